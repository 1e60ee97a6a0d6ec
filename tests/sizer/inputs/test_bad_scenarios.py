"""Every malformed scenario in tests/bad_inputs/scenario gives exit 2 and one line naming its field,
from `sizer plan` and from `sizer simulate` alike (they run the same validation).

Each file's first line says which field the error must name (`# expect: a.b.c`); the folder's
README.md lists every file with that field.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.cli import app

FOLDER = Path(__file__).resolve().parents[2] / "bad_inputs" / "scenario"
BAD = sorted(FOLDER.glob("*.yaml"))
COMMANDS = (["plan"], ["simulate", "--num-requests", "20"])


def expected_field(path: Path) -> str:
    return path.read_text().splitlines()[0].removeprefix("# expect: ").strip()


def test_there_are_at_least_65():
    assert len(BAD) >= 65


def test_the_readme_lists_every_file_with_its_field():
    table = dict(re.findall(r"^\| `([^`]+)` \| .* \| `([^`]+)` \|$", (FOLDER / "README.md").read_text(), re.M))
    assert table == {p.name: expected_field(p) for p in BAD}


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_one_line_exit_2_naming_the_field(path, command):
    result = CliRunner().invoke(app, [*command, str(path)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(path) in lines[0]
    assert f": {expected_field(path)}" in lines[0]
    assert "Traceback" not in result.output


def test_real_process_prints_no_traceback():
    # the console script path, not just the in-process runner
    path = BAD[0]
    proc = subprocess.run([sys.executable, "-m", "sizer", "plan", str(path)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1


# A key is quoted through excerpt(), so a control character in it (a newline, an ANSI colour
# escape) is shown escaped and the message stays one line (it used to split the unknown-key message).
CONTROL_KEYS = ['"a\\nb"', '"\\e[31mred"', '"tab\\there"', '"\\r"']


@pytest.mark.parametrize("key", CONTROL_KEYS)
@pytest.mark.parametrize("where", ["top", "section"])
def test_a_key_with_a_control_character_is_one_line(tmp_path, key, where):
    body = f"{key}: 1\n" if where == "top" else f"deployment:\n  {key}: 1\n"
    path = tmp_path / "s.yaml"
    path.write_text("model: llama-3.1-8b\nhardware: h100\n" + body)
    result = CliRunner().invoke(app, ["plan", str(path)])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.isprintable(), line                     # no escape sequence reaches the terminal
    assert "unknown key" in line and str(path) in line
    assert (": deployment." in line) == (where == "section")
