"""Run every malformed input under tests/bad_inputs/<kind>/ through sizer and classify the outcome.

The inputs run in batches, each batch in one worker process that imports sizer once and runs its
inputs one after another in-process (Typer's CliRunner), with a limit of CPU time per input
(`--timeout`, 10 s: past it the run is a "hang"; the worker's own alarm stops a run; one blocked
without using CPU is killed by the parent after WALL_S, which starts another worker for the rest)
and an address-space limit on the worker (RLIMIT_AS, `--memory-gib`, 4 GiB: a MemoryError or the
worker killed is "memory"). A run is

  good       exit 2, one line on stderr, no traceback
  traceback  an exception other than a clean exit (a Python traceback)
  exit 0     accepted
  hang       still running at the time limit
  memory     MemoryError, or the worker killed (the kernel's answer to the memory limit)
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
  gguf       sizer plan --model FILE --gpu rtx-4090
  checkpoint sizer plan --model COPY --gpu b200, COPY a temporary copy of the case folder
  sweep      sizer sweep COPY/sweep.yaml --results COPY/results.parquet --workers 1, COPY a temporary
             copy of the case folder with ROOT in sweep.yaml replaced by the repository root
  results    sizer report --sweep FILE --csv TMP/out.csv -o TMP/out.html (a sweep's results file)
  kernels    sizer plan TMP/scenario.yaml, a scenario pricing steps by COPY, a temporary copy of
             hardware_profiles/kernels/h200-vllm-0.24.0 with the case folder's files laid over it
  gateway    sizer plan FILE (and sizer simulate FILE --num-requests 50 for files named sim-*)
  outputs    each row of the folder's README.md table (`| `arguments` |`), with its placeholders:
             SCENARIO, GATEWAY, DEPLOY, SWEEP, RESULTS (outputs/README.md says which files), FIFO (a
             FIFO in the run's temporary folder), LINK (a symbolic link there to nothing) and TMP (that
             folder)
  compare    sizer compare FILE tests/data/bench/scenario-llama-3.1-8b-h100.yaml (a vllm bench serve result or a
             GuideLLM report); a `.yaml` FILE is a scenario: sizer compare tests/data/bench/vllm-bench-serve-c16.json
             FILE; a `.sparse` FILE holds a size: sizer compare TMP/huge.json, a sparse file of that many bytes
  hardware   sizer plan --model llama-3.1-8b --gpu FILE (a hardware profile file)

A kind whose folder does not exist is skipped with a note. Prints a table by kind, then every
run that was not good; exits 1 if there was one. Importable: `run_corpus()` returns the same.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import queue
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "bad_inputs"
BASE_PROFILE = ROOT / "hardware_profiles" / "calibrated" / "h200-llama-3.1-8b-tp1"
KINDS = ("scenario", "config", "manifest", "trace", "profile", "flags", "gguf", "checkpoint", "sweep", "results",
         "kernels", "gateway", "outputs", "compare", "hardware")
BENCH = ROOT / "tests" / "data" / "bench"
KERNEL_TABLES = ROOT / "hardware_profiles" / "kernels" / "h200-vllm-0.24.0"
VERDICTS = ("good", "traceback", "exit 0", "hang", "memory", "other")
TIMEOUT_S = 10.0        # CPU seconds one input may take (CPU time: the shared machine's load does not count)
WALL_S = 120.0          # wall seconds before a worker that does not answer is killed
MEMORY_GIB = 4.0


@dataclass(frozen=True)
class Run:
    kind: str
    case: str               # the file or folder, relative to tests/bad_inputs
    args: tuple[str, ...]   # sizer's arguments; {TMP} is replaced by the run's temporary folder
    setup: str = ""         # "trace", "profile", "copy", "kernels", "fifo" or "sparse": what to write into the
                            # temporary folder


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
    if kind == "gguf":
        return [Run(kind, rel(p), ("plan", "--model", str(p), "--gpu", "rtx-4090")) for p in _files(folder)]
    if kind == "checkpoint":
        return [Run(kind, rel(p), ("plan", "--model", "{TMP}/case", "--gpu", "b200"), "copy")
                for p in _files(folder) if p.is_dir()]
    if kind == "sweep":
        return [Run(kind, rel(p), ("sweep", "{TMP}/case/sweep.yaml", "--results", "{TMP}/case/results.parquet",
                                   "--workers", "1"), "copy") for p in _files(folder) if p.is_dir()]
    if kind == "results":
        return [Run(kind, rel(p), ("report", "--sweep", str(p), "--csv", "{TMP}/out.csv", "-o", "{TMP}/out.html"))
                for p in _files(folder)]
    if kind == "kernels":
        return [Run(kind, rel(p), ("plan", "{TMP}/scenario.yaml"), "kernels") for p in _files(folder) if p.is_dir()]
    if kind == "gateway":
        return [Run(kind, rel(p), (cmd, str(p), *(("--num-requests", "50") if cmd == "simulate" else ())))
                for p in _files(folder) for cmd in ("plan", *(("simulate",) if p.name.startswith("sim-") else ()))]
    if kind == "outputs":
        places = {"SCENARIO": str(ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml"),
                  "GATEWAY": str(ROOT / "scenarios" / "gateway-residency.yaml"),
                  "DEPLOY": str(ROOT / "scenarios" / "deploy" / "pass-llama-8b-h100.yaml"),
                  "SWEEP": str(CORPUS / "sweep" / "valid.yaml"), "RESULTS": str(folder / "results.parquet"),
                  "FIFO": "{TMP}/fifo.gguf", "LINK": "{TMP}/link", "TMP": "{TMP}"}
        return [Run(kind, f"outputs: {args}", tuple(re.sub(r"^TMP/", "{TMP}/", places.get(a, a)) for a in args.split()),
                    next((s.lower() for s in ("FIFO", "LINK") if s in args.split()), ""))
                for args in re.findall(r"^\| `([^`]+)` \|", (folder / "README.md").read_text(), re.M)]
    if kind == "compare":
        return [compare_run(rel(p), p) for p in _files(folder)]
    if kind == "hardware":
        return [Run(kind, rel(p), ("plan", "--model", "llama-3.1-8b", "--gpu", str(p))) for p in _files(folder)]
    raise ValueError(kind)


def compare_run(case: str, p: Path) -> Run:
    """`sizer compare` of a result file against the fixtures' scenario, of the fixtures' c16 result against a
    scenario (`.yaml`), or of a sparse file of the size a `.sparse` file holds."""
    if p.suffix == ".yaml":
        return Run("compare", case, ("compare", str(BENCH / "vllm-bench-serve-c16.json"), str(p)))
    scenario = str(BENCH / "scenario-llama-3.1-8b-h100.yaml")
    if p.suffix == ".sparse":
        return Run("compare", case, ("compare", "{TMP}/huge.json", scenario), "sparse")
    return Run("compare", case, ("compare", str(p), scenario))


def kernel_scenario(tables: Path) -> str:
    return (f"name: kernels\nmodel: llama-3.1-8b\nhardware:\n  gpu: h200\n  step_model: kernel_tables\n"
            f"  kernel_tables: {tables}\ndeployment:\n  max_model_len: 8192\n"
            "workload:\n  arrival: {rate_per_s: 1}\n  prompt_tokens: {distribution: fixed, value: 1000}\n"
            "  output_tokens: {distribution: fixed, value: 100}\n"
            "slo:\n  ttft_ms: 1000\n  itl_ms: 50\n  required_share: 0.95\n")


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
        elif p.is_dir():                    # a folder where a file goes
            (dest / p.name).unlink(missing_ok=True)
            shutil.copytree(p, dest / p.name)
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


def prepare(run: Run, tmp: str) -> list[str]:
    """What `run` needs written into its temporary folder; its arguments with {TMP} and the placeholders filled."""
    case = CORPUS / run.case
    if run.setup == "trace":
        Path(tmp, "scenario.yaml").write_text(trace_scenario(case))
    elif run.setup == "profile":
        profile_case(case, Path(tmp, "profile"))
    elif run.setup == "copy":
        shutil.copytree(case, Path(tmp, "case"))
        sweep = Path(tmp, "case", "sweep.yaml")
        if sweep.is_file():
            sweep.write_text(sweep.read_text().replace("ROOT", str(ROOT)))
    elif run.setup == "kernels":
        profile_case(case, Path(tmp, "tables"), KERNEL_TABLES)
        Path(tmp, "scenario.yaml").write_text(kernel_scenario(Path(tmp, "tables")))
    elif run.setup == "fifo":
        os.mkfifo(Path(tmp, "fifo.gguf"))
    elif run.setup == "link":
        Path(tmp, "link").symlink_to(Path(tmp, "gone", "x"))
    elif run.setup == "sparse":
        with Path(tmp, "huge.json").open("wb") as f:      # no data written: a hole of that many bytes
            f.truncate(int(case.read_text()))
    return [a.replace("{TMP}", tmp) for a in run.args]


class _Hang(BaseException):
    """Raised by the worker's alarm: the run went past its time limit (not an Exception, so nothing catches it)."""


