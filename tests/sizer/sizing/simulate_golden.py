"""`sizer simulate --json` on every bundled scenario at two seeds, for tests/sizer/sizing/test_simulate_golden.py.

Regenerate tests/data/simulate_golden/*.json (only where a change is a stated model fix) with
    PYTHONPATH=$PWD python3 tests/sizer/sizing/simulate_golden.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import yaml
from typer.testing import CliRunner

from sizer.cli import app

REPO = Path(__file__).resolve().parents[3]
GOLDEN = REPO / "tests" / "data" / "simulate_golden"
SCENARIOS = sorted((REPO / "scenarios").glob("*.yaml"))
SEEDS = (None, 7)              # None: the scenario's own seed
NUM_REQUESTS = 300             # at most this many requests a run (bundled scenarios ask for 150 to 2,000)


def case_name(scenario: Path, seed: int | None) -> str:
    return f"{scenario.stem}-seed-{'own' if seed is None else seed}"


def simulate_json(scenario: Path, seed: int | None) -> dict:
    """The parsed JSON that `sizer simulate SCENARIO --json` prints, with the seed replaced if given."""
    data = yaml.safe_load(scenario.read_text())
    section = data["gateway"] if "gateway" in data else data["workload"]
    if seed is not None:
        section["seed"] = seed
    n = min(section.get("num_requests", NUM_REQUESTS), NUM_REQUESTS)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / scenario.name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        out = CliRunner().invoke(app, ["simulate", str(path), "--json", "--num-requests", str(n)])
    if out.exit_code != 0:
        raise RuntimeError(f"{scenario.name}: {out.output}")
    return json.loads(out.stdout)


def main() -> None:
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for scenario in SCENARIOS:
        for seed in SEEDS:
            name = case_name(scenario, seed)
            (GOLDEN / f"{name}.json").write_text(json.dumps(simulate_json(scenario, seed), indent=1) + "\n")
            print(name, file=sys.stderr)


if __name__ == "__main__":
    main()
