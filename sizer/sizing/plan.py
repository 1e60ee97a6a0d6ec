"""The plan: every analytic answer for a scenario, in one JSON-serialisable dataclass.

`make_plan(resolved)` computes memory, the parallel split, Little's-law capacity, roofline
step times, speculative-decoding expectations and cost; the simulated section (goodput,
replicas, cost, verdict) is added by `sizer.sizing.pipeline.add_simulation` when asked.
Field names carry their units.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from simulator.speculative import expected_tokens_per_step, with_drafting
from simulator.step_batch import StepTimeModel
from sizer.analytic.capacity import Capacity, littles_law
from sizer.analytic.format_support import Execution
from sizer.analytic.lengths import mean_length, mean_text, served_means
from sizer.analytic.memory import (
    CUDA_CONTEXT_BYTES,
    GB,
    NCCL_BUFFER_BYTES,
    GiB,
    KVLayout,
    LoraMemory,
    MemoryBudget,
    WeightMemory,
    engine_moe_peak_bytes,
    held,
)
from sizer.analytic.parallel import comm_per_step, kv_heads_per_gpu
from sizer.analytic.weights import LayerKind, layer_kinds, parameter_count
from sizer.errors import InputError
from sizer.inputs.hardware import profile_origin
from sizer.inputs.layers import FULL, Attention, LatentAttention
from sizer.inputs.model_spec import ModelSpec
from sizer.inputs.scenario import (
    ENGINE_NAMES,
    MAX_RATE_PER_S,
    VLLM_GPU_MEMORY_UTILIZATION,
    Distribution,
    EnergySection,
    WorkloadSection,
    targets_text,
)
from sizer.kinds import kind
from sizer.sizing.checkpoint_summary import CheckpointSummary, checkpoint_notes, summarise_checkpoint
from sizer.sizing.cost import CostSummary, cost_summary, gpus_per_replica
from sizer.sizing.presets import GRAMMAR_BACKENDS, GRAMMAR_CACHE_ENTRIES, LORA_DISK_BYTES_PER_S
from sizer.sizing.resolve import EngineSettings, Resolved, trtllm_graph_pool
from sizer.sizing.result import Sizing
from sizer.sizing.slots import SlotAnswers, slot_answers, slot_requests_held
from sizer.timing.roofline import (
    ATTENTION_KV_EFFICIENCY,
    COLLECTIVE_LATENCY_S,
    LAYER_STEP_S,
    LORA_STEP_S_PER_LAYER,
    WEIGHT_STREAM_EFFICIENCY,
    RooflineStepTimeModel,
    collective_wait_s,
    compute_bound_batch,
    decode_batch,
    prefill_time_s,
)
from sizer.timing.step_model import kernel_tables_note, roofline_for, step_model_for, step_sources
from sizer.words import count, significant

if TYPE_CHECKING:      # for the annotations only: a plan without a schedule or a trace need not import their code
    from sizer.sizing.day_result import DayPlan, SteadyEnergy
    from sizer.sizing.workload import ServedTrace

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ModelSummary:
    name: str
    architecture: str
    parameters_derived: int
    parameters_active_derived: int
    parameters_official: float | None
    parameters_used: int
    parameters_source: str
    layers: int
    attention: str                     # "GQA 32 query / 8 KV heads", "MLA", ...
    max_position_embeddings: int
    layer_kinds: tuple[LayerKind, ...]   # parameters, KV and state by mixer and FFN kind
    state_bytes_per_sequence: int        # Mamba-2 / linear-attention state, whole model
    unread_config_keys: tuple[str, ...]  # config keys sizer does not read (listed in the assumptions)


@dataclass(frozen=True)
class ParallelSummary:
    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_size: int
    expert_parallel_size: int
    gpus_per_replica: int
    kv_heads_per_gpu: int
    tp_allreduce_bytes_per_token: float
    pp_send_bytes_per_token: float
    ep_alltoall_bytes_per_token: float
    replica_gpus: int = 0               # every pool of a replica together (disaggregated: its prefill and decode pools)
    disaggregated: str = ""             # the pools and how a prompt's KV moves between them ("": one pool)


@dataclass(frozen=True)
class KVDemand:
    """KV the scenario's concurrent sequences need (whole model), at the KV dtype."""
    sequences: int
    tokens_per_sequence: int
    tokens: int
    bytes: float
    gib: float
    sequences_source: str


@dataclass(frozen=True)
class StepTimes:
    model: str                          # which step-time model produced these
    prompt_tokens_mean: float
    output_tokens_mean: float
    prefill_ms: float                   # the mean prompt alone, in budget-sized chunks
    decode_bandwidth_bound_ms: float    # weights per GPU x stages / peak bandwidth: the seeds' lower bound
    decode_bandwidth_bound_tokens_per_s: float
    decode_batch1_ms: float             # roofline, batch 1, mean context
    decode_batch1_tokens_per_s: float
    memory_limited_batch: int           # sequences at mean context that KV and max_num_seqs allow
    decode_memory_limited_batch_ms: float
    decode_memory_limited_tokens_per_s: float
    compute_bound_batch: int | None     # smallest decode batch whose GEMMs are compute-bound
    gemm_compute_format: str
    sources: dict[str, str]             # operator family -> what priced it (kernel tables, roofline)
    # experts spread over data-parallel ranks (DEP): the MoE layers' dispatch and combine in those two steps, and
    # the link that carries them
    alltoall_batch1_ms: float = 0.0
    alltoall_memory_limited_batch_ms: float = 0.0
    alltoall_link: str = ""


