"""The layout's rules (docs/architecture.md), checked on the source: imports point one way.

    validation           imports the standard library and PyYAML only (the leaf every package reads inputs through)
    simulator            imports validation, numpy, simpy, PyYAML and itself only
    engine               imports validation and simulator (and torch, triton), never sizer
    benchmarks           (not shipped) may import any of them; none of them imports it
    sizer.inputs    ->   sizer.analytic -> sizer.sizing -> sizer.outputs -> sizer.cli
                         each stage imports only the stages before it (and sizer.errors)

Imports sit at module top, except the deliberate lazy path: torch, triton and the engine
modules that import them (calibrate, validate), pandas, matplotlib and weasyprint, which
would otherwise cost every `sizer plan` a second of start-up, and ray (`sweep --backend ray`,
an optional extra). sizer's own code is deferred in two places only: the CLI's commands
(sizer/cli/app.py) and the input and output kinds (sizer/kinds.py); and the simulator's public API
(simulator/__init__.py) loads each name's module when it is first used.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from sizer.cli.app import COMMANDS
from sizer.kinds import KINDS

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("sizer", "simulator", "engine", "validation", "hardware_profiles")
STAGES = ("sizer.inputs", "sizer.analytic", "sizer.sizing", "sizer.outputs", "sizer.cli")
LAZY_ALLOWED = ("torch", "triton", "pandas", "matplotlib", "weasyprint", "engine", "ray", "pyarrow")
ENGINE_TORCH_FREE = ("engine.profile", "engine.profile_parts", "engine.config")     # sizer may import these at top


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((REPO / pkg).rglob("*.py"))}


def imports(path: Path) -> list[tuple[str, bool]]:
    """(imported module, at module top?) for every import statement in the file; the imports of a
    module-level `if TYPE_CHECKING:` block (annotations only, never run) count as at the top."""
    tree = ast.parse(path.read_text())
    top = set(map(id, tree.body))
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            top |= set(map(id, node.body))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out += [(node.module, id(node) in top)]
    return out


def first_party(name: str) -> bool:
    return name.split(".")[0] in PACKAGES


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def first_party_imports_outside(package: str, allowed: tuple[str, ...],
                                files: dict[str, Path] | None = None) -> list[tuple[str, str]]:
    """(module, import) for each first-party import of `package`'s modules outside `package` and `allowed`."""
    return [(m, i) for m, p in (files or sources()).items() if within(m, package)
            for i, _ in imports(p) if first_party(i) and not any(within(i, a) for a in (package, *allowed))]


def test_validation_is_the_leaf():
    assert first_party_imports_outside("validation", ()) == []


def test_validation_needs_the_standard_library_and_pyyaml_only():
    # so that every package, the torch-free engine modules and a plain plan can import it without cost
    third_party = {i.split(".")[0] for m, p in sources().items() if within(m, "validation")
                   for i, _ in imports(p) if not first_party(i) and i.split(".")[0] not in sys.stdlib_module_names}
    assert third_party == {"yaml"}


def test_the_simulator_imports_validation_and_itself_only():
    assert first_party_imports_outside("simulator", ("validation",)) == []


def test_the_leaf_rules_find_a_forbidden_import(tmp_path):
    # the checker itself: a validation module importing the simulator, and a simulator module importing sizer,
    # are each found (so an empty answer above means no such import, not a checker that sees nothing)
    (tmp_path / "v.py").write_text("from simulator.config import ReplicaConfig\nimport yaml\n")
    (tmp_path / "s.py").write_text("import validation.schema\nfrom sizer.errors import InputError\n")
    files = {"validation.bad": tmp_path / "v.py", "simulator.bad": tmp_path / "s.py"}
    assert first_party_imports_outside("validation", (), files) == [("validation.bad", "simulator.config")]
    assert first_party_imports_outside("simulator", ("validation",), files) == [("simulator.bad", "sizer.errors")]


def test_the_engine_imports_validation_and_the_simulator_never_sizer():
    assert first_party_imports_outside("engine", ("validation", "simulator")) == []


def test_no_shipped_package_imports_the_benchmarks():
    # benchmarks/ (scripts, and the replays of published runs only they and their tests use) is not in the wheel
    found = [(m, i) for m, p in sources().items() for i, _ in imports(p) if within(i, "benchmarks")]
    assert found == []


def test_sizer_stages_import_only_earlier_stages():
    rank = {stage: n for n, stage in enumerate(STAGES)}

    def stage_of(name: str) -> str | None:
        return next((s for s in STAGES if within(name, s)), None)

    found = []
    for m, p in sources().items():
        here = stage_of(m)
        if here is None:
            continue
        for i, _ in imports(p):
            there = stage_of(i)
            if there is not None and rank[there] > rank[here]:
                found.append((m, i))
    assert found == []


