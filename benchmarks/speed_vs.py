"""This checkout against another revision: CPU seconds and peak memory of the same commands on the same files.

    python3 benchmarks/speed_vs.py [REF] [--cases plan sim-10k sim-100k] [--reps 3]
    python3 benchmarks/speed_vs.py 6603a97 --cases plan --reps 7
    python3 benchmarks/speed_vs.py 6603a97 --cases sim-1m gateway-1m --reps 1

REF is a git revision; without it, the latest release tag, or 6603a97 (the baseline of issue 21) where
the repository has no tag. REF is checked out into a temporary worktree (removed at the end), and each
case runs `python -m sizer ...` there and here, alternately (the order flips every repetition), each
run a fresh process whose PYTHONPATH is its tree. Both trees read the files of this checkout, so a case
compares code, not inputs. A run's CPU time is the child's user + system seconds (os.wait4), its peak
memory the child's ru_maxrss: a shared machine's load moves wall time, far less CPU time, and the ratio
of runs taken side by side moves least. A case the other revision refuses (the gateway document is
newer) prints its error.

Bytecode: each tree's runs keep their .pyc files under their own PYTHONPYCACHEPREFIX (in the temporary
folder, so neither tree's folders change), filled by one unmeasured run per tree and case first: what an
installed wheel has. With --compile, the trees' own modules are compiled again on every run (their
cached bytecode is removed before it; the standard library's and site-packages' stays), as under
PYTHONDONTWRITEBYTECODE=1 in a checkout without __pycache__ folders.

Issue 21's acceptance, on the shared 2-core machine against 6603a97: `sizer plan` at most 0.8x its CPU
time, 100k simulated requests at most 0.5x, 1M requests (a plain scenario and a gateway) under 1 GiB.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASELINE = "6603a97"    # issue 21: "today's main against the main of two turns ago"
STANDARD = REPO / "benchmarks" / "scenarios" / "llama-2-7b-a100-poisson10.yaml"
PLAN_SCENARIO = REPO / "scenarios" / "llama-3.1-8b-chat-h100.yaml"
GATEWAY = REPO / "scenarios" / "gateway-difficulty-routing.yaml"

# case -> the arguments after `python -m sizer` (files of this checkout, the same for both trees)
CASES = {
    "plan": ["plan", str(PLAN_SCENARIO)],
    "sim-10k": ["simulate", str(STANDARD), "--num-requests", "10000", "--json"],
    "sim-100k": ["simulate", str(STANDARD), "--num-requests", "100000", "--json"],
    "sim-1m": ["simulate", str(STANDARD), "--num-requests", "1000000", "--json"],
    "gateway-1m": ["simulate", str(GATEWAY), "--num-requests", "1000000", "--json"],
}
WARM_UP_REQUESTS = "1000"       # the unmeasured first run of a simulation: the same imports, a short run
DEFAULT_CASES = ("plan", "sim-10k", "sim-100k")


@dataclass(frozen=True)
class Run:
    cpu_s: float
    max_rss_mib: float
    error: str | None      # the last line of stderr of a run that exited non-zero


def default_ref() -> str:
    """The latest release tag before HEAD, else the issue's baseline."""
    out = subprocess.run(["git", "describe", "--tags", "--abbrev=0", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else BASELINE


@dataclass(frozen=True)
class Tree:
    path: Path
    pycache: Path        # its PYTHONPYCACHEPREFIX

    def env(self) -> dict[str, str]:
        env = {**os.environ, "PYTHONPATH": str(self.path), "PYTHONPYCACHEPREFIX": str(self.pycache)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env

    def forget_own_bytecode(self) -> None:
        """The tree's own .pyc files (the prefix mirrors absolute paths); the standard library's stay."""
        shutil.rmtree(self.pycache / self.path.resolve().relative_to("/"), ignore_errors=True)


def run_once(tree: Tree, args: list[str], compile_own: bool = False) -> Run:
    """`python -m sizer ARGS` in TREE: its own CPU seconds (user + system) and peak RSS, from os.wait4."""
    if compile_own:
        tree.forget_own_bytecode()
    with tempfile.TemporaryFile() as stderr:
        child = subprocess.Popen([sys.executable, "-m", "sizer", *args], cwd=tree.path, env=tree.env(),
                                 stdout=subprocess.DEVNULL, stderr=stderr)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)      # reaped here, not by Popen
        stderr.seek(0)
        lines = stderr.read().decode(errors="replace").strip().splitlines()
    error = None if child.returncode == 0 else f"exit {child.returncode}: {(lines or [''])[-1][:100]}"
    return Run(usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, error)


def check_tree(tree: Tree) -> None:
    """The child imports sizer from TREE, not from an installed copy."""
    out = subprocess.run([sys.executable, "-c", "import sizer; print(sizer.__file__)"], cwd=tree.path,
                         env=tree.env(), capture_output=True, text=True, check=True)
    if not Path(out.stdout.strip()).resolve().is_relative_to(tree.path.resolve()):
        sys.exit(f"{tree}: python imports sizer from {out.stdout.strip()}")


def compare(ref: str, cases: list[str], reps: int, compile_own: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="speed-vs-") as tmp:
        old = Path(tmp) / "ref"
        subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(old), ref], cwd=REPO, check=True)
        try:
            trees = {"ref": Tree(old, Path(tmp) / "pycache-ref"), "here": Tree(REPO, Path(tmp) / "pycache-here")}
            for tree in trees.values():
                check_tree(tree)
            bytecode = "compiled every run" if compile_own else "cached"
            print(f"ref = {ref} ({old}), here = {REPO}; {reps} alternating runs per case; CPU s = child user + sys; "
                  f"the trees' bytecode {bytecode}")
            print(f"{'case':12s} {'ref CPU s':>22s} {'here CPU s':>22s} {'ratio':>7s} {'ref MiB':>8s} {'here MiB':>8s}")
            for case in cases:
                report(case, measure(trees, CASES[case], reps, compile_own))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=REPO, check=True)


