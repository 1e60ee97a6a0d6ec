"""`sizer search SCENARIO`: rank GPU x split x format configurations by cost for the scenario's SLO (llama.cpp and
Ollama: local device x GGUF preset x slots, by device memory)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import typer

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
    WIDE,
    emits_to_stdout,
    naming_traffic_flags,
    read_scenario_data,
    traffic_from_flags,
)
from sizer.cli.progress import progress
from sizer.cli.render import render_search, terminal
from sizer.cli.search_space import describe_space, space_from_options
from sizer.errors import InputError
from sizer.inputs.scenario import MAX_REPLICAS, MAX_REQUESTS, scenario_from_dict
from sizer.outputs.destination import check_destination, frame_to_csv
from sizer.outputs.emit import ServingConfig, serving_config
from sizer.outputs.serialise import to_json
from sizer.sizing.pipeline import size_deployment
from sizer.sizing.plan import make_plan
from sizer.sizing.resolve import resolve
from sizer.sizing.result import GoodputSettings
from sizer.sizing.search import SearchResult, SearchSettings, check_searchable, search

MIN_GOODPUT_REQUESTS = 50           # fewer simulated requests per rate say nothing about a percentile


def command(
    scenario: Path = typer.Argument(..., help="scenario YAML: model, workload and SLO "
                                              "(its deployment is the starting point)"),
    gpus: str | None = typer.Option(None, help="comma-separated profiles to try (`sizer gpus`; default: the "
                                               "data-centre ones, for llama.cpp and Ollama the local ones)"),
    tp: str | None = typer.Option(None, "--tp", help="tensor parallel sizes, default 1,2,4,8 (llama.cpp, Ollama: 1)"),
    pp: str | None = typer.Option(None, "--pp", help="pipeline parallel sizes, default 1"),
    weights: str | None = typer.Option(None, help="weight formats, default bf16,fp8 (llama.cpp, Ollama: GGUF presets "
                                                  "f16,q8_0,q5_k_m,q4_k_m)"),
    slots: str | None = typer.Option(None, "--slots", help="llama.cpp / Ollama only: parallel slot counts, "
                                                           "default 1,2,4,8"),
    kv_cache_dtype: str | None = typer.Option(None, "--kv-cache-dtype", help="KV formats, default auto,fp8"),
    speculative: bool = typer.Option(False, "--speculative",
                                     help="also try the scenario's speculative_config on and off"),
    workers: int = typer.Option(os.cpu_count() or 1, help="parallel processes"),
    requests: int = typer.Option(GoodputSettings.num_requests, "--num-requests",
                                 help="simulated requests per rate in the goodput search (plan, check: the default)"),
    max_replicas: int = typer.Option(SearchSettings.max_replicas,
                                     help="reject configurations that would need more replicas than this"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
    csv: Path | None = typer.Option(None, "--csv", help="also write one row per configuration here"),
    show_rejected: bool = typer.Option(False, "--all", help="list every rejected configuration too"),
    emit: str | None = typer.Option(None, "--emit", help=EMIT_HELP),
    emit_to: Path | None = typer.Option(None, "--emit-to", help=EMIT_TO_HELP),
    rate: float | None = RATE,
    prompt_tokens: str | None = PROMPT_TOKENS,
    output_tokens: str | None = OUTPUT_TOKENS,
    ttft_ms: float | None = TTFT_MS,
    itl_ms: float | None = ITL_MS,
    tpot_ms: float | None = TPOT_MS,
    wide: bool = WIDE,
) -> None:
    """Find the cheapest deployment that meets the SLO: sweep GPUs, TP/PP, weight and KV formats."""
    traffic = traffic_from_flags(rate, prompt_tokens, output_tokens, ttft_ms, itl_ms, tpot_ms=tpot_ms)
    check_range(workers, "--workers", 1, MAX_WORKERS)
    check_range(requests, "--num-requests", MIN_GOODPUT_REQUESTS, MAX_REQUESTS)
    check_range(max_replicas, "--max-replicas", 1, MAX_REPLICAS)
    if csv:
        check_destination(csv, "--csv", (scenario,))
    data = read_scenario_data(scenario, traffic)
    base = scenario_from_dict(data, str(scenario))
    space = space_from_options(base, gpus, tp, pp, weights, kv_cache_dtype, speculative, slots)
    check_searchable(base, space)
    check_emit(emit, emit_to, as_json, (scenario,), {"--csv": csv})
    terminal(stderr=True).print(f"search: {describe_space(space)}", markup=False, highlight=False)
    with progress("searching", "configurations") as update, naming_traffic_flags(traffic, str(scenario)):
        settings = SearchSettings(GoodputSettings(num_requests=requests), max_replicas)
        result = search(data, str(scenario), space, settings, workers, update)
    if csv:
        write_csv(result, csv)
    text = emitted(emit, lambda: recommended_config(result, data, str(scenario)))
    if as_json:
        typer.echo(to_json(to_dict(result)))
    else:
        render_search(result, str(scenario), terminal(wide, stderr=emits_to_stdout(emit, emit_to)), show_rejected,
                      traffic.flags())
    write_emitted(text, emit_to)


def recommended_config(result: SearchResult, data: dict, file: str) -> ServingConfig:
    """The recommended configuration's settings and replicas, for --emit."""
    best = result.recommended
    if best is None:
        raise InputError(file, "--emit", "nothing to emit: no " + ("" if result.by_device_memory else "priced ")
                         + "configuration meets the SLO")
    base = scenario_from_dict(data, file)
    chosen = resolve(best.candidate.variant(base).apply(base))
    # slot engines' candidates are judged without the sizing pipeline: size the one emitted
    sizing = best.sizing or size_deployment(chosen, make_plan(chosen), result.settings.goodput,
                                            result.settings.max_replicas)
    return serving_config(chosen, sizing.cost, sizing.verdict)


ROW_FIELDS = ("status", "binding", "reason", "gpus_per_replica", "kv_cache_gib_per_gpu", "goodput_rate_per_s",
              "replicas", "gpus", "usd_per_hour", "usd_per_million_output_tokens", "operating_rate_per_s", "share_met",
              "ttft_p95_ms", "itl_p95_ms", "tpot_p95_ms", "e2e_p95_ms", "pareto", "tokens_per_s_per_user",
              "slot_ttft_ms", "device_memory_bytes")


def rows(result: SearchResult) -> list[dict]:
    """One flat record per configuration, in rank order (the sizing pipeline's figures, for CSV and JSON)."""
    return [{"rank": rank, **dataclasses.asdict(o.candidate), "label": o.candidate.label,
             **{name: getattr(o, name) for name in ROW_FIELDS},
             "sizing_status": o.sizing.status.value if o.sizing else None}
            for rank, o in enumerate(result.outcomes, 1)]


def to_dict(result: SearchResult) -> dict:
    ranked = rows(result)
    return {"scenario": result.scenario, "target_rate_per_s": result.target_rate_per_s,
            "required_share": result.required_share, "settings": result.settings, "ranked_by": result.ranked_by,
            "recommended": ranked[0] if result.recommended else None, "notes": result.notes, "configurations": ranked}


def write_csv(result, path: Path) -> None:
    import pandas as pd

    frame_to_csv(path, "--csv", pd.DataFrame(rows(result)))
