"""`sizer plan` and `sizer simulate` on a gateway document (a top-level `gateway:`): per pool, per class, per
route and gateway-wide tables or JSON; plan --simulate adds the cheapest sizing. `sizer report` on one is in
sizer/cli/report.py (`gateway_report`), so that plan and simulate do not import the report renderer."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from simulator import OUTCOMES, REQUEST_CHUNK_ROWS, GatewayRecords
from sizer.cli.progress import progress
from sizer.cli.render import number_column, terminal, text_column
from sizer.cli.terminal_text import styled
from sizer.errors import InputError
from sizer.inputs.gateway import load_gateway
from sizer.outputs.destination import csv_frames
from sizer.outputs.serialise import to_json
from sizer.sizing.gateway import GatewayAnswer, plan_gateway, resolve_gateway, run_gateway


def refuse_flags(flags: dict[str, object]) -> None:
    """Scenario flags do not apply to a gateway document: name the first one given."""
    for flag, value in flags.items():
        if value not in (None, False):
            raise InputError(None, flag, "does not apply to a gateway scenario (each pool states its own deployment)")


def plan(path: Path, as_json: bool, search: bool, wide: bool = False) -> None:
    doc, name = load_gateway(path)
    with progress("searching", "configurations", show=search) as update:
        a = plan_gateway(resolve_gateway(doc, name, str(path)), search, update)
    if as_json:
        typer.echo(to_json(a))
    else:
        render(a, terminal(wide))


def simulate(path: Path, as_json: bool, num_requests: int | None, requests_csv: Path | None,
             wide: bool = False) -> None:
    doc, name = load_gateway(path)
    rg = resolve_gateway(doc, name, str(path))
    with progress("simulating", "requests", num_requests or rg.config.num_requests) as update:
        if requests_csv is None:
            result, a = run_gateway(rg, num_requests, progress=update)
        else:
            with csv_frames(requests_csv, "--requests-csv") as write:
                def rows(records: GatewayRecords, start: int, stop: int) -> None:    # final records, in order
                    for table in records_tables(records, start=start, stop=stop):
                        write(table)
                result, a = run_gateway(rg, num_requests, progress=update, rows=rows)
    if as_json:
        typer.echo(to_json(a))
        return
    console = terminal(wide)
    render(a, console)
    if requests_csv is not None:
        console.print(f"per-request records (pool, route, fallbacks): {requests_csv}")


def records_tables(records: GatewayRecords, rows: int | None = None, start: int = 0,
                   stop: int | None = None) -> Iterator[dict[str, np.ndarray]]:
    """One row per request [start, stop) (default: every one), in `GatewayRecord`'s fields, built from the records'
    columns `rows` requests at a time (default REQUEST_CHUNK_ROWS; dicts of columns, in request order; one, empty,
    for no requests)."""
    rows = rows or REQUEST_CHUNK_ROWS
    stop = len(records) if stop is None else stop
    names = {k: np.array(v, object) for k, v in (("class", records.class_names), ("data", records.data_classes),
                                                  ("route", ("", *records.route_names)),
                                                  ("target", records.target_names), ("outcome", OUTCOMES))}
    ids = tuple(sorted(i for i in by_id if start <= i < stop)              # bisected: in request order
                for by_id in (records.fallbacks, records.reject_reasons))
    for a in range(start, max(stop, start + 1), rows):
        yield _records_table(records, names, ids, a, min(a + rows, stop))


def _records_table(records: GatewayRecords, names: dict[str, np.ndarray], ids: tuple[list[int], list[int]],
                   start: int, stop: int) -> dict[str, np.ndarray]:
    """Requests [start, stop) as columns; `ids`: the request ids of the fallbacks' and the reject reasons' entries,
    in order."""
    part = slice(start, stop)
    fallbacks = np.full(stop - start, "", object)
    reasons = np.full(stop - start, "", object)
    for cells, by_id, keys, text in ((fallbacks, records.fallbacks, ids[0],
                                      lambda skipped: " > ".join(f"{t}: {why}" for t, why in skipped)),
                                     (reasons, records.reject_reasons, ids[1], str)):
        mine = keys[bisect_left(keys, start):bisect_left(keys, stop)]
        cells[[i - start for i in mine]] = [text(by_id[i]) for i in mine]
    cls = records.cls[part]
    return {
        "request_id": np.arange(start, stop), "class_name": names["class"][cls], "data_class": names["data"][cls],
        "difficulty": records.difficulty[part], "arrival_s": records.arrival_s[part],
        "prompt_tokens": records.prompt_tokens[part], "output_tokens": records.output_tokens[part],
        "route": names["route"][records.route[part] + 1], "first_choice": names["target"][records.first_choice[part]],
        "target": names["target"][records.target[part]], "fallbacks": fallbacks,
        "outcome": names["outcome"][records.outcome[part]], "reject_reason": reasons,
        "ttft_ms": records.ttft_ms[part], "tpot_ms": records.tpot_ms[part], "e2e_ms": records.e2e_ms[part],
        "cost_usd": records.cost_usd[part]}


def _ms(x: float) -> str:
    return f"{x:,.0f}" if math.isfinite(x) else "-"


def _usd(x: float | None) -> str:
    return "-" if x is None else f"${x:,.2f}"


# The pools table's columns: (header, numeric, cell of a pool, cell of an external endpoint). In fewer than
# WIDE_POOLS columns the latency columns are a table of their own, so that neither cuts a number.
POOL_LOAD = (("GPUs", False, lambda p: f"{p.replicas} x {p.gpus_per_replica} x\n{p.gpu}", lambda e: "-"),
             ("reqs", True, lambda p: f"{p.requests:,}", lambda e: f"{e.requests:,}"),
             ("busy", True, lambda p: f"{p.busy_share:.0%}", lambda e: "-"),
             ("batch", True, lambda p: f"{p.mean_batch_size:.1f}", lambda e: "-"),
             ("cached", True, lambda p: f"{p.prefix_cache_hit_rate:.0%}", lambda e: "-"),
             ("$/hour", True, lambda p: _usd(p.usd_per_hour), lambda e: _usd(e.usd_per_hour)),
             ("quality", True, lambda p: "-" if p.quality is None else f"{p.quality:.2f}",
              lambda e: "-" if e.quality is None else f"{e.quality:.2f}"))
POOL_LATENCY = (("TTFT\np50", True, lambda p: _ms(p.ttft.p50_ms), lambda e: _ms(e.ttft.p50_ms)),
                ("TTFT\np99", True, lambda p: _ms(p.ttft.p99_ms), lambda e: _ms(e.ttft.p99_ms)),
                ("TPOT\np99", True, lambda p: _ms(p.tpot.p99_ms), lambda e: "-"),
                ("E2E\np99", True, lambda p: _ms(p.e2e.p99_ms), lambda e: _ms(e.e2e.p99_ms)))
WIDE_POOLS = 120


def _pools(a: GatewayAnswer, console: Console) -> None:
    """Per pool (and external endpoint): load, cost and quality, and latency (ms); one table on a wide terminal."""
    parts = ([("pools", POOL_LOAD + POOL_LATENCY)] if console.width >= WIDE_POOLS
             else [("pools", POOL_LOAD), ("pools: latency, ms", POOL_LATENCY)])
    for title, columns in parts:
        t = Table(title=title, title_justify="left")
        text_column(t, "pool")
        for header, numeric, _, _ in columns:
            (number_column if numeric else text_column)(t, header)
        for p in a.pools:
            t.add_row(f"{p.name}\n{p.model}", *(cell(p) for _, _, cell, _ in columns))
        for e in a.externals:
            t.add_row(f"{e.name}\nexternal", *(cell(e) for _, _, _, cell in columns))
        console.print(t)
    console.print("  (ms; busy: share of the run a step was running, per replica; batch: mean sequences per step; "
                  "cached: prompt tokens from the prefix cache)", highlight=False)


def render(a: GatewayAnswer, console: Console) -> None:
    o = a.outcomes
    console.print(styled((a.scenario, "bold"), f": gateway at {a.rate_per_s:g} req/s, {a.num_requests:,} requests: "
                         f"{o.get('served', 0):,} served on the first choice, {o.get('fallback', 0):,} after a "
                         f"fallback, {o.get('rejected', 0):,} rejected"))
    _pools(a, console)
    t = Table(title="classes", title_justify="left")
    for col in ("class", "data", "reqs", "routed to", "fell\nback", "rejected", "E2E p99\nms", "SLO met by"):
        (text_column if col in ("class", "data", "routed to", "SLO met by") else number_column)(t, col)
    for c in a.classes:
        got = f"{c.served / max(c.requests, 1):.1%} served" if c.slo_share is None else f"{c.slo_share:.1%}"
        slo = (f"{got} (need {c.required_share:.0%}) " + ("met" if c.slo_met else "NOT met") if c.requests
               else "no requests: not judged")
        t.add_row(c.name, c.data_class, f"{c.requests:,}", ", ".join(f"{k} {v:.0%}" for k, v in c.share_routed.items()),
                  f"{c.fallback_rate:.1%}", f"{c.rejected:,}", _ms(c.e2e.p99_ms), slo)
    console.print(t)
    t = Table(title="routes", title_justify="left")
    for col in ("route", "reqs", "strong", "threshold", "fallbacks (target: reason)", "rejected"):
        (number_column if col in ("reqs", "strong", "threshold") else text_column)(t, col)
    for r in a.routes:
        t.add_row(r.name, f"{r.requests:,}", "-" if r.strong_share is None else f"{r.strong_share:.0%}",
                  "-" if r.threshold is None else f"{r.threshold:.3f}",
                  ", ".join(f"{k} x{v}" for k, v in r.fallbacks.items()) or "none",
                  ", ".join(f"{k} x{v}" for k, v in r.rejected.items()) or "none")
    console.print(t)
    quality = "" if a.quality is None else f", mean quality {a.quality:.3f}"
    console.print(f"gateway: {_usd(a.usd_per_hour)} per hour, {a.output_tokens_per_s:,.0f} output tokens/s, "
                  f"{_usd(a.usd_per_million_output_tokens)} per million output tokens{quality}; every class's SLO "
                  + ("met" if a.all_met else "NOT met"), highlight=False)
    if a.search is not None:
        s = a.search
        t = Table(title=f"cheapest sizing: {len(s.tried)} configurations, {s.num_requests:,} requests each",
                  title_justify="left")
        for col in ("replicas", "strong\nshare", "$/hour", "$/M output\ntokens", "quality", "accepted"):
            (text_column if col in ("replicas", "accepted") else number_column)(t, col)
        for c in sorted(s.tried, key=lambda c: (c.usd_per_hour is None, c.usd_per_hour or 0.0)):
            mark = "<- cheapest" if c == s.best else ""
            t.add_row(", ".join(f"{k} {v}" for k, v in c.replicas.items()),
                      "-" if c.strong_share is None else f"{c.strong_share:.0%}", _usd(c.usd_per_hour),
                      _usd(c.usd_per_million_output_tokens), "-" if c.quality is None else f"{c.quality:.3f}",
                      "yes " + mark if c.accepted else f"no: {c.why_not}")
        console.print(t)
        console.print("cheapest meeting every class's SLO: " + (
            "none of these" if s.best is None else
            f"{', '.join(f'{k} x{v}' for k, v in s.best.replicas.items())}"
            + ("" if s.best.strong_share is None else f", strong share {s.best.strong_share:.0%}")
            + f", {_usd(s.best.usd_per_hour)} per hour"), highlight=False)
    console.print("assumptions:")
    for line in a.assumptions:
        console.print(f"  {line}", highlight=False)
