"""`sizer models` and `sizer gpus`: the bundled catalogs."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from sizer.analytic.memory import GB, GiB
from sizer.analytic.weights import parameter_count
from sizer.inputs.hardware import all_profiles
from sizer.inputs.model_spec import catalog_names, load_model
from sizer.sizing.plan import attention_kind


def models() -> None:
    """List the model catalog."""
    table = Table(title="Model catalog (any Hugging Face config.json path works too)")
    for col in ("name", "architecture", "parameters (B)", "active (B)", "layers", "mixers", "max context"):
        table.add_column(col, no_wrap=col == "name")
    for name in catalog_names():
        m = load_model(name)
        counts = parameter_count(m)
        table.add_row(name, m.architecture, f"{counts.total / 1e9:.2f}", f"{counts.active / 1e9:.2f}",
                      str(m.num_layers), attention_kind(m), f"{m.max_position_embeddings:,}")
    Console().print(table)


def gpus() -> None:
    """List the accelerator profiles."""
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


