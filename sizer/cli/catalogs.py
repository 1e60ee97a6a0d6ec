"""`sizer models` and `sizer gpus`: the bundled catalogs."""

from __future__ import annotations

from dataclasses import dataclass

import typer
from rich.table import Table

from sizer.analytic.memory import GB, GiB
from sizer.analytic.weights import parameter_count
from sizer.cli.options import WIDE
from sizer.cli.render import number_column, terminal, text_column
from sizer.inputs.hardware import all_profiles
from sizer.inputs.layers import FULL, Attention, LatentAttention
from sizer.inputs.model_spec import ModelSpec, catalog_names, checkpoint_model, load_config
from sizer.outputs.emit import model_reference
from sizer.outputs.serialise import to_json
from sizer.sizing.plan import attention_kind
from sizer.words import dollars

JSON_HELP = "print the catalog as JSON"
FULL_CATALOG = 120      # narrower (80 in a pipe): the listings leave out names and shapes, which --wide prints


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
    mixer_kinds: str               # the mixers' kinds alone, e.g. "Mamba-2 + GQA" (the 80-column listing)
    max_position_embeddings: int


def mixer_kinds(m: ModelSpec) -> str:
    """The kinds of a model's mixers, each once, in layer order: "GQA", "MLA", "GQA window + GQA" (sliding or
    chunked layers), "Mamba-2 + GQA"; a layer without a mixer is left out. The full shapes: `attention_kind`."""
    kinds = []
    for layer in m.layers:
        mixer = layer.mixer
        if isinstance(mixer, LatentAttention):
            text = "MLA"
        elif isinstance(mixer, Attention):
            text = ("MHA" if mixer.num_kv_heads == mixer.num_heads else "MQA" if mixer.num_kv_heads == 1 else "GQA")
            text += "" if mixer.span == FULL else " window"
        else:
            text = mixer.label.split(" (")[0]
        if text != "none" and text not in kinds:
            kinds.append(text)
    return " + ".join(kinds) or "none"


def catalog_models() -> list[CatalogModel]:
    out = []
    for name in catalog_names():
        checkpoint = load_config(name)            # read once: the model and its catalog metadata
        m = checkpoint_model(checkpoint)
        counts = parameter_count(m)
        repo = model_reference(name, checkpoint.config)
        out.append(CatalogModel(name, repo if repo != name else None, m.architecture, counts.total, counts.active,
                                m.num_layers, attention_kind(m), mixer_kinds(m), m.max_position_embeddings))
    return out


def models(as_json: bool = typer.Option(False, "--json", help=JSON_HELP), wide: bool = WIDE) -> None:
    """List the model catalog."""
    rows = catalog_models()
    if as_json:
        typer.echo(to_json(rows))
        return
    console = terminal(wide)
    full = console.width >= FULL_CATALOG          # --wide: always
    table = Table(title="Model catalog (any Hugging Face config.json path works too)", title_justify="left",
                  caption=None if full else "mixers: their kinds (window: sliding or chunked attention); --wide: "
                  "their shapes and the architecture", caption_justify="left", box=None, pad_edge=False)
    text_column(table, "name", no_wrap=True)
    if full:
        text_column(table, "architecture")
    for header in ("parameters\n(B)", "active\n(B)", "layers", "max\ncontext"):
        number_column(table, header)
    text_column(table, "mixers")
    for m in rows:
        table.add_row(m.name, *((m.architecture,) if full else ()), f"{m.parameters / 1e9:,.2f}",
                      f"{m.parameters_active / 1e9:,.2f}", str(m.layers), f"{m.max_position_embeddings:,}",
                      m.mixers if full else m.mixer_kinds)
    console.print(table)


def gpus(as_json: bool = typer.Option(False, "--json", help=JSON_HELP), wide: bool = WIDE) -> None:
    """List the accelerator profiles."""
    if as_json:
        typer.echo(to_json(list(all_profiles().values())))
        return
    console = terminal(wide)
    full = console.width >= FULL_CATALOG          # --wide: always
    table = Table(title="Accelerator profiles (hardware_profiles/)", title_justify="left", box=None, pad_edge=False,
                  caption=None if full else "--wide: each profile's name and aliases too", caption_justify="left")
    text_column(table, "id", no_wrap=True)
    if full:
        text_column(table, "name")
    for header in ("memory\nGB", "memory\nGiB", "TB/s", "bf16\nTFLOP/s", "fp8\nTFLOP/s", "$/GPU\n-hour"):
        number_column(table, header)
    if full:
        text_column(table, "aliases")
    for spec in all_profiles().values():
        fp8 = spec.peak_flops_per_s.get("fp8")
        price = dollars(spec.price_usd_per_gpu_hour) if spec.price_usd_per_gpu_hour is not None else "-"
        table.add_row(spec.id, *((spec.name,) if full else ()), f"{spec.memory_bytes / GB:,.1f}",
                      f"{spec.memory_bytes / GiB:,.1f}", f"{spec.memory_bandwidth_bytes_per_s / 1e12:.2f}",
                      f"{spec.peak_flops('bf16') / 1e12:,.0f}", f"{fp8 / 1e12:,.0f}" if fp8 else "-", price,
                      *((", ".join(spec.aliases),) if full else ()))
    console.print(table)
