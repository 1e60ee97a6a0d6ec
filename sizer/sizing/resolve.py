"""Turn a validated Scenario into concrete specs: model, hardware, split, formats, engine defaults."""

from __future__ import annotations

from dataclasses import dataclass

from sizer.errors import InputError
from sizer.inputs.hardware import HardwareSpec, load_hardware
from sizer.analytic.memory import GiB
from sizer.inputs.model_spec import ModelSpec, from_hf_config, load_config
from sizer.analytic.parallel import ParallelConfig, validate_split
from sizer.inputs.scenario import Scenario, scenario_dir
from sizer.analytic.weights import WeightFormat, weight_format


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
    max_model_len: int
    sources: dict[str, str]


@dataclass(frozen=True)
class Resolved:
    scenario: Scenario
    model: ModelSpec
    hardware: HardwareSpec
    parallel: ParallelConfig
    weight_format: WeightFormat
    group_size: int                  # AWQ/GPTQ scale group: the checkpoint's, else the scenario's
    kv_cache_dtype: str
    engine: EngineSettings
    price_usd_per_gpu_hour: float | None
    price_source: str
    calibrated_profile: object | None = None     # engine.profile.CalibrationProfile


def model_of(s: Scenario) -> ModelSpec:
    """Catalog name or config path (relative to the scenario file), with any key overrides applied."""
    name = s.model.name
    local = scenario_dir(s) / name
    source = str(local) if local.exists() else name
    config, model_name, where = load_config(source, s.file, "model.name")
    if s.model.overrides:
        config = {**config, **s.model.overrides}
        model_name += " (with overrides)"
    return from_hf_config(config, name=model_name, file=where)


def resolve(s: Scenario) -> Resolved:
    """Everything the planner needs, with engine defaults filled in; raises InputError."""
    from sizer.sizing.presets import engine_defaults

    model = model_of(s)
    hardware = load_hardware(s.hardware.gpu, s.file, "hardware.gpu")
    d = s.deployment
    parallel = ParallelConfig(d.tensor_parallel_size, d.pipeline_parallel_size, d.data_parallel_size, d.enable_expert_parallel)
    validate_split(model, parallel, s.file)
    fmt, group_size = weight_format(model, d.quantization, d.quantization_group_size, s.file)
    kv_dtype = d.kv_cache_dtype
    if kv_dtype == "auto":
        # vLLM caches KV in the serving dtype: the plain format's, else the checkpoint's 16-bit type
        kv_dtype = fmt.name if fmt.name in ("bf16", "fp16", "fp32") else "bf16" if model.torch_dtype == "bfloat16" else "fp16"
    max_len = d.max_model_len or model.max_position_embeddings
    if not max_len:
        raise InputError(s.file, "deployment.max_model_len", "missing and the model states no max_position_embeddings")
    if model.max_position_embeddings and max_len > model.max_position_embeddings:
        raise InputError(s.file, "deployment.max_model_len", f"{max_len} exceeds the model's max_position_embeddings {model.max_position_embeddings}")
    defaults = engine_defaults(d.engine, hardware.memory_bytes / GiB, hardware.name)
    sources = {}

    def pick(name: str):
        value = getattr(d, name)
        if value is not None:
            sources[name] = "scenario"
            return value
        sources[name] = f"{d.engine} default ({defaults.source(name)})"
        return getattr(defaults, name)

    engine = EngineSettings(
        engine=d.engine,
        block_size=pick("block_size"),
        max_num_seqs=pick("max_num_seqs"),
        max_num_batched_tokens=pick("max_num_batched_tokens"),
        enable_chunked_prefill=pick("enable_chunked_prefill"),
        enable_prefix_caching=pick("enable_prefix_caching"),
        prefix_cache_kind=defaults.prefix_cache_kind,
        preemption_mode=pick("preemption_mode"),
        max_model_len=max_len,
        sources=sources,
    )
    if not engine.enable_chunked_prefill and engine.max_num_batched_tokens < max_len:
        raise InputError(s.file, "deployment.max_num_batched_tokens",
                         f"{engine.max_num_batched_tokens} is below max_model_len {max_len}; without chunked prefill a whole prompt must fit one step")
    if s.cost.price_usd_per_gpu_hour is not None:
        price, price_source = s.cost.price_usd_per_gpu_hour, "scenario"
    else:
        price, price_source = hardware.price_usd_per_gpu_hour, f"hardware profile {hardware.id} ({hardware.price_rule})"
    profile = _calibrated_profile(s, model, parallel) if s.hardware.calibrated_profile else None
    return Resolved(s, model, hardware, parallel, fmt, group_size, kv_dtype, engine, price, price_source, profile)


def _calibrated_profile(s: Scenario, model: ModelSpec, parallel: ParallelConfig):
    """The scenario's calibrated profile, checked against its model and tensor-parallel size."""
    from engine.profile import load_profile

    field_path = "hardware.calibrated_profile"
    folder = scenario_dir(s) / s.hardware.calibrated_profile
    if not folder.exists():
        raise InputError(s.file, field_path, f"profile folder {str(folder)!r} not found")
    profile = load_profile(folder)
    measured = profile.header.model
    if measured.name != model.name or measured.tp != parallel.tp:
        raise InputError(s.file, field_path, f"measured for {measured.name} at TP{measured.tp}; "
                         f"the scenario serves {model.name} at TP{parallel.tp}")
    return profile