@dataclass(frozen=True)
class SpeculativeSummary:
    method: str
    num_speculative_tokens: int
    acceptance_rate: float
    expected_tokens_per_step: float     # (1 - alpha^(gamma+1)) / (1 - alpha)
    formula: str
    proposer_cost: str                  # how drafting is priced, and where that figure comes from
    proposer_memory: str                # what the proposer's memory is taken as


@dataclass(frozen=True)
class Plan:
    schema_version: int
    scenario: str
    scenario_file: str | None
    gpu: str
    gpu_memory_bytes: int
    gpu_memory_gib: float
    gpu_memory_gb: float
    engine: EngineSettings               # scheduling settings with their sources
    model: ModelSummary
    weights: WeightMemory
    weight_execution: Execution          # how the GPU runs the weight format (natively, weight-only)
    checkpoint: CheckpointSummary        # the checkpoint's stated format and stored bytes beside the derived ones
    kv: KVLayout
    kv_bytes_per_sequence_at_max_model_len: float
    kv_demand: KVDemand
    memory: MemoryBudget
    parallel: ParallelSummary
    capacity: Capacity
    step_times: StepTimes
    speculative: SpeculativeSummary | None
    cost: CostSummary | None            # None after `plan --simulate` when no replica count was sized
    fits: bool
    verdict: str
    assumptions: list[str]
    simulation: Sizing | None = None     # `plan --simulate`: sizer.sizing.pipeline.add_simulation
    slots: SlotAnswers | None = None     # llama.cpp and Ollama: the answers in the user's terms
    lora: LoraMemory | None = None       # LoRA adapter slots per GPU (taken from the KV cache: memory.lora_bytes)
    day: DayPlan | None = None           # workload.schedule with --simulate: sizer.sizing.day.add_day
    energy: SteadyEnergy | None = None   # --simulate: energy at the operating point (sizer.sizing.day.add_energy)
    energy_unknown: str | None = None    # --simulate, replicas sized, no power figures for the GPU: why


def attention_kind(m: ModelSpec) -> str:
    """The mixers, e.g. "GQA 32 query / 8 KV heads x 128" or "Mamba-2 x 23, GQA 32 query / 2 KV heads x 128 x 6"."""
    parts: dict[str, int] = {}
    for layer in m.layers:
        mixer = layer.mixer
        if isinstance(mixer, LatentAttention):
            text = (f"MLA ({mixer.num_heads} heads, latent {mixer.kv_lora_rank} + rope {mixer.qk_rope_head_dim})")
        elif isinstance(mixer, Attention):
            kind = ("MHA" if mixer.num_kv_heads == mixer.num_heads else "MQA" if mixer.num_kv_heads == 1 else "GQA")
            text = f"{kind} {mixer.num_heads} query / {mixer.num_kv_heads} KV heads x {mixer.head_dim}"
            if mixer.span != FULL:
                text += f" {mixer.label}"
        else:
            text = mixer.label
        parts[text] = parts.get(text, 0) + 1
    if len(parts) == 1:
        return next(iter(parts))
    return ", ".join(f"{text} x {n}" for text, n in parts.items())


@dataclass(frozen=True)
class RequestSteps:
    """A request's steps as the plan's Little's law prices them, as the simulator does: its prompt in budget-sized
    chunks, then its output in decode steps; with speculative decoding output / E verifications of 1 + gamma
    tokens a sequence, every step with the drafting beside it (simulator/speculative.py `DraftingStepModel`)."""
    model: StepTimeModel          # the plan's step model, with the drafting where speculation is on
    prefill_s: float              # the mean prompt's steps
    output_tokens: float          # the mean output
    tokens_per_step: float        # E = (1 - alpha^(gamma+1)) / (1 - alpha) a verification; 1 without speculation
    drafts_per_step: int          # gamma a sequence; 0 without speculation

    def time_in_system_s(self, batch: int, context: int) -> float:
        """prefill + output / E x the step of `batch` sequences on `context` tokens each."""
        step_s = self.model.step_time(decode_batch(batch, context, self.drafts_per_step))
        return self.prefill_s + self.output_tokens / self.tokens_per_step * step_s


def _request_steps(r: Resolved, step: StepTimeModel, prompt_mean: float, output_mean: float) -> RequestSteps:
    spec = r.scheduler.speculative
    model = with_drafting(step, spec)
    prefill_s = prefill_time_s(model, int(round(prompt_mean)), _chunk(r.engine))
    if spec is None:
        return RequestSteps(model, prefill_s, output_mean, 1.0, 0)
    return RequestSteps(model, prefill_s, output_mean,
                        expected_tokens_per_step(spec.acceptance_rate, spec.num_speculative_tokens),
                        spec.num_speculative_tokens)


def _chunk(e: EngineSettings) -> int | None:
    """The most prompt tokens a step takes: the token budget under chunked prefill, else the whole prompt."""
    return e.max_num_batched_tokens if e.enable_chunked_prefill else None


