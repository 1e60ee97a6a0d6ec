"""How close sizer comes to InferenceMAX's published closed-loop points (tests/data/fidelity/inferencemax.csv):
each point replayed as it ran (benchmarks/published/replay_closed_loop.py), measured against predicted mean and median
TTFT, TPOT, E2E and throughput per GPU, the error (predicted - measured) / measured, then per group (model,
GPU, framework) the median error and median |error| of each.

    python3 benchmarks/closed_loop.py [--only h100 h200] [--step-model roofline] [--conc 4 64]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.published.replay_closed_loop import METRICS, not_replayed, points, predicted  # noqa: E402
from sizer.errors import InputError  # noqa: E402

COLUMNS = METRICS + ("tput_per_gpu",)
SHORT = {"mean_ttft_ms": "TTFT", "median_ttft_ms": "TTFT p50", "mean_tpot_ms": "TPOT", "median_itl_ms": "ITL p50",
         "mean_e2el_ms": "E2E", "tput_per_gpu": "tput/GPU"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="GPUs (the CSV's hw) to replay")
    parser.add_argument("--conc", nargs="*", type=int, help="concurrencies to replay")
    parser.add_argument("--step-model", default="auto", choices=("auto", "kernel_tables", "roofline"))
    args = parser.parse_args()
    errors: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    skipped: dict[str, int] = defaultdict(int)
    refused: list[str] = []
    print(f"{'model':<28} {'gpu':>6} {'fw':>6} {'TP':>3} {'EP':>3} {'isl/osl':>9} {'conc':>4}  "
          + "  ".join(f"{SHORT[k]:>8} meas {'pred':>8} {'err':>7}" for k in COLUMNS) + "  wall s  priced by")
    for row in points():
        why = not_replayed(row)
        if why:
            skipped[why] += 1
            continue
        if (args.only and row["hw"] not in args.only) or (args.conc and int(row["conc"]) not in args.conc):
            continue
        start = time.process_time()
        try:
            got, source = predicted(row, args.step_model)
        except InputError as e:       # sizer refuses the server as configured (e.g. no room for a KV cache)
            refused.append(f"{row['model']} {row['hw']} TP{row['tp']} EP{row['ep']} {row['isl']}/{row['osl']} "
                           f"c{row['conc']}: {e}")
            continue
        group = (row["model"].split("/")[-1], row["hw"], row["framework"])
        cells = []
        for key in COLUMNS:
            measured = float(row[key])
            err = (got[key] - measured) / measured
            errors[group][key].append(err)
            cells.append(f"{measured:>13,.1f} {got[key]:>8,.1f} {err:>+7.1%}")
        print(f"{group[0]:<28} {row['hw']:>6} {row['framework']:>6} {row['tp']:>3} {row['ep']:>3} "
              f"{row['isl']:>4}/{row['osl']:<4} {row['conc']:>4}  " + "  ".join(cells)
              + f"  {time.process_time() - start:>6.1f}  {source}")
    print("\nper group: median error (median |error|) over its points")
    print(f"{'model':<28} {'gpu':>6} {'fw':>6} {'points':>6}  " + "  ".join(f"{SHORT[k]:>17}" for k in COLUMNS))
    for group, by_key in errors.items():
        n = len(by_key[COLUMNS[0]])
        print(f"{group[0]:<28} {group[1]:>6} {group[2]:>6} {n:>6}  " + "  ".join(
            f"{statistics.median(v):>+7.1%} ({statistics.median(map(abs, v)):>5.1%})"
            for v in (by_key[k] for k in COLUMNS)))
    for why, n in skipped.items():
        print(f"not replayed: {n} points: {why}")
    for line in refused:
        print(f"refused by sizer: {line}")


if __name__ == "__main__":
    main()