def _alarm(signum, frame):
    raise _Hang


def run_in_process(run: Run, timeout: float) -> tuple[str, str]:
    """(verdict, detail) of one run in this process (the worker's loop)."""
    import traceback

    from typer.testing import CliRunner

    from sizer.cli import app
    with tempfile.TemporaryDirectory(prefix="corpus-") as tmp:
        args = prepare(run, tmp)
        signal.signal(signal.SIGPROF, _alarm)
        signal.setitimer(signal.ITIMER_PROF, timeout)
        try:
            result = CliRunner().invoke(app, args)
        except _Hang:
            return "hang", f"still running after {timeout:g} s of CPU time"
        except MemoryError:
            return "memory", "MemoryError"
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
        error = result.exception
        if isinstance(error, _Hang):
            return "hang", f"still running after {timeout:g} s of CPU time"
        if error is not None and not isinstance(error, SystemExit):
            kind = "memory" if isinstance(error, MemoryError) else "traceback"
            last = "".join(traceback.format_exception_only(type(error), error)).strip().splitlines()
            return kind, (last[-1] if last else type(error).__name__).replace(tmp, "TMP")[:300]
        verdict = classify(result.exit_code, result.stderr)
        lines = result.stderr.strip().splitlines()
        return verdict, (lines[-1] if lines else f"(no stderr; exit {result.exit_code})").replace(tmp, "TMP")[:300]