def _step_times(r: Resolved, step, roofline: RooflineStepTimeModel, weights: WeightMemory, budget: MemoryBudget,
                prompt_mean: float, output_mean: float) -> StepTimes:
    """Step times from `step` (calibrated or roofline), without speculative decoding's drafting; the bandwidth
    bound and the compute-bound batch are roofline properties."""
    e = r.engine
    context = int(prompt_mean + output_mean / 2)
    prefill_s = prefill_time_s(step, int(round(prompt_mean)), _chunk(e))
    # The seeds' bound: every weight read once per token (for MoE, only the experts one token routes to).
    untouched_expert_bytes = roofline.expert_bytes * (1 - roofline.experts_touched(1))
    bandwidth = roofline.hardware.memory_bandwidth_bytes_per_s      # the datasheet's, or on the host CPU measured
    bound_s = (weights.per_gpu_bytes - untouched_expert_bytes) * r.parallel.pp / bandwidth
    b1_s = step.step_time(decode_batch(1, context))
    seq_bytes = roofline.kv.sequence_bytes(int(prompt_mean + output_mean), budget.block_size)
    # the KV cache alone, without the recurrent state set aside (MemoryBudget.sequences_held counts both)
    rank_batch = max(1, min(e.max_num_seqs, held(budget.kv_cache_bytes, seq_bytes)))
    mem_batch = rank_batch * r.parallel.dp          # every data-parallel rank's (parallel.py)
    mem_s = step.step_time(decode_batch(mem_batch, context))
    return StepTimes(step.name, prompt_mean, output_mean, prefill_s * 1e3,
                     bound_s * 1e3, 1 / bound_s if bound_s else math.inf,
                     b1_s * 1e3, 1 / b1_s, mem_batch, mem_s * 1e3, mem_batch / mem_s,
                     compute_bound_batch(roofline, context), roofline.compute_format, step_sources(step),
                     roofline.alltoall_s(1) * 1e3 * r.parallel.pp,
                     roofline.alltoall_s(rank_batch) * 1e3 * r.parallel.pp,
                     roofline.alltoall_link.source if r.parallel.experts_span_dp else "")


def _time_in_system_s(steps: RequestSteps, rate: float, context: int, max_batch: int) -> float:
    """Fixed point of T = prefill + outputs / E x step(batch = rate x T), batch capped by what fits."""
    t = steps.time_in_system_s(1, context)
    for _ in range(50):
        batch = max(1, min(max_batch, round(rate * t)))
        t_next = steps.time_in_system_s(batch, context)
        if abs(t_next - t) < 1e-6:
            break
        t = t_next
    return t


def _closed_loop(steps: RequestSteps, concurrency: int, think_s: float, context: int,
                 max_batch: int) -> tuple[float, float]:
    """A closed loop's time in system T and the rate its clients send at, N / (T + think) (Little's law
    over a client's cycle): the fixed point of T at the batch that rate makes."""
    t = _time_in_system_s(steps, concurrency / (think_s + steps.prefill_s), context, max_batch)
    for _ in range(50):
        t_next = _time_in_system_s(steps, concurrency / (think_s + t), context, max_batch)
        if abs(t_next - t) < 1e-6:
            break
        t = t_next
    return t, concurrency / (think_s + t)


def closed_loop_clients(w: WorkloadSection) -> int:
    """The clients of a closed loop that can ever be in flight: min(concurrency, num_requests). The loop sends
    num_requests requests in all (vllm bench serve --max-concurrency N sends --num-prompts), so clients beyond them
    never send one: 100,000 clients of 300 requests hold at most 300 in flight, as the simulation runs them."""
    return min(w.arrival.concurrency, w.num_requests)


def clients_cut(w: WorkloadSection, source: Callable[[str], str]) -> str:
    """Why a closed loop is sized for fewer clients than stated ("" when it is not): `source` says where
    workload.num_requests came from."""
    a = w.arrival
    if closed_loop_clients(w) == a.concurrency:
        return ""
    return (f"; only {w.num_requests:,} of the {a.concurrency:,} clients send a request (workload.num_requests "
            f"{w.num_requests:,}, {source('workload.num_requests')}, is all the loop sends, as vllm bench serve "
            f"--num-prompts is): sized for {w.num_requests:,} clients")


