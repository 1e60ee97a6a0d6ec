"""The one JSON writer (`sizer.outputs.serialise.to_json`) and the --json outputs that use it: strict JSON, no NaN."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from sizer.cli import app
from sizer.inputs.scenario import load_scenario
from sizer.outputs.serialise import to_json
from sizer.sizing.pipeline import add_simulation
from sizer.sizing.plan import make_plan
from sizer.sizing.resolve import resolve

ROOT = Path(__file__).resolve().parents[3]


def strict_loads(text: str):
    """json.loads that refuses NaN, Infinity and -Infinity (as JavaScript's JSON.parse and jq do)."""
    def refuse(constant):
        raise ValueError(f"non-finite number {constant} in JSON")
    return json.loads(text, parse_constant=refuse)


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass(frozen=True)
class Inner:
    latency_ms: float
    counts: tuple


@dataclasses.dataclass(frozen=True)
class Outer:
    name: str
    colour: Colour
    inner: Inner
    values: dict
    path: Path


def test_dataclasses_enums_numpy_and_non_finite_numbers():
    obj = Outer("x", Colour.RED, Inner(math.nan, (1, np.int64(2), np.float64(math.inf))),
                {"a": -math.inf, 3: np.array([1.5, np.nan]), "ok": np.bool_(True)}, Path("/tmp/p"))
    assert strict_loads(to_json(obj)) == {
        "name": "x", "colour": "red", "inner": {"latency_ms": None, "counts": [1, 2, None]},
        "values": {"a": None, "3": [1.5, None], "ok": True}, "path": "/tmp/p"}
    assert to_json([0.1, 2]) == "[\n  0.1,\n  2\n]"          # finite numbers as they are


def test_what_json_cannot_say_is_refused():
    with pytest.raises(TypeError):
        to_json(object())


@pytest.fixture(scope="module")
def one_token_scenario(tmp_path_factory):
    """seed-goodput with one output token per request: no token follows the first, so TPOT is undefined (NaN in the
    simulator's percentiles), which `plan --simulate --json` used to print as a bare NaN."""
    data = yaml.safe_load((ROOT / "scenarios" / "seed-goodput.yaml").read_text())
    data["workload"].update(output_tokens={"distribution": "fixed", "value": 1}, num_requests=200)
    path = tmp_path_factory.mktemp("one-token") / "one-token.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_plan_simulate_json_is_strict_json(one_token_scenario, simulations_once):
    # simulations_once (tests/sizer/conftest.py): the command asks add_simulation's simulations again, run once
    r = resolve(load_scenario(one_token_scenario))
    plan = add_simulation(make_plan(r), r)
    tpot = plan.simulation.operating_point.metrics.tpot
    assert math.isnan(tpot.p95_ms)                            # what the simulator reports: no TPOT to measure
    assert "NaN" in json.dumps(dataclasses.asdict(plan))     # the old writer's output: invalid JSON
    result = CliRunner().invoke(app, ["plan", str(one_token_scenario), "--simulate", "--json"])
    assert result.exit_code == 0, result.output
    out = strict_loads(result.stdout)
    assert out["simulation"]["operating_point"]["metrics"]["tpot"] == {"p50_ms": None, "p95_ms": None, "p99_ms": None,
                                                                      "mean_ms": None}
    assert out["simulation"]["status"] == "met"               # TTFT < 1 s holds; a NaN TPOT meets the ITL target


@pytest.mark.parametrize("command", [["simulate"], ["check"], ["search", "--gpus", "h100-sxm", "--tp", "1",
                                                                "--weights", "bf16", "--kv-cache-dtype", "auto",
                                                                "--workers", "1"]])
def test_every_json_output_is_strict_json(one_token_scenario, command):
    result = CliRunner().invoke(app, [command[0], str(one_token_scenario), "--json", *command[1:]])
    assert result.exit_code == 0, result.output
    out = strict_loads(result.stdout)
    if command[0] == "simulate":
        assert out["tpot"]["p95_ms"] is None and out["num_requests"] == 200