def warm_up_args(args: list[str]) -> list[str]:
    """The case's command with at most WARM_UP_REQUESTS simulated requests."""
    if "--num-requests" not in args:
        return args
    at = args.index("--num-requests") + 1
    return [*args[:at], WARM_UP_REQUESTS, *args[at + 1:]]


def measure(trees: dict[str, Tree], args: list[str], reps: int, compile_own: bool) -> dict[str, list[Run]]:
    runs: dict[str, list[Run]] = {name: [] for name in trees}
    for name, tree in trees.items():            # bytecode caches written; a refused case shows up here
        warm = run_once(tree, warm_up_args(args))
        if warm.error is not None:
            runs[name].append(warm)
    order = list(trees)
    for rep in range(reps):
        for name in order if rep % 2 == 0 else order[::-1]:
            if not (runs[name] and runs[name][0].error):
                runs[name].append(run_once(trees[name], args, compile_own))
    return runs


def report(case: str, runs: dict[str, list[Run]]) -> None:
    cells, medians, rss = [], [], []
    for name in ("ref", "here"):
        errors = [r.error for r in runs[name] if r.error]
        if errors:
            cells.append(errors[0][:22])
            medians.append(None)
            rss.append("-")
            continue
        cpu = [r.cpu_s for r in runs[name]]
        medians.append(statistics.median(cpu))
        cells.append(f"{medians[-1]:.2f} ({min(cpu):.2f}-{max(cpu):.2f})")
        rss.append(f"{max(r.max_rss_mib for r in runs[name]):.0f}")
    # each repetition ran both trees side by side: the median of those pairs' ratios
    pairs = [h.cpu_s / r.cpu_s for r, h in zip(runs["ref"], runs["here"], strict=False)]
    ratio = f"{statistics.median(pairs):.2f}x" if None not in medians else "-"
    print(f"{case:12s} {cells[0]:>22s} {cells[1]:>22s} {ratio:>7s} {rss[0]:>8s} {rss[1]:>8s}", flush=True)
    for name in ("ref", "here"):
        for error in {r.error for r in runs[name] if r.error}:
            print(f"  {name}: {error}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ref", nargs="?", help=f"git revision (default: the latest tag, else {BASELINE})")
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(DEFAULT_CASES),
                        help=f"what to time (default: {' '.join(DEFAULT_CASES)})")
    parser.add_argument("--reps", type=int, default=3, help="measured runs per case and tree (default 3)")
    parser.add_argument("--compile", action="store_true",
                        help="compile the trees' own modules on every run (no cached bytecode for them)")
    options = parser.parse_args()
    compare(options.ref or default_ref(), options.cases, options.reps, options.compile)


if __name__ == "__main__":
    main()