def make_plan(r: Resolved) -> Plan:
    m, hw, p, e = r.model, r.hardware, r.parallel, r.engine
    d, w = r.deployment, r.workload
    weights, kv, budget = r.weights, r.kv, r.memory
    roofline = roofline_for(r)
    step = step_model_for(r, roofline)
    served = None
    if w.trace is None:
        # the engine answers a request longer than max_model_len at once (HTTP 400): it holds no KV and no batch slot,
        # so the rate and the mean lengths sized for are the served requests' (a default workload none of whose
        # requests fits is stated, with a rate of 0, at its own means)
        prompt_mean, output_mean = served_means(w.prompt_tokens, w.output_tokens, e.max_model_len) \
            if 0 < r.too_long_share < 1 else (mean_length(w.prompt_tokens), mean_length(w.output_tokens))
        rate = w.arrival.rate_per_s and w.arrival.rate_per_s * (1 - r.too_long_share)
    else:
        # the same rule over the requests the trace replays: their rate x the share served, the served ones' means
        served = kind("trace").served_trace(r, e.max_model_len)
        prompt_mean, output_mean, rate = served.prompt_tokens_mean, served.output_tokens_mean, served.rate_per_s
    times = _step_times(r, step, roofline, weights, budget, prompt_mean, output_mean)
    steps = _request_steps(r, step, prompt_mean, output_mean)

    # Little's law.
    a = w.arrival
    closed, think_s = w.trace is None and a.process == "closed", a.think_time_s or 0.0
    clients = closed_loop_clients(w) if closed else 0
    context = int(prompt_mean + output_mean / 2)
    if w.time_in_system_s is not None:
        t_sys, t_source = w.time_in_system_s, "scenario"
        if closed:
            rate = clients / (think_s + t_sys)
    else:
        t_source = ("estimated: prefill + outputs x decode step (the plan's step model) at the Little's-law batch"
                    if steps.drafts_per_step == 0 else
                    f"estimated: prefill + outputs / {steps.tokens_per_step:.2f} tokens a verification x the step "
                    f"verifying {steps.drafts_per_step} drafts a sequence (the plan's step model), drafting beside "
                    "each step, at the Little's-law batch")
        if closed:
            t_sys, rate = _closed_loop(steps, clients, think_s, context, times.memory_limited_batch)
            t_source += (f"; closed loop of {clients} clients: they send at concurrency / (time in system + "
                         f"think time {think_s:g} s) = {rate:.3g} req/s, the rate sized for")
        else:
            t_sys = _time_in_system_s(steps, rate, context, times.memory_limited_batch)
    if closed and rate > MAX_RATE_PER_S:      # the rate a scenario may state, so the one its clients may send
        given = "workload.time_in_system_s" if w.time_in_system_s is not None else "workload.arrival.concurrency"
        raise InputError(r.file, given, f"{clients:,} clients would send {rate:.3g} req/s (concurrency / "
                                        f"(time in system {t_sys:.3g} s + think time {think_s:g} s)); expected at "
                                        f"most {MAX_RATE_PER_S:g} req/s, as rate_per_s")
    if w.kv_tokens_per_request:
        tokens_per_req, tokens_source = w.kv_tokens_per_request, "scenario"
    else:
        tokens_per_req = min(e.max_model_len, int(round(prompt_mean + output_mean)))
        tokens_source = "mean prompt + mean output (a request at its end)"
    # a disaggregated replica's requests hold their KV on its decode pools, each a KV cache of its own
    pools = r.disaggregation.num_decode_replicas if r.disaggregation else 1
    if r.slots is None:
        # KV cache plus the recurrent state set aside (hybrid models), over what one request holds of both
        requests_held = pools * p.dp * budget.sequences_held(kv.sequence_bytes(tokens_per_req, e.block_size))
    else:
        requests_held = slot_requests_held(r.slots, tokens_per_req)
    # the rate memory allows: that many requests in flight over their time in system at the batch they make
    t_full = None if w.time_in_system_s is not None else steps.time_in_system_s(times.memory_limited_batch, context)
    capacity = littles_law(rate, t_sys, t_source, tokens_per_req, tokens_source, kv.bytes_per_token,
                           budget.kv_tokens * p.dp * pools, requests_held, t_full)

    sequences = w.concurrent_sequences or max(1, math.ceil(capacity.requests_in_flight))
    source = "scenario" if w.concurrent_sequences else "Little's law (requests in flight, rounded up)"
    held_tokens = tokens_per_req
    if r.slots is not None and not r.slots.kv_unified:     # a request holds its slot's whole context
        held_tokens = r.slots.ctx_per_slot_tokens
        source += ("; each holds its slot's whole context (" + ("llama.cpp allocates ctx_size / parallel per slot"
                   if r.slots.engine == "llama.cpp" else "Ollama allocates num_ctx per parallel request") + ")")
    demand_bytes = sequences * kv.sequence_bytes(held_tokens, e.block_size, per_gpu=False)
    demand = KVDemand(sequences, held_tokens, sequences * held_tokens, demand_bytes, demand_bytes / GiB, source)

    spec = None
    if d.speculative_config:
        sc = d.speculative_config
        resolved_spec = r.scheduler.speculative
        proposer = ("the draft model's own roofline step time" if resolved_spec.draft_step_model is not None else
                    f"{resolved_spec.draft_cost_fraction:g} x the target's step over the same tokens a drafting pass ("
                    + ("scenario" if sc.proposer_cost_fraction is not None else
                       f"assumption for {sc.method}, sizer/sizing/presets.py") + ")")
        spec = SpeculativeSummary(sc.method, sc.num_speculative_tokens, sc.acceptance_rate,
                                  expected_tokens_per_step(sc.acceptance_rate, sc.num_speculative_tokens),
                                  "(1 - alpha^(gamma+1)) / (1 - alpha)", proposer, r.proposer_memory)

    comm = comm_per_step(m, p)
    parallel = ParallelSummary(p.tp, p.pp, p.dp, p.ep, p.gpus_per_replica, kv_heads_per_gpu_of(m, p),
                               comm.tp_allreduce_bytes_per_token, comm.pp_send_bytes_per_token,
                               comm.ep_alltoall_bytes_per_token, gpus_per_replica(r), _pools(r))
    counts = parameter_count(m)
    model = ModelSummary(m.name, m.architecture, counts.total, counts.active, m.params_official_total,
                         weights.parameters, weights.parameters_source, m.num_layers, attention_kind(m),
                         m.max_position_embeddings, tuple(layer_kinds(m)), kv.state_bytes_per_seq, m.unread_keys)

    if r.slots is not None:     # one server on the user's machine, unless the scenario states more
        replicas = d.replicas or 1
        replicas_source = "scenario" if d.replicas else f"one {r.slots.engine} server (deployment.replicas for more)"
    else:
        replicas = d.replicas or capacity.replicas_for_memory or 1
        replicas_source = ("scenario" if d.replicas
                           else "enough KV cache for Little's-law requests in flight (the simulator refines this)")
    cost = cost_summary(r, replicas, replicas_source, rate, output_mean)
    fits = budget.fits
    verdict = ("fits" if fits else "does not fit: " + "; ".join(budget.reasons))
    if fits and demand.sequences > capacity.requests_held_per_replica * replicas:
        if r.slots is not None:
            verdict += (f"; but Little's law puts {count(demand.sequences, 'request')} in flight and "
                        f"{count(replicas, 'server')} with {count(r.slots.slots, 'slot')} "
                        f"{'holds' if replicas == 1 else 'hold'} {capacity.requests_held_per_replica * replicas} at "
                        "once: requests queue (about "
                        f"{capacity.max_arrival_rate_for_memory_per_s * replicas:.3g} req/s at most)")
        else:
            held = count(capacity.requests_held_per_replica, "such sequence")
            verdict += (f"; but {count(demand.sequences, 'sequence')} x {demand.tokens_per_sequence} tokens exceed "
                        f"the KV cache of {count(replicas, 'replica')} ({held} each)")
    return Plan(
        schema_version=SCHEMA_VERSION, scenario=r.name, scenario_file=r.file, gpu=hw.name,
        gpu_memory_bytes=hw.memory_bytes, gpu_memory_gib=hw.memory_bytes / GiB, gpu_memory_gb=hw.memory_bytes / GB,
        engine=e, model=model, weights=weights, weight_execution=r.execution, checkpoint=summarise_checkpoint(r), kv=kv,
        kv_bytes_per_sequence_at_max_model_len=kv.sequence_bytes(e.max_model_len, e.block_size, per_gpu=False),
        kv_demand=demand, memory=budget, parallel=parallel, capacity=capacity, step_times=times, speculative=spec,
        cost=cost, fits=fits, verdict=verdict,
        assumptions=(workload_assumptions(r, rate, prompt_mean, output_mean, served)
                     + assumptions(r, roofline, times.sources.get("step overhead", "roofline")) + slot_notes(r)
                     + _schedule_note(r)),
        slots=slot_answers(r, step, prompt_mean, output_mean, rate) if r.slots else None, lora=r.lora)


