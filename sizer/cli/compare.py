"""`sizer compare`: a measured benchmark (a `vllm bench serve --save-result` file) against sizer's
simulation of the same workload on the scenario's deployment, metric by metric."""

from __future__ import annotations

from pathlib import Path

import typer

from sizer.cli.options import WIDE
from sizer.cli.render import render_comparison, terminal
from sizer.inputs.bench_result import read_bench_result
from sizer.inputs.scenario import load_scenario
from sizer.outputs.serialise import to_json
from sizer.sizing.compare import compare


def command(
    result: Path = typer.Argument(..., help="a vllm bench serve result JSON (--save-result; "
                                            "--save-detailed adds per-request lengths)"),
    scenario: Path = typer.Argument(..., help="scenario YAML: the deployment the benchmark ran on (docs/scenario.md)"),
    as_json: bool = typer.Option(False, "--json", help="print the comparison as JSON"),
    wide: bool = WIDE,
) -> None:
    """Measured against predicted: throughput, TTFT, TPOT, ITL and E2E as vllm bench serve reports them.

    The simulated workload is the benchmark's (request count, rate or concurrency, per-request lengths
    when saved); the deployment, engine and step times are the scenario's."""
    bench = read_bench_result(result)
    comparison = compare(bench, load_scenario(scenario))
    if as_json:
        typer.echo(to_json(comparison))
        return
    render_comparison(comparison, terminal(wide))
