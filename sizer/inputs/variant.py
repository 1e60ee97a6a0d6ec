"""A variant of a scenario: the typed changes that CLI flags, search candidates and check's
fixes make to a scenario before it is validated. This module is the one place that knows
where each change goes in the scenario's YAML mapping.
"""

from __future__ import annotations

from dataclasses import dataclass

# Variant field -> where it goes in the scenario mapping.
_PATHS = {
    "model": ("model", "name"),
    "gpu": ("hardware", "gpu"),
    "calibrated_profile": ("hardware", "calibrated_profile"),
    "memory_gb": ("hardware", "memory_gb"),
    "tensor_parallel_size": ("deployment", "tensor_parallel_size"),
    "pipeline_parallel_size": ("deployment", "pipeline_parallel_size"),
    "quantization": ("deployment", "quantization"),
    "kv_cache_dtype": ("deployment", "kv_cache_dtype"),
    "max_model_len": ("deployment", "max_model_len"),
    "replicas": ("deployment", "replicas"),
    "rate_per_s": ("workload", "arrival", "rate_per_s"),
    "num_requests": ("workload", "num_requests"),
    "arrival_process": ("workload", "arrival", "process"),
    "concurrency": ("workload", "arrival", "concurrency"),
    # sweep axes (sizer/sizing/sweep.py)
    "engine": ("deployment", "engine"),
    "data_parallel_size": ("deployment", "data_parallel_size"),
    "enable_expert_parallel": ("deployment", "enable_expert_parallel"),
    "enable_attention_dp": ("deployment", "enable_attention_dp"),
    "max_num_seqs": ("deployment", "max_num_seqs"),
    "max_num_batched_tokens": ("deployment", "max_num_batched_tokens"),
    "num_speculative_tokens": ("deployment", "speculative_config", "num_speculative_tokens"),
    "ttft_ms": ("slo", "ttft_ms"),
    "itl_ms": ("slo", "itl_ms"),
    "e2e_ms": ("slo", "e2e_ms"),
    "seed": ("workload", "seed"),
    "trace_time_scale": ("workload", "trace", "time_scale"),     # a sweep's rate axis on a trace
    # slot engines' slots (search): llama.cpp's --parallel and total context, Ollama's OLLAMA_NUM_PARALLEL
    "parallel": ("deployment", "parallel"),
    "ctx_size": ("deployment", "ctx_size"),
    "num_parallel": ("deployment", "num_parallel"),
}
# Every scenario path a variant can set, dotted: where a flag's (or a search candidate's) value lands.
SETTABLE_PATHS = tuple(".".join(path) for path in _PATHS.values())
# Flags that remove a stated value, so that its default applies again.
_CLEARS = {
    "clear_replicas": ("deployment", "replicas"),                 # the sizing pipeline chooses replicas
    "clear_speculative": ("deployment", "speculative_config"),    # speculative decoding off
    "clear_price": ("cost", "price_usd_per_gpu_hour"),            # a stated price is its own GPU's
    "clear_calibrated_profile": ("hardware", "calibrated_profile"),  # a profile prices its own GPU only
    "clear_kernel_tables": ("hardware", "kernel_tables"),            # so do a scenario's own kernel tables
    "clear_rate": ("workload", "arrival", "rate_per_s"),            # a closed loop's clients set the rate
}
# Flags that remove several stated values: a scenario's hardware overrides describe its own device only.
_CLEAR_GROUPS = {
    "clear_hardware_overrides": tuple(("hardware", key) for key in
                                      ("memory_gb", "memory_bandwidth_gb_per_s", "gpu_working_set_fraction")),
}


@dataclass(frozen=True)
class Variant:
    """Changes to a scenario; None keeps the scenario's value."""
    model: str | None = None
    gpu: str | None = None
    calibrated_profile: str | None = None
    memory_gb: float | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    max_model_len: int | None = None
    replicas: int | None = None
    rate_per_s: float | None = None
    num_requests: int | None = None
    arrival_process: str | None = None
    concurrency: int | None = None
    engine: str | None = None
    data_parallel_size: int | None = None
    enable_expert_parallel: bool | None = None
    enable_attention_dp: bool | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    num_speculative_tokens: int | None = None
    ttft_ms: float | None = None
    itl_ms: float | None = None
    e2e_ms: float | None = None
    seed: int | None = None
    trace_time_scale: float | None = None
    parallel: int | None = None
    ctx_size: int | None = None
    num_parallel: int | None = None
    clear_replicas: bool = False
    clear_speculative: bool = False
    clear_price: bool = False
    clear_calibrated_profile: bool = False
    clear_kernel_tables: bool = False
    clear_rate: bool = False
    clear_hardware_overrides: bool = False

    def fields_set(self) -> dict[str, str]:
        """Variant field -> the dotted scenario path it sets, for every change this variant makes."""
        return {name: ".".join(path) for name, path in _PATHS.items() if getattr(self, name) is not None}

    def apply(self, data: dict) -> dict:
        """A copy of the scenario mapping `data` with these changes made."""
        for name, path in _PATHS.items():
            value = getattr(self, name)
            if value is not None:
                data = _set(data, path, value)
        for name, path in _CLEARS.items():
            if getattr(self, name):
                data = _set(data, path, None)
        for name, paths in _CLEAR_GROUPS.items():
            if getattr(self, name):
                for path in paths:
                    data = _set(data, path, None)
        return data


def _set(data: dict, path: tuple[str, ...], value: object) -> dict:
    """A copy of `data` with data[k0][k1]... = value, creating sections as needed."""
    head, *rest = path
    inner = data.get(head)
    return {**data, head: _set(inner if isinstance(inner, dict) else {}, tuple(rest), value) if rest else value}
