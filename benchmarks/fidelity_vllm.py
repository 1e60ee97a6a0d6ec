"""How close sizer comes to what real vLLM measured: the 15 public runs of tests/data/fidelity.

    python3 benchmarks/fidelity_vllm.py [--time-scale 1.0] [--arrivals inference-perf|constant|poisson]
                                        [--only 17 60 ...] [--step-model auto|kernel_tables|roofline] [--stages]

Each run is replayed request by request through sizer on its defaults (the vLLM V1 engine
loop, the H100's bundled vLLM kernel tables, the roofline for what they lack;
benchmarks/published/replay_vllm.py): the server as the run set it, and inference-perf's shared-prefix
workload with its stages and its arrival times (inference-perf's `load.type: constant`: exponential gaps
rescaled to rate x duration requests a stage; `--arrivals constant` for fixed gaps of 1 / rate). Prints each
run's relative error (predicted - measured) / measured for E2E mean/p90/p99, TTFT mean/p90/p99 and ITL mean
(as the CSV defines it: (E2E mean - TTFT mean) / (output tokens - 1), with the run's own token count), then the
median absolute error of each, beside the best published simulator's on the same runs (issue 15): E2E mean
6.8%, TTFT mean 18.4%, ITL mean 6.5%.
`--time-scale` < 1 shortens every stage (same rates, fewer requests). `--stages` then prints each stage's TTFT
and E2E mean and p99, measured and predicted, with p99 / mean (the CSV's stage rows; docs/fidelity.md, TTFT p99).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DATA = REPO / "tests" / "data" / "fidelity"
PUBLISHED = {"e2e_mean": 0.068, "ttft_mean": 0.184, "itl_mean": 0.065}
NOTES = {"48": "KV offload on", "66": "KV offload on",
         "67": "KV offload on; ITL over the client's token count, unknown"}


def main() -> None:
    from simulator.workload import STAGED_ARRIVAL_KINDS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-scale", type=float, default=1.0)
    ap.add_argument("--arrivals", choices=STAGED_ARRIVAL_KINDS, default="inference-perf",
                    help="inference-perf (what its load.type constant sends), constant gaps, or poisson cut at each "
                         "stage's end")
    ap.add_argument("--only", nargs="*", default=[], help="experiment ids (their first characters)")
    ap.add_argument("--step-model", choices=("auto", "kernel_tables", "roofline"), default="auto",
                    help="hardware.step_model: auto (sizer's default: the bundled kernel tables, the roofline for "
                         "what they lack), kernel_tables (refused without tables) or the roofline alone")
    ap.add_argument("--stages", action="store_true",
                    help="also each stage's TTFT and E2E mean and p99, measured and predicted")
    args = ap.parse_args()

    from benchmarks.published.replay_vllm import METRICS, load_experiments, median_abs_error, replay

    experiments = [e for e in load_experiments(DATA / "trainval15.csv", DATA / "configs")
                   if not args.only or any(e.exp_id.startswith(o) for o in args.only)]
    print(f"step model: {args.step_model}")
    print(f"{'experiment':<55}{'reqs':>7}" + "".join(f"{m:>10}" for m in METRICS) + f"{'wall s':>8}  notes")
    replays = []
    for e in experiments:
        start = time.perf_counter()
        rp = replay(e, args.time_scale, args.arrivals, step_model=args.step_model)
        replays.append(rp)
        print(f"{e.label:<55}{rp.num_requests:>7,}" + "".join(f"{rp.error(m):>+10.1%}" for m in METRICS)
              + f"{time.perf_counter() - start:>8.1f}  {NOTES.get(e.exp_id, '')}")
    print(f"{'median |error|':<62}" + "".join(f"{median_abs_error(replays, m):>10.1%}" for m in METRICS))
    print(f"{'best published simulator':<62}"
          + "".join(f"{PUBLISHED[m]:>10.1%}" if m in PUBLISHED else f"{'':>10}" for m in METRICS))
    if args.stages:
        print_stages(replays)


def print_stages(replays) -> None:
    """Each stage's TTFT and E2E mean / p99 in ms, measured and predicted, p99 / mean and the p99's error."""
    for metric in ("ttft", "e2e"):
        print(f"\n{metric.upper() + ' by stage':<55}{'stage':>6}{'measured mean / p99':>26}"
              f"{'predicted mean / p99':>26}{'p99 error':>11}")
        for rp in replays:
            for i, (got, want) in enumerate(zip(rp.stage_ms, rp.experiment.stage_ms, strict=True)):
                mm, mp = want[f"{metric}_mean"], want[f"{metric}_p99"]
                pm, pp = got[f"{metric}_mean"], got[f"{metric}_p99"]
                print(f"{rp.experiment.label:<55}{i:>6}{f'{mm:.1f} / {mp:.1f} ({mp / mm:.2f}x)':>26}"
                      f"{f'{pm:.1f} / {pp:.1f} ({pp / pm:.2f}x)':>26}{(pp - mp) / mp:>+11.1%}")

if __name__ == "__main__":
    main()
