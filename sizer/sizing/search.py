"""`sizer search`: the cheapest deployment that meets the SLO, over GPUs, splits and formats.

Every candidate (GPU x TP x PP x weight format x KV format x speculative on/off) is planned;
those that do not fit are rejected on memory. The rest go through the sizing pipeline
(`sizer.sizing.pipeline.size_deployment`, as `plan --simulate`, `check` and `report` do):
goodput, the fewest replicas whose operating point (the scenario's request count) meets the SLO, cost.
Candidates run in parallel processes. Ranked by cost per hour, then p95 end-to-end latency at
the operating point, with the Pareto front of cost vs. that latency marked.

llama.cpp and Ollama scenarios search their own space (`default_space`): the local device profiles of the
scenario's device kind, GGUF presets and slot counts, one device each. A candidate is judged on the plan's slot answers
(`sizer.sizing.slots`), analytically, without simulation: every slot busy at the target speed per user,
the mean prompt's first token within the TTFT target, and the arrival rate's busy slots (Little's law)
within the slots. Local devices are bought, not rented, and their profiles carry no price: the smallest
machine (device memory) that meets the targets ranks first, then the most precise format, then the most slots.
"""

from __future__ import annotations

import itertools
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace

from sizer.analytic.lengths import mean_length
from sizer.analytic.memory import GiB
from sizer.errors import InputError
from sizer.inputs.hardware import all_profiles, load_hardware, local_profiles, other_device
from sizer.inputs.scenario import Scenario, scenario_from_dict
from sizer.inputs.variant import Variant
from sizer.sizing.goodput import slo_of
from sizer.sizing.pipeline import method_notes, size_deployment
from sizer.sizing.plan import Plan, make_plan
from sizer.sizing.presets import slot_preset
from sizer.sizing.resolve import Resolved, hardware_of, model_of, resolve
from sizer.sizing.result import GoodputSettings, Sizing, SizingStatus, SLOProbe
from sizer.sizing.slots import FORMAT_CANDIDATES, SlotAnswers
from sizer.words import count
from validation.errors import FieldError


@dataclass(frozen=True)
class SearchSpace:
    gpus: tuple[str, ...]                               # profile ids
    tensor_parallel_sizes: tuple[int, ...] = (1, 2, 4, 8)
    pipeline_parallel_sizes: tuple[int, ...] = (1,)
    weight_formats: tuple[str, ...] = ("bf16", "fp8")
    kv_cache_dtypes: tuple[str, ...] = ("auto", "fp8")
    speculative: tuple[bool, ...] = (False,)            # (True, False): the scenario's speculative_config on and off
    slots: tuple[int | None, ...] = (None,)             # llama.cpp / Ollama slot counts; None: the scenario's own
    attention_dp: tuple[bool, ...] = (False,)           # MoE models: (False, True) also tries attention DP + EP


# llama.cpp / Ollama defaults: common GGUF presets from full precision down to the usual 4-bit one, and slot counts
# from one user to llama-server's auto --parallel x 2 (SLOT_PRESETS: 4).
SLOT_WEIGHT_FORMATS = ("f16", "q8_0", "q5_k_m", "q4_k_m")
SLOT_COUNTS = (1, 2, 4, 8)
BY_COST, BY_DEVICE_MEMORY = "cost", "device memory"     # how a search ranks the configurations that pass


