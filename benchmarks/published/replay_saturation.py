"""Replay TensorRT-LLM's published maximum-load rows (tests/data/fidelity/saturation.csv) through sizer.

A row is replayed as trtllm-bench ran it (tests/data/fidelity/README.md): the row's request count,
every request queued at once (arrivals at 10^6 req/s: the last of 30,000 arrives 30 ms in), fixed
input and output lengths, no shared prefixes; the row's model (sizer's catalog entry) in FP8 weights
and an FP8 KV cache (NVIDIA's ModelOpt FP8 checkpoints), the row's GPU and TP, engine tensorrt-llm
on its preset (32-token blocks, max_num_batched_tokens 8192, max_num_seqs 2048: the batch is bounded
by the KV cache, as trtllm-bench sizes it; the 20,000-token prompts a budget of their whole length
(22,000), the preset not chunking prefills) with `--kv_cache_free_gpu_mem_fraction 0.95` as
gpu_memory_utilization 0.95; the MoE rows with attention DP and EP over the TP GPUs (the page's `--ep` and
`enable_attention_dp: true`: sizer's enable_attention_dp, docs/moe.md). Predicted throughput: output tokens / the
time the last request finishes (the metric's definition: the TP group's total output tokens per second).
"""

from __future__ import annotations

from sizer.inputs.scenario import scenario_from_dict
from sizer.sizing.resolve import resolve
from sizer.sizing.simulate import simulate_scenario
from sizer.sizing.step_model import step_model_for, step_sources

MODELS = {"meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b", "meta-llama/Llama-3.3-70B-Instruct": "llama-3.1-70b",
          "Qwen/Qwen3-235B-A22B": "qwen3-235b-a22b",
          "meta-llama/Llama-4-Maverick-17B-128E-Instruct": "llama-4-maverick-17b-128e"}
MOE = ("Qwen/Qwen3-235B-A22B", "meta-llama/Llama-4-Maverick-17B-128E-Instruct")
QUEUED_AT_ONCE_PER_S = 1e6
MAX_NUM_TOKENS = 8192          # TensorRT-LLM's preset; a longer request (22,000) must fit one step (no chunking)


def scenario_of(row: dict, step_model: str, num_requests: int) -> dict:
    isl, osl = int(row["isl"]), int(row["osl"])
    return {"name": f"{row['model_hf_id']} {row['gpu']} {isl}/{osl}", "model": MODELS[row["model_hf_id"]],
            "hardware": {"gpu": row["gpu"], "step_model": step_model},
            "deployment": {"engine": "tensorrt-llm", "tensor_parallel_size": int(row["tp"]), "quantization": "fp8",
                           "kv_cache_dtype": "fp8", "gpu_memory_utilization": 0.95, "max_model_len": isl + osl,
                           "max_num_batched_tokens": max(MAX_NUM_TOKENS, isl + osl),
                           "enable_attention_dp": row["model_hf_id"] in MOE},
            "workload": {"arrival": {"process": "constant", "rate_per_s": QUEUED_AT_ONCE_PER_S},
                         "prompt_tokens": {"distribution": "fixed", "value": isl},
                         "output_tokens": {"distribution": "fixed", "value": osl}, "num_requests": num_requests}}


def predicted_tokens_per_s(row: dict, step_model: str = "auto", scale: float = 1.0) -> tuple[float, str]:
    """(output tokens per second, what priced the steps) of the row's replay; `scale` < 1 replays that share
    of its requests."""
    n = max(1, round(int(row["num_requests"]) * scale))
    r = resolve(scenario_from_dict(scenario_of(row, step_model, n), None))
    step = step_model_for(r)
    result = simulate_scenario(r, step=step)
    done = ~result.columns["rejected"]
    sources = step_sources(step)
    roofline = [family for family, source in sources.items() if source == "roofline"]
    name = ("roofline" if set(sources.values()) == {"roofline"} else f"{r.hardware.id} {r.engine.engine} tables"
            + (f"; roofline: {', '.join(roofline)}" if roofline else ""))
    return int(done.sum()) * int(row["osl"]) / float(result.timeline.end_s.max()), name