def worker(timeout: float) -> None:
    """Read runs (JSON lines) on stdin; write {"i", "verdict", "detail"} per run on stdout as each ends (on a
    copy of the pipe: file descriptor 1 itself goes to /dev/null, so nothing a run prints can garble it)."""
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    for i, line in enumerate(sys.stdin):
        fields = json.loads(line)
        verdict, detail = run_in_process(Run(fields["kind"], fields["case"], tuple(fields["args"]), fields["setup"]),
                                         timeout)
        answers.write(json.dumps({"i": i, "verdict": verdict, "detail": detail}) + "\n")
        answers.flush()


def _write(proc: subprocess.Popen, runs: list[Run]) -> None:
    try:
        proc.stdin.write("".join(json.dumps(dataclasses.asdict(r)) + "\n" for r in runs))
        proc.stdin.close()
    except OSError:                 # the worker died or was killed: its answers so far are queued by _feed
        pass


def _feed(proc: subprocess.Popen, runs: list[Run], lines: queue.Queue) -> None:
    """Write the runs to the worker (a thread of its own) and queue its answers (None at its end); a thread, so
    the caller can time out."""
    threading.Thread(target=_write, args=(proc, runs), daemon=True).start()
    for line in proc.stdout:
        lines.put(line)
    lines.put(None)


def execute_batch(runs: list[Run], timeout: float = TIMEOUT_S, memory_gib: float = MEMORY_GIB) -> list[Outcome]:
    """The runs in worker processes, one at a time, each worker running the rest after one it lost."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "COLUMNS": "200",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    outcomes: list[Outcome] = []
    while len(outcomes) < len(runs):
        rest = runs[len(outcomes):]
        proc = subprocess.Popen([sys.executable, __file__, "--worker", "--timeout", str(timeout)], cwd=ROOT, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                preexec_fn=_limit_memory(memory_gib))
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_feed, args=(proc, rest, lines), daemon=True).start()
        for run in rest:
            try:
                line = lines.get(timeout=WALL_S)          # blocked without using CPU (a FIFO), or the alarm failed
            except queue.Empty:
                proc.kill()
                proc.wait()
                outcomes.append(Outcome(run, "hang", f"no answer after {WALL_S:g} s (worker killed)"))
                break
            if line is None:                                 # the worker died: the kernel's answer to memory
                code = proc.wait()
                outcomes.append(Outcome(run, "memory" if code < 0 else "other", f"worker exited {code}"))
                break
            got = json.loads(line)
            outcomes.append(Outcome(run, got["verdict"], got["detail"]))
        else:
            proc.wait()
    return outcomes


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
    batches = [runs[i::jobs] for i in range(jobs)]
    with ThreadPoolExecutor(max_workers=jobs) as pool:       # each thread feeds its own worker process
        outcomes = [o for batch in pool.map(lambda b: execute_batch(b, timeout, memory_gib), batches) for o in batch]
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
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="CPU seconds before a run is a hang")
    parser.add_argument("--memory-gib", type=float, default=MEMORY_GIB, help="address-space limit per worker")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    unknown = [k for k in opts.kinds if k not in KINDS]
    if unknown:
        parser.error(f"unknown kind {unknown[0]!r}; expected one of: {', '.join(KINDS)}")
    if opts.worker:
        worker(opts.timeout)
        return 0
    table, bad, notes = run_corpus(tuple(opts.kinds) or KINDS, opts.jobs, opts.timeout, opts.memory_gib)
    for note in notes:
        print(f"note: {note}")
    print(format_table(table))
    for o in bad:
        print(f"{o.verdict}: {o.run.kind} {o.run.case}: sizer {' '.join(o.run.args)}\n    {o.detail}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
