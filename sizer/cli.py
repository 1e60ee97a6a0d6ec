"""The `sizer` command line. Heavy imports (pandas, simpy, torch) happen inside commands only."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Optional

import typer

from sizer.errors import InputError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Capacity planner for LLM inference: memory, parallelism, simulated latency, goodput and cost.")


def input_errors_exit_2(command):
    """Wrap a command so that bad input (InputError) is one line on stderr and exit code 2."""
    @functools.wraps(command)
    def guarded(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except InputError as error:
            typer.echo(f"error: {error.one_line()}", err=True)
            raise typer.Exit(2) from None
    return guarded


def build_scenario(scenario: Optional[Path], overrides: dict):
    """A scenario from a file (with flag overrides) or from flags alone."""
    from sizer.scenario import load_scenario, scenario_from_dict

    overrides = {k: v for k, v in overrides.items() if v is not None}
    if scenario is not None:
        return load_scenario(scenario, overrides)
    if "model.name" not in overrides or "hardware.gpu" not in overrides:
        raise InputError(None, "--model/--gpu", "give a scenario file, or both --model and --gpu")
    defaults = {"workload.arrival.rate_per_s": 1.0,
                "workload.prompt_tokens": {"distribution": "fixed", "value": 1024},
                "workload.output_tokens": {"distribution": "fixed", "value": 256}}
    return scenario_from_dict({}, None, {**defaults, **overrides}, default_name="command-line")


@app.command()
@input_errors_exit_2
def plan(
    scenario: Optional[Path] = typer.Argument(None, help="scenario YAML (see docs/scenario.md)"),
    as_json: bool = typer.Option(False, "--json", help="print the plan as JSON"),
    model: Optional[str] = typer.Option(None, help="catalog name or config.json path"),
    gpu: Optional[str] = typer.Option(None, help="accelerator profile (`sizer gpus`)"),
    tp: Optional[int] = typer.Option(None, "--tp", help="tensor_parallel_size"),
    pp: Optional[int] = typer.Option(None, "--pp", help="pipeline_parallel_size"),
    weights: Optional[str] = typer.Option(None, help="weight format: bf16, fp16, fp8, int8, awq, gptq, nvfp4, mxfp4"),
    kv_cache_dtype: Optional[str] = typer.Option(None, help="auto, bf16, fp16, fp8"),
    max_model_len: Optional[int] = typer.Option(None, help="longest context per sequence"),
    rate: Optional[float] = typer.Option(None, help="arrival rate, requests per second"),
    profile: Optional[Path] = typer.Option(None, "--profile", help="calibrated profile folder (sizer calibrate): measured step times"),
    simulate: bool = typer.Option(False, "--simulate", help="add simulated latency at the scenario's rate and the goodput rate"),
) -> None:
    """Memory, parallel split, Little's-law capacity, step times and cost for a scenario."""
    overrides = {"model.name": model, "hardware.gpu": gpu, "deployment.tensor_parallel_size": tp,
                 "deployment.pipeline_parallel_size": pp, "deployment.quantization": weights,
                 "deployment.kv_cache_dtype": kv_cache_dtype, "deployment.max_model_len": max_model_len,
                 "workload.arrival.rate_per_s": rate,
                 "hardware.calibrated_profile": str(profile.resolve()) if profile else None}

    from sizer.plan import make_plan
    from sizer.resolve import resolve

    resolved = resolve(build_scenario(scenario, overrides))
    result = make_plan(resolved)
    if simulate:
        from sizer.plan_sim import add_simulation
        result = add_simulation(result, resolved)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
    else:
        from rich.console import Console
        from sizer.render import render_plan
        render_plan(result, Console())


@app.command()
def models() -> None:
    """List the model catalog."""
    from rich.console import Console
    from rich.table import Table

    from sizer.model_spec import catalog_names, load_model
    from sizer.weights import parameter_count

    table = Table(title="Model catalog (any Hugging Face config.json path works too)")
    for col in ("name", "architecture", "parameters (B)", "active (B)", "layers", "attention heads / KV heads", "max context"):
        table.add_column(col, no_wrap=col == "name")
    for name in catalog_names():
        m = load_model(name)
        counts = parameter_count(m)
        heads = "MLA" if m.is_mla else f"{m.num_attention_heads} / {m.num_kv_heads}"
        table.add_row(name, m.architecture, f"{counts.total / 1e9:.2f}", f"{counts.active / 1e9:.2f}", str(m.num_layers),
                      heads, f"{m.max_position_embeddings:,}")
    Console().print(table)


@app.command()
def gpus() -> None:
    """List the accelerator profiles."""
    from rich.console import Console
    from rich.table import Table

    from sizer.hardware import all_profiles
    from sizer.memory import GB, GiB

    table = Table(title="Accelerator profiles (hardware_profiles/)")
    for col in ("id", "name", "memory GB / GiB", "bandwidth TB/s", "bf16 dense TFLOP/s", "fp8 TFLOP/s", "$/GPU-hour", "aliases"):
        table.add_column(col, no_wrap=col == "id")
    for spec in all_profiles().values():
        fp8 = spec.peak_flops_per_s.get("fp8")
        price = f"{spec.price_usd_per_gpu_hour:.2f}" if spec.price_usd_per_gpu_hour is not None else "-"
        table.add_row(spec.id, spec.name, f"{spec.memory_bytes / GB:.1f} / {spec.memory_bytes / GiB:.1f}",
                      f"{spec.memory_bandwidth_bytes_per_s / 1e12:.2f}", f"{spec.peak_flops('bf16') / 1e12:,.0f}",
                      f"{fp8 / 1e12:,.0f}" if fp8 else "-", price, ", ".join(spec.aliases))
    Console().print(table)


# Commands that live in their own modules (each imports its heavy dependencies lazily).
from sizer.commands import calibrate, check, report, search, simulate as simulate_cmd, validate  # noqa: E402

app.command("simulate")(input_errors_exit_2(simulate_cmd.command))
app.command("search")(input_errors_exit_2(search.command))
app.command("report")(input_errors_exit_2(report.command))
app.command("check")(input_errors_exit_2(check.command))
app.command("calibrate")(input_errors_exit_2(calibrate.command))
app.command("validate")(input_errors_exit_2(validate.command))


def main() -> None:  # pragma: no cover - `python -m sizer`
    sys.exit(app())
