"""`sizer search`: the cheapest deployment that meets the SLO, over GPUs, splits and formats.

Every candidate (GPU x TP x PP x weight format x KV format x speculative on/off) is planned;
those that do not fit are rejected on memory. The rest go through the sizing pipeline
(`sizer.sizing.pipeline.size_deployment`, as `plan --simulate`, `check` and `report` do):
goodput, the fewest replicas whose operating point (the scenario's request count) meets the SLO, cost.
Candidates run in parallel processes. Ranked by cost per hour, then p95 end-to-end latency at
the operating point, with the Pareto front of cost vs. that latency marked.
"""

from __future__ import annotations

import itertools
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace

from simulator.errors import FieldError
from sizer.analytic.memory import GiB
from sizer.errors import InputError
from sizer.inputs.hardware import load_hardware
from sizer.inputs.scenario import Scenario, mean_length, scenario_from_dict
from sizer.inputs.variant import Variant
from sizer.sizing.goodput import slo_of
from sizer.sizing.pipeline import method_notes, size_deployment
from sizer.sizing.plan import make_plan
from sizer.sizing.resolve import resolve
from sizer.sizing.result import GoodputSettings, Sizing, SizingStatus, SLOProbe
from sizer.words import count


@dataclass(frozen=True)
class SearchSpace:
    gpus: tuple[str, ...]                               # profile ids
    tensor_parallel_sizes: tuple[int, ...] = (1, 2, 4, 8)
    pipeline_parallel_sizes: tuple[int, ...] = (1,)
    weight_formats: tuple[str, ...] = ("bf16", "fp8")
    kv_cache_dtypes: tuple[str, ...] = ("auto", "fp8")
    speculative: tuple[bool, ...] = (False,)            # (True, False): the scenario's speculative_config on and off


@dataclass(frozen=True)
class SearchSettings:
    goodput: GoodputSettings = field(default_factory=GoodputSettings)   # the sizing pipeline's, as every command's
    max_replicas: int = 32             # configurations needing more replicas are rejected (no rate per replica
                                       # below target rate / max_replicas is simulated)


@dataclass(frozen=True)
class Candidate:
    gpu: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    quantization: str
    kv_cache_dtype: str
    speculative: bool

    def variant(self, scenario: Scenario) -> Variant:
        """The scenario with this configuration; replicas left to the sizing pipeline."""
        other_gpu = load_hardware(self.gpu).id != load_hardware(scenario.hardware.gpu).id
        return Variant(gpu=self.gpu, tensor_parallel_size=self.tensor_parallel_size,
                       pipeline_parallel_size=self.pipeline_parallel_size, quantization=self.quantization,
                       kv_cache_dtype=self.kv_cache_dtype, clear_replicas=True, clear_speculative=not self.speculative,
                       # a stated price and a calibrated profile are the scenario GPU's
                       clear_price=other_gpu, clear_calibrated_profile=other_gpu)

    @property
    def label(self) -> str:
        spec = " +spec" if self.speculative else ""
        pp = f" PP{self.pipeline_parallel_size}" if self.pipeline_parallel_size > 1 else ""
        return f"{self.gpu} TP{self.tensor_parallel_size}{pp} {self.quantization}/{self.kv_cache_dtype} KV{spec}"

    def plan_flags(self) -> str:
        """The `sizer plan` flags that re-check this configuration."""
        return (f"--gpu {self.gpu} --tp {self.tensor_parallel_size} --pp {self.pipeline_parallel_size} "
                f"--weights {self.quantization} --kv-cache-dtype {self.kv_cache_dtype}")


@dataclass(frozen=True)
class Outcome:
    candidate: Candidate
    status: str                        # "ok", "rejected" (memory or SLO), "invalid" (split or format)
    binding: str                       # rejected: memory, TTFT, ITL, E2E, split; ok: the target that binds above
                                       # goodput, or "none" when met at the analytic bound (goodput is at least that)
    reason: str
    gpus_per_replica: int = 0
    kv_cache_gib_per_gpu: float | None = None
    sizing: Sizing | None = None       # the pipeline's answer, for every candidate that fits
    pareto: bool = False

    @property
    def priced(self) -> bool:
        return self.status == "ok" and self.usd_per_hour is not None

    @property
    def goodput_rate_per_s(self) -> float | None:
        return self.sizing.goodput_per_replica_per_s if self.sizing else None

    @property
    def replicas(self) -> int | None:
        return self.sizing.replicas if self.sizing else None

    @property
    def gpus(self) -> int | None:
        return self.sizing.cost.gpus if self.sizing and self.sizing.cost else None

    @property
    def usd_per_hour(self) -> float | None:
        return self.sizing.cost.usd_per_hour if self.sizing and self.sizing.cost else None

    @property
    def usd_per_million_output_tokens(self) -> float | None:
        return self.sizing.cost.usd_per_million_output_tokens if self.sizing and self.sizing.cost else None

    @property
    def operating_rate_per_s(self) -> float | None:
        """Per replica: target rate / replicas."""
        return self._point.rate_per_s if self._point else None

    @property
    def share_met(self) -> float | None:
        return self._point.share_met if self._point else None

    @property
    def ttft_p95_ms(self) -> float | None:
        return self._point.p95_ms("ttft") if self._point else None

    @property
    def tpot_p95_ms(self) -> float | None:
        """A request's mean time per output token (the SLO's ITL)."""
        return self._point.p95_ms("tpot") if self._point else None

    @property
    def e2e_p95_ms(self) -> float | None:
        return self._point.p95_ms("e2e") if self._point else None

    @property
    def _point(self) -> SLOProbe | None:
        return self.sizing.operating_point if self.sizing else None


