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
# The paths no bundled scenario takes: several replicas behind each router, disaggregated pools.
CHAT = REPO / "scenarios" / "llama-3.1-8b-chat-h100.yaml"
VARIANTS = {   # name -> (scenario, command-line flags, sections merged into the scenario)
    "chat-3-replicas-prefix-aware": (CHAT, ["--replicas", "3", "--router", "prefix_aware"], {}),
    "chat-2-replicas-round-robin": (CHAT, ["--replicas", "2", "--router", "round_robin"], {}),
    "chat-disaggregated-2-3": (CHAT, [], {"deployment": {"disaggregated": {"prefill_replicas": 2,
                                                                          "decode_replicas": 3}},
                                          "workload": {"arrival": {"process": "poisson", "rate_per_s": 20}}}),
}


def case_name(scenario: Path, seed: int | None) -> str:
    return f"{scenario.stem}-seed-{'own' if seed is None else seed}"


def simulate_json(scenario: Path, seed: int | None, flags: tuple[str, ...] = (), merge: dict | None = None) -> dict:
    """The parsed JSON that `sizer simulate SCENARIO --json FLAGS` prints, with the seed replaced if given
    and `merge`'s sections merged into the scenario's (one level deep)."""
    data = yaml.safe_load(scenario.read_text())
    for key, section in (merge or {}).items():
        data[key] = data.get(key, {}) | section
    section = data["gateway"] if "gateway" in data else data["workload"]
    if seed is not None:
        section["seed"] = seed
    n = min(section.get("num_requests", NUM_REQUESTS), NUM_REQUESTS)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / scenario.name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        out = CliRunner().invoke(app, ["simulate", str(path), "--json", "--num-requests", str(n), *flags])
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
    for name, (scenario, flags, merge) in VARIANTS.items():
        (GOLDEN / f"{name}.json").write_text(json.dumps(simulate_json(scenario, None, flags, merge), indent=1) + "\n")
        print(name, file=sys.stderr)


if __name__ == "__main__":
    main()
