"""Every malformed scenario in tests/sizer/inputs/bad_scenarios gives exit 2 and one line naming its field.

Each file's first line says which field the error must name (`# expect: a.b.c`).
"""

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.cli import app

BAD = sorted((Path(__file__).resolve().parent / "bad_scenarios").glob("*.yaml"))


def test_there_are_at_least_25():
    assert len(BAD) >= 25


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_one_line_exit_2_naming_the_field(path):
    expected_field = path.read_text().splitlines()[0].removeprefix("# expect: ").strip()
    result = CliRunner().invoke(app, ["plan", str(path)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(path) in lines[0]
    assert f": {expected_field}" in lines[0]
    assert "Traceback" not in result.output


def test_real_process_prints_no_traceback():
    # the console script path, not just the in-process runner
    path = BAD[0]
    proc = subprocess.run([sys.executable, "-m", "sizer", "plan", str(path)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1
