"""`sizer report SCENARIO -o reports/NAME.html [--pdf]`: a self-contained HTML (and PDF) sizing report."""

from __future__ import annotations

import datetime
import functools
import os
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from sizer.cli.flags import MAX_WORKERS, check_range
from sizer.cli.options import (
    EMIT_HELP,
    EMIT_TO_HELP,
    ITL_MS,
    OUTPUT_TOKENS,
    PROMPT_TOKENS,
    RATE,
    TTFT_MS,
    check_emit,
    emits_to_stdout,
    emitted,
    read_scenario_data,
    space_from_options,
    traffic_from_flags,
    write_emitted,
)
from sizer.errors import InputError
from sizer.outputs.destination import check_destination, write_text
from sizer.outputs.emit import ServingConfig
from sizer.outputs.report import Report, build_report, check_pdf_renderer, render_html, write_pdf


def command(
    scenario: Path = typer.Argument(..., help="scenario YAML"),
    output: Path = typer.Option(..., "-o", "--output", help="HTML file to write (reports/NAME.html)"),
    pdf: bool = typer.Option(False, "--pdf", help="also write the same document as PDF beside it (weasyprint)"),
    no_search: bool = typer.Option(False, "--no-search", help="report on the scenario's configuration only"),
    gpus: str | None = typer.Option(None, help="profiles the search tries (default: all)"),
    tp: str | None = typer.Option(None, "--tp", help="tensor parallel sizes, default 1,2,4,8"),
    weights: str | None = typer.Option(None, help="weight formats, default bf16,fp8"),
    kv_cache_dtype: str | None = typer.Option(None, "--kv-cache-dtype", help="KV formats, default auto,fp8"),
    workers: int = typer.Option(os.cpu_count() or 1, help="parallel processes for the search"),
    date: str | None = typer.Option(None, help="date printed in the header (default today)"),
    emit: str | None = typer.Option(None, "--emit", help=EMIT_HELP),
    emit_to: Path | None = typer.Option(None, "--emit-to", help=EMIT_TO_HELP),
    rate: float | None = RATE,
    prompt_tokens: str | None = PROMPT_TOKENS,
    output_tokens: str | None = OUTPUT_TOKENS,
    ttft_ms: float | None = TTFT_MS,
    itl_ms: float | None = ITL_MS,
) -> None:
    """Write a sizing report: question, answer, memory, latency against rate, timelines, search, assumptions."""
    traffic = traffic_from_flags(rate, prompt_tokens, output_tokens, ttft_ms, itl_ms)
    check_range(workers, "--workers", 1, MAX_WORKERS)
    space = None if no_search else space_from_options(gpus, tp, None, weights, kv_cache_dtype, False)
    check_destination(output, "--output")
    pdf_path = output.with_suffix(".pdf")
    if pdf:
        if pdf_path == output:
            raise InputError(str(output), "--output", "with --pdf the PDF is written beside the HTML under the same "
                                                      "name with .pdf; name the HTML .html")
        check_destination(pdf_path, "--pdf")
        check_pdf_renderer("--pdf")
    check_emit(emit, emit_to)
    data = read_scenario_data(scenario, traffic)
    # No refresh thread (auto_refresh=False): the search forks its worker processes.
    with Progress(TextColumn("searching"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True, auto_refresh=False) as bar:
        task = bar.add_task("search", total=None)
        report = build_report(data, str(scenario), space, workers,
                              progress=lambda done, total: bar.update(task, completed=done, total=total, refresh=True))
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
