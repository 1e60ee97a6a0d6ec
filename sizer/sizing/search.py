"""`sizer search`: the cheapest deployment that meets the SLO, over GPUs, splits and formats.

Every candidate (GPU x TP x PP x weight format x KV format x speculative on/off) is planned;
those that do not fit are rejected on memory. For the rest, a coarse search with short
simulations (scored as simulator.metrics does) finds the highest rate one replica serves with
the SLO share met (goodput); the target rate then sets replicas, GPUs and cost. Candidates
run in parallel processes. Ranked by cost per hour, then p95 end-to-end latency at the
operating point, with the Pareto front of cost vs. that latency marked; the cheapest is
confirmed by a full-length simulation before it is recommended.
"""

from __future__ import annotations

import itertools
import math
import multiprocessing
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from typing import Callable

from sizer.errors import InputError
from sizer.inputs.hardware import load_hardware
from sizer.analytic.memory import GiB
from sizer.sizing.plan import cost_summary, make_plan
from sizer.sizing.resolve import Resolved, resolve
from sizer.inputs.scenario import Scenario, mean_length, scenario_from_dict


@dataclass(frozen=True)
class SLOProbe:
    """One simulation at one rate, scored against the SLO (ITL per request is its TPOT)."""
    rate_per_s: float
    share_met: float                                   # requests meeting every target (rejected ones do not)
    share_by_target: dict[str, float]                  # "TTFT"/"ITL"/"E2E" -> share meeting that target alone
    percentiles_ms: dict[str, tuple[float, float, float]]   # "ttft"/"tpot"/"e2e" -> (p50, p95, p99)

    @property
    def binding(self) -> str:
        """The stated target the fewest requests meet."""
        return min(self.share_by_target, key=self.share_by_target.get) if self.share_by_target else "none"

    def p95_ms(self, metric: str) -> float:
        return self.percentiles_ms[metric][1]


def slo_of(scenario: Scenario):
    from simulator.metrics import SLO

    s = scenario.slo
    return SLO(ttft_ms=s.ttft_ms, itl_ms=s.itl_ms, e2e_ms=s.e2e_ms, required_share=s.required_share)


def score(result, slo, rate_per_s: float) -> SLOProbe:
    """Shares per target and p50/p95/p99 of a simulation result (simulator.metrics semantics)."""
    from simulator.metrics import SLO, slo_attainment, summarise

    met = slo_attainment(result, slo)
    shares = {name: float(slo_attainment(result, SLO(**{key: target})).mean())
              for name, key, target in (("TTFT", "ttft_ms", slo.ttft_ms), ("ITL", "itl_ms", slo.itl_ms),
                                        ("E2E", "e2e_ms", slo.e2e_ms)) if target is not None}
    m = summarise(result)
    percentiles = {k: (lat.p50_ms, lat.p95_ms, lat.p99_ms) for k, lat in (("ttft", m.ttft), ("tpot", m.tpot), ("e2e", m.e2e))}
    return SLOProbe(rate_per_s, float(met.mean()) if len(met) else 0.0, shares, percentiles)


def simulate_at(resolved: Resolved, rate_per_s: float, num_requests: int):
    """One replica of `resolved` at `rate_per_s`, `num_requests` requests (the scenario's seed)."""
    from sizer.sizing.simulate import simulate_replica

    return simulate_replica(resolved, rate_per_s, num_requests)


def probe_slo(resolved: Resolved, rate_per_s: float, num_requests: int) -> SLOProbe:
    return score(simulate_at(resolved, rate_per_s, num_requests), slo_of(resolved.scenario), rate_per_s)


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
    """Short simulations and a coarse rate search keep a 100-configuration sweep under a minute."""
    num_requests: int = 300            # per simulation
    rate_tolerance: float = 0.1        # bisection stops when the bracket's ratio is within 1 + this
    low_rate_fraction: float = 1 / 64  # the lowest rate tried, as a share of the analytic bound
    max_replicas: int = 32             # nor below target rate / max_replicas: such configurations are rejected
    verify_tries: int = 6              # full-length simulations to confirm the recommendation


