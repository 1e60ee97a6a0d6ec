"""`sizer validate`: replay a scenario's workload through the bundled engine and through the
simulator priced by a calibrated profile (or a device's kernel tables), and print how far the prediction is from the
measurement (see docs/engine.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from simulator.kv_cache import KVCacheManager
from sizer.cli.flags import check_engine, check_range
from sizer.cli.render import render_validation, terminal
from sizer.errors import InputError
from sizer.inputs.scenario import MAX_REQUESTS, load_scenario
from sizer.outputs.serialise import to_json
from sizer.sizing.resolve import resolve
from sizer.sizing.validate import DEFAULT_MAX_REQUESTS, replayed_count, run_validation
from sizer.sizing.workload import workload_of


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
    _check_num_blocks(num_blocks, scenario, num_requests)
    report = run_validation(scenario, profile, num_requests, num_blocks, checkpoint, kernel_tables)
    if as_json:
        typer.echo(to_json(report.to_dict()))
        return
    render_validation(report, terminal())


def _check_num_blocks(num_blocks: int | None, scenario: Path, num_requests: int | None) -> None:
    """--num-blocks: at least the blocks the longest replayed request holds at its end, before the engine starts.
    The scheduler refuses a request that could never fit the pool (simulator/scheduler.py _too_long: its final
    blocks, the window ones too), so a smaller pool would replay a part of the workload, or none of it."""
    if num_blocks is None:
        return
    s = load_scenario(scenario)
    replica = resolve(s).replica
    count = replayed_count(s, num_requests)
    kv = KVCacheManager(1, replica.block_size, window_groups=replica.kv_windows)
    longest, need = kv.pool_to_serve((r.prompt_tokens + r.output_tokens for r in workload_of(s, count).requests()),
                                     replica.scheduler.max_model_len)
    if num_blocks < need:
        raise InputError(None, "--num-blocks", f"expected at least {need:,}: the longest of the {count:,} requests "
                                               f"replayed within max_model_len has {longest:,} tokens of prompt and "
                                               "output, "
                                               f"{need:,} blocks of {replica.block_size}; got {num_blocks:,}")
