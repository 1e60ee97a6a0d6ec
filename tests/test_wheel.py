"""The package as a user installs it: a wheel built with `python -m build`, installed (not editable) by pip
into a fresh virtual environment that does not see this machine's packages, with its dependencies resolved
from the package index as a user's pip resolves them, and no extras (`pip install sizer`, the minimum set).
From another folder it plans, simulates, checks and searches a bundled scenario; calibrate, which needs
torch, says which extra to install.

pip downloads into a wheelhouse kept across runs ($SIZER_WHEELHOUSE, default ~/.cache/sizer/wheelhouse):
each run resolves against the index and downloads only what is new (the first run 110 MB: pyarrow 55, numpy 17,
pandas 12, matplotlib 10, pillow 7), then installs from there offline. On the 2-core CI machine at a load of 5:
resolving about 12 s, installing without byte-compiling about 24 s; the four tests took 3 minutes at a load of 9,
the first run (2026-12-01)."""

import fcntl
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "llama-3.1-8b-chat-h100.yaml"
SOURCES = ("pyproject.toml", "README.md", "sizer", "simulator", "engine", "validation", "hardware_profiles")
# Package data the wheel must carry, as globs relative to the repository (= to site-packages).
DATA = ("hardware_profiles/*.yaml", "hardware_profiles/calibrated/*/*", "hardware_profiles/local/*.yaml",
        "hardware_profiles/kernels/*/*",
        "sizer/inputs/catalog/models/*.json",
        "sizer/outputs/report/templates/*")
WHEELHOUSE = Path(os.environ.get("SIZER_WHEELHOUSE") or Path.home() / ".cache" / "sizer" / "wheelhouse")


def run(*args: str | Path, cwd: Path, code: int = 0) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"COLUMNS": "200"}
    result = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == code, f"{args}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A venv without system site-packages, the freshly built wheel installed with its dependencies;
    returns its bin/ folder."""
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
    # a venv without pip of its own (0.6 s, not 11.5): this interpreter's pip installs into it (`pip --python`,
    # pip >= 22.3), resolving for the venv's interpreter as the venv's own pip would
    run(sys.executable, "-m", "venv", "--without-pip", tmp / "venv", cwd=tmp)
    python = tmp / "venv" / "bin" / "python"
    pip = (sys.executable, "-m", "pip", "--python", python)
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    with open(WHEELHOUSE / ".lock", "w") as lock:       # other checkouts' test runs share the wheelhouse
        fcntl.flock(lock, fcntl.LOCK_EX)
        run(*pip, "download", "-q", "--dest", tmp / "downloads", "--find-links", WHEELHOUSE, wheel,
            cwd=tmp)
        for file in (tmp / "downloads").glob("*.whl"):
            if not file.name.startswith("sizer-") and not (WHEELHOUSE / file.name).exists():
                shutil.copy2(file, WHEELHOUSE / file.name)
    run(*pip, "install", "-q", "--no-compile", "--no-index", "--find-links", tmp / "downloads", wheel,
        cwd=tmp)
    return python.parent


def test_the_installed_wheel_plans_a_bundled_scenario_from_another_folder(installed, tmp_path):
    venv = installed.parent
    where = run(installed / "python", "-c", "import sizer, hardware_profiles, yaml; print(sizer.__file__); "
                "print(hardware_profiles.CALIBRATED_DIR); print(yaml.__file__)", cwd=tmp_path).stdout.split()
    assert all(Path(p).is_relative_to(venv) for p in where), where      # PyYAML too: not the system's
    plan = json.loads(run(installed / "sizer", "plan", SCENARIO, "--json", cwd=tmp_path).stdout)
    # Llama-3.1-8B in bf16: 8,030,261,248 parameters x 2 bytes = 16.06 GB of weights (README).
    assert plan["gpu"] == "NVIDIA H100 SXM5 80GB"
    assert plan["weights"]["total_bytes"] == 2 * 8_030_261_248
    assert not any(tmp_path.iterdir())           # the plan wrote nothing where it ran


def test_the_installed_wheel_lists_the_bundled_gpus(installed, tmp_path):
    listing = run(installed / "sizer", "gpus", cwd=tmp_path).stdout
    assert "h200" in listing and "NVIDIA H200" in listing


def test_without_extras_simulate_check_and_search_run(installed, tmp_path):
    sim = json.loads(run(installed / "sizer", "simulate", SCENARIO, "--num-requests", "200", "--json",
                         cwd=tmp_path).stdout)
    assert sim["num_requests"] == 200                      # --num-requests 200
    check = run(installed / "sizer", "check", REPO / "scenarios" / "deploy" / "pass-llama-8b-h100.yaml", cwd=tmp_path)
    assert "PASS" in check.stdout                          # the bundled passing deployment (docs/ci.md: exit 0)
    search = json.loads(run(installed / "sizer", "search", SCENARIO, "--gpus", "h100-sxm", "--tp", "1", "--weights",
                            "bf16", "--kv-cache-dtype", "auto", "--num-requests", "100", "--workers", "1", "--json",
                            cwd=tmp_path).stdout)
    assert search["recommended"]["label"] == "h100-sxm TP1 bf16/auto KV"    # the one configuration asked for


def test_without_the_engine_extra_calibrate_names_it(installed, tmp_path):
    # torch is not in this venv (it is no core dependency), so calibrate refuses before any work
    assert run(installed / "python", "-c", "import importlib.util; print(importlib.util.find_spec('torch'))",
               cwd=tmp_path).stdout.strip() == "None"
    result = run(installed / "sizer", "calibrate", "--model", "llama-3.1-8b", "--device", "cpu", cwd=tmp_path, code=2)
    assert result.stderr.count("\n") == 1 and "pip install 'sizer[engine]'" in result.stderr, result.stderr
    assert not any(tmp_path.iterdir())
