"""Sweep files for the sweep tests: a short copy of the 8B chat scenario and the axes asked for; a model
given as a path; a trace workload."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from sizer.inputs.model_spec import CATALOG_DIR
from sizer.inputs.sweep_file import load_sweep
from sizer.sizing.sweep import Sweep, build_sweep
from validation.safe_yaml import load_yaml

REPO = Path(__file__).resolve().parents[3]
BASE = REPO / "scenarios" / "llama-3.1-8b-chat-h100.yaml"
TRACE = REPO / "tests" / "data" / "traces" / "azure_conv_head500.csv"


def write_sweep(tmp_path: Path, axes: dict, **extra) -> Path:
    """A sweep over the 8B chat scenario with 120 requests at the operating point and 50 per goodput probe."""
    data = load_yaml(BASE)
    data["workload"]["num_requests"] = 120
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(data))
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"scenario": "base.yaml", "axes": axes,
                                    "settings": {"num_requests": 50, **extra.pop("settings", {})}, **extra}))
    return path


def sweep_of(path: Path) -> Sweep:
    s = load_sweep(path)
    return build_sweep(s, load_yaml(s.scenario_path()))


def model_folder(tmp_path: Path) -> Path:
    """The catalog's Llama 3.1 8B config as a checkpoint folder of its own (a model given as a path)."""
    folder = tmp_path / "my-model"
    folder.mkdir()
    shutil.copy(CATALOG_DIR / "llama-3.1-8b.json", folder / "config.json")
    return folder


def trace_sweep(tmp_path: Path, axes: dict, trace: Path = TRACE) -> Path:
    """The 8B chat sweep with the Azure conversation trace's first 120 requests as its workload."""
    path = write_sweep(tmp_path, axes)
    data = load_yaml(tmp_path / "base.yaml")
    shutil.copy(trace, tmp_path / "trace.csv")
    data["workload"] = {"trace": {"path": "trace.csv", "format": "csv"}, "num_requests": 120}
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(data))
    return path
