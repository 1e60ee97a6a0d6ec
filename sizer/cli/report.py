"""`sizer report SCENARIO -o reports/NAME.html [--pdf]`: a self-contained HTML (and PDF) sizing report
(of a gateway document: `gateway_report` below)."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import os
from pathlib import Path

import typer

from sizer.cli import gateway
from sizer.cli.emit import check_emit, emitted, write_emitted
from sizer.cli.flags import MAX_WORKERS, check_range
from sizer.cli.options import (
    EMIT_HELP,
    EMIT_TO_HELP,
    ITL_MS,
    OUTPUT_TOKENS,
    PROMPT_TOKENS,
    RATE,
    TPOT_MS,
    TTFT_MS,
    emits_to_stdout,
    naming_traffic_flags,
    read_scenario_data,
    traffic_from_flags,
)
from sizer.cli.progress import progress
from sizer.cli.render import terminal
from sizer.cli.search_space import REPORT_GPUS_HELP, describe_space, report_space
from sizer.errors import InputError
from sizer.inputs.gateway import load_gateway
from sizer.inputs.scenario import is_gateway, scenario_from_dict
from sizer.outputs.destination import check_destination, write_text
from sizer.outputs.emit import ServingConfig
from sizer.outputs.report import Report, build_report, check_report_destinations, render_html, write_pdf
from sizer.outputs.report.gateway import render_gateway_html
from sizer.outputs.report.sweep import build_sweep_report, render_sweep_html
from sizer.outputs.serialise import to_json
from sizer.outputs.sweep_store import read_rows, write_csv
from sizer.sizing.gateway import plan_gateway, resolve_gateway


def command(
    scenario: Path | None = typer.Argument(None, help="scenario or gateway YAML (none with --sweep)"),
    output: Path | None = typer.Option(None, "-o", "--output", help="HTML file to write (reports/NAME.html)"),
    pdf: bool = typer.Option(False, "--pdf", help="also write the same document as PDF beside it (weasyprint)"),
    no_search: bool = typer.Option(False, "--no-search", help="report the scenario's configuration only, as "
                                                              "given, without a search (the quickest report)"),
    gpus: str | None = typer.Option(None, help=REPORT_GPUS_HELP),
    tp: str | None = typer.Option(None, "--tp", help="tensor parallel sizes, default 1,2,4,8 (llama.cpp, Ollama: 1)"),
    weights: str | None = typer.Option(None, help="weight formats, default bf16,fp8 (llama.cpp, Ollama: GGUF presets "
                                                  "f16,q8_0,q5_k_m,q4_k_m)"),
    slots: str | None = typer.Option(None, "--slots", help="llama.cpp / Ollama only: parallel slot counts the search "
                                                           "tries, default 1,2,4,8"),
    kv_cache_dtype: str | None = typer.Option(None, "--kv-cache-dtype", help="KV formats, default auto,fp8"),
    workers: int | None = typer.Option(None, help="parallel processes for the search (default: the CPU count)"),
    date: str | None = typer.Option(None, help="date printed in the header (default today)"),
    emit: str | None = typer.Option(None, "--emit", help=EMIT_HELP),
    emit_to: Path | None = typer.Option(None, "--emit-to", help=EMIT_TO_HELP),
    sweep: Path | None = typer.Option(None, "--sweep", help="report on a `sizer sweep` Parquet file instead: Pareto "
                                                            "fronts and the cheapest configuration per SLO"),
    csv: Path | None = typer.Option(None, "--csv", help="with --sweep: also write one row per point here"),
    as_json: bool = typer.Option(False, "--json", help="with --sweep: print the fronts and the cheapest as JSON"),
    rate: float | None = RATE,
    prompt_tokens: str | None = PROMPT_TOKENS,
    output_tokens: str | None = OUTPUT_TOKENS,
    ttft_ms: float | None = TTFT_MS,
    itl_ms: float | None = ITL_MS,
    tpot_ms: float | None = TPOT_MS,
) -> None:
    """Write a sizing report: question, answer, memory, latency against rate, timelines, search, assumptions.

    On a gateway document: the cheapest sizing, per pool, per class, per route, the searched configurations."""
    if sweep is not None:
        traffic_flags = {"--rate": rate, "--prompt-tokens": prompt_tokens, "--output-tokens": output_tokens,
                         "--ttft-ms": ttft_ms, "--itl-ms": itl_ms, "--tpot-ms": tpot_ms}
        for flag, given in traffic_flags.items():
            if given is not None:
                raise InputError(None, flag, "does not apply to --sweep (the sweep file states its traffic)")
        search_flags = {"--no-search": no_search, "--gpus": gpus, "--tp": tp, "--weights": weights, "--slots": slots,
                        "--kv-cache-dtype": kv_cache_dtype, "--workers": workers, "--emit": emit,
                        "--emit-to": emit_to}
        for flag, given in search_flags.items():
            if given not in (None, False):
                raise InputError(None, flag, "does not apply to --sweep (a report on results already sized: the "
                                             "sweep file states its axes)")
        return sweep_report(sweep, scenario, output, csv, as_json, date, pdf)
    if scenario is None:
        raise InputError(None, "SCENARIO", "missing; expected a scenario YAML (or --sweep results.parquet)")
    if is_gateway(scenario):
        gateway.refuse_flags({"--gpus": gpus, "--tp": tp, "--weights": weights, "--kv-cache-dtype": kv_cache_dtype,
                              "--workers": workers, "--emit": emit, "--emit-to": emit_to, "--csv": csv,
                              "--json": as_json, "--rate": rate, "--prompt-tokens": prompt_tokens,
                              "--output-tokens": output_tokens, "--ttft-ms": ttft_ms, "--itl-ms": itl_ms,
                              "--tpot-ms": tpot_ms, "--slots": slots})
        return gateway_report(scenario, output, pdf, not no_search, date)
    if output is None:
        raise InputError(str(scenario), "--output", "missing; expected the HTML file to write (-o reports/NAME.html)")
    for flag, given in (("--csv", csv), ("--json", as_json)):
        if given:
            raise InputError(None, flag, "needs --sweep")
    traffic = traffic_from_flags(rate, prompt_tokens, output_tokens, ttft_ms, itl_ms, tpot_ms=tpot_ms)
    workers = os.cpu_count() or 1 if workers is None else workers
    check_range(workers, "--workers", 1, MAX_WORKERS)
    axes = {"--gpus": gpus, "--tp": tp, "--weights": weights, "--kv-cache-dtype": kv_cache_dtype, "--slots": slots}
    for flag, given in axes.items():
        if no_search and given is not None:
            raise InputError(None, flag, "is a search axis; --no-search reports the scenario's own configuration")
    pdf_path = check_report_destinations(output, pdf, (scenario,))
    data = read_scenario_data(scenario, traffic)
    space = None if no_search else report_space(scenario_from_dict(data, str(scenario)), gpus, tp, weights,
                                                kv_cache_dtype, slots)
    check_emit(emit, emit_to, reads=(scenario,), others={"--output": output, "--pdf": pdf_path if pdf else None})
    terminal(stderr=True).print("report: the scenario's configuration as given (--no-search)" if space is None else
                                f"report: searching {describe_space(space)} (--gpus to widen it, --no-search to "
                                "skip it)", markup=False, highlight=False)
    with progress("searching", "configurations") as update, naming_traffic_flags(traffic, str(scenario)):
        report = build_report(data, str(scenario), space, workers, progress=update)
    text = emitted(emit, lambda: serving_of(report, str(scenario)))
    html = render_html(report, date or datetime.date.today().isoformat())
    write_text(output, "--output", html)
    echo = functools.partial(typer.echo, err=emits_to_stdout(emit, emit_to))
    echo(f"wrote {output}")
    if pdf:
        write_pdf(html, pdf_path, "--pdf")
        echo(f"wrote {pdf_path}")
    write_emitted(text, emit_to)


def serving_of(report: Report, file: str) -> ServingConfig:
    if report.serving is None:
        raise InputError(file, "--emit", f"nothing to emit: {report.answer.sizing.verdict}")
    return report.serving


def sweep_report(sweep: Path, scenario: Path | None, output: Path | None, csv: Path | None, as_json: bool,
                 date: str | None, pdf: bool = False) -> None:
    """`report --sweep`: the HTML (-o; with --pdf the PDF beside it), one CSV row per point (--csv), the fronts and
    cheapest as JSON (--json)."""
    if scenario is not None:
        raise InputError(str(scenario), "--sweep", "reports on the sweep's results alone; leave out the scenario")
    if output is None and csv is None and not as_json:
        raise InputError(str(sweep), "--sweep", "nothing to write: give -o HTML, --csv or --json")
    if pdf and output is None:
        raise InputError(None, "--pdf", "writes the HTML report as PDF beside it; expected -o HTML with it")
    pdf_path = check_report_destinations(output, pdf, (sweep,)) if output is not None else None
    if csv is not None:
        check_destination(csv, "--csv", (sweep,), {"--output": output, "--pdf": pdf_path if pdf else None})
    table = read_rows(sweep, "--sweep")
    if not table.num_rows:          # a sweep writes a row a point: none is a sweep whose every point failed
        raise InputError(str(sweep), "--sweep", "holds no rows, nothing to report; expected a sweep's results (a "
                                                "point that failed every try has no row: run the sweep again)")
    report = build_sweep_report(table.to_pylist(), sweep.name, str(sweep))
    if output is not None:
        html = render_sweep_html(report, date or datetime.date.today().isoformat())
        write_text(output, "--output", html)
        typer.echo(f"wrote {output}", err=as_json)
        if pdf:
            write_pdf(html, pdf_path, "--pdf")
            typer.echo(f"wrote {pdf_path}", err=as_json)
    if csv is not None:
        write_csv(table, csv, "--csv")
        typer.echo(f"wrote {csv}", err=as_json)
    if as_json:
        typer.echo(to_json(dataclasses.asdict(report)))


def gateway_report(path: Path, output: Path | None, pdf: bool, search: bool, date: str | None) -> None:
    """`sizer report` on a gateway document: the same answer as `plan [--simulate]`, as HTML (and PDF)."""
    if output is None:
        raise InputError(str(path), "--output", "missing; expected the HTML file to write (-o reports/NAME.html)")
    pdf_path = check_report_destinations(output, pdf, (path,))
    doc, name = load_gateway(path)
    with progress("searching", "configurations", show=search) as update:
        a = plan_gateway(resolve_gateway(doc, name, str(path)), search, update)
    html = render_gateway_html(a, date or datetime.date.today().isoformat(), str(path))
    write_text(output, "--output", html)
    typer.echo(f"wrote {output}")
    if pdf:
        write_pdf(html, pdf_path, "--pdf")
        typer.echo(f"wrote {pdf_path}")
