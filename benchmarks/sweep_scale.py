"""Points per second of `sizer sweep` on one machine, and the parallel efficiency (issue 14: 1,000 points
in under 10 minutes on 2 cores, with pruning on).

    python3 benchmarks/sweep_scale.py [--skip-ray]

Sweeps Llama-3.1-8B chat serving (scenarios/llama-3.1-8b-chat-h100.yaml with 300 requests at each operating
point and 100 per goodput probe) over
5 GPUs x TP 1,2,4,8,16 x bf16/fp8 x auto/fp8 KV x vLLM/SGLang x 5 rates = 1,000 points with the
constraint gpus_per_replica <= 8 (TP 16 is pruned before simulation), three ways: the local backend
with 1 and 2 worker processes, and Ray with a local cluster of 2 CPUs (its start-up timed apart).
Prints, per run: wall time, points per second, points per core per second and the parallel
efficiency (points/s / (1-worker points/s x workers)). docs/scale.md extrapolates the figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from sizer.inputs.sweep_file import load_sweep  # noqa: E402
from sizer.outputs.sweep_store import ResultStore  # noqa: E402
from sizer.sizing.sweep import build_sweep, run_sweep  # noqa: E402

SCENARIO = ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml"
AXES = {"gpu": ["h100-sxm", "h200", "a100-80gb", "l40s", "b200"], "tensor_parallel_size": [1, 2, 4, 8, 16],
        "quantization": ["bf16", "fp8"], "kv_cache_dtype": ["auto", "fp8"], "engine": ["vllm", "sglang"],
        "rate_per_s": [2, 4, 8, 16, 32]}


OPERATING_REQUESTS = 300     # requests at each operating point (the scenario's 2,000 cost 4x as much a point)
PROBE_REQUESTS = 100         # requests per goodput probe


def sweep_in(folder: Path):
    base = yaml.safe_load(SCENARIO.read_text())
    base["workload"]["num_requests"] = OPERATING_REQUESTS
    (folder / "base.yaml").write_text(yaml.safe_dump(base))
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump({"scenario": "base.yaml", "axes": AXES, "constraints": ["gpus_per_replica <= 8"],
                                    "settings": {"num_requests": PROBE_REQUESTS}}))
    return build_sweep(load_sweep(path), base)


def timed(backend: str, workers: int) -> tuple[float, object]:
    with tempfile.TemporaryDirectory() as folder:
        sweep = sweep_in(Path(folder))
        store = ResultStore(Path(folder) / "results.parquet")
        start = time.perf_counter()
        summary = run_sweep(sweep, store.done(), store.add, backend, workers)
        store.close()
        wall = time.perf_counter() - start
        again = ResultStore(Path(folder) / "results.parquet")
        start = time.perf_counter()
        rerun = run_sweep(sweep, again.done(), again.add, backend, workers)
        again.close()
        assert rerun.simulated == 0
        return wall, summary, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-ray", action="store_true")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} at the start, {os.cpu_count()} cores")
    print(f"{'backend':<8} {'workers':>7} {'points':>6} {'pruned':>6} {'simulated':>9} {'wall s':>7} "
          f"{'points/s':>8} {'/core/s':>7} {'efficiency':>10} {'re-run s':>8}")
    base = None
    runs = [("local", 1), ("local", 2)] + ([] if args.skip_ray else [("ray", 2)])
    for backend, workers in runs:
        if backend == "ray":
            import ray
            start = time.perf_counter()
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
            print(f"(ray start-up: {time.perf_counter() - start:.1f} s, not counted below)")
        wall, s, rerun_s = timed(backend, workers)
        rate = s.points / wall
        base = base or rate
        print(f"{backend:<8} {workers:>7} {s.points:>6} {sum(s.pruned.values()):>6} {s.simulated:>9} {wall:>7.1f} "
              f"{rate:>8.2f} {rate / workers:>7.2f} {rate / (base * workers):>10.0%} {rerun_s:>8.1f}")
        if backend == "ray":
            ray.shutdown()


if __name__ == "__main__":
    main()
