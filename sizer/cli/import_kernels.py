"""`sizer import-kernels`: convert aiconfigurator-core's measured operator tables for one GPU into
sizer's kernel tables (docs/engine.md). Needs the `kernels` extra (pandas reads the parquet files
with pyarrow); planning never does."""

from __future__ import annotations

from pathlib import Path

import typer

from sizer.errors import InputError
from sizer.outputs.destination import check_folder_destination, shown
from sizer.timing.aiconfigurator_import import convert, write_tables
from sizer.timing.kernel_tables import KERNELS_DIR


def command(
    source: Path = typer.Argument(..., help="aiconfigurator-core's package folder (site-packages/aiconfigurator_core) "
                                            "or an unpacked wheel"),
    gpu: str = typer.Option(..., help="the GPU's hardware profile id (its profile's aiconfigurator_system names "
                                      "aiconfigurator's system: h100-sxm, h200, b200, ...)"),
    framework: str = typer.Option("vllm", help="the framework whose measurements to convert (vllm, sglang, trtllm)"),
    out: Path = typer.Option(KERNELS_DIR, "--out", help="folder the tables' folder is written into (default: the "
                                                        "bundled kernels folder, which plans read)"),
    all_shapes: bool = typer.Option(False, "--all-shapes", help="keep every measured shape, not only those the "
                                                                "catalog's models need at TP 1, 2, 4, 8"),
) -> None:
    """Write `<gpu>-<framework>-<version>/`: tables.yaml (provenance) and gzip CSV tables."""
    # checked before the tables are read and converted, as calibrate's --out: a file, FIFO, dangling link or a path
    # under /dev (/dev/shm took the tables) was written into, or refused only after the work
    check_folder_destination(out, "--out")
    header, rows = convert(source, gpu, framework, prune_to_catalog=not all_shapes)
    folder = out / f"{header['gpu']}-{header['engine']}-{header['engine_version']}"
    try:
        write_tables(folder, header, rows)
    except OSError as exc:
        raise InputError(shown(folder), "--out", f"cannot write here: {exc.strerror or exc}") from None
    typer.echo(f"wrote {folder}")
    for name, table in rows.items():
        typer.echo(f"  {name}: {len(table):,} measured points")
