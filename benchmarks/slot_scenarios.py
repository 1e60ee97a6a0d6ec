"""How long the llama.cpp and Ollama scenarios take to plan and to simulate (issue 12: under 2 s each).

    python3 benchmarks/slot_scenarios.py

Prints, per bundled scenario whose engine is llama.cpp or Ollama, the median of 3 in-process runs of
the plan (resolve + make_plan, with the answers in the user's terms) and of the simulation of its
workload, and the wall time of `sizer plan` and of `sizer simulate` from a fresh interpreter (start-up
and imports included; `plan --simulate` adds the goodput search, many simulations, and is not timed here).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TARGET_S = 2.0


def median_s(fn, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    from sizer.inputs.scenario import load_scenario
    from sizer.sizing.plan import make_plan
    from sizer.sizing.presets import SLOT_PRESETS
    from sizer.sizing.resolve import resolve
    from sizer.sizing.simulate import simulate_scenario

    print(f"{'scenario':32s} {'engine':10s} {'plan ms':>8s} {'simulate ms':>12s} {'sizer plan s':>13s} "
          f"{'sizer simulate s':>17s}")
    for path in sorted((REPO / "scenarios").glob("*.yaml")):
        s = load_scenario(path)
        if s.deployment.engine not in SLOT_PRESETS:
            continue
        plan_s = median_s(lambda p=path: make_plan(resolve(load_scenario(p))))
        r = resolve(s)
        sim_s = median_s(lambda r=r: simulate_scenario(r))
        walls = [median_s(lambda c=[sys.executable, "-m", "sizer", command, str(path)]:
                          subprocess.run(c, cwd=REPO, check=True, capture_output=True), runs=1)
                 for command in ("plan", "simulate")]
        mark = "" if plan_s + sim_s < TARGET_S else "  over target"
        print(f"{path.stem:32s} {s.deployment.engine:10s} {plan_s * 1e3:8.0f} {sim_s * 1e3:12.0f} {walls[0]:13.1f} "
              f"{walls[1]:17.1f}{mark}")


if __name__ == "__main__":
    main()