def default_space(scenario: Scenario) -> SearchSpace:
    """What `search` tries when no flag says otherwise. llama.cpp and Ollama: the local device profiles of the
    scenario's device kind (discrete and Jetson GPUs, Apple GPUs or CPUs: the alternatives to the machine the
    user has in mind, and a search that stays short), the GGUF presets and slot counts above, TP 1. Other
    engines: the data-centre profiles (local devices only by name, --gpus), TP 1-8, bf16 and fp8 weights and KV,
    and for a MoE model each split also as attention DP + EP across its GPUs (DEP)."""
    if slot_preset(scenario.deployment.engine) is not None:
        kind = hardware_of(scenario).device_kind
        return SearchSpace(gpus=tuple(g for g in local_profiles() if load_hardware(g).device_kind == kind),
                           tensor_parallel_sizes=(1,), weight_formats=SLOT_WEIGHT_FORMATS, kv_cache_dtypes=("auto",),
                           slots=SLOT_COUNTS)
    moe = model_of(scenario).moe is not None
    return SearchSpace(gpus=tuple(g for g in all_profiles() if g not in local_profiles()),
                       attention_dp=(False, True) if moe else (False,))


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
    slots: int | None = None           # llama.cpp / Ollama: parallel slots; None: the scenario's
    attention_dp: bool = False         # attention data-parallel on the TP GPUs, experts spread over them (DEP)

    def variant(self, scenario: Scenario) -> Variant:
        """The scenario with this configuration; replicas left to the sizing pipeline."""
        other_gpu = other_device(self.gpu, scenario.hardware.gpu, scenario.file)
        return Variant(gpu=self.gpu, tensor_parallel_size=self.tensor_parallel_size,
                       pipeline_parallel_size=self.pipeline_parallel_size, quantization=self.quantization,
                       kv_cache_dtype=self.kv_cache_dtype, clear_replicas=True, clear_speculative=not self.speculative,
                       enable_attention_dp=self.attention_dp or None,
                       # a calibrated profile, kernel tables and hardware overrides are the scenario GPU's (so is a
                       # stated price, which a variant onto another GPU clears itself)
                       clear_calibrated_profile=other_gpu, clear_kernel_tables=other_gpu,
                       clear_hardware_overrides=other_gpu, **self._slot_fields(scenario))

    def _slot_fields(self, scenario: Scenario) -> dict:
        """The slot count where the engine takes it. Each slot keeps the scenario's context: Ollama's num_ctx is
        per request; llama.cpp's -c is all slots' (scaled when the scenario states -c and --parallel, without a
        unified buffer; otherwise llama.cpp's own split of -c applies)."""
        if self.slots is None:
            return {}
        d = scenario.deployment
        if d.engine == "ollama":
            return {"num_parallel": self.slots}
        if d.ctx_size is not None and d.parallel is not None and not d.kv_unified:
            return {"parallel": self.slots, "ctx_size": d.ctx_size // d.parallel * self.slots}
        return {"parallel": self.slots}

    @property
    def label(self) -> str:
        if self.slots is not None:
            return f"{self.gpu} {self.quantization} {count(self.slots, 'slot')}"
        spec = " +spec" if self.speculative else ""
        pp = f" PP{self.pipeline_parallel_size}" if self.pipeline_parallel_size > 1 else ""
        split = f"DEP{self.tensor_parallel_size}" if self.attention_dp else f"TP{self.tensor_parallel_size}"
        return f"{self.gpu} {split}{pp} {self.quantization}/{self.kv_cache_dtype} KV{spec}"

    def plan_flags(self) -> str:
        """The `sizer plan` flags that re-check this configuration (slot engines: but the slot count)."""
        if self.slots is not None:
            return f"--gpu {self.gpu} --weights {self.quantization}"
        return (f"--gpu {self.gpu} --tp {self.tensor_parallel_size} --pp {self.pipeline_parallel_size} "
                f"--weights {self.quantization} --kv-cache-dtype {self.kv_cache_dtype}"
                + (" --attention-dp" if self.attention_dp else ""))


@dataclass(frozen=True)
class Outcome:
    candidate: Candidate
    status: str                        # "ok", "rejected" (memory or SLO), "invalid" (split or format)
    binding: str                       # rejected: memory, TTFT, TPOT, E2E, split; ok: the target that binds above
                                       # goodput, or "none" when met at the analytic bound (goodput is at least that)
    reason: str
    gpus_per_replica: int = 0
    kv_cache_gib_per_gpu: float | None = None
    sizing: Sizing | None = None       # the pipeline's answer, for every candidate that fits
    pareto: bool = False
    slots: SlotAnswers | None = None   # llama.cpp / Ollama: the plan's slot answers (no sizing: not simulated)
    refused_field: str = ""            # "invalid" for its input: the field refused, and its file (the scenario's,
    refused_file: str | None = None    # or a model's config.json)

    @property
    def tokens_per_s_per_user(self) -> float | None:
        """Slot engines: each user's decode speed with every slot busy."""
        return self.slots.speeds[-1].tokens_per_s_per_user if self.slots else None

    @property
    def slot_ttft_ms(self) -> float | None:
        """Slot engines: the mean prompt's time to first token on an idle server."""
        return self.slots.ttft_s * 1e3 if self.slots else None

    @property
    def device_memory_bytes(self) -> int:
        """The machine's memory: unified memory where the GPU shares it, else the device's."""
        hw = load_hardware(self.candidate.gpu)
        return hw.unified_memory_bytes or hw.memory_bytes

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
    def itl_p95_ms(self) -> float | None:
        """The gaps between consecutive tokens, pooled (the SLO's ITL)."""
        return self._point.p95_ms("itl") if self._point else None

    @property
    def tpot_p95_ms(self) -> float | None:
        """A request's mean time per output token (the SLO's TPOT)."""
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
    ranked_by: str = BY_COST           # BY_DEVICE_MEMORY: slot engines, whose local devices have no price

    @property
    def by_device_memory(self) -> bool:
        return self.ranked_by == BY_DEVICE_MEMORY

    def chosen(self, o: Outcome) -> bool:
        """`o` is ranked as an answer: priced and passing, or passing in a search ranked by device memory."""
        return o.priced or (self.by_device_memory and o.status == "ok")

    @property
    def recommended(self) -> Outcome | None:
        """The first ranked configuration that meets the SLO: the cheapest priced one, or (slot engines) the
        smallest machine."""
        return next((o for o in self.outcomes if self.chosen(o)), None)


def candidates(space: SearchSpace) -> list[Candidate]:
    return [Candidate(*combo) for combo in itertools.product(
        space.gpus, space.tensor_parallel_sizes, space.pipeline_parallel_sizes, space.weight_formats,
        space.kv_cache_dtypes, space.speculative, space.slots, space.attention_dp)
        if not (combo[-1] and combo[1] == 1)]        # attention DP across one GPU is TP 1


def check_searchable(base: Scenario, space: SearchSpace) -> None:
    """What a search of `space` needs of the scenario, refused before any work (and before the CLI says what it will
    search): the speculative settings it sweeps, a synthetic open-loop workload, a target."""
    file = base.file
    if any(space.speculative) and base.deployment.speculative_config is None:
        raise InputError(file, "deployment.speculative_config",
                         "missing; sweeping speculative decoding needs its settings")
    if base.workload.trace is not None:
        raise InputError(file, "workload.trace",
                         "search needs a synthetic workload (arrival rate and length distributions)")
    if base.workload.arrival.process == "closed":
        raise InputError(file, "workload.arrival.process", "'closed': search compares configurations at one arrival "
                         "rate, and a closed loop's rate depends on the configuration; give rate_per_s")
    if not slo_of(base).has_targets:
        raise InputError(file, "slo", "search needs at least one target (ttft_ms, itl_ms, tpot_ms or e2e_ms)")


def search(data: dict, file: str | None, space: SearchSpace, settings: SearchSettings = SearchSettings(),
           workers: int = 1, progress: Callable[[int, int], None] | None = None) -> SearchResult:
    """Evaluate every candidate of `space` for the scenario mapping `data`; raises FieldError for the scenario
    itself."""
    base = scenario_from_dict(data, file)
    check_searchable(base, space)
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
    in_order = sorted(outcomes, key=lambda o: order[o.candidate])
    refuse_common_input(in_order)
    if slot_preset(base.deployment.engine) is not None:
        notes = SLOT_NOTES + (("the E2E target is not checked here: `sizer plan --simulate` simulates it",)
                              if base.slo.e2e_ms else ())
        return SearchResult(base.name, base.workload.arrival.rate_per_s, mean_length(base.workload.output_tokens),
                            base.slo.required_share, settings, tuple(rank_slots(in_order)), notes, BY_DEVICE_MEMORY)
    notes = method_notes(settings.goodput, base.workload.num_requests) + (
        f"configurations needing more than {settings.max_replicas} replicas are rejected",
        "a stated price applies to the scenario's GPU only") + (
        (f"hardware.kernel_tables price {base.hardware.gpu} only; other GPUs' steps are priced as "
         f"hardware.step_model ({base.hardware.step_model}) says",) if base.hardware.kernel_tables is not None else ()
    ) + ((f"workload.schedule is not searched: each configuration is sized at workload.arrival.rate_per_s "
          f"({base.workload.arrival.rate_per_s:g} req/s) alone; `sizer plan --simulate` sizes the day's replicas "
          "hour by hour",) if base.workload.schedule is not None else ())
    return SearchResult(base.name, base.workload.arrival.rate_per_s, mean_length(base.workload.output_tokens),
                        base.slo.required_share, settings, tuple(rank(mark_pareto(in_order))), notes)


def refuse_common_input(outcomes: list[Outcome]) -> None:
    """Every configuration refused for one and the same input (a prompt longer than max_model_len): the scenario's
    own error, raised as `sizer plan` raises it, not a search whose answer is that nothing fits."""
    if outcomes and all(o.status == "invalid" and o.binding == "input" for o in outcomes):
        if len({(o.refused_file, o.refused_field, o.reason) for o in outcomes}) == 1:
            raise InputError(outcomes[0].refused_file, outcomes[0].refused_field or None, outcomes[0].reason)


SLOT_NOTES = (
    "llama.cpp / Ollama: judged on the plan's slot answers, analytically (no simulation): tokens/s per user with "
    "every slot busy against 1000 / slo.itl_ms and 1000 / slo.tpot_ms (each slot gets one token a step), the mean "
    "prompt's first token on an idle server against slo.ttft_ms, "
    "and busy slots at the arrival rate (rate x (TTFT + mean output / tokens/s per user), Little's law) within the "
    "slots",
    "local devices are bought, not rented: their profiles carry no price, so the smallest machine (its memory, "
    "unified where the GPU shares it) that meets the targets ranks first, then the most precise format, then the "
    "most slots; set cost.price_usd_per_gpu_hour in a scenario for a cost",
)


def evaluate(c: Candidate, data: dict, file: str | None, settings: SearchSettings) -> Outcome:
    """One candidate: plan, memory filter, then the sizing pipeline. Never raises FieldError."""
    try:
        base = scenario_from_dict(data, file)
        resolved = resolve(c.variant(base).apply(base))
    except FieldError as error:
        if c.slots is not None and "KV need" in error.message:    # resolve: the slots' context does not fit
            return Outcome(c, "rejected", "memory", error.message)
        field_path = error.field or ""
        split = "parallel_size" in field_path if c.slots is not None else "parallel" in field_path  # not slots'
        return Outcome(c, "invalid", "split" if split else "input", error.message, refused_field=field_path,
                       refused_file=error.file)
    plan = make_plan(resolved)
    gpus_per_replica = plan.parallel.gpus_per_replica
    if not plan.fits:
        return Outcome(c, "rejected", "memory", "; ".join(plan.memory.reasons), gpus_per_replica)
    kv_gib = plan.memory.kv_cache_bytes / GiB
    if plan.slots is not None:
        return slot_outcome(c, resolved, plan, gpus_per_replica, kv_gib)
    sizing = size_deployment(resolved, plan, settings.goodput, settings.max_replicas)
    if sizing.status is SizingStatus.MET:
        return Outcome(c, "ok", sizing.binding_target, f"{count(sizing.replicas, 'replica')} at "
                       f"{sizing.operating_point.rate_per_s:.3g} req/s each; {sizing.goodput_words}",
                       gpus_per_replica, kv_gib, sizing)
    binding = sizing.operating_point.binding if sizing.status is SizingStatus.MISSED else sizing.binding_target
    return Outcome(c, "rejected", binding, sizing.verdict, gpus_per_replica, kv_gib, sizing)


def slot_outcome(c: Candidate, r: Resolved, plan: Plan, gpus_per_replica: int, kv_gib: float) -> Outcome:
    """A slot engine's candidate that fits, judged on its slot answers (SLOT_NOTES). Binding when it passes:
    the target with the least headroom."""
    a, slo, w = plan.slots, r.slo, r.workload
    speed, ttft_ms = a.speeds[-1].tokens_per_s_per_user, a.ttft_s * 1e3
    busy = w.arrival.rate_per_s * (a.ttft_s + mean_length(w.output_tokens) / speed)
    # (target, measured / allowed: above 1 misses, what it says)
    checks = [("load", busy / a.slots, f"{busy:.2f} slots busy on average at {w.arrival.rate_per_s:g} req/s, "
                                       f"{a.slots} available")]
    for name, per_token_ms in (("ITL", slo.itl_ms), ("TPOT", slo.tpot_ms)):   # every busy slot: one token a step
        if per_token_ms:
            target = 1e3 / per_token_ms
            checks.append((name, target / speed, f"{speed:.1f} tokens/s per user with {count(a.slots, 'slot')} "
                                                 f"busy, target {target:.1f} ({name} {per_token_ms:g} ms)"))
    if slo.ttft_ms:
        checks.append(("TTFT", ttft_ms / slo.ttft_ms, f"first token in {ttft_ms:,.0f} ms for a "
                                                      f"{a.prompt_tokens:,}-token prompt, target {slo.ttft_ms:,.0f}"))
    missed = [check for check in checks if check[1] > 1]
    if missed:
        return Outcome(c, "rejected", missed[0][0], "; ".join(m[2] for m in missed), gpus_per_replica, kv_gib,
                       slots=a)
    binding = max(checks, key=lambda check: check[1])
    return Outcome(c, "ok", binding[0], "; ".join(check[2] for check in checks), gpus_per_replica, kv_gib, slots=a)


def rank_slots(outcomes: list[Outcome]) -> list[Outcome]:
    """Slot engines: passing configurations by the machine's memory (smallest first: no price to rank by), then
    the most precise format, then the most slots, then the fastest; then the rejected, then the invalid."""
    def key(o: Outcome):
        group = 0 if o.status == "ok" else 1 if o.status == "rejected" else 2
        q = o.candidate.quantization
        precision = FORMAT_CANDIDATES.index(q) if q in FORMAT_CANDIDATES else len(FORMAT_CANDIDATES)
        return (group, o.device_memory_bytes, precision, -(o.candidate.slots or 0), -(o.tokens_per_s_per_user or 0),
                o.slot_ttft_ms or 0)
    return sorted(outcomes, key=key)


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

