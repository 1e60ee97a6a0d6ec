"""Simulator speed: simulated requests per wall-clock second and peak memory.

Standard workload (issue 3): Llama-2-7B on one A100-80GB, TP1, Poisson 10 req/s, 512-token
prompts, 128-token outputs, chunked prefill with a 512-token budget, max_num_seqs 128, sizer's
default step model (the A100's bundled vLLM tables; `--step-model roofline` for the roofline alone). Each size runs
in a fresh Python process, so the wall time includes start-up (imports); CPU time is the child's
own (less noisy on a shared machine); peak RSS is the largest child's so far (sizes run in
increasing order). Then the one-hour Mooncake conversation trace (Llama-3.1-8B, one H100, prefix
caching on).

    python3 benchmarks/sim_speed.py [--sizes 1000 10000 100000] [--no-mooncake] [--step-model roofline]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MOONCAKE = REPO.parent / "shared" / "traces" / "mooncake_conversation_trace.jsonl"

# The child process's source; its long line is string content, left as is (noqa at the closing quotes).
CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from sizer.inputs.scenario import scenario_from_dict
from sizer.sizing.resolve import resolve
from sizer.sizing.simulate import simulate_scenario
from simulator.metrics import summarise
kind, n, trace, step_model = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
if kind == "standard":
    data = {"name": "sim-speed", "model": "llama-2-7b", "hardware": {"gpu": "a100-80gb", "step_model": step_model},
            "deployment": {"engine": "vllm", "tensor_parallel_size": 1, "max_num_batched_tokens": 512,
                           "max_num_seqs": 128, "enable_chunked_prefill": True, "max_model_len": 4096},
            "workload": {"arrival": {"process": "poisson", "rate_per_s": 10},
                         "prompt_tokens": {"distribution": "fixed", "value": 512},
                         "output_tokens": {"distribution": "fixed", "value": 128}, "num_requests": n}}
else:
    data = {"name": "mooncake", "model": "llama-3.1-8b", "hardware": {"gpu": "h100-sxm", "step_model": step_model},
            "deployment": {"engine": "vllm", "enable_prefix_caching": True, "max_model_len": 131072},
            "workload": {"trace": {"path": trace, "format": "mooncake"}, "num_requests": n}}
r = resolve(scenario_from_dict(data, None))
t1 = time.perf_counter()
result = simulate_scenario(r)
s = summarise(result)
t2 = time.perf_counter()
print(json.dumps({"wall_s": t2 - t0, "setup_s": t1 - t0, "cpu_s": time.process_time(), "steps": len(result.timeline.end_s),
                  "ttft_p50_ms": s.ttft.p50_ms, "itl_p50_ms": s.itl.p50_ms, "hit_rate": s.prefix_cache_hit_rate,
                  "finished": s.num_finished}))
"""  # noqa: E501


def run(kind: str, n: int, step_model: str) -> dict:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, kind, str(n), str(MOONCAKE), step_model], cwd=REPO,
                         capture_output=True, text=True, check=True)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["process_s"] = time.perf_counter() - start
    row["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[1000, 10_000, 100_000])
    ap.add_argument("--no-mooncake", action="store_true")
    ap.add_argument("--step-model", choices=("auto", "kernel_tables", "roofline"), default="auto",
                    help="hardware.step_model: auto (sizer's default: the bundled tables, the roofline for what they "
                         "lack), kernel_tables or the roofline alone")
    args = ap.parse_args()
    print(f"step model: {args.step_model}")
    print(f"{'workload':<28}{'requests':>9}{'wall s':>9}{'cpu s':>8}{'req/s':>10}{'steps':>10}{'peak MiB':>10}  notes")
    for n in args.sizes:
        row = run("standard", n, args.step_model)
        print(f"{'standard (Llama-2-7B A100)':<28}{n:>9,}{row['process_s']:>9.2f}{row['cpu_s']:>8.2f}"
              f"{n / row['process_s']:>10,.0f}{row['steps']:>10,}{row['peak_rss_mib']:>10.0f}  "
              f"TTFT p50 {row['ttft_p50_ms']:.1f} ms, "
              f"ITL p50 {row['itl_p50_ms']:.2f} ms")
    if not args.no_mooncake and MOONCAKE.exists():
        row = run("mooncake", 12_031, args.step_model)
        print(f"{'Mooncake conversation, 1 h':<28}{row['finished']:>9,}{row['process_s']:>9.2f}{row['cpu_s']:>8.2f}"
              f"{row['finished'] / row['process_s']:>10,.0f}{row['steps']:>10,}{row['peak_rss_mib']:>10.0f}  "
              f"hit rate {row['hit_rate']:.1%}, TTFT p50 {row['ttft_p50_ms']:.0f} ms")


if __name__ == "__main__":
    main()