@dataclass(frozen=True)
class Candidate:
    gpu: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    quantization: str
    kv_cache_dtype: str
    speculative: bool

    def overrides(self, scenario: Scenario) -> dict:
        out = {"hardware.gpu": self.gpu, "deployment.tensor_parallel_size": self.tensor_parallel_size,
               "deployment.pipeline_parallel_size": self.pipeline_parallel_size,
               "deployment.quantization": self.quantization, "deployment.kv_cache_dtype": self.kv_cache_dtype,
               "deployment.replicas": None}
        if load_hardware(self.gpu).id != load_hardware(scenario.hardware.gpu).id:
            out["cost.price_usd_per_gpu_hour"] = None     # a stated price is the scenario GPU's price
        if not self.speculative:
            out["deployment.speculative_config"] = None
        return out

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
    goodput_rate_per_s: float | None = None     # per replica, SLO share met
    replicas: int | None = None
    gpus: int | None = None
    price_usd_per_gpu_hour: float | None = None
    usd_per_hour: float | None = None
    usd_per_million_output_tokens: float | None = None  # at the scenario's rate
    operating_rate_per_s: float | None = None   # per replica: target rate / replicas
    share_met: float | None = None              # at the operating point
    ttft_p95_ms: float | None = None
    tpot_p95_ms: float | None = None            # a request's mean time per output token (the SLO's ITL)
    e2e_p95_ms: float | None = None
    pareto: bool = False
    verified: bool = False                      # a full-length simulation at the operating point meets the SLO

    @property
    def priced(self) -> bool:
        return self.status == "ok" and self.usd_per_hour is not None


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
        """The cheapest priced configuration, once a full-length simulation has confirmed it."""
        top = next((o for o in self.outcomes if o.priced), None)
        return top if top is not None and top.verified else None


def candidates(space: SearchSpace) -> list[Candidate]:
    return [Candidate(*combo) for combo in itertools.product(
        space.gpus, space.tensor_parallel_sizes, space.pipeline_parallel_sizes, space.weight_formats,
        space.kv_cache_dtypes, space.speculative)]


def search(data: dict, file: str | None, space: SearchSpace, settings: SearchSettings = SearchSettings(),
           workers: int = 1, progress: Callable[[int, int], None] | None = None) -> SearchResult:
    """Evaluate every candidate of `space` for the scenario mapping `data`; raises InputError for the scenario itself."""
    base = scenario_from_dict(data, file)
    if any(space.speculative) and base.deployment.speculative_config is None:
        raise InputError(file, "deployment.speculative_config", "missing; sweeping speculative decoding needs its settings")
    if base.workload.trace is not None:
        raise InputError(file, "workload.trace", "search needs a synthetic workload (arrival rate and length distributions)")
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
    outcomes = verify(sorted(outcomes, key=lambda o: order[o.candidate]), data, file, settings)
    ranked = rank(mark_pareto(outcomes))
    notes = (f"goodput: {settings.num_requests} simulated requests per rate, bisection to {settings.rate_tolerance:.0%}",
             f"the recommendation is verified by a full-length simulation ({base.workload.num_requests:,} requests) at its "
             "operating point, with one more replica while it misses the SLO",
             "cost per million output tokens at the scenario's rate; a stated price applies to the scenario's GPU only")
    return SearchResult(base.name, base.workload.arrival.rate_per_s, mean_length(base.workload.output_tokens),
                        base.slo.required_share, settings, tuple(ranked), notes)


def verify(outcomes: list[Outcome], data: dict, file: str | None, settings: SearchSettings) -> list[Outcome]:
    """Confirm the cheapest priced outcome with the scenario's own request count at its operating point.

    The coarse goodput can be a few percent high, and a replica count chosen at 98% of it may
    miss the SLO in a long run: while the cheapest misses, it gets one more replica (and its
    cost) and the ranking is redone, up to `settings.verify_tries` simulations.
    """
    outcomes = list(outcomes)
    for _ in range(settings.verify_tries):
        top = next((o for o in rank(outcomes) if o.priced), None)
        if top is None or top.verified:
            break
        base = scenario_from_dict(data, file)
        resolved = resolve(scenario_from_dict(data, file, top.candidate.overrides(base)))
        target = base.workload.arrival.rate_per_s
        at = probe_slo(resolved, target / top.replicas, base.workload.num_requests)
        if at.share_met >= base.slo.required_share:
            new = replace(top, verified=True, share_met=at.share_met, ttft_p95_ms=at.p95_ms("ttft"),
                          tpot_p95_ms=at.p95_ms("tpot"), e2e_p95_ms=at.p95_ms("e2e"))
        else:
            replicas = top.replicas + 1
            short = probe_slo(resolved, target / replicas, settings.num_requests)   # the table's figures, as for the rest
            new = replace(top, replicas=replicas, gpus=replicas * top.gpus_per_replica,
                          usd_per_hour=top.usd_per_hour / top.replicas * replicas,
                          usd_per_million_output_tokens=top.usd_per_million_output_tokens / top.replicas * replicas,
                          operating_rate_per_s=target / replicas, share_met=short.share_met,
                          ttft_p95_ms=short.p95_ms("ttft"), tpot_p95_ms=short.p95_ms("tpot"), e2e_p95_ms=short.p95_ms("e2e"),
                          reason=top.reason + f"; {top.replicas} missed the SLO in a full-length simulation "
                                              f"({at.share_met:.1%} met), so {replicas}")
        outcomes[outcomes.index(top)] = new
    return outcomes