@dataclass(frozen=True)
class SearchResult:
    scenario: str
    target_rate_per_s: float
    output_tokens_mean: float
    required_share: float
    settings: SearchSettings
    outcomes: tuple[Outcome, ...]      # ranked: priced ok by cost, unpriced ok, then rejected
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def recommended(self) -> Outcome | None:
        """The cheapest priced configuration that meets the SLO."""
        return next((o for o in self.outcomes if o.priced), None)


def candidates(space: SearchSpace) -> list[Candidate]:
    return [Candidate(*combo) for combo in itertools.product(
        space.gpus, space.tensor_parallel_sizes, space.pipeline_parallel_sizes, space.weight_formats,
        space.kv_cache_dtypes, space.speculative)]


def search(data: dict, file: str | None, space: SearchSpace, settings: SearchSettings = SearchSettings(),
           workers: int = 1, progress: Callable[[int, int], None] | None = None) -> SearchResult:
    """Evaluate every candidate of `space` for the scenario mapping `data`; raises FieldError for the scenario
    itself."""
    base = scenario_from_dict(data, file)
    if any(space.speculative) and base.deployment.speculative_config is None:
        raise InputError(file, "deployment.speculative_config",
                         "missing; sweeping speculative decoding needs its settings")
    if base.workload.trace is not None:
        raise InputError(file, "workload.trace",
                         "search needs a synthetic workload (arrival rate and length distributions)")
    if not slo_of(base).has_targets:
        raise InputError(file, "slo", "search needs at least one target (ttft_ms, itl_ms or e2e_ms)")
    todo = [(c, data, file, settings) for c in candidates(space)]
    outcomes = []
    if workers <= 1:
        for i, args in enumerate(todo):
            outcomes.append(evaluate(*args))
            if progress:
                progress(i + 1, len(todo))
    else:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            futures = [pool.submit(evaluate, *args) for args in todo]
            for i, future in enumerate(as_completed(futures)):
                outcomes.append(future.result())
                if progress:
                    progress(i + 1, len(todo))
    order = {c: i for i, (c, *_) in enumerate(todo)}
    ranked = rank(mark_pareto(sorted(outcomes, key=lambda o: order[o.candidate])))
    notes = method_notes(settings.goodput, base.workload.num_requests) + (
        f"configurations needing more than {settings.max_replicas} replicas are rejected",
        "a stated price applies to the scenario's GPU only")
    return SearchResult(base.name, base.workload.arrival.rate_per_s, mean_length(base.workload.output_tokens),
                        base.slo.required_share, settings, tuple(ranked), notes)


def evaluate(c: Candidate, data: dict, file: str | None, settings: SearchSettings) -> Outcome:
    """One candidate: plan, memory filter, then the sizing pipeline. Never raises FieldError."""
    try:
        base = scenario_from_dict(data, file)
        resolved = resolve(scenario_from_dict(data, file, c.variant(base)))
    except FieldError as error:
        return Outcome(c, "invalid", "split" if "parallel" in (error.field or "") else "input", error.message)
    plan = make_plan(resolved)
    gpus_per_replica = plan.parallel.gpus_per_replica
    if not plan.fits:
        return Outcome(c, "rejected", "memory", "; ".join(plan.memory.reasons), gpus_per_replica)
    kv_gib = plan.memory.kv_cache_bytes / GiB
    sizing = size_deployment(resolved, plan, settings.goodput, settings.max_replicas)
    if sizing.status is SizingStatus.MET:
        return Outcome(c, "ok", sizing.binding_target, f"{count(sizing.replicas, 'replica')} at "
                       f"{sizing.operating_point.rate_per_s:.3g} req/s each; one meets the SLO up to "
                       f"{sizing.goodput_per_replica_per_s:.3g} req/s", gpus_per_replica, kv_gib, sizing)
    binding = sizing.operating_point.binding if sizing.status is SizingStatus.MISSED else sizing.binding_target
    return Outcome(c, "rejected", binding, sizing.verdict, gpus_per_replica, kv_gib, sizing)


def mark_pareto(outcomes: list[Outcome]) -> list[Outcome]:
    """Mark priced, passing outcomes that no other beats on both cost per hour and p95 E2E latency."""
    priced = [o for o in outcomes if o.priced and o.e2e_p95_ms is not None]

    def dominated(o: Outcome) -> bool:
        return any(p.usd_per_hour <= o.usd_per_hour and p.e2e_p95_ms <= o.e2e_p95_ms
                   and (p.usd_per_hour < o.usd_per_hour or p.e2e_p95_ms < o.e2e_p95_ms) for p in priced)

    return [replace(o, pareto=True) if o in priced and not dominated(o) else o for o in outcomes]


def rank(outcomes: list[Outcome]) -> list[Outcome]:
    """Priced passing configurations by cost then latency, unpriced passing ones, then the rejected."""
    def key(o: Outcome):
        group = 0 if o.priced else 1 if o.status == "ok" else 2 if o.status == "rejected" else 3
        return (group, o.usd_per_hour or 0.0, o.e2e_p95_ms or 0.0, o.gpus or 0)
    return sorted(outcomes, key=key)