def _length(d: Distribution) -> str:
    if d.distribution == "fixed":
        return f"{d.value:,.0f} tokens, fixed"
    return f"{d.distribution} lengths, {mean_text(d)}"


def slo_targets(r: Resolved, sources: bool = False) -> str:
    """The stated targets, "TTFT <= 2,000 ms, ITL <= 60 ms; 95% of requests", each with its source if asked."""
    targets = targets_text(r.slo, significant, source=r.source_of if sources else None)
    if not targets:
        return "no targets"
    share = f"{r.slo.required_share:.0%} of requests" + (f" ({r.source_of('slo.required_share')})" if sources else "")
    return targets + "; " + share


def workload_assumptions(r: Resolved, rate: float, prompt_mean: float, output_mean: float,
                         served: ServedTrace | None = None) -> list[str]:
    """The workload and SLO the plan answers, each value with where it came from (a flag, the scenario, a
    default): a plan from flags alone assumes a workload, and says so. `served`: a trace's replayed requests."""
    w, src = r.workload, r.source_of
    if w.trace is not None:
        which = ("them" if served.served == served.requests else
                 f"the {served.served:,} of them within max_model_len {r.engine.max_model_len:,} "
                 "(the rest refused)" if served.served else
                 f"all of them (none within max_model_len {r.engine.max_model_len:,}: the rate served is 0)")
        arrival = (f"workload: trace {w.trace.path} ({w.trace.format}, scenario), {served.words}: {rate:.3g} req/s, "
                   f"mean prompt {prompt_mean:,.0f} and output {output_mean:,.0f} tokens from {which}")
        lengths = []
    else:
        if w.arrival.process == "closed":
            arrival = (f"workload: a closed loop of {w.arrival.concurrency} clients "
                       f"({src('workload.arrival.concurrency')}), think time {w.arrival.think_time_s or 0:g} s"
                       + clients_cut(w, src))
        else:
            arrival = (f"workload: {w.arrival.rate_per_s:g} req/s ({src('workload.arrival.rate_per_s')}), "
                       f"{w.arrival.process} arrivals ({src('workload.arrival.process')})")
        lengths = [f"workload: prompt {_length(w.prompt_tokens)} ({src('workload.prompt_tokens')}), output "
                   f"{_length(w.output_tokens)} ({src('workload.output_tokens')})"]
    targets = slo_targets(r, sources=True)
    slo = (f"SLO: {targets}" if r.slo.ttft_ms or r.slo.itl_ms or r.slo.tpot_ms or r.slo.e2e_ms
           else "SLO: no targets stated (a scenario's slo section, or --ttft-ms / --itl-ms): --simulate reports "
                "latency and sizes no replicas for an SLO")
    if served is not None and served.unread:
        lengths = [served.unread]
    simulated = (f"{served.requests:,}, the trace's replayed" if served is not None else
                 f"{w.num_requests:,} ({src('workload.num_requests')})")
    return [arrival, *lengths, slo, f"simulated requests (--simulate): {simulated}"]


