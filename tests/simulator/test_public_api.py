"""The simulator's public API (issue 22, item 4): `simulator/__init__.py` exports what sizer and the engine use,
lazily, so that a plain `sizer plan`, which imports `simulator.config`, still loads neither numpy nor simpy."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import simulator

REPO = Path(__file__).resolve().parents[2]


def loaded_after(statement: str) -> list[str]:
    """Which of numpy, simpy and the simulator's event-loop modules a fresh interpreter holds after `statement`."""
    watched = ("numpy", "simpy", "simulator.run", "simulator.metrics", "simulator.replica", "simulator.gateway")
    code = f"import sys; {statement}; print(' '.join(m for m in {watched!r} if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_importing_the_package_or_its_config_loads_nothing_heavy():
    # what a plain plan runs (sizer/sizing/resolve.py builds a ReplicaConfig): tests/sizer/cli/test_cli.py holds the
    # whole plan to this; here the package alone, so a future eager import in __init__ fails close to its cause
    assert loaded_after("import simulator") == []
    assert loaded_after("import simulator.config") == []
    assert loaded_after("from simulator import ReplicaConfig, SchedulerConfig, SpeculativeConfig") == []


def test_a_name_loads_its_module_when_used():
    # summarise lives in simulator/metrics.py, which imports numpy: asking for it is what loads them
    assert loaded_after("from simulator import summarise") == ["numpy", "simulator.metrics"]


@pytest.mark.parametrize("name", simulator.__all__)
def test_every_exported_name_is_the_object_its_module_defines(name):
    module = importlib.import_module(f"simulator.{simulator._MODULE_OF[name]}")
    assert getattr(simulator, name) is getattr(module, name)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="module 'simulator' has no attribute 'Simulator'"):
        simulator.Simulator  # noqa: B018
    assert not hasattr(simulator, "_no_such_name")


def simulator_names_used_by(package: str) -> set[str]:
    """Every name `package` imports from the simulator: `from simulator.x import Y` and `from simulator import Y`."""
    names = set()
    for path in (REPO / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "simulator":
                names |= {alias.name for alias in node.names}
    return names


@pytest.mark.parametrize("package", ["sizer", "engine"])
def test_every_name_sizer_and_the_engine_use_is_exported(package):
    used = simulator_names_used_by(package)
    assert used, package            # the scan sees their imports (sizer uses dozens, the engine a dozen)
    assert sorted(used - set(simulator.__all__)) == []


def test_each_name_is_exported_from_one_module_and_listed_by_dir():
    # a name listed under two modules would silently resolve to the later one
    assert sum(len(names) for names in simulator._EXPORTS.values()) == len(simulator.__all__)
    assert set(simulator.__all__) <= set(dir(simulator))
