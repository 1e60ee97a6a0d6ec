"""`sizer compare`: a measured benchmark (a `vllm bench serve --save-result` file or a GuideLLM report)
against sizer's simulation of the same workload on the scenario's deployment, metric by metric."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer

from sizer.cli.options import WIDE
from sizer.cli.progress import progress
from sizer.cli.render import render_comparison, terminal
from sizer.errors import InputError
from sizer.inputs.bench_result import bench_result
from sizer.inputs.guidellm_report import MAX_REPORT_BYTES, check_compared, guidellm_benchmarks, is_guidellm_report
from sizer.inputs.scenario import load_scenario
from sizer.outputs.serialise import to_json
from sizer.sizing.compare import Comparison, compare, compare_guidellm
from validation.safe_load import load_json


def command(
    result: Path = typer.Argument(..., help="a vllm bench serve result JSON (--save-result; --save-detailed adds "
                                            "per-request lengths) or a GuideLLM report (guidellm benchmark "
                                            "--output-path benchmarks.json)"),
    scenario: Path = typer.Argument(..., help="scenario YAML: the deployment the benchmark ran on (docs/scenario.md)"),
    benchmark: int = typer.Option(None, "--benchmark", min=0, help="a GuideLLM report: compare only its "
                                  "benchmark at this index (0 the first); default every benchmark"),
    as_json: bool = typer.Option(False, "--json", help="print the comparison as JSON (a list for a GuideLLM report)"),
    wide: bool = WIDE,
) -> None:
    """Measured against predicted: throughput, TTFT, TPOT, ITL and E2E as the benchmark tool reports them.

    The simulated workload is the benchmark's (request count, rate or concurrency, per-request lengths
    when saved); the deployment, engine and step times are the scenario's (a scenario replaying a trace
    is refused). Where the two disagree (another model_id, requests the engine rejects) a warning says so."""
    data = load_json(result, MAX_REPORT_BYTES)
    plan = load_scenario(scenario)
    if not is_guidellm_report(data):
        if benchmark is not None:
            raise InputError(None, "--benchmark", f"{benchmark}: {result} is a vllm bench serve result (one run); "
                                                  "--benchmark picks one of a GuideLLM report's benchmarks")
        measured = bench_result(data, str(result))
        with progress("simulating", "requests", measured.num_requests) as update:
            comparison = compare(measured, plan, update)
        _warn([comparison])
        typer.echo(to_json(comparison)) if as_json else render_comparison(comparison, terminal(wide))
        return
    runs = guidellm_benchmarks(data, str(result))
    if benchmark is not None:
        if benchmark >= len(runs):
            raise InputError(None, "--benchmark", f"{benchmark}: {result} holds {len(runs)} benchmark(s), "
                                                  f"expected an index from 0 to {len(runs) - 1}")
        runs = (runs[benchmark],)
    check_compared(runs, str(result))
    comparisons, done = [], 0
    with progress("simulating", "requests", sum(run.num_simulated for run in runs)) as update:
        for run in runs:
            comparisons.append(compare_guidellm(run, plan, after(update, done)))
            done += run.num_simulated
    _warn(comparisons)
    if as_json:
        typer.echo(to_json(comparisons))
        return
    console = terminal(wide)
    for comparison in comparisons:
        render_comparison(comparison, console)


def after(update: Callable[..., None] | None, done_before: int) -> Callable[[int], None] | None:
    """`update` told the requests of the benchmarks simulated before this one too."""
    return None if update is None else lambda done: update(done_before + done)


def _warn(comparisons: list[Comparison]) -> None:
    """Each comparison's warnings, one line each on stderr (after every comparison is made: a refusal stays the
    one line it prints); a warning several benchmarks share (a report's model) once."""
    for warning in dict.fromkeys(w for comparison in comparisons for w in comparison.warnings):
        typer.echo(f"warning: {warning}", err=True)