def kv_heads_per_gpu_of(m: ModelSpec, p) -> int:
    return 1 if m.is_mla or not m.num_kv_heads else kv_heads_per_gpu(m.num_kv_heads, p)


def assumptions(r: Resolved, step: RooflineStepTimeModel, overhead: str = "roofline") -> list[str]:
    """`overhead`: what prices the time a step costs beside its kernels (the step sources' "step overhead": the
    roofline's assumption, or the kernel tables' fitted figure)."""
    hw = step.hardware          # the datasheet, or on the host CPU what sizer calibrate measured
    overhead_line = (f"step overhead {step.step_overhead_s * 1e3:.2f} ms per step (assumption)"
                     if overhead == "roofline" else f"step overhead {overhead}")
    return [
        profile_origin(r.hardware),
        f"engine {r.deployment.engine} ({r.source_of('deployment.engine')})",
        f"GPU memory {hw.memory_bytes / GiB:.2f} GiB ({hw.memory_bytes / GB:.2f} GB): {hw.memory_source}",
        f"peak bandwidth {hw.memory_bandwidth_bytes_per_s / 1e12:.3g} TB/s x efficiency {hw.bandwidth_efficiency} "
        f"({hw.bandwidth_efficiency_source})",
        f"peak {step.compute_format} {hw.peak_flops(step.compute_format) / 1e12:.4g} TFLOP/s dense "
        f"x efficiency {step.gemm_compute_efficiency} ({step.gemm_compute_efficiency_source})",
        *_memory_assumptions(r),
        f"{overhead_line}; {COLLECTIVE_LATENCY_S * 1e6:.1f} us per collective (the measured kernels' median) + the "
        f"wait for the last GPU, {collective_wait_s(step.parallel.tp) * 1e6:.1f} us at TP {step.parallel.tp} (fitted)",
        f"fitted on public vLLM 0.15.1 H100 runs (docs/fidelity.md): weights stream at {WEIGHT_STREAM_EFFICIENCY:.0%} "
        f"and KV at {ATTENTION_KV_EFFICIENCY:.0%} of the achievable bandwidth, {LAYER_STEP_S * 1e6:.0f} us per layer "
        "per step",
        f"engine loop: {r.replica.engine_loop.name} (sizer/sizing/presets.py)",
        *(["pipeline parallelism: a step's latency is the sum of its stages (no micro-batch overlap)"]
          if r.slots is None else []),
        "engine settings: " + ", ".join(f"{k} from {v}" for k, v in r.engine.sources.items()),
        f"price: {r.price_source}",
    ] + _default_notes(r) + list(r.link_notes) + ([calibration_note(r)] if r.calibrated_profile else []) \
        + [note for note in (kernel_tables_note(r),) if note] + _model_notes(r) + _serving_notes(r)


def _default_notes(r: Resolved) -> list[str]:
    """Defaults the plan took that no other line names (the workload's: `workload_assumptions`): the KV cache
    type and vLLM's share of GPU memory."""
    notes = []
    if r.slots is None:
        d = r.deployment
        notes.append(f"KV cache type {r.kv_cache_dtype} (" + (r.source_of("deployment.kv_cache_dtype")
                                                         if d.kv_cache_dtype != "auto" else
                                                         "kv_cache_dtype auto: the model's serving dtype") + ")")
        if d.gpu_memory_utilization == VLLM_GPU_MEMORY_UTILIZATION:
            notes.append(f"gpu_memory_utilization {d.gpu_memory_utilization} (vLLM's default; "
                         "deployment.gpu_memory_utilization sets it)")
    return notes


def _trtllm_memory(r: Resolved) -> list[str]:
    """How TensorRT-LLM's KV cache differs from vLLM's reading (memory_budget's share_of_free)."""
    if r.engine.engine != "tensorrt-llm":
        return []
    moe_peak = engine_moe_peak_bytes(r.model, r.parallel, r.engine.engine, r.engine.max_num_batched_tokens,
                                     r.weight_format.compute)
    pool = trtllm_graph_pool(r.deployment, r.model, r.parallel, r.engine, r.weight_format)
    return [f"TensorRT-LLM: the KV cache is gpu_memory_utilization {r.memory.gpu_memory_utilization} (its "
            "kv_cache_free_gpu_mem_fraction) of what weights, the activation peak and the context leave"
            + ("; the peak includes its fused-MoE workspace"
               + (" and gathered rows" if r.parallel.experts_span_dp else "") + f", {moe_peak / GiB:.2f} GiB for "
               f"{r.engine.max_num_batched_tokens:,} tokens" + (f" x {r.parallel.dp} attention-DP ranks"
                                                                if r.parallel.experts_span_dp else "")
               if moe_peak else "")
            + (f"; and the CUDA-graph pool its warmup captured before it, {pool / GiB:.2f} GiB (the largest "
               "decode graph's forward)" if pool else "")]


