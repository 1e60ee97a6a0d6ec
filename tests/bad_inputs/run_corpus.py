"""Run every malformed input under tests/bad_inputs/<kind>/ through sizer and classify the outcome.

Each input runs in its own process (`python -m sizer ...`, from the repository root) with a
time limit (`--timeout`, 20 s: past it the run is a "hang") and an address-space limit
(RLIMIT_AS, `--memory-gib`, 4 GiB: a MemoryError or a kill is "memory"). A run is

  good       exit 2, one line on stderr, no traceback
  traceback  a Python traceback on stderr
  exit 0     accepted
  hang       still running at the time limit
  memory     MemoryError, or killed (the kernel's answer to the memory limit)
  other      anything else (another exit code, more than one line, nothing on stderr)

Kinds and the commands they run:

  scenario   sizer plan FILE; sizer simulate FILE
  config     sizer plan --model FILE --gpu h100
  manifest   sizer check FILE
  trace      sizer simulate SCENARIO, a scenario (written to a temporary folder) replaying FILE
             (`.jsonl` as mooncake, `.csv` as csv)
  profile    sizer plan --gpu h200 --model llama-3.1-8b --max-model-len 8192 --profile COPY, COPY
             a temporary copy of hardware_profiles/calibrated/h200-llama-3.1-8b-tp1 with the
             case folder's files laid over it (`REMOVE` lists files to delete)
  flags      each row of the folder's README.md table (`| `arguments` | `flag` |`), with its
             placeholders: SCENARIO (scenarios/llama-3.1-8b-chat-h100.yaml), DISAGG (the folder's
             disaggregated.yaml) and OUT (a file in the run's temporary folder)

A kind whose folder does not exist is skipped with a note. Prints a table by kind, then every
run that was not good; exits 1 if there was one. Importable: `run_corpus()` returns the same.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "bad_inputs"
BASE_PROFILE = ROOT / "hardware_profiles" / "calibrated" / "h200-llama-3.1-8b-tp1"
KINDS = ("scenario", "config", "manifest", "trace", "profile", "flags")
VERDICTS = ("good", "traceback", "exit 0", "hang", "memory", "other")
TIMEOUT_S = 20.0
MEMORY_GIB = 4.0


@dataclass(frozen=True)
class Run:
    kind: str
    case: str               # the file or folder, relative to tests/bad_inputs
    args: tuple[str, ...]   # sizer's arguments; {TMP} is replaced by the run's temporary folder
    setup: str = ""         # "trace" or "profile": what to write into the temporary folder first


@dataclass(frozen=True)
class Outcome:
    run: Run
    verdict: str
    detail: str


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name != "README.md" and not p.name.startswith("."))


def runs_for(kind: str, folder: Path) -> list[Run]:
    """The invocations for every input of one kind."""
    rel = lambda p: str(p.relative_to(CORPUS))          # noqa: E731
    if kind == "scenario":
        return [Run(kind, rel(p), (cmd, str(p))) for p in _files(folder) for cmd in ("plan", "simulate")]
    if kind == "config":
        return [Run(kind, rel(p), ("plan", "--model", str(p), "--gpu", "h100")) for p in _files(folder)]
    if kind == "manifest":
        return [Run(kind, rel(p), ("check", str(p))) for p in _files(folder)]
    if kind == "trace":
        return [Run(kind, rel(p), ("simulate", "{TMP}/scenario.yaml"), "trace") for p in _files(folder)]
    if kind == "profile":
        return [Run(kind, rel(p), ("plan", "--gpu", "h200", "--model", "llama-3.1-8b", "--max-model-len", "8192",
                                   "--profile", "{TMP}/profile"), "profile")
                for p in _files(folder) if p.is_dir()]
    if kind == "flags":
        places = {"SCENARIO": str(ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml"),
                  "DISAGG": str(folder / "disaggregated.yaml"), "OUT": "{TMP}/report.html"}
        return [Run(kind, f"flags: {args}", tuple(places.get(a, a) for a in args.split()))
                for args in flag_invocations(folder)]
    raise ValueError(kind)


def flag_invocations(folder: Path) -> list[str]:
    """The `arguments` cells of the README table (tests/sizer/cli/test_bad_flags.py reads the same rows)."""
    return re.findall(r"^\| `([^`]+)` \| `[^`]+` \|$", (folder / "README.md").read_text(), re.M)


def trace_scenario(trace: Path) -> str:
    fmt = "mooncake" if trace.suffix == ".jsonl" else "csv"
    return (f"name: traced\nmodel: llama-3.1-8b\nhardware: h100-sxm\ndeployment:\n  max_model_len: 8192\n"
            f"workload:\n  trace: {{path: {trace}, format: {fmt}}}\n  num_requests: 50\n"
            "slo:\n  ttft_ms: 1000\n  itl_ms: 50\n  required_share: 0.95\n")


def profile_case(case: Path, dest: Path, base: Path = BASE_PROFILE) -> Path:
    """A copy of `base` at `dest` with `case`'s files laid over it and those its REMOVE lists deleted."""
    shutil.copytree(base, dest)
    for p in case.iterdir():
        if p.name == "REMOVE":
            for name in p.read_text().split():
                (dest / name).unlink()
        else:
            shutil.copyfile(p, dest / p.name)
    return dest


