"""`sizer sweep SWEEP.yaml`: every point of a design space sized, one Parquet row each, resumable."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from sizer.cli.flags import MAX_WORKERS, check_choices, check_range
from sizer.cli.options import read_scenario_data
from sizer.cli.progress import progress
from sizer.cli.render import terminal
from sizer.errors import InputError
from sizer.inputs.sweep_file import load_sweep
from sizer.outputs.sweep_store import ResultStore
from sizer.sizing.sweep import build_sweep, check_resumable, run_sweep, tasks
from sizer.sizing.sweep_backends import check_ray
from sizer.words import count
from validation.errors import excerpt

BACKENDS = ("local", "ray")


def command(
    sweep_file: Path = typer.Argument(..., help="sweep YAML: a base scenario, axes, constraints (scenarios/sweeps/)"),
    results: Path | None = typer.Option(None, "--results",
                                        help="Parquet file of results, one row per point (default NAME.parquet); "
                                             "points already in it are skipped"),
    backend: str = typer.Option("local", help="local (a process pool) or ray (a Ray cluster; needs sizer's ray extra)"),
    workers: int = typer.Option(os.cpu_count() or 1, help="parallel processes (ray: the CPUs of a cluster started "
                                                          "here)"),
    address: str | None = typer.Option(None, help="the Ray cluster to join (ray://host:10001 or auto); "
                                                  "default a local one"),
) -> None:
    """Size every point of a sweep (models x GPUs x formats x splits x engines x rates x SLOs) on a process pool
    or a Ray cluster; prune what the analytic bounds rule out; stream one Parquet row per point."""
    check_choices((backend,), "--backend", BACKENDS)
    check_range(workers, "--workers", 1, MAX_WORKERS)
    if address is not None and backend != "ray":
        raise InputError(None, "--address", "needs --backend ray")
    if backend == "ray":
        check_ray()
    sweep_file_data = load_sweep(sweep_file)
    data = read_scenario_data(sweep_file_data.scenario_path())
    # the results file checked (and its rows read) before the axes are: a million values take minutes to check
    store = ResultStore(results or default_results(sweep_file_data.name, sweep_file), "--results",
                        (sweep_file, sweep_file_data.scenario_path()))
    done = store.done()
    with progress("sweeping", "points") as update:
        sweep = build_sweep(sweep_file_data, data, update)
        every = tasks(sweep, update)
        check_resumable(sweep, done, every)     # before anything is written: a refusal leaves the file and parts alone
        try:
            summary = run_sweep(sweep, done, store.add, backend, workers, address, update, every=every)
        except InputError:
            if store.added:         # refused after rows of this run: they are kept; before any, nothing is written
                store.close()
            raise
        except BaseException:
            store.close()
            raise
        rows = store.close()
    pruned = sum(summary.pruned.values())
    by = ", ".join(f"{k} {v}" for k, v in sorted(summary.pruned.items()))
    terminal().print(f"{sweep.name}: {count(summary.points, 'point')}; {summary.already_done} already in "
                     f"{store.path}, {pruned} pruned before simulation{f' ({by})' if by else ''}, "
                     f"{summary.simulated} simulated on {backend} in {summary.elapsed_s:.1f} s "
                     f"({summary.points_per_s:.2f} points/s); {count(rows, 'row')} in {store.path}",
                     markup=False, highlight=False)
    for digest, why in summary.failed:
        typer.echo(f"failed: point {digest[:12]}: {why}", err=True)
    if summary.failed:
        typer.echo(f"{count(len(summary.failed), 'point')} failed every try and were not written; run the sweep "
                   "again to retry them", err=True)
        raise typer.Exit(1)


def default_results(name: str, sweep_file: Path) -> Path:
    """`NAME.parquet` in the working folder, when the sweep's name is a plain file name: a name with a path separator,
    `..` or a control character would put the results elsewhere (or in a name no shell lists), so it is refused."""
    if name in (".", "..") or any(c in name for c in "/\\") or not name.isprintable():
        raise InputError(str(sweep_file), "name", f"{excerpt(name)} names the results file when --results is not "
                                                  "given; expected a plain file name (no '/', '\\', '..' or control "
                                                  "characters), or give --results")
    return Path(f"{name}.parquet")
