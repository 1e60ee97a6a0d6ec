"""Property: `sizer plan --profile` with any field of a calibrated profile's `profile.yaml` header,
or any cell of its CSV tables, set to a hostile value answers (exit 0, JSON without NaN or
Infinity) or refuses the profile in one line naming the file (exit 2); never a traceback, another
exit code or a hang.

The base is the bundled H200 profile (hardware_profiles/calibrated/h200-llama-3.1-8b-tp1), copied
for each example; tests/bad_inputs/profile/ holds the hand-written cases.
"""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import yaml
from fuzzhelp import HOSTILE, HOSTILE_TEXT, answered_or_refused, json_answer, wall_clock
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sizer.cli import app
from sizer.timing.profile import (
    DECODE_FILE,
    PREFILL_FILE,
    PROFILE_FILE,
    SEQ_OPS_FILE,
    TOKEN_OPS_FILE,
    ProfileHeader,
)
from validation.schema import describe

REPO = Path(__file__).resolve().parents[3]
BASE = REPO / "hardware_profiles" / "calibrated" / "h200-llama-3.1-8b-tp1"
HEADER = yaml.safe_load((BASE / PROFILE_FILE).read_text())
HEADER_PATHS = [tuple(row[0].split(".")) for row in describe(ProfileHeader) if row[1] != "section"] + \
    [("calls_per_step", op) for op in HEADER["calls_per_step"]]
TABLES = {name: list(csv.reader(io.StringIO((BASE / name).read_text())))
          for name in (TOKEN_OPS_FILE, SEQ_OPS_FILE, DECODE_FILE, PREFILL_FILE)}
PLAN = ["plan", "--gpu", "h200", "--model", "llama-3.1-8b", "--max-model-len", "8192", "--json", "--profile"]
PER_EXAMPLE_S = 30            # a plan takes well under a second


def set_path(data: dict, path: tuple, value) -> None:
    for key in path[:-1]:
        if not isinstance(data.get(key), dict):
            data[key] = {}
        data = data[key]
    data[path[-1]] = value


@st.composite
def damage(draw):
    """(file name, new text, what was changed) of one damaged file."""
    if draw(st.booleans()):
        path, value = draw(st.sampled_from(HEADER_PATHS)), draw(HOSTILE)
        header = yaml.safe_load(yaml.safe_dump(HEADER))
        set_path(header, path, value)
        return PROFILE_FILE, yaml.safe_dump(header), (path, value)
    name = draw(st.sampled_from(sorted(TABLES)))
    rows = [list(r) for r in TABLES[name]]
    i = draw(st.integers(0, len(rows) - 1))                  # the header row too
    j = draw(st.integers(0, len(rows[i]) - 1))
    rows[i][j] = draw(HOSTILE_TEXT)
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return name, out.getvalue(), (name, i, j, rows[i][j])


def with_cell(name: str, row: int, column: int, value: str) -> str:
    """The base profile's table `name` with the cell at data row `row` (1: the first), `column` set to `value`."""
    lines = (BASE / name).read_text().splitlines()
    cells = lines[row].split(",")
    cells[column] = value
    return "\n".join([*lines[:row], ",".join(cells), *lines[row + 1:]]) + "\n"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(case=damage())
# found by hypothesis (2026-12-02): a 400-digit layer count times a float was an OverflowError traceback
@example(case=(PROFILE_FILE, yaml.safe_dump({**HEADER, "model": {**HEADER["model"], "engine_num_layers": 10**400}}),
               ("model", "engine_num_layers", 10**400)))
# found by hypothesis (2026-12-02): an operator named by an unassigned code point (U+FDC8) in calls_per_step was
# quoted raw into the missing-column message (its `{op}_s` column); now escaped as the rest of the line is
@example(case=(PROFILE_FILE, yaml.safe_dump({**HEADER, "calls_per_step": {**HEADER["calls_per_step"], "\ufdc8": 1}}),
               ("calls_per_step", "\ufdc8", 1)))
# found by hypothesis (2026-12-03): a finite 2e305 s in seq_ops.csv overflowed to infinity in the step model (an
# OverflowError traceback); cells are now bounded (profile.MAX_TABLE_VALUE)
@example(case=("seq_ops.csv", with_cell("seq_ops.csv", 1, 1, "2.1366816918538096e+305"),
               ("seq_ops.csv", 1, 1, "2.1366816918538096e+305")))
def test_plan_answers_or_refuses_the_profile_in_one_line(tmp_path, case):
    name, text, what = case
    folder = tmp_path / "profile"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(BASE, folder)
    (folder / name).write_text(text)
    with wall_clock(PER_EXAMPLE_S):
        result = CliRunner().invoke(app, [*PLAN, str(folder)])
    line = answered_or_refused(result, what)
    if line is None:
        plan = json_answer(result.stdout)
        assert plan["step_times"], plan
    else:   # a damaged file names itself; a sound profile of another model or device names the flag
        assert line.startswith((f"error: {folder}", "error: --profile: ")), (what, line)


def test_the_undamaged_profile_plans():
    result = CliRunner().invoke(app, [*PLAN, str(BASE)])
    assert result.exit_code == 0, result.output
    assert json_answer(result.stdout)["step_times"]