def _memory_assumptions(r: Resolved) -> list[str]:
    """What the memory budget sets aside beside weights and KV, in the engine's own terms."""
    if r.slots is None:
        return [f"CUDA context, workspaces and CUDA graphs: {CUDA_CONTEXT_BYTES / GiB:.2f} GiB per GPU; "
                f"NCCL buffers {NCCL_BUFFER_BYTES / GiB:.2f} GiB when TP or PP > 1 or attention-DP ranks share "
                f"experts (DEP) (assumption)",
                f"activation peak: an estimate of {ENGINE_NAMES.get(r.engine.engine, r.engine.engine)}'s profiled "
                f"forward pass at max_num_batched_tokens "
                "(residual, q/k/v, MLP intermediate, fp32 logits)"] + _trtllm_memory(r)
    runtime = {"apple-gpu": "the Metal runtime and its buffers", "cpu": "the runtime and its buffers"}.get(
        r.hardware.device_kind, "the CUDA context and ggml's buffers")
    return [f"{r.slots.engine} takes no share of the device (no gpu_memory_utilization): the memory above is its, "
            f"less {CUDA_CONTEXT_BYTES / GiB:.2f} GiB for {runtime} (assumption)",
            f"compute buffer: the activation estimate for one ubatch of {r.slots.ubatch_size} tokens (residual, q/k/v, "
            "MLP intermediate, fp32 logits)"]


def _serving_notes(r: Resolved) -> list[str]:
    """LoRA adapters and structured outputs: how each is priced, and what is not modelled."""
    notes, lora = [], r.lora
    if lora is not None:
        d = r.deployment
        notes.append(f"LoRA: {lora.slots} GPU slots (max_loras) x rank {lora.rank} over {', '.join(lora.modules)}: "
                     f"{lora.bytes_per_slot / 2**20:,.1f} MiB per slot per GPU, taken from the KV cache; a step runs "
                     f"at most {lora.slots} adapters (others wait); an adapter not in a slot loads from the host "
                     f"cache of {d.max_cpu_loras or d.max_loras} over the host link, or from disk at "
                     f"{LORA_DISK_BYTES_PER_S / 1e9:g} GB/s (assumption); per step 2 x adapter params x LoRA tokens "
                     f"FLOPs or the adapters' bytes, plus {LORA_STEP_S_PER_LAYER * 1e6:g} us per layer of kernels "
                     "(assumption); the simulation prices these, the analytic step times above do not")
        if lora.skipped:
            notes.append("LoRA: adapters on " + ", ".join(lora.skipped) + " layers are not modelled "
                         "(no slot memory, no FLOPs)")
        if r.calibrated_profile is not None:
            notes.append("LoRA: the calibrated profile does not measure LoRA kernels; their cost is not added")
        if r.workload.lora is None:
            notes.append("LoRA: enabled but workload.lora names no adapters: every request runs on the base model")
    so = r.workload.structured_output
    if so is not None:
        compile_s, mask_s = GRAMMAR_BACKENDS[so.backend]
        notes.append(f"structured outputs ({so.backend}): {so.share:.0%} of requests over {so.schemas} schemas; "
                     f"{compile_s * 1e3:g} ms to compile a schema on first use (cache of {GRAMMAR_CACHE_ENTRIES:,}), "
                     f"added to that request's TTFT; {mask_s * 1e6:g} us of CPU per grammar token, added to the step "
                     "(sourced assumptions, sizer/sizing/presets.py); the analytic step times leave both out")
    return notes


def _pools(r: Resolved) -> str:
    """A disaggregated replica's pools and its KV transfer, in words ("" for one pool)."""
    d = r.disaggregation
    if d is None:
        return ""
    pool = count(r.parallel.gpus_per_replica, "GPU")
    state = f" and its recurrent state ({d.state_bytes_per_seq / 2**20:,.1f} MiB)" if d.state_bytes_per_seq else ""
    return (f"{d.num_prefill_replicas} prefill + {d.num_decode_replicas} decode pools of {pool} each; a prompt's KV "
            f"({d.kv_bytes_per_token:,.0f} B a token){state} moves to decode at "
            f"{d.interconnect_bytes_per_s / 1e9:g} GB/s")


def _schedule_note(r: Resolved) -> list[str]:
    """A schedule is sized, and energy estimated, by `plan --simulate` (sizer/sizing/day.py, the operating point's
    busy share); this plan is at the steady rate, without them."""
    notes = []
    if r.workload.schedule is not None:
        notes.append(f"workload.schedule: this plan is at workload.arrival.rate_per_s; `plan --simulate` sizes the "
                     f"{r.workload.schedule.period} (docs/capacity-over-time.md)")
    if r.energy != EnergySection():
        notes.append("energy: estimated from the simulated operating point's busy share: `plan --simulate` reports it")
    return notes


