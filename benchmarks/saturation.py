"""Saturation throughput against TensorRT-LLM's published maximum-load rows (tests/data/fidelity/saturation.csv).

    python3 benchmarks/saturation.py [--step-model auto|kernel_tables|roofline] [--only 8b 70b ...]
                                     [--scale 1.0]

Each row is replayed as trtllm-bench ran it (tests/data/fidelity/README.md): the row's request count,
every request queued at once (arrivals at 10^6 req/s: the last of 30,000 arrives 30 ms in), fixed
input and output lengths, no shared prefixes; the row's model (sizer's catalog entry) in FP8 weights
and an FP8 KV cache (NVIDIA's ModelOpt FP8 checkpoints), the row's GPU and TP, engine tensorrt-llm
on its preset (32-token blocks, max_num_batched_tokens 8192, max_num_seqs 2048: the batch is bounded
by the KV cache, as trtllm-bench sizes it; the 20,000-token prompts a budget of their whole length (22,000), the preset
not chunking prefills) with `--kv_cache_free_gpu_mem_fraction 0.95` as
gpu_memory_utilization 0.95. Predicted throughput: output tokens / the time the last request finishes
(the metric's definition: the TP group's total output tokens per second). Prints predicted against
published per row, dense rows (Llama-3.1-8B, Llama-3.3-70B) and MoE rows (Qwen3-235B-A22B,
Llama-4-Maverick: another issue's) separately, with the median |error| of each and the largest.
`--scale` < 1 replays that share of each row's requests (same lengths).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DATA = REPO / "tests" / "data" / "fidelity" / "saturation.csv"
MODELS = {"meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b", "meta-llama/Llama-3.3-70B-Instruct": "llama-3.1-70b",
          "Qwen/Qwen3-235B-A22B": "qwen3-235b-a22b",
          "meta-llama/Llama-4-Maverick-17B-128E-Instruct": "llama-4-maverick-17b-128e"}
MOE = ("Qwen/Qwen3-235B-A22B", "meta-llama/Llama-4-Maverick-17B-128E-Instruct")
QUEUED_AT_ONCE_PER_S = 1e6
MAX_NUM_TOKENS = 8192          # TensorRT-LLM's preset; a longer prompt (20,000) must fit one step (no chunking)


def scenario_of(row: dict, step_model: str, num_requests: int) -> dict:
    isl, osl = int(row["isl"]), int(row["osl"])
    return {"name": f"{row['model_hf_id']} {row['gpu']} {isl}/{osl}", "model": MODELS[row["model_hf_id"]],
            "hardware": {"gpu": row["gpu"], "step_model": step_model},
            "deployment": {"engine": "tensorrt-llm", "tensor_parallel_size": int(row["tp"]), "quantization": "fp8",
                           "kv_cache_dtype": "fp8", "gpu_memory_utilization": 0.95, "max_model_len": isl + osl,
                           "max_num_batched_tokens": max(MAX_NUM_TOKENS, isl + osl)},
            "workload": {"arrival": {"process": "constant", "rate_per_s": QUEUED_AT_ONCE_PER_S},
                         "prompt_tokens": {"distribution": "fixed", "value": isl},
                         "output_tokens": {"distribution": "fixed", "value": osl}, "num_requests": num_requests}}


def predicted_tokens_per_s(row: dict, step_model: str, scale: float) -> tuple[float, str]:
    """(output tokens per second, the step model's name) of the row's replay."""
    from sizer.inputs.scenario import scenario_from_dict
    from sizer.sizing.resolve import resolve
    from sizer.sizing.simulate import simulate_scenario
    from sizer.sizing.step_model import step_model_for, step_sources

    n = max(1, round(int(row["num_requests"]) * scale))
    r = resolve(scenario_from_dict(scenario_of(row, step_model, n), None))
    result = simulate_scenario(r)
    done = ~result.columns["rejected"]
    sources = step_sources(step_model_for(r))
    roofline = [family for family, source in sources.items() if source == "roofline"]
    name = ("roofline" if set(sources.values()) == {"roofline"} else f"{r.hardware.id} {r.engine.engine} tables"
            + (f"; roofline: {', '.join(roofline)}" if roofline else ""))
    return int(done.sum()) * int(row["osl"]) / float(result.timeline.end_s.max()), name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--step-model", choices=("auto", "kernel_tables", "roofline"), default="auto")
    ap.add_argument("--only", nargs="*", default=[], help="rows whose model id contains one of these")
    ap.add_argument("--scale", type=float, default=1.0)
    args = ap.parse_args()

    rows = [r for r in csv.DictReader(DATA.open())
            if not args.only or any(o.lower() in r["model_hf_id"].lower() for o in args.only)]
    print(f"step model: {args.step_model}")
    errors: dict[str, list[float]] = {"dense": [], "MoE": []}
    for kind in ("dense", "MoE"):
        print(f"\n{kind} rows\n{'model':<38}{'gpu':>9}{'TP':>4}{'isl/osl':>12}{'reqs':>7}{'published':>11}"
              f"{'sizer':>9}{'error':>9}{'wall s':>8}  step model")
        for row in rows:
            if (row["model_hf_id"] in MOE) != (kind == "MoE"):
                continue
            start = time.perf_counter()
            tokens_per_s, name = predicted_tokens_per_s(row, args.step_model, args.scale)
            published = float(row["total_output_tok_s"])
            error = (tokens_per_s - published) / published
            errors[kind].append(error)
            print(f"{row['model_hf_id'].split('/')[-1][:37]:<38}{row['gpu']:>9}{row['tp']:>4}"
                  f"{row['isl'] + '/' + row['osl']:>12}{int(row['num_requests']):>7,}{published:>11,.0f}"
                  f"{tokens_per_s:>9,.0f}{error:>+9.1%}{time.perf_counter() - start:>8.1f}  {name}")
        if errors[kind]:
            e = errors[kind]
            print(f"{kind}: median |error| {statistics.median(abs(x) for x in e):.1%}, largest "
                  f"{max(e, key=abs):+.1%}, mean {statistics.mean(e):+.1%} over {len(e)} rows")


if __name__ == "__main__":
    main()
