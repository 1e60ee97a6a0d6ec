"""The package as a user gets it: a wheel built with `python -m build`, installed (not
editable) into a fresh virtual environment, plans a bundled scenario from another folder.

The venv sees the system's site-packages (numpy, pandas, ... are not downloaded again); the
test checks that its `sizer` is the wheel's, not the editable checkout's."""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "llama-3.1-8b-chat-h100.yaml"
SOURCES = ("pyproject.toml", "README.md", "sizer", "simulator", "engine", "hardware_profiles")
# Package data the wheel must carry, as globs relative to the repository (= to site-packages).
DATA = ("hardware_profiles/*.yaml", "hardware_profiles/calibrated/*/*", "hardware_profiles/local/*.yaml",
        "hardware_profiles/kernels/*/*",
        "sizer/inputs/catalog/models/*.json",
        "sizer/outputs/report/templates/*")


def run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"COLUMNS": "200"}
    result = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{args}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A venv with the freshly built wheel installed; returns its bin/ folder."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"          # a clean copy: no build/ or egg-info of an earlier build in the wheel
    src.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(REPO / name, src / name)
    run(sys.executable, "-m", "build", "--wheel", "--outdir", tmp / "dist", src, cwd=tmp)
    (wheel,) = (tmp / "dist").glob("sizer-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for pattern in DATA:
        wanted = {p.relative_to(REPO).as_posix() for p in REPO.glob(pattern) if p.is_file()}
        assert wanted and wanted <= names, (pattern, sorted(wanted - names))
    run(sys.executable, "-m", "venv", "--system-site-packages", tmp / "venv", cwd=tmp)
    bin_dir = tmp / "venv" / "bin"
    run(bin_dir / "python", "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--ignore-installed", wheel,
        cwd=tmp)
    return bin_dir


@pytest.mark.slow
def test_the_installed_wheel_plans_a_bundled_scenario_from_another_folder(installed, tmp_path):
    venv = installed.parent
    where = run(installed / "python", "-c", "import sizer, hardware_profiles; print(sizer.__file__); "
                "print(hardware_profiles.CALIBRATED_DIR)", cwd=tmp_path).stdout.split()
    assert all(Path(p).is_relative_to(venv) for p in where), where
    plan = json.loads(run(installed / "sizer", "plan", SCENARIO, "--json", cwd=tmp_path).stdout)
    # Llama-3.1-8B in bf16: 8,030,261,248 parameters x 2 bytes = 16.06 GB of weights (README).
    assert plan["gpu"] == "NVIDIA H100 SXM5 80GB"
    assert plan["weights"]["total_bytes"] == 2 * 8_030_261_248
    assert not any(tmp_path.iterdir())           # the plan wrote nothing where it ran


@pytest.mark.slow
def test_the_installed_wheel_lists_the_bundled_gpus(installed, tmp_path):
    listing = run(installed / "sizer", "gpus", cwd=tmp_path).stdout
    assert "h200" in listing and "NVIDIA H200" in listing
