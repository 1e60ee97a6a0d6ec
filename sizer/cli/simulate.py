"""`sizer simulate`: run the scenario's workload through the discrete-event simulator (roofline
step times) and print latency percentiles, throughput, SLO attainment and cache figures."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.progress import Progress

from simulator.cluster import ROUTERS
from simulator.errors import excerpt
from simulator.metrics import summarise
from sizer.cli.flags import check_range
from sizer.cli.options import (
    ITL_MS,
    OUTPUT_TOKENS,
    PROMPT_TOKENS,
    RATE,
    TTFT_MS,
    scenario_with_flags,
    traffic_from_flags,
)
from sizer.cli.render import render_simulation_metrics
from sizer.errors import InputError
from sizer.inputs.scenario import MAX_REPLICAS, MAX_REQUESTS, is_gateway
from sizer.inputs.traffic import Traffic
from sizer.kinds import kind
from sizer.outputs.destination import check_destination, write_with
from sizer.outputs.serialise import to_json
from sizer.sizing.goodput import slo_of
from sizer.sizing.resolve import resolve
from sizer.sizing.simulate import DEFAULT_ROUTER, simulate_scenario

PROGRESS_FROM_REQUESTS = 5000       # show a progress bar for runs at least this long


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
    prompt_tokens: str | None = PROMPT_TOKENS,
    output_tokens: str | None = OUTPUT_TOKENS,
    ttft_ms: float | None = TTFT_MS,
    itl_ms: float | None = ITL_MS,
) -> None:
    """Simulated TTFT, ITL, TPOT, E2E (p50/p95/p99), throughput, goodput and prefix-cache hits.

    The workload and SLO flags replace the scenario's rate, lengths (fixed) and targets."""
    if requests_csv is not None:
        check_destination(requests_csv, "--requests-csv")
    if is_gateway(scenario):
        check_range(num_requests, "--num-requests", 1, MAX_REQUESTS)
        gateway = kind("gateway")
        gateway.refuse_flags({"--replicas": replicas, "--router": router if router != DEFAULT_ROUTER else None,
                              "--rate": rate, "--prompt-tokens": prompt_tokens, "--output-tokens": output_tokens,
                              "--ttft-ms": ttft_ms, "--itl-ms": itl_ms})
        return gateway.simulate(scenario, as_json, num_requests, requests_csv)
    traffic = traffic_from_flags(rate, prompt_tokens, output_tokens, ttft_ms, itl_ms)
    scenario_obj, result, summary = run(scenario, num_requests, replicas, router, show_progress=not as_json,
                                        traffic=traffic)
    if requests_csv is not None:
        write_with(requests_csv, "--requests-csv", lambda f: result.requests.to_csv(f, index=False))
    if as_json:
        typer.echo(to_json({"scenario": scenario_obj.name, **vars(summary)}))
        return
    render_simulation_metrics(scenario_obj.name, summary, Console(), requests_csv)


def run(path: Path, num_requests: int | None, replicas: int | None, router: str, show_progress: bool,
        traffic: Traffic = Traffic()):
    if router not in ROUTERS:
        raise InputError(None, "--router", f"{excerpt(router)}; expected one of {', '.join(ROUTERS)}")
    check_range(num_requests, "--num-requests", 1, MAX_REQUESTS)
    check_range(replicas, "--replicas", 1, MAX_REPLICAS)
    s = scenario_with_flags(path, traffic)
    if replicas is not None and s.deployment.disaggregated is not None:
        raise InputError(None, "--replicas", "does not apply to this scenario: its deployment.disaggregated "
                                             "section sets the replicas (prefill_replicas and decode_replicas)")
    r = resolve(s)
    total = min(num_requests or s.workload.num_requests, (s.workload.trace.max_requests or 1 << 62)
                if s.workload.trace else 1 << 62)
    if show_progress and total >= PROGRESS_FROM_REQUESTS:
        with Progress(transient=True) as bar:
            task = bar.add_task("simulating", total=total)
            result = simulate_scenario(r, num_requests, replicas, router, lambda done: bar.update(task, completed=done))
    else:
        result = simulate_scenario(r, num_requests, replicas, router)
    return s, result, summarise(result, slo_of(s))
