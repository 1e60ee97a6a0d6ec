"""`sizer validate`: replay a scenario's workload through the bundled engine and through the
simulator priced by a calibrated profile, and print how far the prediction is from the
measurement (see docs/engine.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from sizer.errors import InputError

DEFAULT_MAX_REQUESTS = 200


def command(
    scenario: Path = typer.Argument(..., help="scenario YAML whose model, deployment and workload are replayed"),
    profile: Path = typer.Option(..., "--profile", help="calibrated profile folder (from `sizer calibrate`)"),
    num_requests: Optional[int] = typer.Option(None, "--num-requests", min=1,
                                               help=f"replay the first N requests (default: the scenario's, at most {DEFAULT_MAX_REQUESTS})"),
    num_blocks: Optional[int] = typer.Option(None, "--num-blocks", min=1, help="KV blocks for both runs (default: max_num_seqs full-length sequences, capped by memory)"),
    weights: Optional[Path] = typer.Option(None, "--weights", help="folder of a local safetensors checkpoint (default: random weights)"),
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
) -> None:
    """Measured vs predicted TTFT, ITL, E2E (p50/p95/p99) and throughput for one workload."""
    report = run_validation(scenario, profile, num_requests, num_blocks, weights)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
        return
    from rich.console import Console

    render(report, Console())


def run_validation(scenario_path: Path, profile_path: Path, num_requests: int | None, num_blocks: int | None,
                   weights: Path | None = None):
    from engine.profile import load_profile
    from sizer.sizing.resolve import model_of
    from sizer.inputs.scenario import load_scenario

    s = load_scenario(scenario_path)
    prof = load_profile(profile_path)
    spec = model_of(s)
    header, f = prof.header, s.file
    if spec.name != header.model.name:
        raise InputError(f, "model.name", f"{spec.name!r}, but the profile was calibrated for {header.model.name!r}")
    tp = s.deployment.tensor_parallel_size
    if tp != 1 or s.deployment.pipeline_parallel_size != 1 or header.model.tp != 1:
        raise InputError(f, "deployment.tensor_parallel_size", "the bundled engine validates on one device (TP 1, PP 1) only")
    if s.deployment.speculative_config is not None or s.deployment.disaggregated is not None:
        raise InputError(f, "deployment", "the bundled engine runs neither speculative decoding nor disaggregated pools")

    from engine.device import cpu_device, gpu_device
    from engine.validate import validate
    from simulator.scheduler import SchedulerConfig

    if header.device.kind == "cuda":
        from sizer.inputs.hardware import load_hardware

        device = gpu_device(load_hardware(header.device.id, str(profile_path), "device.id"))
    else:
        device = cpu_device(header.device.threads or 1)
    settings = _settings(s, spec)
    scheduler = SchedulerConfig(max_num_seqs=settings["max_num_seqs"], max_num_batched_tokens=settings["max_num_batched_tokens"],
                                enable_chunked_prefill=settings["enable_chunked_prefill"],
                                preemption_mode=settings["preemption_mode"], max_model_len=settings["max_model_len"])
    from sizer.sizing.simulate import workload_of

    requests = list(workload_of(s, num_requests or min(s.workload.num_requests, DEFAULT_MAX_REQUESTS)).requests())
    return validate(spec, prof, device, scheduler, num_blocks, settings["block_size"], settings["enable_prefix_caching"],
                    requests, s.workload.seed, weights)


def _settings(s, spec) -> dict:
    """Scheduler settings: the scenario's, else its engine preset's (simulator/presets.py)."""
    from sizer.sizing.presets import preset

    defaults, d = preset(s.deployment.engine), s.deployment
    names = ("block_size", "max_num_seqs", "max_num_batched_tokens", "enable_chunked_prefill",
             "enable_prefix_caching", "preemption_mode")
    out = {n: getattr(d, n) if getattr(d, n) is not None else getattr(defaults, n) for n in names}
    out["max_model_len"] = d.max_model_len or spec.max_position_embeddings
    if out["preemption_mode"] != "recompute":
        raise InputError(s.file, "deployment.preemption_mode", "the bundled engine preempts by recompute only")
    return out


def render(report, console) -> None:
    from rich.table import Table

    table = Table(title=f"sizer validate: {report.model} on {report.device}, {report.num_requests} requests")
    for col in ("metric", "measured (engine)", "predicted (simulator)", "relative error"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for r in report.rows:
        table.add_row(r.metric, f"{r.measured:,.2f}", f"{r.predicted:,.2f}", f"{r.relative_error:+.1%}")
    console.print(table)
    console.print(f"profile {report.profile}; engine time {report.engine_time_s:.1f} s (device clock); "
                  f"{report.cached_prompt_tokens:,} prompt tokens from the prefix cache; "
                  f"{report.mixed_steps} steps mixed prefill chunks with decodes; {report.preemptions} preemptions")
    if report.out_of_range_steps:
        console.print(f"[yellow]warning: {report.out_of_range_steps} of {report.steps_predicted} predicted steps fell "
                      f"outside the profile's measured range and were extrapolated[/yellow]")
