"""`sizer models` and `sizer gpus`: the bundled catalogs."""

from __future__ import annotations

from dataclasses import dataclass

import typer
from rich.console import Console
from rich.table import Table

from sizer.analytic.memory import GB, GiB
from sizer.analytic.weights import parameter_count
from sizer.inputs.hardware import all_profiles
from sizer.inputs.model_spec import catalog_names, checkpoint_model, load_config
from sizer.outputs.emit import model_reference
from sizer.outputs.serialise import to_json
from sizer.sizing.plan import attention_kind

JSON_HELP = "print the catalog as JSON"


@dataclass(frozen=True)
class CatalogModel:
    """One row of `sizer models`."""
    name: str
    hf_repo: str | None
    architecture: str
    parameters: int
    parameters_active: int
    layers: int
    mixers: str
    max_position_embeddings: int


def catalog_models() -> list[CatalogModel]:
    out = []
    for name in catalog_names():
        checkpoint = load_config(name)            # read once: the model and its catalog metadata
        m = checkpoint_model(checkpoint)
        counts = parameter_count(m)
        repo = model_reference(name, checkpoint.config)
        out.append(CatalogModel(name, repo if repo != name else None, m.architecture, counts.total, counts.active,
                                m.num_layers, attention_kind(m), m.max_position_embeddings))
    return out


def models(as_json: bool = typer.Option(False, "--json", help=JSON_HELP)) -> None:
    """List the model catalog."""
    rows = catalog_models()
    if as_json:
        typer.echo(to_json(rows))
        return
    table = Table(title="Model catalog (any Hugging Face config.json path works too)")
    for col in ("name", "architecture", "parameters (B)", "active (B)", "layers", "mixers", "max context"):
        table.add_column(col, no_wrap=col == "name")
    for m in rows:
        table.add_row(m.name, m.architecture, f"{m.parameters / 1e9:.2f}", f"{m.parameters_active / 1e9:.2f}",
                      str(m.layers), m.mixers, f"{m.max_position_embeddings:,}")
    Console().print(table)


def gpus(as_json: bool = typer.Option(False, "--json", help=JSON_HELP)) -> None:
    """List the accelerator profiles."""
    if as_json:
        typer.echo(to_json(list(all_profiles().values())))
        return
    table = Table(title="Accelerator profiles (hardware_profiles/)")
    for col in ("id", "name", "memory GB / GiB", "bandwidth TB/s", "bf16 dense TFLOP/s", "fp8 TFLOP/s", "$/GPU-hour",
                "aliases"):
        table.add_column(col, no_wrap=col == "id")
    for spec in all_profiles().values():
        fp8 = spec.peak_flops_per_s.get("fp8")
        price = f"{spec.price_usd_per_gpu_hour:.2f}" if spec.price_usd_per_gpu_hour is not None else "-"
        table.add_row(spec.id, spec.name, f"{spec.memory_bytes / GB:.1f} / {spec.memory_bytes / GiB:.1f}",
                      f"{spec.memory_bandwidth_bytes_per_s / 1e12:.2f}", f"{spec.peak_flops('bf16') / 1e12:,.0f}",
                      f"{fp8 / 1e12:,.0f}" if fp8 else "-", price, ", ".join(spec.aliases))
    Console().print(table)


