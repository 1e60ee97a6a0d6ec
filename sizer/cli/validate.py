"""`sizer validate`: replay a scenario's workload through the bundled engine and through the
simulator priced by a calibrated profile (or a device's kernel tables), and print how far the prediction is from the
measurement (see docs/engine.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from sizer.cli.flags import check_engine, check_range
from sizer.cli.render import render_validation, terminal
from sizer.errors import InputError
from sizer.inputs.scenario import MAX_REQUESTS
from sizer.outputs.serialise import to_json
from sizer.sizing.validate import DEFAULT_MAX_REQUESTS, run_validation


def command(
    scenario: Path = typer.Argument(..., help="scenario YAML whose model, deployment and workload are replayed"),
    profile: Path | None = typer.Option(None, "--profile",
                                        help="calibrated profile folder (from `sizer calibrate --model`)"),
    kernel_tables: Path | None = typer.Option(None, "--kernel-tables",
                                              help="a device's kernel-table folder (from `sizer calibrate` without "
                                                   "--model): prices any model with the shapes it measured"),
    num_requests: int | None = typer.Option(None, "--num-requests", min=1,
                                            help="replay the first N requests (default: the scenario's, "
                                                 f"at most {DEFAULT_MAX_REQUESTS})"),
    num_blocks: int | None = typer.Option(None, "--num-blocks", min=1,
                                          help="KV blocks for both runs (default: the memory budget's, "
                                               "as sizer plan and simulate use; capped by what the device holds)"),
    checkpoint: Path | None = typer.Option(None, "--checkpoint",
                                           help="folder of a local safetensors checkpoint (default: random weights)"),
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
) -> None:
    """Measured vs predicted TTFT, ITL, E2E (p50/p95/p99) and throughput for one workload."""
    check_engine("validate")
    check_range(num_requests, "--num-requests", 1, MAX_REQUESTS)
    if (profile is None) == (kernel_tables is None):
        raise InputError(None, "--profile/--kernel-tables", "give one: a model's calibrated profile (--profile) or "
                                                           "a device's kernel tables (--kernel-tables)")
    report = run_validation(scenario, profile, num_requests, num_blocks, checkpoint, kernel_tables)
    if as_json:
        typer.echo(to_json(report.to_dict()))
        return
    render_validation(report, terminal())
