"""`sizer validate`: replay a scenario's workload through the bundled engine and through the
simulator priced by a calibrated profile, and print how far the prediction is from the
measurement (see docs/engine.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from sizer.outputs.serialise import to_json
from sizer.sizing.validate import DEFAULT_MAX_REQUESTS, run_validation


def command(
    scenario: Path = typer.Argument(..., help="scenario YAML whose model, deployment and workload are replayed"),
    profile: Path = typer.Option(..., "--profile", help="calibrated profile folder (from `sizer calibrate`)"),
    num_requests: Optional[int] = typer.Option(None, "--num-requests", min=1,
                                               help=f"replay the first N requests (default: the scenario's, at most {DEFAULT_MAX_REQUESTS})"),
    num_blocks: Optional[int] = typer.Option(None, "--num-blocks", min=1, help="KV blocks for both runs (default: the memory budget's, as sizer plan and simulate use; capped by what the device holds)"),
    weights: Optional[Path] = typer.Option(None, "--weights", help="folder of a local safetensors checkpoint (default: random weights)"),
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
) -> None:
    """Measured vs predicted TTFT, ITL, E2E (p50/p95/p99) and throughput for one workload."""
    report = run_validation(scenario, profile, num_requests, num_blocks, weights)
    if as_json:
        typer.echo(to_json(report.to_dict()))
        return
    render(report, Console())


def render(report, console) -> None:
    table = Table(title=f"sizer validate: {report.model} on {report.device}, {report.num_requests} requests")
    for col in ("metric", "measured (engine)", "predicted (simulator)", "relative error"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for r in report.rows:
        table.add_row(r.metric, f"{r.measured:,.2f}", f"{r.predicted:,.2f}", f"{r.relative_error:+.1%}")
    console.print(table)
    pool = f"KV pool {report.num_blocks:,} blocks"
    if report.num_blocks_limit:
        pool += f" ({report.num_blocks_requested:,} from the memory budget or --num-blocks, {report.num_blocks_limit})"
    console.print(f"{pool}; profile {report.profile}; engine time {report.engine_time_s:.1f} s (device clock); "
                  f"{report.cached_prompt_tokens:,} prompt tokens from the prefix cache; "
                  f"{report.mixed_steps} steps mixed prefill chunks with decodes; {report.preemptions} preemptions")
    if report.out_of_range_steps:
        console.print(f"[yellow]warning: {report.out_of_range_steps} of {report.steps_predicted} predicted steps fell "
                      f"outside the profile's measured range and were extrapolated[/yellow]")
