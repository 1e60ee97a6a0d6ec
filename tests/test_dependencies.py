"""Every third-party import in the packages the wheel ships is declared in pyproject.toml, as a user's pip
installs them: one at module top (run by `import sizer` or a command's module) is a core dependency; one
inside a function (the lazy path: torch, pandas, weasyprint, ray, ...) or in the torch engine's modules, which
sizer reaches lazily, is a core dependency or an extra. tests/test_wheel.py runs the commands in a fresh venv
with the core set alone."""

from __future__ import annotations

import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import tomllib
from test_architecture import ENGINE_TORCH_FREE, REPO, first_party, imports, sources, within


def names(requirements: list[str]) -> set[str]:
    """Distribution names of PEP 508 requirements, normalised (PEP 503)."""
    return {normalise(re.match(r"[A-Za-z0-9._-]+", r).group()) for r in requirements}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
CORE = names(PROJECT["dependencies"])
# the extras a user installs; `test` is the suite's own
EXTRAS = set().union(*(names(r) for extra, r in PROJECT["optional-dependencies"].items() if extra != "test"))


def undeclared(files: dict[str, Path]) -> list[tuple[str, str, list[str]]]:
    """(module, import, the distributions that provide it) for each import pyproject.toml does not declare."""
    distributions = packages_distributions()
    found = []
    for module, path in files.items():
        lazy_module = within(module, "engine") and not any(within(module, free) for free in ENGINE_TORCH_FREE)
        for imported, at_top in imports(path):
            top = imported.split(".")[0]
            if first_party(imported) or top in sys.stdlib_module_names:
                continue
            providers = {normalise(d) for d in distributions.get(top, [])}
            if not providers & (CORE if at_top and not lazy_module else CORE | EXTRAS):
                found.append((module, imported, sorted(providers)))
    return found


def test_every_third_party_import_is_a_declared_dependency():
    assert undeclared(sources()) == []


def test_an_undeclared_import_is_found(tmp_path):
    # click, which sizer/cli/app.py imported after Typer (0.26 on) stopped installing it; torch at module top
    # of a planner module (an extra's); both allowed where they would be: yaml at top, torch in a function
    (tmp_path / "a.py").write_text("import click\nimport torch\nimport yaml\n\n\ndef f():\n    import torch\n")
    assert undeclared({"sizer.cli.a": tmp_path / "a.py"}) == [("sizer.cli.a", "click", ["click"]),
                                                               ("sizer.cli.a", "torch", ["torch"])]
