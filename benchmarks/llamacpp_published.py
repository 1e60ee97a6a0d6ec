"""Predicted vs published llama.cpp step rates: llama-bench pp512 and tg128 on GPUs and Apple Silicon.

    python3 benchmarks/llamacpp_published.py

Reads tests/data/llamacpp/published.csv (sources in its README), prices each row with sizer's
roofline on the device's profile (hardware_profiles/local/) and prints predicted vs published
tokens per second, each error, and the median absolute errors. Target: tg128 median error <= 15%
(tests/benchmarks/test_llamacpp_published.py asserts it).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    from benchmarks.published.llamacpp_published import median_errors, read_runs, replay

    rows = [replay(run) for run in read_runs(REPO / "tests" / "data" / "llamacpp" / "published.csv")]
    print(f"{'device':<14} {'model':<14} {'format':<8} {'pp512 pred':>10} {'published':>10} {'err':>6}   "
          f"{'tg128 pred':>10} {'published':>10} {'err':>6}")
    for r in rows:
        print(f"{r.run.device:<14} {r.run.model:<14} {r.run.format:<8} {r.pp512_tok_per_s:>10.1f} "
              f"{r.run.pp512_tok_per_s:>10.1f} {r.pp512_error:>+6.0%}   {r.tg128_tok_per_s:>10.1f} "
              f"{r.run.tg128_tok_per_s:>10.1f} {r.tg128_error:>+6.0%}")
    pp, tg = median_errors(rows)
    print(f"median |error|: pp512 {pp:.1%}, tg128 {tg:.1%} (target tg128 <= 15%) over {len(rows)} rows")


if __name__ == "__main__":
    main()
