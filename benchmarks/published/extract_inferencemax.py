"""Write tests/data/fidelity/inferencemax.csv from InferenceMAX's aggregated result files.

InferenceMAX (SemiAnalysis; github.com/InferenceMAX/InferenceMAX, now SemiAnalysisAI/InferenceX) runs
`benchmark_serving.py --max-concurrency N --request-rate inf` against each server on each GPU and uploads
every workflow run's results as an `agg_bmk.json` artifact. Copies of 35 runs' artifacts (December 2025 to
January 2026) are kept in gminneci/mantile, reconcile/sources/inferencemax/raw/run_<id>/agg_bmk.json; give
that folder (or any folder of run_<id>/agg_bmk.json files):

    python3 benchmarks/published/extract_inferencemax.py RAW_FOLDER > tests/data/fidelity/inferencemax.csv

Kept: single-node servers without disaggregation or speculative decoding (the points sizer replays:
benchmarks/closed_loop.py); of a point measured by several runs, the latest run's (the highest run id).
Latencies in ms, as the files give them in seconds.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

SERVER = ("hw", "framework", "image", "model", "precision", "tp", "ep", "dp_attention")
POINT = ("isl", "osl", "conc")
MEASURED_S = ("mean_ttft", "median_ttft", "p99_ttft", "mean_tpot", "median_tpot", "p99_tpot", "mean_itl",
              "median_itl", "p99_itl", "mean_e2el", "median_e2el", "p99_e2el")
MEASURED = ("tput_per_gpu", "output_tput_per_gpu")


def rows(raw: Path) -> list[dict]:
    latest: dict[tuple, tuple[int, dict]] = {}
    for path in sorted(raw.glob("run_*/agg_bmk.json")):
        run_id = int(path.parent.name.removeprefix("run_"))
        for r in json.loads(path.read_text()):
            if r.get("disagg") or r.get("is_multinode") or r.get("spec_decoding") != "none" or "tp" not in r:
                continue
            key = tuple(r[k] for k in SERVER[:2] + SERVER[3:] + POINT)
            if key not in latest or latest[key][0] < run_id:
                latest[key] = (run_id, r)
    out = []
    for run_id, r in latest.values():
        row = {k: r[k] for k in SERVER + POINT}
        row.update({f"{k}_ms": round(r[k] * 1e3, 4) for k in MEASURED_S})
        row.update({k: round(r[k], 2) for k in MEASURED})
        row["run_id"] = run_id
        out.append(row)
    return sorted(out, key=lambda row: tuple(str(row[k]) for k in SERVER) + tuple(row[k] for k in POINT))


def main() -> None:
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        sys.exit("usage: extract_inferencemax.py RAW_FOLDER (holding run_<id>/agg_bmk.json)")
    out = rows(Path(sys.argv[1]))
    writer = csv.DictWriter(sys.stdout, fieldnames=list(out[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(out)


if __name__ == "__main__":
    main()
