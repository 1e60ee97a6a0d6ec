"""Every bad invocation in tests/bad_inputs/flags/README.md exits 2 with one line naming its flag."""

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.cli import app

REPO = Path(__file__).resolve().parents[3]
FOLDER = REPO / "tests" / "bad_inputs" / "flags"
ROWS = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|$", (FOLDER / "README.md").read_text(), re.M)


def test_there_are_at_least_15():
    assert len(ROWS) >= 15


@pytest.mark.parametrize(("args", "flag"), ROWS, ids=[a for a, _ in ROWS])
def test_one_line_exit_2_naming_the_flag(args, flag, tmp_path):
    places = {"SCENARIO": str(REPO / "scenarios" / "llama-3.1-8b-chat-h100.yaml"),
              "DISAGG": str(FOLDER / "disaggregated.yaml"), "OUT": str(tmp_path / "report.html")}
    argv = [places.get(a, a) for a in args.split()]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {flag}: "), lines[0]
    assert "Traceback" not in result.output
    assert not (tmp_path / "report.html").exists()
