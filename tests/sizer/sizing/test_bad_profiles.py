"""Damaged calibrated profiles (tests/bad_inputs/profile/): `sizer plan --profile` exits 2 with one
line naming the file and the field; `load_profile` raises the engine's FieldError."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
from timing import fastest
from typer.testing import CliRunner

from engine.profile import load_profile
from hardware_profiles import CALIBRATED_DIR
from sizer.cli import app
from validation.errors import FieldError

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "tests" / "bad_inputs" / "profile"
_spec = importlib.util.spec_from_file_location("run_corpus", ROOT / "tests" / "bad_inputs" / "run_corpus.py")
run_corpus = sys.modules.setdefault("run_corpus", importlib.util.module_from_spec(_spec))
if not hasattr(run_corpus, "run_corpus"):
    _spec.loader.exec_module(run_corpus)
runner = CliRunner()


def table() -> dict[str, tuple[str, str]]:
    """case -> (expected file, expected field; '' for none), from the README."""
    rows = {}
    for line in (CORPUS / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            field = "" if cells[3] == "(none)" else cells[3].strip("`")
            rows[cells[0].strip("`")] = (cells[2].strip("`"), field)
    return rows


TABLE = table()


def test_the_readme_lists_every_case():
    assert {p.name for p in CORPUS.iterdir() if p.is_dir()} == set(TABLE)
    assert len(TABLE) >= 10


def _named(folder: Path, name: str) -> str:
    file, field = TABLE[name]
    where = str(folder) if file == "." else str(folder / file)
    return f"{where}: {field}: " if field else f"{where}: "


@pytest.mark.parametrize("name", sorted(TABLE))
def test_plan_refuses_a_damaged_profile_in_one_line(tmp_path, name):
    folder = run_corpus.profile_case(CORPUS / name, tmp_path.resolve() / "profile")
    result = runner.invoke(app, ["plan", "--gpu", "h200", "--model", "llama-3.1-8b", "--max-model-len", "8192",
                                 "--profile", str(folder)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert _named(folder, name) in lines[0], lines[0]
    assert len(lines[0]) < 400


@pytest.mark.parametrize("name", sorted(TABLE))
def test_load_profile_raises_field_error(tmp_path, name):
    folder = run_corpus.profile_case(CORPUS / name, tmp_path / "profile")
    with pytest.raises(FieldError) as err:
        load_profile(folder)
    assert _named(folder, name) in err.value.one_line() + ": "


def test_the_undamaged_profile_still_loads():
    profile = load_profile(run_corpus.BASE_PROFILE)
    assert profile.header.model.name == "llama-3.1-8b"


def test_a_fifo_is_refused_not_read(tmp_path):
    folder = run_corpus.profile_case(CORPUS / "seq-ops-empty", tmp_path / "p")
    (folder / "seq_ops.csv").unlink()
    os.mkfifo(folder / "seq_ops.csv")
    with pytest.raises(FieldError, match="not a regular file"):
        load_profile(folder)


def test_a_billion_laughs_profile_is_refused_before_it_expands(tmp_path):
    """The engine reads profile.yaml through validation.safe_yaml, the loader sizer's scenarios use:
    nine levels of nine aliases (9^9 = 387 million nodes once expanded) are refused while parsing,
    at the line where the expansion passes MAX_NODES (about 9^7, 5 million, at `g:`, line 84), in one line,
    in no more than ten times what reading the committed CPU profile takes (both tens of milliseconds here;
    expanding would take minutes)."""
    folder = run_corpus.profile_case(CORPUS / "profile-yaml-billion-laughs", tmp_path / "p")
    with pytest.raises(FieldError) as err:
        load_profile(folder)

    def refuse():
        with pytest.raises(FieldError):
            load_profile(folder)
    assert fastest(refuse) < 10 * fastest(lambda: load_profile(CALIBRATED_DIR / "cpu-tiny-tp1"))
    assert err.value.one_line() == f"{folder / 'profile.yaml'}: line 84: aliases expand it to more than 1,000,000 nodes"