def evaluate(c: Candidate, data: dict, file: str | None, settings: SearchSettings) -> Outcome:
    """One candidate: plan, memory filter, goodput search, replicas and cost. Never raises InputError."""
    try:
        base = scenario_from_dict(data, file)
        resolved = resolve(scenario_from_dict(data, file, c.overrides(base)))
    except InputError as error:
        return Outcome(c, "invalid", "split" if "parallel" in (error.field or "") else "input", error.message)
    plan = make_plan(resolved)
    gpus_per_replica = plan.parallel.gpus_per_replica
    if not plan.fits:
        return Outcome(c, "rejected", "memory", "; ".join(plan.memory.reasons), gpus_per_replica)
    kv_gib = plan.memory.kv_cache_bytes / GiB
    output_mean = plan.step_times.output_tokens_mean
    upper = rate_bound_per_s(plan)
    target = resolved.scenario.workload.arrival.rate_per_s
    floor = target / settings.max_replicas
    goodput, binding = goodput_rate(resolved, upper, settings, floor)
    if goodput == 0:
        why = (f"more than {settings.max_replicas} replicas: the {binding} target is missed above {floor:.3g} req/s per replica"
               if floor > upper * settings.low_rate_fraction else
               f"the {binding} target is missed even at {upper * settings.low_rate_fraction:.3g} req/s per replica")
        return Outcome(c, "rejected", binding, why, gpus_per_replica, kv_gib, 0.0)
    replicas = replicas_for(target, goodput)
    at = probe_slo(resolved, target / replicas, settings.num_requests)
    cost = cost_summary(resolved, replicas, "goodput", target * output_mean, "target rate x mean output")
    return Outcome(c, "ok", binding, f"{replicas} replica(s) at {target / replicas:.3g} req/s each; one meets the SLO up to "
                   f"{goodput:.3g} req/s", gpus_per_replica, kv_gib, goodput, replicas, cost.gpus,
                   cost.price_usd_per_gpu_hour, cost.usd_per_hour, cost.usd_per_million_output_tokens,
                   target / replicas, at.share_met, at.p95_ms("ttft"), at.p95_ms("tpot"), at.p95_ms("e2e"))


def replicas_for(target_per_s: float, goodput_per_s: float) -> int:
    """Replicas a target rate needs at a goodput per replica: ceil(target / goodput), at least 1
    (the epsilon keeps an exact multiple from rounding up through float error)."""
    return max(1, math.ceil(target_per_s / goodput_per_s - 1e-9))


def rate_bound_per_s(plan) -> float:
    """An optimistic rate one replica can sustain: 1.5 / (mean prefill + mean output / decode tokens/s at the
    largest batch the KV cache holds). 1.5: chunked prefill overlaps prefill with decodes in a step."""
    st = plan.step_times
    return 1.5 / (st.prefill_ms / 1e3 + st.output_tokens_mean / st.decode_memory_limited_tokens_per_s)


def goodput_rate(resolved: Resolved, upper_per_s: float, settings: SearchSettings,
                 floor_per_s: float = 0.0) -> tuple[float, str]:
    """Highest rate per replica (coarse) with the SLO share met, and the target that binds above it.

    Bisects in log space from the top: [upper / 4, upper] first, extended down by factors of 4
    while its low end misses, to upper x low_rate_fraction (and not below `floor_per_s`); then
    halves the bracket's log-ratio until it is within 1 + rate_tolerance. Low rates are the
    slow ones to simulate (steps grow as 1 / rate), so they are tried only when needed.
    (0, binding) when even the lowest rate tried misses.
    """
    slo = slo_of(resolved.scenario)

    def probe(rate: float) -> SLOProbe:
        return score(simulate_at(resolved, rate, settings.num_requests), slo, rate)

    top = probe(upper_per_s)
    if top.share_met >= slo.required_share:
        return upper_per_s, "none"          # met at the bound: the goodput is at least this
    hi, failing = upper_per_s, top
    while True:
        lo = hi / 4
        if lo < max(upper_per_s * settings.low_rate_fraction * (1 - 1e-9), floor_per_s):
            return 0.0, failing.binding
        low = probe(lo)
        if low.share_met >= slo.required_share:
            break
        hi, failing = lo, low
    while hi / lo > 1 + settings.rate_tolerance:
        mid = math.sqrt(lo * hi)
        p = probe(mid)
        if p.share_met >= slo.required_share:
            lo = mid
        else:
            hi, failing = mid, p
    return lo, failing.binding


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

