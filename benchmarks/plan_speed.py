"""How long `sizer plan` takes: interpreter + CLI start-up, and the plan itself, per bundled scenario.

    python3 benchmarks/plan_speed.py

Prints a table (median of 5 runs each). The target: a plan well under a second after start-up.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def median_wall_s(cmd: list[str], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=REPO, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def in_process_plan_s(scenario: Path, runs: int = 5) -> float:
    from sizer.inputs.scenario import load_scenario
    from sizer.sizing.plan import make_plan
    from sizer.sizing.resolve import resolve

    make_plan(resolve(load_scenario(scenario)))  # warm imports
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        make_plan(resolve(load_scenario(scenario)))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    startup = median_wall_s([sys.executable, "-m", "sizer", "plan", "--help"])   # loads the plan command only
    print(f"{'scenario':40s} {'plan in-process ms':>20s} {'sizer plan wall ms':>20s}")
    print(f"{'(start-up only: sizer plan --help)':40s} {'':>20s} {startup * 1e3:20.0f}")
    for scenario in sorted((REPO / "scenarios").glob("*.yaml")):
        plan_s = in_process_plan_s(scenario)
        wall = median_wall_s([sys.executable, "-m", "sizer", "plan", str(scenario), "--json"], runs=3)
        print(f"{scenario.stem:40s} {plan_s * 1e3:20.1f} {wall * 1e3:20.0f}")


if __name__ == "__main__":
    main()