def slot_notes(r: Resolved) -> list[str]:
    """What the llama.cpp / Ollama model leaves out or approximates (docs/engines.md)."""
    sl = r.slots
    if sl is None:
        return []
    notes = [
        f"{sl.engine} slots: {sl.slots} x {sl.ctx_per_slot_tokens:,} tokens"
        + (" sharing one unified KV buffer" if sl.kv_unified else " of contiguous KV each")
        + f", K cache {sl.cache_type_k}, V cache {sl.cache_type_v}; "
        + ", ".join(f"{k} from {v}" for k, v in sl.sources.items()),
        "a request longer than its slot's context is simulated as refused (llama-server answers an error when "
        "the prompt exceeds the slot's context; a generation that reaches it stops early)",
        ("per-slot prompt reuse (cache_prompt) is not simulated in the unified buffer: no prefix hits"
         if sl.kv_unified else
         "per-slot prompt reuse (cache_prompt): a request takes the idle slot whose last prompt shares the longest "
         "prefix with it and reuses that prefix (llama-server's --slot-prompt-similarity threshold is not modelled)"),
        f"a step's tokens run in ubatch_size ({sl.ubatch_size}) pieces; priced as one batch (the roofline), "
        "the compute buffer sized for one ubatch; flash_attn "
        + ("auto" if sl.flash_attn is None else "on" if sl.flash_attn else "off") + " is not priced",
        "the roofline's efficiencies were fitted on vLLM H100 runs, not on llama.cpp kernels",
        "llama.cpp's --fit (llama_params_fit: lowers an unset context or n_gpu_layers until the model fits free "
        "memory) is not modelled: the context planned is the one given, else the model's, and one that does not "
        "fit is refused",
    ]
    if sl.engine == "ollama":
        notes.append(f"Ollama: cold loads (model file at {sl.load_bytes_per_s / 1e9:g} GB/s after "
                     f"{sl.keep_alive_s:g} s idle) are answered analytically, not simulated; "
                     f"max_loaded_models {sl.max_loaded_models} matters only with several models (one is planned)")
    return notes


def _model_notes(r: Resolved) -> list[str]:
    m, kv = r.model, r.kv
    notes = list(m.notes) + checkpoint_notes(r, summarise_checkpoint(r))
    if kv.state_layers:
        padded = (f"; padded to pages of {r.memory.block_size}-token attention blocks: "
                  f"{kv.pool_state_bytes_per_seq_per_gpu / 2**20:,.1f} MiB a GPU in the pool"
                  if kv.padded_state_bytes_per_seq_per_gpu else "")
        kept = (f"each running sequence takes it from the KV blocks' pool "
                f"({kv.state_bytes_per_seq_per_gpu / 2**20:,.1f} MiB a GPU{padded}, as vLLM's hybrid KV cache gives "
                "every request its state blocks beside its KV blocks)"
                if kv.state_in_pool else
                f"set aside for the {count(r.memory.state_seqs, 'sequence')} of max_model_len the memory holds "
                f"(at most max_num_seqs {r.engine.max_num_seqs}), which caps the running sequences: conservative "
                "for shorter ones")
        notes.append(f"recurrent state: {kv.state_layers} Mamba-2 / linear-attention layers keep "
                     f"{kv.state_bytes_per_seq / 2**20:,.1f} MiB per sequence (convolution window in {m.torch_dtype}, "
                     f"recurrent state in {m.recurrent_state_dtype or m.torch_dtype}); {kept}")
        if kv.padded_state_bytes_per_seq_per_gpu and r.engine.enable_prefix_caching:
            notes.append(f"prefix cache of a hybrid model: vLLM (mamba_cache_mode align) keeps the recurrent state "
                         f"only at {r.memory.block_size}-token block boundaries where a step ended, and a hit needs "
                         "it; the simulator counts a hit on every cached block (not modelled: optimistic for shared "
                         "prefixes shorter than the prompt), and does not align prefill chunks to the blocks")
    if any(g.kept_window_tokens for g in kv.groups) and r.replica.kv_windows:
        windows = ", ".join(f"{g.layers} layers of {g.label}" for g in kv.groups if g.kept_window_tokens)
        notes.append(f"windowed layers ({windows}) keep only their window: a KV block holds {r.memory.block_size} "
                     f"tokens of the layers that keep every token, and each sequence's windowed layers take blocks "
                     f"for their window beside them from the same pool (vLLM's hybrid KV cache frees what leaves "
                     f"the window); the simulator holds those from a request's start")
    index_bytes = max((a.index_key_bytes_per_token for a in m.mixers(LatentAttention)), default=0)
    for g in kv.groups:
        if g.attended_tokens:
            notes.append(f"DeepSeek sparse attention ({g.layers} layers of {g.label}): attention is priced from the "
                         f"top {g.attended_tokens:,} cached tokens each query attends to, not the whole context; the "
                         f"indexer that picks them scores every cached token (FP8) and reads its own key cache "
                         f"({index_bytes} B per token per layer) whole each step")
    if m.unread_keys:
        notes.append("config keys sizer does not read (taken not to change parameters, memory or FLOPs): "
                     + ", ".join(m.unread_keys))
    return notes


def calibration_note(r: Resolved) -> str:
    h = r.calibrated_profile.header
    return (f"step times: calibrated profile {r.calibrated_profile.path} measured on {h.device.name} on {h.date} "
            f"(torch {h.versions.torch}, {h.dtype}); the roofline prices steps outside its measured range")
