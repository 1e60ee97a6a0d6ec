"""Saturation throughput against TensorRT-LLM's published maximum-load rows (tests/data/fidelity/saturation.csv).

    python3 benchmarks/saturation.py [--step-model auto|kernel_tables|roofline] [--only 8b 70b ...]
                                     [--scale 1.0]

Each row is replayed as trtllm-bench ran it (benchmarks/published/replay_saturation.py; MoE rows with attention DP and
EP 8, docs/moe.md). Prints predicted against published per row, dense rows (Llama-3.1-8B, Llama-3.3-70B) and MoE
rows (Qwen3-235B-A22B, Llama-4-Maverick) separately, with the median |error| of each and the largest.
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--step-model", choices=("auto", "kernel_tables", "roofline"), default="auto")
    ap.add_argument("--only", nargs="*", default=[], help="rows whose model id contains one of these")
    ap.add_argument("--scale", type=float, default=1.0)
    args = ap.parse_args()

    from benchmarks.published.replay_saturation import MOE, predicted_tokens_per_s

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
