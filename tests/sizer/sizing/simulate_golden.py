"""`sizer simulate --json` on every bundled scenario at two seeds, and `sizer plan --json` on every bundled
scenario plain and with flags, for tests/sizer/sizing/test_simulate_golden.py.

Regenerate tests/data/simulate_golden/*.json and tests/data/plan_golden/*.json (only where a change is a
stated model fix) with
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
PLAN_GOLDEN = REPO / "tests" / "data" / "plan_golden"
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

# plan flags that take other paths than a scenario's own settings (issue 22: a flag reaches the step-time
# model, the split and the workload through the deployment description)
PLAN_FLAGS = {
    "plain": [],
    "gpu-h200-tp2": ["--gpu", "h200", "--tp", "2"],
    "fp8-kv-fp8-a100": ["--weights", "fp8", "--kv-cache-dtype", "fp8", "--gpu", "a100"],
    "sglang-rate-9-slo": ["--engine", "sglang", "--rate", "9", "--ttft-ms", "800", "--tpot-ms", "40"],
    "concurrency-16-lengths": ["--concurrency", "16", "--prompt-tokens", "2k", "--output-tokens", "300",
                               "--max-model-len", "8192"],
}
PLAN_FLAG_SCENARIOS = ("llama-3.1-8b-chat-h100", "llama-3.1-70b-h200", "mixtral-8x7b-a100-tp2",
                       "deepseek-v3-h200-tp8")


def plan_cases() -> list[tuple[str, Path, list[str]]]:
    """(golden name, scenario, flags): every bundled scenario plain; four of them with each set of flags."""
    cases = [(f"{s.stem}-plain", s, []) for s in SCENARIOS]
    for stem in PLAN_FLAG_SCENARIOS:
        cases += [(f"{stem}-{name}", REPO / "scenarios" / f"{stem}.yaml", flags)
                  for name, flags in PLAN_FLAGS.items() if flags]
    return cases


def plan_json(scenario: Path, flags: list[str]) -> dict:
    """The parsed JSON that `sizer plan SCENARIO --json FLAGS` prints, the repository's folder written <repo> (a plan
    names its scenario's and profiles' files by absolute path: the golden holds in any checkout)."""
    out = CliRunner().invoke(app, ["plan", str(scenario), "--json", *flags])
    if out.exit_code != 0:
        raise RuntimeError(f"{scenario.name} {flags}: {out.output}")
    return json.loads(out.stdout.replace(json.dumps(str(REPO))[1:-1], "<repo>"))


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
    PLAN_GOLDEN.mkdir(parents=True, exist_ok=True)
    for name, scenario, flags in plan_cases():
        (PLAN_GOLDEN / f"{name}.json").write_text(json.dumps(plan_json(scenario, flags), indent=1) + "\n")
        print(name, file=sys.stderr)


if __name__ == "__main__":
    main()
