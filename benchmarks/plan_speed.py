"""How long `sizer plan` takes: interpreter + CLI start-up, and the plan itself, per bundled scenario
and per real model config in tests/data/models (issue 10: under a second per config, no torch).

    python3 benchmarks/plan_speed.py

Prints two tables (median of 5 runs in-process, 3 runs of the CLI). The target: a plan well under
a second after start-up.
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


def in_process_plan_s(scenario: Path, runs: int = 5, variant=None) -> float:
    from sizer.inputs.scenario import load_scenario
    from sizer.sizing.plan import make_plan
    from sizer.sizing.resolve import resolve

    make_plan(resolve(load_scenario(scenario, variant)))  # warm imports
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        make_plan(resolve(load_scenario(scenario, variant)))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def models() -> None:
    """Each real config planned on 8 x H200 at max_model_len 8192 (a split and a length every fixture allows)."""
    from sizer.inputs.model_spec import load_model
    from sizer.inputs.variant import Variant
    from validation.errors import FieldError

    scenario = REPO / "scenarios" / "llama-3.1-8b-chat-h100.yaml"
    print(f"\n{'model config (8 x H200)':44s} {'layers':>6s} {'plan in-process ms':>20s} {'sizer plan wall ms':>20s}")
    for folder in sorted(p.parent for p in (REPO / "tests" / "data" / "models").glob("*/config.json")):
        variant = Variant(model=str(folder), gpu="h200", tensor_parallel_size=8, max_model_len=8192)
        try:
            plan_s = in_process_plan_s(scenario, variant=variant)
        except FieldError as exc:      # a refused architecture prints its one-line reason instead
            print(f"{folder.name:44s} refused: {str(exc)[:90]}")
            continue
        wall = median_wall_s([sys.executable, "-m", "sizer", "plan", str(scenario), "--model", str(folder),
                              "--gpu", "h200", "--tp", "8", "--max-model-len", "8192", "--json"], runs=3)
        layers = len(load_model(str(folder)).layers)
        print(f"{folder.name:44s} {layers:6d} {plan_s * 1e3:20.1f} {wall * 1e3:20.0f}")


def main() -> None:
    startup = median_wall_s([sys.executable, "-m", "sizer", "plan", "--help"])   # loads the plan command only
    print(f"{'scenario':40s} {'plan in-process ms':>20s} {'sizer plan wall ms':>20s}")
    print(f"{'(start-up only: sizer plan --help)':40s} {'':>20s} {startup * 1e3:20.0f}")
    for scenario in sorted((REPO / "scenarios").glob("*.yaml")):
        if scenario.name.startswith("gateway-"):        # several pools, simulated: not a single-model plan
            continue
        plan_s = in_process_plan_s(scenario)
        wall = median_wall_s([sys.executable, "-m", "sizer", "plan", str(scenario), "--json"], runs=3)
        print(f"{scenario.stem:40s} {plan_s * 1e3:20.1f} {wall * 1e3:20.0f}")
    models()


if __name__ == "__main__":
    main()
