"""`sizer sweep` without --results writes NAME.parquet in the working folder: a sweep's name that is not a plain file
name (a path, `..`, a control character) would write elsewhere, so it is refused naming the sweep file's `name`."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.cli import app
from sizer.cli.sweep import default_results
from validation.errors import FieldError

REPO = Path(__file__).resolve().parents[3]
SCENARIO = REPO / "scenarios" / "llama-3.1-8b-chat-h100.yaml"


@pytest.mark.parametrize("name", ["../../escaped", "ABSOLUTE", "a\\b", "two\nlines", ".."])
def test_a_name_that_is_not_a_file_name_is_refused_before_any_point(tmp_path, monkeypatch, name):
    name = str(tmp_path / "absolute") if name == "ABSOLUTE" else name       # a path of its own, written nowhere
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    sweep = work / "sweep.yaml"
    sweep.write_text(f"name: {name!r}\nscenario: {SCENARIO}\naxes:\n  rate_per_s: [1]\n".replace("'", '"')
                     if "\n" in name or "\\" in name else
                     f"name: '{name}'\nscenario: {SCENARIO}\naxes:\n  rate_per_s: [1]\n")
    monkeypatch.chdir(work)
    result = CliRunner().invoke(app, ["sweep", str(sweep), "--workers", "1"])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert ": name: " in result.stderr and "give --results" in result.stderr
    assert not list(tmp_path.rglob("*.parquet"))


def test_a_plain_name_is_the_default_file():
    assert default_results("llama sweep v2", Path("s.yaml")) == Path("llama sweep v2.parquet")
    with pytest.raises(FieldError):
        default_results("x/y", Path("s.yaml"))