def test_imports_sit_at_module_top_except_the_lazy_heavy_path():
    found = [(m, i) for m, p in sources().items() for i, at_top in imports(p)
             if not at_top and not any(within(i, lazy) for lazy in LAZY_ALLOWED)]
    assert found == []
    # and sizer reaches the torch engine only lazily
    eager = [(m, i) for m, p in sources().items() if within(m, "sizer") for i, at_top in imports(p)
             if at_top and within(i, "engine") and not any(within(i, free) for free in ENGINE_TORCH_FREE)]
    assert eager == []


def dynamic_imports(path: Path) -> list[str]:
    """The modules a file imports by name at run time (importlib.import_module, __import__): each literal
    the name may take, or "?" where it is computed."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in (
                "import_module", "__import__"):
            arg = node.args[0] if node.args else None
            options = [arg.body, arg.orelse] if isinstance(arg, ast.IfExp) else [arg]
            names += [o.value if isinstance(o, ast.Constant) else "?" for o in options]
    return names


def test_sizer_defers_its_own_code_in_two_places_only():
    # the command and input-kind boundaries (docs/architecture.md): sizer/cli/app.py COMMANDS, sizer/kinds.py KINDS;
    # and the simulator's public API, each name loading its module when used (simulator/__init__.py);
    # a standard-library module chosen by Python version (re._parser or sre_parse) is no deferral
    found = sorted(m for m, p in sources().items()
                   if any(name == "?" or any(within(name, pkg) for pkg in PACKAGES) for name in dynamic_imports(p)))
    assert found == ["simulator", "sizer.cli.app", "sizer.kinds"]
    # and every module those tables name exists
    assert {module for module, _ in COMMANDS.values()} | set(KINDS.values()) <= set(sources())


def test_no_import_cycles():
    src = sources()
    graph = {m: {i for i, at_top in imports(p) if at_top and i in src and i != m} for m, p in src.items()}
    # `from package import module` names the package; count the modules it reaches as edges too
    for m, p in src.items():
        for node in ast.parse(p.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.module in src:
                graph[m] |= {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in src}
    done, stack, cycles = set(), [], []

    def visit(m: str) -> None:
        if m in stack:
            cycles.append(stack[stack.index(m):] + [m])
            return
        if m in done:
            return
        stack.append(m)
        for n in sorted(graph[m]):
            # a package's __init__ importing its own submodules is not a cycle of the layout
            if not within(n, m):
                visit(n)
        stack.pop()
        done.add(m)

    for m in sorted(graph):
        visit(m)
    assert cycles == []


# The packages between which docs/architecture.md draws every arrow ("Every arrow between packages"); the
# longest prefix names a module's package, and `sizer` is its top-level modules.
ARROW_UNITS = ("sizer.inputs", "sizer.analytic", "sizer.sizing", "sizer.outputs", "sizer.cli", "simulator", "engine",
               "validation", "hardware_profiles", "sizer")


def unit_of(name: str) -> str:
    return next(u for u in ARROW_UNITS if within(name, u))


def documented_arrows() -> dict[tuple[str, str], set[str]]:
    """The table between `<!-- arrows` and `<!-- /arrows -->` in docs/architecture.md: (from, to) -> {top, lazy}."""
    text = (REPO / "docs" / "architecture.md").read_text()
    table = text[text.index("<!-- arrows"):text.index("<!-- /arrows -->")]
    out = {}
    for line in table.splitlines()[3:]:             # the marker, the header and its rule
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        how = {kind for kind, word in (("top", "top"), ("lazy", "lazily")) if word in cells[2]}
        out[(cells[0].strip("`"), cells[1].strip("`"))] = how
    return out


def code_arrows() -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for m, p in sources().items():
        for i, at_top in imports(p):
            if first_party(i) and unit_of(i) != unit_of(m):
                out.setdefault((unit_of(m), unit_of(i)), set()).add("top" if at_top else "lazy")
    return out


def test_every_arrow_between_packages_is_documented_and_every_documented_arrow_exists():
    documented, code = documented_arrows(), code_arrows()
    assert sorted(set(code) - set(documented)) == [], "arrows in the code that docs/architecture.md does not draw"
    assert sorted(set(documented) - set(code)) == [], "arrows docs/architecture.md draws that the code no longer has"
    assert {k: v for k, v in code.items() if documented[k] != v} == {}, "an arrow's top/lazily differs from the doc"


def test_the_arrow_table_is_read_as_written():
    # the reader itself: a few rows as the document states them (so a parse that drops rows fails here too)
    documented = documented_arrows()
    assert documented[("engine", "simulator")] == {"top"}
    assert documented[("sizer.cli", "engine")] == {"top", "lazy"}
    assert documented[("simulator", "validation")] == {"top"}
    assert ("simulator", "sizer") not in documented and len(documented) >= 25
    assert not any(source == "validation" for source, _ in documented)      # the leaf imports no other package
