"""Replay TensorRT-LLM's published maximum-load rows (tests/data/fidelity/saturation.csv) through sizer.

A row is replayed as trtllm-bench ran it (tests/data/fidelity/README.md): the row's request count,
every request queued at once (arrivals at 10^6 req/s: the last of 30,000 arrives 30 ms in), fixed
input and output lengths, no shared prefixes; the row's model (sizer's catalog entry) in FP8 weights
and an FP8 KV cache (NVIDIA's ModelOpt FP8 checkpoints), the row's GPU and TP, engine tensorrt-llm
on its preset (32-token blocks, max_num_batched_tokens 8192; the 20,000-token prompts a budget of their whole
length (22,000), the preset not chunking prefills) and max_num_seqs as trtllm-bench sets max_batch_size from its
own KV estimate (`bench_max_batch_size`; it also caps the CUDA graphs captured), with
`--kv_cache_free_gpu_mem_fraction 0.95` as gpu_memory_utilization 0.95; the page's `cuda_graph_config` (padding
on, batch sizes 1 to 8,192: its llm_options.yml for dense and MoE models alike) as cuda_graph_batch_sizes; the MoE
rows with attention DP and EP over the TP GPUs (the page's `--ep` and `enable_attention_dp: true`: sizer's
enable_attention_dp, docs/moe.md).
Predicted throughput: output tokens / the time the last request finishes (the metric's definition: the TP group's
total output tokens per second).
"""

from __future__ import annotations

import math

from sizer.inputs.layers import Attention
from sizer.inputs.scenario import scenario_from_dict
from sizer.sizing.resolve import resolve
from sizer.sizing.simulate import simulate_scenario
from sizer.timing.step_model import step_model_for, step_sources

MODELS = {"meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b", "meta-llama/Llama-3.3-70B-Instruct": "llama-3.1-70b",
          "Qwen/Qwen3-235B-A22B": "qwen3-235b-a22b",
          "meta-llama/Llama-4-Maverick-17B-128E-Instruct": "llama-4-maverick-17b-128e"}
MOE = ("Qwen/Qwen3-235B-A22B", "meta-llama/Llama-4-Maverick-17B-128E-Instruct")
QUEUED_AT_ONCE_PER_S = 1e6
MAX_NUM_TOKENS = 8192          # TensorRT-LLM's preset; a longer request (22,000) must fit one step (no chunking)
# the page's llm_options.yml (cuda_graph_config, enable_padding: true), for dense and MoE models
CUDA_GRAPH_BATCH_SIZES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192]


GiB = 2**30
BENCH_KV_FRACTION = 0.95       # trtllm-bench's kv_cache_gpu_mem_fraction: the page's --kv_cache_free_gpu_mem_fraction


def bench_max_batch_size(row: dict) -> int:
    """trtllm-bench's max_batch_size for the row (the page passes none): its estimate of the requests of isl + osl
    tokens the group's KV cache holds, (GPUs x memory - parameters x 1 byte) x 0.95 / (2 x layers x max(TP, KV
    heads) x head dim x 1 byte x (isl + osl)), capped at 4,096 and rounded up to 32 (at least 64) below 256, to 128
    below 1,024, else to 256 (NVIDIA/TensorRT-LLM tensorrt_llm/bench/build/tuning.py, calc_engine_setting and
    finetune_setting; FP8 weights and KV at 1 byte, BYTES_PER_ELEM). The parameters are sizer's count of the
    catalog model (trtllm-bench sums the checkpoint's safetensors; FP8 scales aside, the same), the memory the
    GPU profile's. Under attention DP it is each rank's cap, though estimated for the group."""
    r = resolve(scenario_from_dict(scenario_of(row, "roofline", 1), None))
    m, tp = r.model, int(row["tp"])
    head_dim = max(a.head_dim for a in m.mixers(Attention))
    token_gib = 2 * m.num_layers * max(tp, m.num_kv_heads) * head_dim / GiB
    free_gib = tp * r.hardware.memory_bytes / GiB - r.weights.parameters / GiB
    raw = min(free_gib * BENCH_KV_FRACTION / (token_gib * (int(row["isl"]) + int(row["osl"]))), 4096)
    if raw < 256:
        return max(64, 32 * math.ceil(raw / 32))
    return 128 * math.ceil(raw / 128) if raw < 1024 else 256 * math.ceil(raw / 256)


def scenario_of(row: dict, step_model: str, num_requests: int, max_num_seqs: int | None = None) -> dict:
    """The row's scenario; `max_num_seqs` None leaves the engine's preset (2,048)."""
    isl, osl = int(row["isl"]), int(row["osl"])
    return {"name": f"{row['model_hf_id']} {row['gpu']} {isl}/{osl}", "model": MODELS[row["model_hf_id"]],
            "hardware": {"gpu": row["gpu"], "step_model": step_model},
            "deployment": {"engine": "tensorrt-llm", "tensor_parallel_size": int(row["tp"]), "quantization": "fp8",
                           "kv_cache_dtype": "fp8", "gpu_memory_utilization": 0.95, "max_model_len": isl + osl,
                           "max_num_batched_tokens": max(MAX_NUM_TOKENS, isl + osl),
                           "cuda_graph_batch_sizes": CUDA_GRAPH_BATCH_SIZES, "max_num_seqs": max_num_seqs,
                           "enable_attention_dp": row["model_hf_id"] in MOE},
            "workload": {"arrival": {"process": "constant", "rate_per_s": QUEUED_AT_ONCE_PER_S},
                         "prompt_tokens": {"distribution": "fixed", "value": isl},
                         "output_tokens": {"distribution": "fixed", "value": osl}, "num_requests": num_requests}}


def predicted_tokens_per_s(row: dict, step_model: str = "auto", scale: float = 1.0) -> tuple[float, str]:
    """(output tokens per second, what priced the steps) of the row's replay; `scale` < 1 replays that share
    of its requests."""
    n = max(1, round(int(row["num_requests"]) * scale))
    r = resolve(scenario_from_dict(scenario_of(row, step_model, n, bench_max_batch_size(row)), None))
    step = step_model_for(r)
    result = simulate_scenario(r, step=step)
    done = ~result.columns["rejected"]
    return (int(done.sum()) * int(row["osl"]) / float(result.timeline.end_s.max()),
            priced_by(step, f"{r.hardware.id} {r.engine.engine} tables"))


def priced_by(step, tables: str) -> str:
    """What priced a replay's steps in a word: "roofline" when it priced everything, else `tables` and the operator
    families the roofline priced."""
    sources = step_sources(step)
    roofline = [family for family, source in sources.items() if source == "roofline"]
    return ("roofline" if set(sources.values()) == {"roofline"}
            else tables + (f"; roofline: {', '.join(roofline)}" if roofline else ""))
