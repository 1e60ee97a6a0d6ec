"""`sizer simulate`: run the scenario's workload through the discrete-event simulator (roofline
step times) and print latency percentiles, throughput, SLO attainment and cache figures."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import typer

from simulator import ROUTERS, request_tables, summarise
from sizer.cli.flags import check_range, naming_flags
from sizer.cli.options import (
    CONCURRENCY,
    ITL_MS,
    OUTPUT_TOKENS,
    PROMPT_TOKENS,
    RATE,
    TPOT_MS,
    TTFT_MS,
    WIDE,
    closed_loop_flag,
    naming_traffic_flags,
    scenario_with_flags,
    traffic_from_flags,
    traffic_sources,
)
from sizer.cli.progress import progress
from sizer.errors import InputError
from sizer.inputs.scenario import MAX_REPLICAS, MAX_REQUESTS, is_gateway, with_sources
from sizer.inputs.traffic import Traffic
from sizer.inputs.variant import Variant
from sizer.kinds import kind
from sizer.outputs.destination import check_destination, csv_frames
from sizer.outputs.serialise import to_json
from sizer.sizing.goodput import slo_of
from sizer.sizing.resolve import resolve
from sizer.sizing.simulate import DEFAULT_ROUTER, check_simulated_blocks, simulate_notes, simulate_scenario
from sizer.sizing.workload import workload_of
from validation.errors import excerpt


def command(
    scenario: Path = typer.Argument(..., help="scenario YAML (see docs/scenario.md)"),
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON"),
    requests_csv: Path | None = typer.Option(None, "--requests-csv", help="write one row per request to this CSV"),
    num_requests: int | None = typer.Option(None, "--num-requests",
                                            help="simulate N requests (default: the scenario's)"),
    replicas: int | None = typer.Option(None, "--replicas",
                                        help="replicas behind the router (default: deployment.replicas, else 1)"),
    router: str = typer.Option(DEFAULT_ROUTER, "--router", help="round_robin, least_outstanding or prefix_aware"),
    rate: float | None = RATE,
    concurrency: int | None = CONCURRENCY,
    prompt_tokens: str | None = PROMPT_TOKENS,
    output_tokens: str | None = OUTPUT_TOKENS,
    ttft_ms: float | None = TTFT_MS,
    itl_ms: float | None = ITL_MS,
    tpot_ms: float | None = TPOT_MS,
    wide: bool = WIDE,
) -> None:
    """Simulated TTFT, ITL, TPOT, E2E (p50/p95/p99), throughput, goodput and prefix-cache hits.

    The workload and SLO flags replace the scenario's rate (or, --concurrency, its arrivals by a closed loop),
    lengths (fixed) and targets."""
    if requests_csv is not None:
        check_destination(requests_csv, "--requests-csv", (scenario,))
    if is_gateway(scenario):
        check_range(num_requests, "--num-requests", 1, MAX_REQUESTS)
        gateway = kind("gateway")
        gateway.refuse_flags({"--replicas": replicas, "--router": router if router != DEFAULT_ROUTER else None,
                              "--rate": rate, "--concurrency": concurrency, "--prompt-tokens": prompt_tokens,
                              "--output-tokens": output_tokens,
                              "--ttft-ms": ttft_ms, "--itl-ms": itl_ms, "--tpot-ms": tpot_ms})
        return gateway.simulate(scenario, as_json, num_requests, requests_csv, wide)
    traffic = traffic_from_flags(rate, prompt_tokens, output_tokens, ttft_ms, itl_ms, tpot_ms=tpot_ms)
    variant = closed_loop_flag(concurrency, rate)
    if requests_csv is None:
        scenario_obj, result, summary, notes = run(scenario, num_requests, replicas, router, traffic=traffic,
                                                   variant=variant)
    else:
        with csv_frames(requests_csv, "--requests-csv") as write:
            def rows(columns: dict, reasons: dict) -> None:     # a chunk of finished requests, in request order
                for table in request_tables(columns, reasons):
                    write(table)
            scenario_obj, result, summary, notes = run(scenario, num_requests, replicas, router, traffic=traffic,
                                                       variant=variant, rows=rows)
            if not len(result.columns["request_id"]):         # no request: the header alone
                write(next(request_tables(result.columns, result.reject_reasons)))
    if as_json:
        typer.echo(to_json({"scenario": scenario_obj.name, **vars(summary), "notes": notes}))
        return
    tables = kind("tables")
    console = tables.terminal(wide)
    tables.render_simulation_metrics(scenario_obj.name, summary, console, requests_csv, result.num_replicas)
    for note in notes:
        console.print(f"note: {note}", highlight=False)


def run(path: Path, num_requests: int | None, replicas: int | None, router: str,
        traffic: Traffic = Traffic(), variant: Variant | None = None, rows: Callable[[dict, dict], None] | None = None):
    """The scenario with the flags, simulated (its progress on stderr; `rows`: `simulator.simulate`'s), its
    summary, and the notes on what of it the run left out or cut (`simulate_notes`). --num-requests states
    workload.num_requests, as the file may: it cuts a trace as that field does."""
    variant = variant or Variant()
    if router not in ROUTERS:
        raise InputError(None, "--router", f"{excerpt(router)}; expected one of {', '.join(ROUTERS)}")
    check_range(num_requests, "--num-requests", 1, MAX_REQUESTS)
    check_range(replicas, "--replicas", 1, MAX_REPLICAS)
    sources = traffic_sources(traffic)
    if num_requests is not None:
        variant = dataclasses.replace(variant, num_requests=num_requests)
        sources["workload.num_requests"] = "--num-requests"
    with naming_flags(variant, {"concurrency": "--concurrency", "arrival_process": "--concurrency",
                                "num_requests": "--num-requests"}, str(path)), \
            naming_traffic_flags(traffic, str(path)):
        s = with_sources(scenario_with_flags(path, traffic, variant), sources)
        if replicas is not None and s.deployment.disaggregated is not None:
            raise InputError(None, "--replicas", "does not apply to this scenario: its deployment.disaggregated "
                                                 "section sets the replicas (prefill_replicas and decode_replicas)")
        r = resolve(s)
    if replicas is not None and r.replica.num_blocks >= 1:    # the flag's replicas, named as the flag
        check_simulated_blocks(replicas * r.replica.num_blocks, None, "--replicas")
    workload = workload_of(r)
    with progress("simulating", "requests", len(workload)) as update:
        result = simulate_scenario(r, None, replicas, router, update, workload=workload, rows=rows)
    return s, result, summarise(result, slo_of(s)), simulate_notes(r, workload)

