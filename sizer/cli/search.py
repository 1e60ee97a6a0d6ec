"""`sizer search SCENARIO`: rank GPU x split x format configurations by cost for the scenario's SLO."""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from pathlib import Path
from typing import Optional

import typer
import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from sizer.cli.options import read_scenario_data, space_from_options
from sizer.errors import InputError
from sizer.inputs.scenario import load_scenario
from sizer.outputs.serialise import to_json
from sizer.sizing.result import GoodputSettings
from sizer.sizing.search import SearchResult, SearchSettings, SearchSpace, search


def command(
    scenario: Path = typer.Argument(..., help="scenario YAML: model, workload and SLO (its deployment is the starting point)"),
    gpus: Optional[str] = typer.Option(None, help="comma-separated profiles to try (default: all, `sizer gpus`)"),
    tp: Optional[str] = typer.Option(None, "--tp", help="tensor parallel sizes, default 1,2,4,8"),
    pp: Optional[str] = typer.Option(None, "--pp", help="pipeline parallel sizes, default 1"),
    weights: Optional[str] = typer.Option(None, help="weight formats, default bf16,fp8"),
    kv_cache_dtype: Optional[str] = typer.Option(None, "--kv-cache-dtype", help="KV formats, default auto,fp8"),
    speculative: bool = typer.Option(False, "--speculative", help="also try the scenario's speculative_config on and off"),
    workers: int = typer.Option(os.cpu_count() or 1, min=1, help="parallel processes"),
    requests: int = typer.Option(GoodputSettings.num_requests, min=50,
                                 help="simulated requests per rate in the goodput search (plan, check: the default)"),
    max_replicas: int = typer.Option(32, min=1, help="reject configurations that would need more replicas than this"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
    csv: Optional[Path] = typer.Option(None, "--csv", help="also write one row per configuration here"),
    show_rejected: bool = typer.Option(False, "--all", help="list every rejected configuration too"),
) -> None:
    """Find the cheapest deployment that meets the SLO: sweep GPUs, TP/PP, weight and KV formats."""
    data = read_scenario_data(scenario)
    space = space_from_options(gpus, tp, pp, weights, kv_cache_dtype, speculative)
    err = Console(stderr=True)
    # No refresh thread (auto_refresh=False): the search forks its worker processes.
    with Progress(TextColumn("searching"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True, auto_refresh=False) as bar:
        task = bar.add_task("search", total=None)
        settings = SearchSettings(GoodputSettings(num_requests=requests), max_replicas)
        result = search(data, str(scenario), space, settings, workers,
                        lambda done, total: bar.update(task, completed=done, total=total, refresh=True))
    if csv:
        write_csv(result, csv)
    if as_json:
        typer.echo(to_json(to_dict(result)))
    else:
        render(result, str(scenario), Console(), show_rejected)


ROW_FIELDS = ("status", "binding", "reason", "gpus_per_replica", "kv_cache_gib_per_gpu", "goodput_rate_per_s",
              "replicas", "gpus", "usd_per_hour", "usd_per_million_output_tokens", "operating_rate_per_s", "share_met",
              "ttft_p95_ms", "tpot_p95_ms", "e2e_p95_ms", "pareto")


def rows(result: SearchResult) -> list[dict]:
    """One flat record per configuration, in rank order (the sizing pipeline's figures, for CSV and JSON)."""
    return [{"rank": rank, **dataclasses.asdict(o.candidate), "label": o.candidate.label,
             **{name: getattr(o, name) for name in ROW_FIELDS},
             "sizing_status": o.sizing.status.value if o.sizing else None}
            for rank, o in enumerate(result.outcomes, 1)]


def to_dict(result: SearchResult) -> dict:
    ranked = rows(result)
    return {"scenario": result.scenario, "target_rate_per_s": result.target_rate_per_s,
            "required_share": result.required_share, "settings": result.settings,
            "recommended": ranked[0] if result.recommended else None, "notes": result.notes, "configurations": ranked}


def write_csv(result, path: Path) -> None:
    import pandas as pd

    pd.DataFrame(rows(result)).to_csv(path, index=False)


def render(result, scenario_path: str, console, show_rejected: bool) -> None:
    ok = [o for o in result.outcomes if o.status == "ok"]
    rejected = [o for o in result.outcomes if o.status != "ok"]
    table = Table(title=f"{result.scenario}: {len(result.outcomes)} configurations for {result.target_rate_per_s:g} req/s, "
                        f"{result.required_share:.0%} of requests within the SLO", title_justify="left",
                  caption="goodput: req/s per replica; TTFT, TPOT, E2E: p95 ms at the operating point; ◆ Pareto front "
                          "of cost per hour against p95 E2E", caption_justify="left")
    money = lambda v: "-" if v is None else f"{v:,.2f}"  # noqa: E731
    columns = [("#", lambda i, o: str(i), True), ("configuration", lambda i, o: ("◆ " if o.pareto else "  ") + o.candidate.label, True),
               ("GPU/rep", lambda i, o: str(o.gpus_per_replica), False), ("goodput", lambda i, o: ("≥ " if o.binding == "none" else "") + f"{o.goodput_rate_per_s:.2f}", True),
               ("rep", lambda i, o: str(o.replicas), False), ("GPUs", lambda i, o: str(o.gpus), True),
               ("$/hour", lambda i, o: money(o.usd_per_hour), True), ("$/Mtok", lambda i, o: money(o.usd_per_million_output_tokens), False),
               ("TTFT", lambda i, o: f"{o.ttft_p95_ms:,.0f}", True), ("TPOT", lambda i, o: f"{o.tpot_p95_ms:.1f}", True),
               ("E2E", lambda i, o: f"{o.e2e_p95_ms:,.0f}", False), ("binds", lambda i, o: o.binding, True)]
    columns = [c for c in columns if c[2] or console.width >= 120]      # narrow terminals: the essentials
    for name, _, _ in columns:
        table.add_column(name, justify="left" if name in ("configuration", "binds") else "right")
    for i, o in enumerate(ok, 1):
        table.add_row(*(cell(i, o) for _, cell, _ in columns))
    console.print(table)
    counts = Counter(o.binding for o in rejected)
    console.print(f"rejected: {len(rejected)} ({', '.join(f'{k} {v}' for k, v in counts.most_common()) or 'none'})")
    if show_rejected:
        for o in rejected:
            console.print(f"  ✗ {o.candidate.label}: {o.binding}: {o.reason}")
    best = result.recommended
    if best:
        console.print(f"[bold green]recommended[/]: {best.replicas} x {best.candidate.label} = {best.gpus} GPUs, "
                      f"${best.usd_per_hour:,.2f}/hour; binds on {best.binding}")
        console.print(f"re-check: sizer plan {scenario_path} {best.candidate.plan_flags()} --simulate")
    else:
        console.print("[bold red]no priced configuration meets the SLO[/]")
    for note in result.notes:
        console.print(f"[dim]note: {note}[/]")
