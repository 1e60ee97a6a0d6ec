"""Property: any scenario field set to any value gives `sizer plan` a sane answer (exit 0) or one
line naming the problem (exit 2); never a traceback, another exit code, a numpy warning or a hang.

Random fields of scenarios/llama-3.1-8b-chat-h100.yaml (those it states and every other field the
schema knows) are set to hostile values: huge, tiny, negative, NaN, infinite, strings, lists,
mappings, nulls. Each example runs under a wall-clock guard (SIGALRM), so a loop whose length
comes from input fails the test instead of hanging it.
"""

from __future__ import annotations

import copy
import tempfile
import warnings
from pathlib import Path

import yaml
from fuzzhelp import HOSTILE, wall_clock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sizer.cli import app
from sizer.inputs.scenario import Scenario
from validation.schema import describe

REPO = Path(__file__).resolve().parents[3]
BASE = yaml.safe_load((REPO / "scenarios" / "llama-3.1-8b-chat-h100.yaml").read_text())
BASE["workload"]["num_requests"] = 50
BASE["model"] = {"name": BASE["model"]}
BASE["hardware"] = {"gpu": BASE["hardware"]}
PER_EXAMPLE_S = 30                       # plan alone takes well under a second


def leaf_paths(data: dict, prefix: tuple = ()) -> list[tuple[str, ...]]:
    out = []
    for key, value in data.items():
        out += leaf_paths(value, prefix + (key,)) if isinstance(value, dict) else [prefix + (key,)]
    return out


PATHS = sorted(set(leaf_paths(BASE)) | {tuple(row[0].split(".")) for row in describe(Scenario) if row[1] != "section"})

def set_path(data: dict, path: tuple[str, ...], value: object) -> None:
    for key in path[:-1]:
        if not isinstance(data.get(key), dict):
            data[key] = {}
        data = data[key]
    data[path[-1]] = value


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(PATHS), HOSTILE), min_size=1, max_size=3))
def test_plan_answers_or_names_the_field(changes):
    data = copy.deepcopy(BASE)
    for path, value in changes:
        set_path(data, path, value)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fuzzed.yaml"
        path.write_text(yaml.safe_dump(data))
        with warnings.catch_warnings(), wall_clock(PER_EXAMPLE_S):
            warnings.simplefilter("error", RuntimeWarning)   # a numpy overflow is silent nonsense, not an answer
            result = CliRunner().invoke(app, ["plan", str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), (changes, result.exception)
    assert result.exit_code in (0, 2), (changes, result.output)
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, (changes, result.stderr)
        assert lines[0].startswith("error: "), lines[0]
