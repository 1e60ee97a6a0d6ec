"""Engine presets: each serving engine's documented scheduling defaults.

API used by `sizer/resolve.py` (keep it): `engine_defaults(engine, gpu_memory_gib, gpu_name)
-> EngineDefaults`, whose fields are the scenario's deployment field names plus
`prefix_cache_kind`, and `source(field)` says where a default comes from. Every value is
cited in docs/engines.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EngineDefaults:
    engine: str
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    preemption_mode: str
    prefix_cache_kind: str                      # "hashed-blocks" or "radix-tree"
    sources: dict[str, str] = field(default_factory=dict)

    def source(self, name: str) -> str:
        return self.sources.get(name, self.sources.get("*", "engine documentation"))


def _vllm(gpu_memory_gib: float, gpu_name: str) -> EngineDefaults:
    # vllm/engine/arg_utils.py EngineArgs.get_batch_defaults: GPUs with >= 70 GiB that are
    # not A100s get the larger OpenAI-API-server defaults (8192 tokens, 1024 sequences).
    large = gpu_memory_gib >= 70 and "a100" not in gpu_name.lower()
    rule = "vllm EngineArgs.get_batch_defaults, OpenAI API server, " + (">= 70 GiB non-A100 GPU" if large else "other GPUs")
    return EngineDefaults(
        engine="vllm",
        block_size=16,
        max_num_seqs=1024 if large else 256,
        max_num_batched_tokens=8192 if large else 2048,
        enable_chunked_prefill=True,
        enable_prefix_caching=True,
        preemption_mode="recompute",
        prefix_cache_kind="hashed-blocks",
        sources={"max_num_seqs": rule, "max_num_batched_tokens": rule,
                 "block_size": "vllm CacheConfig block_size 16 on CUDA",
                 "enable_chunked_prefill": "vllm V1 enables chunked prefill by default",
                 "enable_prefix_caching": "vllm V1 enables prefix caching by default",
                 "preemption_mode": "vllm V1 preempts by recompute"},
    )


PRESETS = {"vllm": _vllm}


def engine_defaults(engine: str, gpu_memory_gib: float, gpu_name: str) -> EngineDefaults:
    return PRESETS[engine](gpu_memory_gib, gpu_name)
