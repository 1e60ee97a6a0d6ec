"""Turn a validated Scenario (its flags made) into the deployment description, `Resolved`: model, hardware,
split, formats, engine settings, each with where it came from, the memory budget, and the executors'
configuration. Built once, by keyword; nothing downstream reads the scenario.

`resolve` is the one place engine defaults are applied, and `replica_config` the one place the
`SchedulerConfig` and `ReplicaConfig` are built from the description (KV blocks from the memory budget,
`reserve_full_kv`, the swap link): what the simulator and the bundled engine both run, so `sizer simulate`,
`sizer plan` and `sizer validate` cannot disagree on them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.config import DisaggregationConfig, ReplicaConfig, SwapLink
from simulator.grammar import GrammarConfig
from simulator.lora import LoraConfig
from simulator.scheduler import SchedulerConfig
from simulator.speculative import SpeculativeConfig
from sizer.analytic.format_support import (
    MARLIN_FAMILIES,
    TENSORRT_LLM_FAMILIES,
    Execution,
    execution,
    family,
    mxfp4_moe_checkpoint,
)
from sizer.analytic.formats import PLAIN, WeightFormat, validate_groups, weight_format
from sizer.analytic.lengths import share_longer_than
from sizer.analytic.memory import (
    DraftLoad,
    GiB,
    KVLayout,
    LoraMemory,
    MemoryBudget,
    WeightMemory,
    engine_moe_peak_bytes,
    kv_layout,
    llamacpp_cache_bytes,
    lora_memory,
    memory_budget,
    trtllm_graph_pool_bytes,
    weight_memory,
)
from sizer.analytic.offload import Offload, all_layers_on_gpu, input_layer_bytes, offload, on_gpu
from sizer.analytic.parallel import ParallelConfig, validate_split
from sizer.analytic.proposer import (
    DraftMemory,
    draft_model_memory,
    eagle_memory,
    medusa_memory,
    mtp_memory,
)
from sizer.errors import InputError
from sizer.inputs import preloaded
from sizer.inputs.checkpoint import Checkpoint, NotCachedError, beside, hf_cache_dir
from sizer.inputs.hardware import (
    LLAMACPP_ONLY_DEVICES,
    HardwareOverrides,
    HardwareSpec,
    Link,
    host_link,
    scale_up_link,
    scenario_hardware,
)
from sizer.inputs.layers import LatentAttention
from sizer.inputs.model_spec import ModelSpec, checkpoint_model, load_config
from sizer.inputs.scenario import (
    ASSUMED_FIELDS,
    ENGINE_NAMES,
    DeploymentSection,
    Scenario,
    SLOSection,
    WorkloadSection,
    length_bounds,
    scenario_dir,
)
from sizer.inputs.schedule import AutoscalingSection, EnergySection
from sizer.inputs.spec_head import EAGLE_FC_INPUTS, MedusaHead, read_head, target_shaped
from sizer.inputs.variant import PRICE
from sizer.kinds import kind
from sizer.sizing.presets import (
    ATTENTION_DP_CONTEXT_BALANCE,
    GRAMMAR_BACKENDS,
    GRAMMAR_CACHE_ENTRIES,
    KEEPS_CHUNKED_KV,
    LLAMACPP_CTX_PAD,
    LLAMACPP_CTX_PAD_SOURCE,
    LORA_DISK_BYTES_PER_S,
    PROPOSER_COST_FRACTION,
    VLLM_BLOCK_SIZES,
    VLLM_MLA_BLOCK_SIZES,
    VLLM_SPARSE_MLA_BLOCK_SIZE,
    engine_defaults,
    engine_loop,
    preset,
    slot_preset,
)
from sizer.timing.cuda_graphs import captured_sizes
from sizer.timing.kernel_tables import (
    CALIBRATED_ENGINE,
    HEADER_FILE,
    TABLES,
    KernelTables,
    cached_kernel_tables,
    read_header,
)
from sizer.timing.roofline import RooflineStepTimeModel
from validation.errors import FieldError, excerpt

if TYPE_CHECKING:      # the type only: a scenario without a calibrated profile loads none (sizer/kinds.py)
    from sizer.timing.profile import CalibrationProfile

# Assumption: a disaggregated KV transfer costs its bytes over the link and nothing more.
KV_TRANSFER_LATENCY_S = 0.0
# A quantised V cache needs flash attention: llama.cpp refuses it without ("V cache quantization requires
# flash_attn", src/llama-context.cpp); Ollama's FAQ: KV cache quantisation needs OLLAMA_FLASH_ATTENTION.
QUANTISED_CACHE_TYPES = ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl")
# llama.cpp's unified KV buffer is cells of one token; simulated in blocks of this many (a request's last
# block may hold up to 15 unused cells).
UNIFIED_KV_BLOCK_TOKENS = 16


@dataclass(frozen=True)
class EngineSettings:
    """Scheduling settings after engine defaults are applied; `sources` says where each came from."""
    engine: str
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    prefix_cache_kind: str               # "hashed-blocks" (vLLM) or "radix-tree" (SGLang)
    preemption_mode: str
    reserve_full_kv: bool                # admit only with KV for the whole output (never preempt)
    max_model_len: int
    sources: dict[str, str]


# llama.cpp and Ollama have no gpu_memory_utilization: the whole device memory (on Apple parts, the Metal
# working-set limit the profile states) is theirs, less the runtime context the budget sets aside.
SLOT_ENGINE_MEMORY_SHARE = 1.0


@dataclass(frozen=True)
class SlotSettings:
    """llama.cpp / Ollama: the slots, their context and KV types, with where each came from."""
    engine: str
    slots: int
    kv_unified: bool
    ctx_total_tokens: int            # KV cells allocated (llama.cpp -c; Ollama num_ctx x num_parallel)
    ctx_per_slot_tokens: int         # the longest request (prompt + output) one slot serves
    slot_cells: int                  # KV cells of one slot's stream, llama.cpp's padded n_ctx_seq (unified: n_ctx)
    batch_size: int
    ubatch_size: int
    cache_type_k: str
    cache_type_v: str
    flash_attn: bool | None          # None: auto
    keep_alive_s: float | None       # Ollama
    max_loaded_models: int | None    # Ollama
    load_bytes_per_s: float | None   # Ollama: cold load read speed
    sources: dict[str, str]

    @property
    def ctx_field(self) -> str:
        """The scenario field that sets the context: what a refusal names."""
        return "deployment.ctx_size" if self.engine == "llama.cpp" else "deployment.num_ctx"

    @property
    def streams(self) -> tuple[int, int]:
        """(KV streams, sequences each holds): one buffer for every slot when unified, else one per slot."""
        return (1, self.slots) if self.kv_unified else (self.slots, 1)

    def kv_bytes(self, kv: KVLayout, stream_cells: int | None = None) -> float:
        """KV the engine allocates on one GPU, each stream `stream_cells` long (default: a slot's context; the whole
        context when unified). llama.cpp keeps windowed layers in its SWA cache (llamacpp_cache_bytes); Ollama is
        counted with every layer at the whole context (its own engine's window caches are not modelled)."""
        streams, seqs = self.streams
        cells = self.slot_cells if stream_cells is None else stream_cells
        if self.engine != "llama.cpp":
            return streams * cells * kv.bytes_per_token_per_gpu
        return llamacpp_cache_bytes(kv, cells, streams, seqs, self.ubatch_size)


@dataclass(frozen=True, kw_only=True)
class Resolved:
    """The deployment description: what the planner and the executors read, built once, by keyword, by `resolve`
    from a validated scenario (its flags already made). Nothing downstream reads the scenario itself: what it
    stated that has no resolved form here (the workload, the SLO, the deployment section as stated) is a typed
    section of it. `source_of` says where each setting came from: a flag (`--tp`), "scenario", or a default."""
    name: str                        # the scenario's title (reports)
    file: str | None                 # the scenario's file, what a refusal names (None: a plan from flags alone)
    model_name: str                  # model.name as stated: a catalog name, a path or a Hugging Face id
    num_parameters: float | None     # model.num_parameters: a stated count in place of the architecture's
    model_overrides: dict | None     # model.overrides: config.json keys the scenario changed (emitted for the engine)
    model: ModelSpec
    hardware: HardwareSpec
    step_model_mode: str             # hardware.step_model: auto, kernel_tables or roofline
    parallel: ParallelConfig
    checkpoint: Checkpoint           # where config.json was found; the stored bytes its folder states
    weight_format: WeightFormat
    execution: Execution             # how the engine runs the weight format on this GPU
    group_size: int                  # AWQ/GPTQ scale group: the checkpoint's, else the scenario's
    kv_cache_dtype: str
    deployment: DeploymentSection    # the deployment section as stated (flags made); resolved values are above
    engine: EngineSettings
    workload: WorkloadSection
    slo: SLOSection
    energy: EnergySection
    autoscaling: AutoscalingSection | None
    weights: WeightMemory
    kv: KVLayout
    memory: MemoryBudget             # one GPU of one replica; its kv_blocks size the pool
    speculative: SpeculativeConfig | None   # deployment.speculative_config resolved (a draft model's own roofline)
    disaggregation: DisaggregationConfig | None
    link_notes: tuple[str, ...]      # notes for the plan: fallbacks for link figures the hardware profile lacks,
                                     # layers offloaded, a unified memory's limit, requests longer than max_model_len
    price_usd_per_gpu_hour: float | None
    price_source: str
    # scenario path (model.name, deployment.tensor_parallel_size, workload.arrival.rate_per_s, ...) -> where its
    # value came from; the engine settings' own sources are in `engine.sources` (`source_of` reads both)
    sources: dict[str, str]
    calibrated_profile: CalibrationProfile | None = None
    offload: Offload | None = None   # llama.cpp's n_gpu_layers below all: the layers left in host memory
    host_weight_bytes: float = 0.0   # llama.cpp / Ollama: weights in host memory (the input layer, offload's layers)
    slots: SlotSettings | None = None    # llama.cpp and Ollama
    lora: LoraMemory | None = None   # adapter slots per GPU (deployment.enable_lora)
    kernel_tables: KernelTables | None = None   # hardware.kernel_tables: the scenario's own folder, checked
    cuda_graph_batch_sizes: tuple[int, ...] = ()   # deployment.cuda_graph_batch_sizes; () when not stated
    too_long_share: float = 0.0      # requests whose prompt + output exceed max_model_len: the engine refuses them
    proposer_memory: str = ""        # what a speculative proposer's memory is taken as, and from where (the plan)

    def source_of(self, path: str) -> str:
        """Where the setting at scenario `path` came from: a flag, "scenario", or the default's reason."""
        if path in self.sources:
            return self.sources[path]
        section, _, name = path.partition(".")
        return self.engine.sources.get(name, "default") if section == "deployment" else "default"

    @cached_property
    def replica(self) -> ReplicaConfig:
        """What the simulator and the engine run (num_blocks 0 if nothing fits): `replica_config`'s, built once."""
        return replica_config(self)

    @property
    def scheduler(self) -> SchedulerConfig:
        return self.replica.scheduler


def checkpoint_of(s: Scenario) -> Checkpoint:
    """The scenario's model: a catalog name, a config or checkpoint folder (relative to the scenario file), or a
    Hugging Face id in the local cache (a sweep worker: as its driver read it, sizer/inputs/preloaded.py)."""
    shipped = preloaded.checkpoint(str(scenario_dir(s)), s.model.name)
    return shipped or load_config(beside(s.model.name, scenario_dir(s)), s.file, "model.name")


def model_of(s: Scenario) -> ModelSpec:
    """The scenario's model, with any config key overrides applied."""
    return _overridden_model(s, checkpoint_of(s))


def _overridden_model(s: Scenario, checkpoint: Checkpoint) -> ModelSpec:
    """The checkpoint's model with the scenario's model.overrides applied: a refusal of an overridden key names the
    scenario's model.overrides.KEY, not the config file the override was made to."""
    try:
        return checkpoint_model(checkpoint, s.model.overrides)
    except FieldError as error:
        key = re.split(r"[.\[]", error.field or "", maxsplit=1)[0]
        if error.file != checkpoint.config_file or key not in (s.model.overrides or {}):
            raise
        raise InputError(s.file, f"model.overrides.{error.field}", error.message) from None


def hardware_of(s: Scenario) -> HardwareSpec:
    """The scenario's device: its profile (by id, alias or file) with the scenario's overrides."""
    h = s.hardware
    return scenario_hardware(h.gpu, s.file, "hardware.gpu",
                             HardwareOverrides(h.memory_gb, h.memory_bandwidth_gb_per_s, h.gpu_working_set_fraction))


def parallel_config(d: DeploymentSection, model: ModelSpec, file: str | None) -> ParallelConfig:
    """The deployment's split. `enable_attention_dp` (TensorRT-LLM's enable_attention_dp, SGLang's
    --enable-dp-attention) runs attention and the dense layers data-parallel on each of the tensor-parallel GPUs
    with the experts spread whole over them: as vLLM's data_parallel_size with enable_expert_parallel (DEP)."""
    # ranks that each schedule their own prompts wait for the busiest at the MoE layers (presets)
    balance = ATTENTION_DP_CONTEXT_BALANCE.get(d.engine, 1.0)
    if not d.enable_attention_dp:
        spans = d.enable_expert_parallel and d.data_parallel_size > 1
        return ParallelConfig(d.tensor_parallel_size, d.pipeline_parallel_size, d.data_parallel_size,
                              d.enable_expert_parallel, balance if spans else 1.0)
    if model.moe is None:
        raise InputError(file, "deployment.enable_attention_dp", f"{model.name} has no experts; attention data "
                                                                  "parallelism is modelled for MoE models (DEP)")
    return ParallelConfig(1, d.pipeline_parallel_size, d.tensor_parallel_size * d.data_parallel_size, True, balance)


def trtllm_graph_pool(d: DeploymentSection, model: ModelSpec, parallel: ParallelConfig, engine: EngineSettings,
                       fmt: WeightFormat) -> float:
    """The CUDA-graph pool TensorRT-LLM's KV sizing counts (`trtllm_graph_pool_bytes`): its largest captured decode
    batch; 0 for the other engines, or without CUDA graphs stated."""
    sizes = captured_sizes(tuple(d.cuda_graph_batch_sizes or ()), engine.max_num_seqs, engine.max_num_batched_tokens)
    if d.engine != "tensorrt-llm" or not sizes:
        return 0                                    # an int: the budget's bytes stay as they were without it
    return trtllm_graph_pool_bytes(model, parallel, sizes[-1], engine.max_num_batched_tokens, engine.max_model_len,
                                   engine.block_size, fmt.compute)


def resolve(s: Scenario) -> Resolved:
    """Everything the planner and the executors need, with engine defaults filled in; raises FieldError."""
    checkpoint = checkpoint_of(s)
    model = _overridden_model(s, checkpoint)
    hardware = hardware_of(s)
    d = s.deployment
    parallel = parallel_config(d, model, s.file)
    validate_split(model, parallel, s.file)
    _check_one_slice(hardware, parallel, s.file)
    fmt, group_size = weight_format(model, d.quantization, d.quantization_group_size, s.file)
    validate_groups(model, parallel, fmt, group_size, s.file)
    runs = execution(fmt, hardware, s.file, d.engine, d.moe_backend or "auto")
    _check_moe_backend(s, model, fmt, hardware)
    _check_engine_serves(s, fmt, hardware)
    kv_dtype = d.kv_cache_dtype
    if kv_dtype == "auto":
        # vLLM caches KV in the serving dtype: the plain format's, else the checkpoint's 16-bit type
        kv_dtype = (fmt.name if fmt.name in ("bf16", "fp16", "fp32")
                    else "bf16" if model.torch_dtype == "bfloat16" else "fp16")
    slots = slot_settings(s, model) if slot_preset(d.engine) else None
    if slots:
        kv_dtype = slots.cache_type_k if slots.cache_type_k == slots.cache_type_v \
            else f"{slots.cache_type_k}/{slots.cache_type_v}"
    engine = engine_settings(s, model, hardware) if slots is None else slot_engine_settings(slots)
    too_long = too_long_share(s, engine.max_model_len, refuse=slots is None,    # a slot's context, for slot engines
                              limit_what=context_limit(model, d.engine).what)
    weights = weight_memory(model, fmt, parallel, group_size, s.model.num_parameters)
    kv = kv_layout(model, kv_dtype, parallel, d.engine in KEEPS_CHUNKED_KV, hybrid_groups=d.engine == "vllm",
                   block_size=engine.block_size)
    if kv.block_tokens > engine.block_size:
        stated = f"; the scenario's {engine.block_size} is less" if d.block_size is not None else ""
        state_page = kv.state_bytes_per_seq / kv.state_layers / parallel.tp
        engine = replace(engine, block_size=kv.block_tokens, sources={**engine.sources, "block_size": (
            f"vllm for a hybrid model ({kv.block_tokens}: the fewest tokens, a multiple of 16, whose page in one "
            f"attention layer holds one layer's recurrent state, {state_page:,.0f} B a GPU; "
            f"vllm/platforms/interface.py{stated})")})
    # llama.cpp runs a step in graphs of one physical batch (ubatch) each: its compute buffer and offload uploads
    ubatch = slots.ubatch_size if slots else engine.max_num_batched_tokens
    split = (offload(model, fmt, hardware, d.n_gpu_layers, group_size, s.file, parallel.gpus_per_replica,
                     slots.kv_bytes(kv) if slots else 0.0, ubatch) if d.n_gpu_layers is not None else None)
    # llama.cpp keeps the input layer in host memory, apart from a GPU's: on a CPU device every weight is the device's
    input_on_host = bool(slots) and hardware.device_kind != "cpu"
    gpu_weights, gpu_kv = (replace(weights, per_gpu_bytes=split.gpu_weight_bytes), on_gpu(kv, split.gpu_kv_share)) \
        if split else (all_layers_on_gpu(model, fmt, weights) if input_on_host else weights, kv)
    host_weights = split.host_weight_bytes if split else input_layer_bytes(model, fmt) if input_on_host else 0.0
    lora = _lora(s, model, parallel) if d.enable_lora else None
    # llama.cpp and Ollama take no share of the device: they allocate what they need up to its limit
    utilisation = d.gpu_memory_utilization if slots is None else SLOT_ENGINE_MEMORY_SHARE
    draft, proposer_memory = _draft_memory(s, model, fmt, group_size, kv_dtype, parallel)
    budget = memory_budget(model, hardware.memory_bytes, gpu_weights, gpu_kv, parallel, utilisation,
                           engine.block_size, engine.max_model_len,
                           ubatch, engine.max_num_seqs,
                           lora.bytes if lora else 0.0,
                           engine_moe_peak_bytes(model, parallel, d.engine, engine.max_num_batched_tokens,
                                                 fmt.compute),
                           share_of_free=d.engine == "tensorrt-llm",
                           graph_pool_bytes=trtllm_graph_pool(d, model, parallel, engine, fmt),
                           draft=draft and DraftLoad(draft.what, draft.weights, draft.kv), all_outputs=bool(slots))
    if slots:
        budget = _slot_budget(s, slots, gpu_kv, budget, "the GPU may use (its working-set limit)"
                              if hardware.unified_memory_bytes else "of device memory")
    scale_up, host = scale_up_link(hardware), host_link(hardware)
    try:
        speculative = _speculative(s, model, hardware, parallel, draft)
    except FieldError:
        raise                                       # names its own field (an unknown draft model)
    except ValueError as exc:
        raise InputError(s.file, "deployment.speculative_config", str(exc)) from None
    swap = engine.preemption_mode == "swap"
    disagg, g = None, d.disaggregated
    if g:
        # a prompt's KV as memory.py keeps it: windowed layers send at most their window, a hybrid its state
        disagg = DisaggregationConfig(g.prefill_replicas, g.decode_replicas, kv.unwindowed_bytes_per_token,
                                      g.kv_transfer_bytes_per_s or scale_up.bytes_per_s_per_direction,
                                      KV_TRANSFER_LATENCY_S, kv.windowed_bytes_per_token,
                                      kv.state_bytes_per_seq_per_gpu)
    notes = []
    if scale_up.assumed and (parallel.gpus_per_replica > 1 or (g and not g.kv_transfer_bytes_per_s)):
        notes.append(_link_note("link between GPUs (collectives, KV transfer)", scale_up))
    if host.assumed and (swap or lora is not None):
        uses = [use for use, on in (("swap", swap), ("LoRA adapter loads", lora is not None)) if on]
        notes.append(_link_note(f"host link ({', '.join(uses)})", host))
    if s.cost.price_usd_per_gpu_hour is not None:
        price, price_source = s.cost.price_usd_per_gpu_hour, "scenario"
    else:
        price, price_source = hardware.price_usd_per_gpu_hour, (
            f"hardware profile {hardware.id} ({hardware.price_rule})" if hardware.price_usd_per_gpu_hour is not None
            else f"none: the {hardware.id} profile lists no price (cost.price_usd_per_gpu_hour sets one)")
        if s.source_of(PRICE) != "default":          # a stated price left behind with its GPU (sizer.inputs.variant)
            price_source += f"; {s.source_of(PRICE)}"
    tables = checked_kernel_tables(s, hardware) if s.hardware.kernel_tables is not None else None
    profile = _calibrated_profile(s, model, hardware, parallel) if s.hardware.calibrated_profile else None
    if split:
        notes.append(split.note)
    elif d.n_gpu_layers is not None and d.n_gpu_layers > model.num_layers + 1:
        notes.append(f"n_gpu_layers {d.n_gpu_layers}: llama.cpp takes at most the model's {model.num_layers} layers "
                     f"and the output layer, so {model.num_layers + 1}: every layer on the GPU")
    if too_long >= STATED_SHARE and slots is None:
        notes.append(f"{too_long:.2%} of requests have prompt + output above max_model_len {engine.max_model_len:,}: "
                     "the engine refuses them (vLLM answers HTTP 400), and the simulation counts them rejected")
    elif too_long >= STATED_SHARE:
        notes.append(f"{too_long:.2%} of requests have prompt + output above a slot's context of "
                     f"{slots.ctx_per_slot_tokens:,} tokens: the simulation rejects them, where "
                     + ("llama.cpp refuses a prompt that fills the context (HTTP 400, exceed_context_size_error) and, "
                        "without --context-shift, ends an output at the context's end" if slots.engine == "llama.cpp"
                        else "Ollama truncates a prompt to num_ctx and shifts the context to go on generating")
                     + ": their real outcome is not modelled")
    if hardware.unified_memory_bytes and hardware.memory_limit_source:
        notes.append(f"{hardware.name}: the GPU may use {hardware.memory_bytes / GiB:.1f} GiB of its "
                     f"{hardware.unified_memory_bytes / GiB:.0f} GiB unified memory ({hardware.memory_limit_source})")
    r = Resolved(
        name=s.name, file=s.file, model_name=s.model.name, num_parameters=s.model.num_parameters,
        model_overrides=s.model.overrides or None, model=model,
        hardware=hardware, step_model_mode=s.hardware.step_model, parallel=parallel, checkpoint=checkpoint,
        weight_format=fmt, execution=runs, group_size=group_size, kv_cache_dtype=kv_dtype, deployment=d,
        engine=engine, workload=s.workload, slo=s.slo, energy=s.energy,
        autoscaling=s.autoscaling, weights=weights, kv=kv, memory=budget, speculative=speculative,
        disaggregation=disagg,
        link_notes=tuple(notes), price_usd_per_gpu_hour=price, price_source=price_source,
        sources=setting_sources(s, slots, price_source), calibrated_profile=profile, offload=split,
        host_weight_bytes=host_weights, slots=slots,
        lora=lora, kernel_tables=tables, cuda_graph_batch_sizes=tuple(d.cuda_graph_batch_sizes or ()),
        too_long_share=too_long, proposer_memory=proposer_memory)
    try:                                            # built (and kept) now: a limit the scheduler refuses is bad input
        _ = r.replica
    except ValueError as exc:
        raise InputError(s.file, "deployment", str(exc)) from None
    return r


def replica_config(r: Resolved) -> ReplicaConfig:
    """What the simulator and the bundled engine run, from the deployment description alone: the one place a
    scenario's `SchedulerConfig` and `ReplicaConfig` are built (`Resolved.replica` keeps it). Raises ValueError
    for limits the scheduler refuses."""
    e, d, w, budget, kv, slots = r.engine, r.deployment, r.workload, r.memory, r.kv, r.slots
    host = host_link(r.hardware)
    lora = grammar = None
    if r.lora is not None:
        # a load copies the adapter at its own rank (the workload's), into a slot sized for max_lora_rank
        rank = w.lora.rank if w.lora else d.max_lora_rank
        lora = LoraConfig(d.max_loras, d.max_cpu_loras or d.max_loras, r.lora.bytes_per_slot * rank / r.lora.rank,
                          host.bytes_per_s_per_direction, LORA_DISK_BYTES_PER_S)
    if w.structured_output is not None:
        compile_s, mask_s = GRAMMAR_BACKENDS[w.structured_output.backend]
        grammar = GrammarConfig(compile_s, mask_s, GRAMMAR_CACHE_ENTRIES)
    # hybrid models: no more running sequences than the recurrent state was set aside for
    # a replica's data-parallel ranks run as one engine of their combined limits and KV pool (parallel.py)
    ranks = r.parallel.dp
    scheduler = SchedulerConfig(max(1, min(e.max_num_seqs, budget.state_seqs)) * ranks,
                                e.max_num_batched_tokens * ranks, e.enable_chunked_prefill, e.preemption_mode,
                                r.speculative, e.max_model_len, prefill_only=False, reserve_full_kv=e.reserve_full_kv,
                                lora=lora, grammar=grammar)
    # a swapped block moves what a pool block holds: windowed layers' and a hybrid's state blocks are pool blocks
    swap = (SwapLink(budget.pool_bytes_per_token, host.bytes_per_s_per_direction)
            if e.preemption_mode == "swap" else None)
    return ReplicaConfig(scheduler, budget.kv_blocks * ranks, e.block_size, e.enable_prefix_caching,
                         d.prefix_cache_tenant_isolation, swap,
                         engine_loop(d.engine, ranks, d.stream_interval or 1, d.scheduler_recv_interval or 1),
                         slot_prompt_reuse=bool(slots and not slots.kv_unified),
                         kv_windows=() if slots else kv.window_groups)


# Defaults of the settings a scenario may leave out that `setting_sources` names (the engine settings' defaults
# are named by `engine_settings` and `slot_settings`; the workload's and SLO's are "default").
_SETTING_DEFAULTS = {
    "deployment.tensor_parallel_size": "default (1)", "deployment.pipeline_parallel_size": "default (1)",
    "deployment.data_parallel_size": "default (1)", "deployment.enable_expert_parallel": "default (off)",
    "deployment.enable_attention_dp": "default (off)",
    "deployment.quantization": "default (auto: the checkpoint's format)",
    "deployment.kv_cache_dtype": "kv_cache_dtype auto: the model's serving dtype",
    "hardware.memory_gb": "hardware profile",
}


def setting_sources(s: Scenario, slots: SlotSettings | None, price_source: str) -> dict[str, str]:
    """Scenario path -> where its value came from: what the scenario's loading recorded (a flag that set it, or
    "scenario"), else its default; the engine's choice and the price with the reasons the plan prints."""
    stated = dict(s.sources)
    sources = {path: stated.get(path, "default") for path in ASSUMED_FIELDS}
    sources |= {path: stated.get(path, default) for path, default in _SETTING_DEFAULTS.items()}
    sources["model.name"], sources["hardware.gpu"] = stated.get("model.name", "scenario"), stated.get(
        "hardware.gpu", "scenario")
    sources["deployment.engine"] = stated.get("deployment.engine", s.engine_source)
    if slots is not None:
        sources["deployment.kv_cache_dtype"] = slots.sources["cache_type_k"]
    # any other stated setting (replicas, an engine setting): "scenario", or the flag that set it (engine.sources
    # says "scenario" for any stated value; `source_of` reads it for the engine settings no one stated)
    sources |= {path: source for path, source in stated.items() if path not in sources}
    sources[PRICE] = price_source
    return sources


# Checkpoint formats llama.cpp's converter writes as GGUF types of their own (16/32-bit floats; gpt-oss's MXFP4, which
# GGUF stores as MXFP4): other quantised checkpoints (AWQ, GPTQ, FP8) are not what llama.cpp or Ollama load
SLOT_CHECKPOINT_FORMATS = (*PLAIN, "mxfp4")


def _check_engine_serves(s: Scenario, fmt: WeightFormat, hardware: HardwareSpec) -> None:
    """Each engine is planned with the formats and devices it runs: GGUF weights and Apple GPUs or CPUs with llama.cpp
    or Ollama (and those with GGUF types or what converts to them), TensorRT-LLM on NVIDIA GPUs from Ampere on;
    anything else is refused naming why."""
    d = s.deployment
    if slot_preset(d.engine) is not None:
        if fmt.gguf is None and fmt.name not in SLOT_CHECKPOINT_FORMATS:
            raise InputError(s.file, "deployment.quantization", f"{fmt.name} on {ENGINE_NAMES[d.engine]}, which "
                                                                "runs GGUF weights: a GGUF type (q4_k_m, q8_0, ...) "
                                                                "or a 16- or 32-bit format, as converted to GGUF")
        return
    if fmt.gguf is not None:
        raise InputError(s.file, "deployment.engine", f"{d.engine} with GGUF weights ({fmt.name}): sizer plans GGUF "
                                                      "on llama.cpp and ollama only (vLLM's GGUF loading is not "
                                                      "modelled); expected engine llama.cpp or ollama, or another "
                                                      "weight format")
    if hardware.device_kind in LLAMACPP_ONLY_DEVICES:
        raise InputError(s.file, "deployment.engine", f"{d.engine} on {hardware.name} ({hardware.device_kind}): "
                                                      "sizer models batching engines on discrete GPUs only; "
                                                      "expected engine llama.cpp or ollama")
    if d.engine == "tensorrt-llm" and family(hardware) not in TENSORRT_LLM_FAMILIES:
        raise InputError(s.file, "deployment.engine", f"tensorrt-llm on {hardware.name}: TensorRT-LLM runs on NVIDIA "
                                                      "GPUs from Ampere on; expected another engine or GPU")


def _check_moe_backend(s: Scenario, model: ModelSpec, fmt: WeightFormat, hardware: HardwareSpec) -> None:
    """deployment.moe_backend marlin is priced for MXFP4 experts on NVIDIA GPUs (the Marlin rows measured); anything
    else it would run is refused naming why."""
    if s.deployment.moe_backend != "marlin":
        return
    if model.moe is None:
        raise InputError(s.file, "deployment.moe_backend", "marlin: the model has no MoE experts to run")
    if not mxfp4_moe_checkpoint(fmt):
        stored = f"{fmt.name} ({fmt.scheme.method} checkpoint)" if fmt.scheme.method else f"{fmt.name}"
        raise InputError(s.file, "deployment.moe_backend", f"marlin is priced for MXFP4 MoE checkpoints "
                                                           f"(quant_method mxfp4) only; these weights are {stored}")
    if family(hardware) not in MARLIN_FAMILIES:
        raise InputError(s.file, "deployment.moe_backend", f"marlin: vLLM's Marlin kernels run on NVIDIA GPUs from "
                                                           f"Ampere on, not on {hardware.name} "
                                                           f"({hardware.architecture or 'architecture unknown'})")


@dataclass(frozen=True)
class ContextLimit:
    """The longest context an engine serves a model at, and its default max_model_len."""
    tokens: int                        # 0: the model states none
    what: str                          # "max_position_embeddings", for messages after "the model's" and as a source
    scaled_from: int = 0               # the max_position_embeddings the RoPE scaling scaled; 0: not scaled
    default_tokens: int = 0            # the engine's default max_model_len where shorter (LongRoPE's); 0: `tokens`

    @property
    def described(self) -> str:
        """`what` with the tokens: "max_position_embeddings 40,960"."""
        scaled = f" (max_position_embeddings {self.scaled_from:,} scaled)" if self.scaled_from else ""
        return f"{self.what} {self.tokens:,}{scaled}"


def context_limit(model: ModelSpec, engine: str) -> ContextLimit:
    """vLLM's as it derives it from the RoPE scaling (ModelSpec.rope_scaled_positions, rope_default_positions), every
    other engine's max_position_embeddings (how SGLang and TensorRT-LLM scale it is not modelled)."""
    if engine != "vllm":
        return ContextLimit(model.max_position_embeddings, "max_position_embeddings")
    if model.rope_scaled_positions:
        return ContextLimit(model.rope_scaled_positions, "rope_scaling context under vLLM",
                            model.max_position_embeddings, model.rope_default_positions)
    return ContextLimit(model.max_position_embeddings, "max_position_embeddings",
                        default_tokens=model.rope_default_positions)


def engine_settings(s: Scenario, model: ModelSpec, hardware: HardwareSpec) -> EngineSettings:
    """The scenario's scheduling fields, else its engine's defaults on this hardware, each with its source."""
    d = s.deployment
    limit = context_limit(model, d.engine)
    max_len = d.max_model_len or limit.default_tokens or limit.tokens
    if not max_len:
        raise InputError(s.file, "deployment.max_model_len", "missing and the model states no max_position_embeddings")
    if limit.tokens and max_len > limit.tokens:
        raise InputError(s.file, "deployment.max_model_len", f"{max_len} exceeds the model's {limit.described}")
    if d.engine == "vllm" and d.block_size is not None and d.block_size not in VLLM_BLOCK_SIZES:
        raise InputError(s.file, "deployment.block_size", f"{d.block_size}: vLLM's --block-size takes one of "
                                                          f"{', '.join(map(str, VLLM_BLOCK_SIZES))}")
    # The engines' device rules are about GPUs; the host CPU (validate) takes the plain preset.
    defaults = engine_defaults(d.engine, hardware.memory_bytes / GiB, hardware.name) if hardware.has_datasheet \
        else preset(d.engine)
    sources = {}

    def pick(name: str):
        value = getattr(d, name)
        if value is not None:
            sources[name] = "scenario"
            return value
        sources[name] = f"{d.engine} default ({defaults.source(name)})"
        return getattr(defaults, name)

    block_size, max_num_seqs = pick("block_size"), pick("max_num_seqs")
    mla = model.mixers(LatentAttention) if d.engine == "vllm" and hardware.has_datasheet else []
    mla_block = VLLM_MLA_BLOCK_SIZES.get(family(hardware) or "") if mla else None
    sparse = any(a.attended_tokens for a in mla)
    if mla_block and sparse and block_size != VLLM_SPARSE_MLA_BLOCK_SIZE:
        mla_block = VLLM_SPARSE_MLA_BLOCK_SIZE        # FlashMLA sparse takes exactly its page, on Blackwell too
    elif mla_block and not block_size % mla_block:
        mla_block = None                              # a multiple of the backend's page is kept
    if mla_block:
        stated = f"; the scenario's {block_size} is not what it takes" if d.block_size is not None else ""
        block_size = mla_block
        kind = "sparse MLA" if sparse else "MLA"
        sources["block_size"] = (f"vllm for {kind} on {family(hardware).title()} ({mla_block}: vllm/platforms/"
                                 f"cuda.py forces its {kind} attention backend's page size{stated})")
    max_num_batched_tokens, chunked = pick("max_num_batched_tokens"), pick("enable_chunked_prefill")
    prefix_caching, preemption = pick("enable_prefix_caching"), pick("preemption_mode")
    if d.preemption_mode is None:       # an engine that never preempts, unless told how to
        reserve = defaults.reserve_full_kv
        sources["reserve_full_kv"] = f"{d.engine} default ({defaults.source('reserve_full_kv')})"
    else:
        reserve, sources["reserve_full_kv"] = False, "scenario (preemption_mode given: the engine preempts)"
    sources["max_model_len"] = ("scenario" if d.max_model_len else
                                "model (vLLM's default for LongRoPE: original_max_position_embeddings)"
                                if limit.default_tokens else f"model ({limit.what})")
    if d.engine == "vllm" and not chunked and d.max_num_batched_tokens is None and max_num_batched_tokens < max_len:
        # vLLM without chunked prefill raises its step budget to max_model_len (vllm/config/scheduler.py,
        # SchedulerConfig: max(max_model_len, the default) when enable_chunked_prefill is off)
        max_num_batched_tokens = max_len
        sources["max_num_batched_tokens"] = "vllm default without chunked prefill (max_model_len)"
    engine = EngineSettings(d.engine, block_size, max_num_seqs, max_num_batched_tokens, chunked, prefix_caching,
                            defaults.prefix_cache_kind, preemption, reserve, max_len, sources)
    if not engine.enable_chunked_prefill and engine.max_num_batched_tokens < max_len:
        raise _prompt_beyond_a_step(s, engine, limit)
    return engine


def _prompt_beyond_a_step(s: Scenario, engine: EngineSettings, limit: ContextLimit) -> InputError:
    """A step budget below max_model_len with chunked prefill off: the engine takes no prompt longer than one step
    (TensorRT-LLM: a context request of more than max_num_tokens). The refusal says where each number came from, a
    default the user never wrote among them, and the three ways out, with the flag for the length when the
    command line named the engine or the length."""
    d = s.deployment
    name, chosen = ENGINE_NAMES[d.engine], s.source_of("deployment.engine")

    def origin(field: str) -> str:
        if getattr(d, field) is None:
            return f"{name}'s default"
        source = s.source_of(f"deployment.{field}")
        return f"from {source}" if source.startswith("--") else "stated"
    tokens, max_len = engine.max_num_batched_tokens, engine.max_model_len
    length = origin("max_model_len") if d.max_model_len else f"the model's context: {limit.what}" \
        if max_len == limit.tokens else engine.sources["max_model_len"]
    by_flag = chosen.startswith("--") or s.source_of("deployment.max_model_len").startswith("--")
    return InputError(s.file, "deployment.max_num_batched_tokens",
                      f"{tokens:,} ({origin('max_num_batched_tokens')}) is below max_model_len {max_len:,} ({length}) "
                      f"with chunked prefill off ({origin('enable_chunked_prefill')}): {name}"
                      + (f" ({chosen} {d.engine})" if chosen.startswith("--") else "")
                      + " takes no prompt longer than one step; set deployment.enable_chunked_prefill: true, raise "
                      f"deployment.max_num_batched_tokens to {max_len:,}, or lower deployment.max_model_len to "
                      f"{tokens:,}" + (f" (--max-model-len {tokens})" if by_flag else ""))


# A share of requests refused for their length that a plan states (and `sizer check`'s max_model_len rule fails on):
# 0.01% or more, the precision the share is printed to.
STATED_SHARE = 1e-4


def too_long_share(s: Scenario, max_len: int, refuse: bool = True,
                   limit_what: str = "max_position_embeddings") -> float:
    """The share of the workload's requests whose prompt + output exceed max_model_len (a slot engine's: a slot's
    context): the engine refuses each (vLLM answers HTTP 400) and the simulator counts it rejected. A workload none
    of whose requests fits is refused here when it states a length and `refuse` (a default workload's share is
    stated as any other's; llama.cpp and Ollama serve part of such requests, which their plans state). A trace's
    share is counted over the requests it replays, and a trace none of whose requests fits is refused alike.
    `limit_what`: where a default max_len comes from (ContextLimit.what)."""
    w = s.workload
    if w.trace is not None:
        return _trace_too_long_share(s, max_len, refuse, limit_what)
    if w.prompt_tokens is None or w.output_tokens is None:
        return 0.0
    (prompt, longest_prompt), (output, longest_output) = length_bounds(w.prompt_tokens), length_bounds(w.output_tokens)
    stated = any(not s.source_of(f"workload.{key}").startswith("default") for key in ("prompt_tokens", "output_tokens"))
    if prompt + output > max_len and stated and refuse:
        limit = f"deployment.max_model_len {max_len:,}" + ("" if s.deployment.max_model_len else
                                                           f" (the model's {limit_what})")
        which = "every" if (prompt, output) == (longest_prompt, longest_output) else "the shortest"
        # the length a flag set, if one did (naming_traffic_flags then names the flag), else the longer
        field = next((f"workload.{key}" for key in ("prompt_tokens", "output_tokens")
                      if s.source_of(f"workload.{key}").startswith("--")),
                     "workload.output_tokens" if output > prompt else "workload.prompt_tokens")
        raise InputError(s.file, field,
                         f"expected prompt + output within {limit}, got {prompt:,} + {output:,} = {prompt + output:,} "
                         f"tokens in {which} request: {ENGINE_NAMES[s.deployment.engine]} refuses every request")
    return share_longer_than(w.prompt_tokens, w.output_tokens, max_len)


def _trace_too_long_share(s: Scenario, max_len: int, refuse: bool, limit_what: str) -> float:
    """`too_long_share` of a trace: the share of the requests it replays whose prompt + output exceed max_len, each
    as the simulator rejects it (sizer/sizing/workload.py `too_long`)."""
    replayed, longer, trace = kind("trace").too_long(s, max_len)
    if longer == replayed and refuse:
        limit = f"deployment.max_model_len {max_len:,}" + ("" if s.deployment.max_model_len else
                                                           f" (the model's {limit_what})")
        shortest = int((trace.prompt_tokens + trace.output_tokens).argmin())
        prompt, output = int(trace.prompt_tokens[shortest]), int(trace.output_tokens[shortest])
        raise InputError(s.file, "workload.trace.path",
                         f"expected requests whose prompt + output fit {limit}; "
                         + ("the 1 request" if replayed == 1 else f"all {replayed:,} requests")
                         + f" replayed of the trace {excerpt(s.workload.trace.path)} "
                         + ("exceeds" if replayed == 1 else "exceed") + " it, the shortest "
                         f"{prompt:,} + {output:,} = {prompt + output:,} tokens: {ENGINE_NAMES[s.deployment.engine]} "
                         "refuses every request")
    return longer / replayed


def llamacpp_context(n_ctx: int, n_seq_max: int, unified: bool) -> tuple[int, int]:
    """(n_ctx, n_ctx_seq) as llama.cpp pads them (src/llama-context.cpp, llama_context::llama_context):
    n_ctx = GGML_PAD(n_ctx, 256); unified, one stream of n_ctx; else n_ctx_seq = GGML_PAD(n_ctx / n_seq_max, 256)
    (integer division) and n_ctx = n_ctx_seq x n_seq_max."""
    def pad(x: int) -> int:
        return -(-x // LLAMACPP_CTX_PAD) * LLAMACPP_CTX_PAD
    n_ctx = pad(n_ctx)
    if unified:
        return n_ctx, n_ctx
    n_ctx_seq = pad(n_ctx // n_seq_max)
    return n_ctx_seq * n_seq_max, n_ctx_seq


def slot_settings(s: Scenario, model: ModelSpec) -> SlotSettings:
    """llama.cpp's or Ollama's slots: the scenario's fields, else the engine's defaults, each with its source."""
    d, f = s.deployment, s.file
    p = slot_preset(d.engine)
    sources: dict[str, str] = {}

    def pick(name: str, field_name: str, default):
        value = getattr(d, field_name)
        sources[name] = "scenario" if value is not None else f"{d.engine} default ({p.source(name)})"
        return default if value is None else value

    cache_k, cache_v = pick("cache_type_k", "cache_type_k", p.cache_type), pick("cache_type_v", "cache_type_v",
                                                                                p.cache_type)
    flash = pick("flash_attn", "flash_attn", p.flash_attn)
    if flash == "auto":
        flash, sources["flash_attn"] = None, (
            "scenario: auto (llama.cpp's default): flash attention on where each layer's device runs it, as CUDA, "
            "Metal and the CPU do (src/llama-context.cpp logs 'Flash Attention was auto, set to enabled'); Ollama "
            "passes auto where its GPUs support it (llm/llama_server.go)")
    if cache_v in QUANTISED_CACHE_TYPES and flash is False:
        raise InputError(f, "deployment.cache_type_v", f"{cache_v} needs flash_attn: true ({d.engine} refuses a "
                                                       "quantised V cache without flash attention)")
    max_pos = model.max_position_embeddings
    if d.engine == "llama.cpp":
        slots = pick("parallel", "parallel", p.parallel)
        # auto parallel turns the unified buffer on; an explicit --parallel leaves it off unless asked
        unified = d.kv_unified if d.kv_unified is not None else (p.kv_unified and d.parallel is None)
        sources["kv_unified"] = ("scenario" if d.kv_unified is not None else
                                 f"llama.cpp default ({p.source('kv_unified')})" if d.parallel is None else
                                 "llama.cpp default (off when --parallel is given)")
        batch, ubatch = pick("batch_size", "batch_size", p.batch_size), pick("ubatch_size", "ubatch_size",
                                                                             p.ubatch_size)
        if ubatch > batch:                   # llama.cpp: n_ubatch = min(n_batch, n_ubatch)
            ubatch, sources["ubatch_size"] = batch, sources["ubatch_size"] + ", capped at batch_size as llama.cpp does"
        if d.ctx_size is None and not max_pos:
            raise InputError(f, "deployment.ctx_size", "missing and the model states no max_position_embeddings")
        total = pick("ctx_size", "ctx_size", max_pos)
        if max_pos and total > max_pos:
            raise InputError(f, "deployment.ctx_size", f"{total} exceeds the model's max_position_embeddings {max_pos}")
        stated = total
        total, cells = llamacpp_context(total, slots, unified)
        # llama-server caps each slot's context at the model's training context (tools/server/server-context.cpp)
        per_slot = min(cells, max_pos) if max_pos else cells
        if cells != (stated if unified else stated / slots):
            what = "the unified context" if unified else "each slot's context"
            over = "" if unified else f" over {slots} slot" + "s" * (slots > 1)
            sources["ctx_size"] += (f"; ctx_size {stated:,}{over}: llama.cpp pads {what} to {cells:,} tokens "
                                    f"({LLAMACPP_CTX_PAD_SOURCE})")
        keep = loaded = load = None
    else:
        slots = pick("parallel", "num_parallel", p.parallel)
        unified, sources["kv_unified"] = False, "Ollama: each parallel request gets num_ctx (not confirmed)"
        batch = ubatch = p.batch_size
        sources["batch_size"] = sources["ubatch_size"] = f"ollama default ({p.source('batch_size')})"
        per_slot = pick("ctx_per_slot", "num_ctx", p.ctx_per_slot)
        if max_pos and per_slot > max_pos:
            raise InputError(f, "deployment.num_ctx", f"{per_slot} exceeds the model's max_position_embeddings "
                                                      f"{max_pos}")
        # Ollama starts llama-server with -c num_ctx x num_parallel -np num_parallel (llm/llama_server.go): llama.cpp
        # pads each slot's stream; Ollama still truncates a prompt to num_ctx (llm/llama_server.go s.options.NumCtx)
        total, cells = llamacpp_context(per_slot * slots, slots, False)
        if cells != per_slot:
            sources["ctx_per_slot"] += (f"; num_ctx {per_slot:,}: llama.cpp pads each slot's KV to {cells:,} tokens "
                                        f"({LLAMACPP_CTX_PAD_SOURCE})")
        keep = pick("keep_alive_s", "keep_alive_s", p.keep_alive_s)
        loaded = pick("max_loaded_models_per_gpu", "max_loaded_models", p.max_loaded_models_per_gpu)
        load = pick("load_bytes_per_s", "load_bytes_per_s", p.load_bytes_per_s)
    if batch < slots:
        name = "deployment.batch_size" if d.engine == "llama.cpp" else "deployment.num_parallel"
        raise InputError(f, name, f"a batch of {batch} tokens cannot hold one decode token for each of {slots} slots")
    return SlotSettings(d.engine, slots, unified, total, per_slot, cells, batch, ubatch, cache_k, cache_v, flash, keep,
                        loaded, load, sources)


def slot_engine_settings(slots: SlotSettings) -> EngineSettings:
    """What the shared scheduler runs for a slot engine: a request takes a free slot (at most `slots` run), its
    KV is the slot's (one block of the slot's context, or blocks of the unified buffer reserved for its whole
    output: nothing is preempted), prompts are processed batch_size tokens a step beside the decodes, and there
    is no prefix cache across slots."""
    src = slots.sources
    block = UNIFIED_KV_BLOCK_TOKENS if slots.kv_unified else slots.ctx_per_slot_tokens
    sources = {"block_size": "unified KV buffer, simulated in 16-token blocks" if slots.kv_unified
               else "one block per slot: the slot's context of contiguous KV",
               "max_num_seqs": src["parallel"], "max_num_batched_tokens": src["batch_size"],
               "enable_chunked_prefill": f"{slots.engine}: continuous batching splits prompts by batch_size",
               "enable_prefix_caching": f"{slots.engine}: no shared prefix cache; a slot keeps its own last prompt "
                                        "(cache_prompt)" + ("" if not slots.kv_unified else ", not simulated in "
                                                            "the unified buffer"),
               "preemption_mode": f"{slots.engine}: never preempts", "reserve_full_kv": "a slot holds its context",
               "max_model_len": "the slot's context"}
    return EngineSettings(slots.engine, block, slots.slots, slots.batch_size, True, False, "none", "recompute", True,
                          slots.ctx_per_slot_tokens, sources)


def _slot_budget(s: Scenario, slots: SlotSettings, kv: KVLayout, budget: MemoryBudget,
                 device_limit: str) -> MemoryBudget:
    """The engine allocates exactly its context's KV: refuse a context the memory cannot hold (naming the
    field that set it); otherwise the KV pool is that context, and what is left stays free."""
    need = slots.kv_bytes(kv)
    if budget.weights_bytes > budget.usable_bytes:     # the plan says the weights do not fit, in the device's terms
        return replace(budget, reasons=(f"weights need {budget.weights_bytes / GiB:.2f} GiB, more than the "
                                        f"{budget.usable_bytes / GiB:.2f} GiB {device_limit}",))
    room = budget.room_for_kv_bytes
    if need > room:
        raise InputError(s.file, slots.ctx_field,
                         f"{slots.ctx_total_tokens:,} tokens of {kv.dtype} KV need {need / GiB:.2f} GiB; "
                         f"{max(room, 0) / GiB:.2f} GiB of the {budget.gpu_memory_bytes / GiB:.2f} GiB "
                         f"{device_limit} is left after the weights, compute buffer and runtime context: a smaller "
                         "context, cache type or weight format")
    # a slot per block (each holds its padded stream), or the unified buffer in blocks
    blocks = slots.slots if not slots.kv_unified else slots.ctx_total_tokens // budget.block_size
    return replace(budget, kv_cache_bytes=need, kv_blocks=blocks, kv_tokens=blocks * budget.block_size,
                   max_seqs_at_max_model_len=slots.slots if not slots.kv_unified else 1)


# lora_dtype spellings -> bytes per value; "auto" takes the model's dtype (vLLM LoRAConfig.lora_dtype)
_LORA_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "bf16": 2, "fp16": 2, "float32": 4}


def _lora(s: Scenario, model: ModelSpec, parallel: ParallelConfig) -> LoraMemory:
    """The adapter slots one GPU preallocates: max_loras at max_lora_rank over the targeted modules."""
    d = s.deployment
    dtype = model.torch_dtype if d.lora_dtype == "auto" else d.lora_dtype
    targets = tuple(d.lora_target_modules) if d.lora_target_modules is not None else None
    lora = lora_memory(model, parallel, d.max_lora_rank, d.max_loras, _LORA_DTYPE_BYTES.get(dtype, 2), targets)
    missing = [t for t in targets or () if t not in lora.modules]
    if missing or not lora.modules:
        everything = lora_memory(model, parallel, d.max_lora_rank, d.max_loras, 2).modules
        raise InputError(s.file, "deployment.lora_target_modules",
                         f"{excerpt(missing[0] if missing else '(none)')} is not a LoRA-capable linear layer of "
                         f"{model.name}; expected some of {', '.join(everything) or '(none: no such layer)'}")
    return lora


def _link_note(use: str, link: Link) -> str:
    return f"{use}: {link.bytes_per_s_per_direction / 1e9:.0f} GB/s per direction, {link.source}"


def _check_one_slice(hardware: HardwareSpec, parallel: ParallelConfig, file: str | None) -> None:
    """A model's shard serves on one slice: a process sees one slice, and NCCL does not connect slices (NVIDIA MIG
    user guide: no peer-to-peer between GPU instances), so tensor and pipeline parallel, and experts spread over
    data-parallel ranks, need whole GPUs."""
    if not hardware.mig_slice:
        return
    for name, size in (("tensor_parallel_size", parallel.tp), ("pipeline_parallel_size", parallel.pp),
                       ("data_parallel_size", parallel.dp if parallel.expert_parallel else 1)):
        if size > 1:
            raise InputError(file, f"deployment.{name}", f"{size} on MIG slices ({hardware.name}): a slice serves a "
                                                         "replica alone (no communication between slices); expected 1")


def _draft_memory(s: Scenario, model: ModelSpec, fmt: WeightFormat, group_size: int, kv_dtype: str,
                  parallel: ParallelConfig) -> tuple[DraftMemory | None, str]:
    """What the speculative proposer loads beside the target (sizer/analytic/proposer.py), and what the plan says
    its memory is taken as: the draft model of method draft_model (checked even when its cost is stated), the
    model's MTP layers under method mtp, an eagle, eagle3 or medusa head from its own config
    (speculative_config.model) where it is found here, else an EAGLE head estimated from the target's shapes."""
    sc = s.deployment.speculative_config
    if sc is None:
        return None, ""
    if sc.method == "mtp" and model.mtp_layers:
        return _counted(mtp_memory(model, fmt, group_size, kv_dtype, parallel))
    if sc.method == "ngram":
        return None, "none: n-grams of the prompt itself"
    if sc.method == "draft_model":
        draft = draft_checkpoint(s)
        m = checkpoint_model(draft)
        fmt, draft_group = weight_format(m, "auto", group_size, s.file)
        return _counted(draft_model_memory(m, fmt, draft_group, kv_dtype, parallel))
    ckpt = head_checkpoint(s) if sc.model else None
    if ckpt is not None:
        head = read_head(ckpt, sc.method, model)
        return _counted(medusa_memory(head, model, sc.num_speculative_tokens, kv_dtype, parallel)
                        if isinstance(head, MedusaHead) else eagle_memory(head, model, kv_dtype, parallel))
    missing = (f"{sc.model} is not in the local Hugging Face cache ({hf_cache_dir()}; sizer never downloads)"
               if sc.model else "speculative_config.model names no head config")
    estimate = target_shaped(sc.method, model) if sc.method in EAGLE_FC_INPUTS else None
    if estimate is not None:
        return _counted(eagle_memory(estimate, model, kv_dtype, parallel, estimated=missing))
    heads = "heads' weights are" if sc.method == "medusa" else "head's weights and KV are"
    why = "" if sc.method == "medusa" else f", and the first layer of {model.name}, which an estimate copies, is " \
                                           "not attention and a dense MLP"
    return None, f"the {sc.method} {heads} not counted in memory: {missing}{why}"


def _counted(draft: DraftMemory) -> tuple[DraftMemory, str]:
    return draft, draft.basis


def draft_checkpoint(s: Scenario) -> Checkpoint:
    """speculative_config.model: a catalog name, a config or checkpoint folder (relative to the scenario file), or a
    Hugging Face id in the local cache (a sweep worker: as its driver read it)."""
    reference = s.deployment.speculative_config.model
    shipped = preloaded.checkpoint(str(scenario_dir(s)), reference)
    return shipped or load_config(beside(reference, scenario_dir(s)), s.file, "deployment.speculative_config.model")


def head_checkpoint(s: Scenario) -> Checkpoint | None:
    """The config of the eagle, eagle3 or medusa head speculative_config.model names, as `draft_checkpoint` finds
    it; None for a Hugging Face id found nowhere here, which the plan then says (sizer never downloads)."""
    try:
        return draft_checkpoint(s)
    except NotCachedError:
        return None


def _speculative(s: Scenario, model: ModelSpec, hardware: HardwareSpec, parallel: ParallelConfig,
                 draft: DraftMemory | None) -> SpeculativeConfig | None:
    """The scenario's speculative decoding; a draft model without a stated cost is priced by its own roofline."""
    sc = s.deployment.speculative_config
    if sc is None:
        return None
    if sc.method == "mtp" and not model.mtp_layers:
        raise InputError(s.file, "deployment.speculative_config.method",
                         f"mtp drafts with the model's multi-token-prediction layers; {model.name} has none "
                         "(num_nextn_predict_layers 0): expected another method")
    proposer = None
    own = draft.own if draft is not None else None
    if own is not None and sc.proposer_cost_fraction is None:
        proposer = RooflineStepTimeModel(own.model, hardware, own.weight_format, draft.weights, draft.kv,
                                         parallel, own.group_size,
                                         runs=execution(own.weight_format, hardware, s.file, s.deployment.engine,
                                                        s.deployment.moe_backend or "auto"))
    fraction = PROPOSER_COST_FRACTION[sc.method] if sc.proposer_cost_fraction is None else sc.proposer_cost_fraction
    return SpeculativeConfig(sc.method, sc.num_speculative_tokens, sc.acceptance_rate, fraction, proposer)


def _calibrated_profile(s: Scenario, model: ModelSpec, hardware: HardwareSpec,
                        parallel: ParallelConfig) -> CalibrationProfile:
    """The scenario's calibrated profile, checked against its model, GPU and tensor-parallel size."""
    field_path = "hardware.calibrated_profile"
    folder = scenario_dir(s) / s.hardware.calibrated_profile
    if not folder.exists():
        raise InputError(s.file, field_path, f"profile folder {excerpt(str(folder))} not found")
    profile = kind("calibrated profile").load_profile(folder)
    measured = profile.header.model
    if measured.name != model.name or measured.tp != parallel.tp:
        raise InputError(s.file, field_path, f"measured for {excerpt(measured.name, quote=False)} at TP{measured.tp}; "
                         f"the scenario serves {model.name} at TP{parallel.tp}")
    if profile.header.device.id != hardware.id:
        raise InputError(s.file, field_path, f"measured on {excerpt(profile.header.device.id, quote=False)}; "
                         "the scenario runs on "
                         f"{hardware.id} (a profile prices only the device it was measured on)")
    return profile


def kernel_tables_folder(s: Scenario) -> Path:
    return scenario_dir(s) / s.hardware.kernel_tables


def checked_kernel_tables(s: Scenario, hardware: HardwareSpec) -> KernelTables:
    """The scenario's kernel-tables folder, checked against its GPU and engine (a sweep worker: as its driver read
    it; the tables `sizer calibrate` measured in sizer's own engine price any engine, and the plan says so). Here,
    not in the scenario's cross-field rules, so that a gateway's pools get it too."""
    if s.hardware.calibrated_profile is not None:
        raise InputError(s.file, "hardware.kernel_tables", "not together with hardware.calibrated_profile: "
                                                           "expected one source of step times")
    folder = kernel_tables_folder(s)
    tables = preloaded.kernel_folder(str(folder)) or read_kernel_tables(s)
    if tables.header.gpu != hardware.id:
        raise InputError(s.file, "hardware.kernel_tables", f"measured on {excerpt(tables.header.gpu, quote=False)}; "
                         f"the scenario runs on {hardware.id} (tables price only the device they were measured on)")
    engine = s.deployment.engine
    if tables.header.engine not in (engine, CALIBRATED_ENGINE):
        raise InputError(s.file, "hardware.kernel_tables", f"measured in {excerpt(tables.header.engine, quote=False)}; "
                         f"the scenario serves {engine} (tables price only the engine they were measured in; sizer "
                         f"calibrate's, engine {CALIBRATED_ENGINE}, price any)")
    return tables


def read_kernel_tables(s: Scenario) -> KernelTables:
    """Read the scenario's hardware.kernel_tables folder; raises FieldError (the folder's files name themselves)."""
    field_path, folder = "hardware.kernel_tables", kernel_tables_folder(s)
    try:
        found = folder.is_dir()
    except OSError as exc:                              # a name too long for the file system
        raise InputError(s.file, field_path, f"kernel-tables folder {excerpt(str(folder))} not readable "
                                             f"({exc.strerror})") from None
    if not found:
        missing = "not found" if not folder.exists() else "is not a folder (tables.yaml and gzip CSVs in one)"
        raise InputError(s.file, field_path, f"kernel-tables folder {excerpt(str(folder))} {missing}")
    if not (folder / HEADER_FILE).is_file():
        raise InputError(s.file, field_path, f"{excerpt(str(folder))} is not a kernel-tables folder: expected "
                                             f"{HEADER_FILE} in it")
    read_header(folder)                                 # a bad header is refused before any table is read
    if not any((folder / f"{name}.csv.gz").is_file() for name in TABLES):
        raise InputError(s.file, field_path, f"{excerpt(str(folder))} holds no table: expected at least one of "
                                             + ", ".join(f"{name}.csv.gz" for name in TABLES))
    return cached_kernel_tables(folder)
