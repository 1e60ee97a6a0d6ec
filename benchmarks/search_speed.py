"""Wall time of `sizer search` over ~100 configurations (issue 5: under a minute on 2 cores).

    python3 benchmarks/search_speed.py [--workers N] [--requests N]

Sweeps Llama-3.1-70B (scenarios/llama-3.1-70b-h200.yaml, 10 req/s) over six priced GPUs x
TP 1,2,4,8 x bf16/fp8 weights x auto/fp8 KV = 96 configurations, and prints the wall time,
how many were simulated, rejected and invalid, and the recommendation.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from sizer.sizing.result import GoodputSettings  # noqa: E402
from sizer.sizing.search import SearchSettings, SearchSpace, search  # noqa: E402

SCENARIO = ROOT / "scenarios" / "llama-3.1-70b-h200.yaml"
SPACE = SearchSpace(gpus=("h100-sxm", "h100-pcie", "h200", "a100-80gb", "b200", "l40s"),
                    tensor_parallel_sizes=(1, 2, 4, 8), weight_formats=("bf16", "fp8"), kv_cache_dtypes=("auto", "fp8"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--requests", type=int, default=GoodputSettings().num_requests)
    args = parser.parse_args()
    data = yaml.safe_load(SCENARIO.read_text())
    start, load = time.perf_counter(), os.getloadavg()[0]
    settings = SearchSettings(GoodputSettings(num_requests=args.requests))
    result = search(data, str(SCENARIO), SPACE, settings, args.workers)
    wall = time.perf_counter() - start
    cpu = sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
              for f in ("ru_utime", "ru_stime"))
    statuses = Counter(o.status for o in result.outcomes)
    print(f"{len(result.outcomes)} configurations, {args.workers} workers, {args.requests} requests per simulation: "
          f"{wall:.1f} s wall, {cpu:.1f} s CPU ({cpu / len(result.outcomes):.2f} s per configuration; "
          f"load average {load:.1f} at the start)")
    print(f"  meet the SLO: {statuses['ok']}, rejected: {statuses['rejected']} "
          f"({dict(Counter(o.binding for o in result.outcomes if o.status == 'rejected'))}), "
          f"invalid: {statuses['invalid']}")
    best = result.recommended
    if best:
        print(f"  recommended: {best.replicas} x {best.candidate.label} = {best.gpus} GPUs, "
              f"${best.usd_per_hour:,.2f}/hour, goodput {best.goodput_rate_per_s:.2f} req/s per replica")
    print("  target: under 60 s on 2 cores:", "met" if wall < 60 else "MISSED")


if __name__ == "__main__":
    main()