def _limit_memory(gib: float):
    def apply():
        limit = int(gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def classify(returncode: int | None, stderr: str) -> str:
    if returncode is None:
        return "hang"
    if "MemoryError" in stderr or returncode < 0:
        return "memory"
    if "Traceback" in stderr:
        return "traceback"
    if returncode == 0:
        return "exit 0"
    if returncode == 2 and len(stderr.strip().splitlines()) == 1:
        return "good"
    return "other"


def execute(run: Run, timeout: float = TIMEOUT_S, memory_gib: float = MEMORY_GIB) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="corpus-") as tmp:
        if run.setup == "trace":
            Path(tmp, "scenario.yaml").write_text(trace_scenario(CORPUS / run.case))
        elif run.setup == "profile":
            profile_case(CORPUS / run.case, Path(tmp, "profile"))
        args = [a.replace("{TMP}", tmp) for a in run.args]
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "COLUMNS": "200",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        try:
            proc = subprocess.run([sys.executable, "-m", "sizer", *args], cwd=ROOT, env=env, capture_output=True,
                                  text=True, errors="replace", timeout=timeout, preexec_fn=_limit_memory(memory_gib))
        except subprocess.TimeoutExpired:
            return Outcome(run, "hang", f"still running after {timeout:g} s")
        verdict = classify(proc.returncode, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        detail = (lines[-1] if lines else f"(no stderr; exit {proc.returncode})").replace(tmp, "TMP")
        return Outcome(run, verdict, detail[:300])


def run_corpus(kinds: tuple[str, ...] = KINDS, jobs: int = 2, timeout: float = TIMEOUT_S,
               memory_gib: float = MEMORY_GIB) -> tuple[dict[str, Counter], list[Outcome], list[str]]:
    """(kind -> verdict counts, the runs that were not good, notes on kinds skipped)."""
    runs, notes = [], []
    for kind in kinds:
        folder = CORPUS / kind
        if not folder.is_dir():
            notes.append(f"{kind}: skipped, no folder {folder.relative_to(ROOT)}")
            continue
        found = runs_for(kind, folder)
        if not found:
            notes.append(f"{kind}: skipped, no inputs in {folder.relative_to(ROOT)}")
        runs += found
    with ThreadPoolExecutor(max_workers=jobs) as pool:       # each thread waits on its own child process
        outcomes = list(pool.map(lambda r: execute(r, timeout, memory_gib), runs))
    table: dict[str, Counter] = {}
    for o in outcomes:
        table.setdefault(o.run.kind, Counter())[o.verdict] += 1
    return table, [o for o in outcomes if o.verdict != "good"], notes


def format_table(table: dict[str, Counter]) -> str:
    head = ["kind", "runs", *VERDICTS]
    rows = [[kind, str(sum(c.values())), *(str(c[v]) for v in VERDICTS)] for kind, c in table.items()]
    total = sum(table.values(), Counter())
    rows.append(["total", str(sum(total.values())), *(str(total[v]) for v in VERDICTS)])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def fmt(row: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
    return "\n".join([fmt(head), fmt(["-" * w for w in widths]), *map(fmt, rows)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kinds", nargs="*", help=f"kinds to run, of {', '.join(KINDS)} (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (default 2)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds before a run is a hang")
    parser.add_argument("--memory-gib", type=float, default=MEMORY_GIB, help="address-space limit per run")
    opts = parser.parse_args(argv)
    unknown = [k for k in opts.kinds if k not in KINDS]
    if unknown:
        parser.error(f"unknown kind {unknown[0]!r}; expected one of: {', '.join(KINDS)}")
    table, bad, notes = run_corpus(tuple(opts.kinds) or KINDS, opts.jobs, opts.timeout, opts.memory_gib)
    for note in notes:
        print(f"note: {note}")
    print(format_table(table))
    for o in bad:
        print(f"{o.verdict}: {o.run.kind} {o.run.case}: sizer {' '.join(o.run.args)}\n    {o.detail}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
