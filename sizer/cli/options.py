"""Option parsing that several commands share: the workload and SLO flags, a scenario file with their values."""

from __future__ import annotations

import dataclasses
from contextlib import AbstractContextManager
from pathlib import Path

import typer

from sizer.cli.flags import check_range, naming_flags
from sizer.errors import InputError
from sizer.inputs.number_text import parse_number
from sizer.inputs.scenario import (
    MAX_CONCURRENCY,
    MAX_RATE_PER_S,
    MAX_SECONDS,
    MAX_TOKENS,
    MIN_RATE_PER_S,
    SETTABLE,
    Scenario,
    StatedValueError,
    scenario_from_dict,
)
from sizer.inputs.traffic import Traffic, with_traffic
from sizer.inputs.variant import Variant
from validation.errors import FieldError
from validation.safe_yaml import load_yaml
from validation.schema import Key, check_key

EMIT_HELP = "also write the recommended configuration as a `vllm serve` command, a Kubernetes manifest, an " \
            "`sglang.launch_server` command, a `llama-server` command or an Ollama Modelfile and environment: " \
            "vllm, k8s, sglang, llamacpp, ollama, gke (k8s for GKE's node label; to stdout unless --emit-to; " \
            "the rest goes to stderr)"
EMIT_TO_HELP = "file for --emit's output"


# The workload and SLO flags, one object each for every command that reads a workload (plan, check):
# the same name, help and parsing wherever they appear.
RATE = typer.Option(None, "--rate", help="arrival rate, requests per second (the workload)")
PROMPT_TOKENS = typer.Option(None, "--prompt-tokens", help="prompt length in tokens, fixed (32k accepted)")
OUTPUT_TOKENS = typer.Option(None, "--output-tokens", help="output length in tokens, fixed (1k accepted)")
CONCURRENCY = typer.Option(None, "--concurrency",
                           help="a closed loop of N clients in place of the scenario's arrivals: each sends its next "
                                "request when its last answer arrives (vllm bench serve --max-concurrency N)")
WIDE = typer.Option(False, "--wide", help="print every table in full, as wide as its content (default: fit the "
                                          "terminal, 80 columns in a pipe: labels wrapped, some columns left out)")
# The deployment flags `plan` and `check` share: the same name and help in both.
MODEL = typer.Option(None, "--model", help="catalog name, config.json, checkpoint folder or cached HF id")
GPU = typer.Option(None, "--gpu", help="accelerator profile (`sizer gpus`; yours in $SIZER_HOME/profiles first), "
                                       "a profile YAML file, or PROFILE/mig-3g.40gb for a MIG slice")
GPUS_PER_REPLICA = typer.Option(None, "--gpus-per-replica",
                                help="GPUs one replica has (all its pods), in place of what the manifest says")
TTFT_MS = typer.Option(None, "--ttft-ms", help="SLO: time to first token target, milliseconds")
ITL_MS = typer.Option(None, "--itl-ms", help="SLO: inter-token latency target, milliseconds: the gaps between "
                                             "consecutive tokens, pooled over requests (vllm bench serve's ITL)")
TPOT_MS = typer.Option(None, "--tpot-ms", help="SLO: time-per-output-token target, milliseconds, checked against "
                                               "each request's TPOT ((E2E - TTFT) / (output tokens - 1))")


def traffic_from_flags(rate: float | None, prompt_tokens: str | None, output_tokens: str | None,
                       ttft_ms: float | None, itl_ms: float | None, share: float | None = None,
                       tpot_ms: float | None = None) -> Traffic:
    """The workload and SLO flags, each checked up front (one line naming the flag)."""
    check_range(rate, "--rate", MIN_RATE_PER_S, MAX_RATE_PER_S)
    check_range(ttft_ms, "--ttft-ms", 1e-9, MAX_SECONDS * 1e3)
    check_range(itl_ms, "--itl-ms", 1e-9, MAX_SECONDS * 1e3)
    check_range(tpot_ms, "--tpot-ms", 1e-9, MAX_SECONDS * 1e3)
    return Traffic(rate, tokens_flag(prompt_tokens, "--prompt-tokens"), tokens_flag(output_tokens, "--output-tokens"),
                   ttft_ms, itl_ms, share, tpot_ms)


def with_flags(data: object, traffic: Traffic) -> object:
    """A scenario mapping with the workload and SLO flags' values in place of its own."""
    if not isinstance(data, dict) or traffic == Traffic():
        return data                 # not a mapping: scenario_from_dict names the file
    workload, slo = with_traffic(data.get("workload") or {}, data.get("slo") or {}, traffic)
    return {**data, "workload": workload, "slo": slo}


def traffic_variant(traffic: Traffic, variant: Variant | None = None) -> Variant:
    """`variant` with the workload and SLO flags' values among its changes (--prompt-tokens and --output-tokens
    as fixed lengths). A share (`check --share`) scales the workload's own rate: not one of them."""
    changes = {name: getattr(traffic, name) for name in ("rate_per_s", "prompt_tokens", "output_tokens", "ttft_ms",
                                                         "itl_ms", "tpot_ms") if getattr(traffic, name) is not None}
    return dataclasses.replace(variant or Variant(), **changes)


def scenario_with_flags(path: Path, traffic: Traffic, variant: Variant | None = None) -> Scenario:
    """load_scenario, with the workload and SLO flags' values and `variant`'s changes made to the typed scenario
    read from the file. A scenario rule that the --prompt-tokens length breaks (a shared prefix longer than the
    prompt) names the flag."""
    try:
        return scenario_from_dict(with_flags(load_yaml(path), Traffic(share=traffic.share)), str(path),
                                  traffic_variant(traffic, variant), default_name=path.stem)
    except FieldError as error:
        if (traffic.prompt_tokens is None or error.field != "workload.shared_prefix.tokens"
                or isinstance(error, StatedValueError)):
            raise
        raise InputError(None, "--prompt-tokens", f"{traffic.prompt_tokens} is shorter than the scenario's shared "
                                                  f"prefix (workload.shared_prefix.tokens in {path})") from None


# The Variant fields the workload flags set (traffic_variant), and the flags
TRAFFIC_FLAGS = {"rate_per_s": "--rate", "prompt_tokens": "--prompt-tokens", "output_tokens": "--output-tokens"}


def traffic_sources(traffic: Traffic) -> dict[str, str]:
    """The scenario paths the workload flags set -> those flags (Scenario.sources: where a value came from)."""
    return {SETTABLE[name]: flag for name, flag in TRAFFIC_FLAGS.items() if getattr(traffic, name) is not None}


def naming_traffic_flags(traffic: Traffic, scenario_file: str | None) -> AbstractContextManager[None]:
    """`naming_flags` for the workload flags: a refusal of a field --rate, --prompt-tokens or --output-tokens set
    (the lengths beyond max_model_len: sizer/sizing/resolve.py too_long_share; a rate or lengths beside a trace)
    names that flag, not the file's field."""
    return naming_flags(traffic_variant(traffic), TRAFFIC_FLAGS, scenario_file)


def tokens_flag(text: str | None, flag: str) -> int | None:
    """A token-count flag ("3000", "32k", "32K") as a number of tokens, from 1 to MAX_TOKENS."""
    if text is None:
        return None
    return check_key(Key(flag, int, ge=1, le=MAX_TOKENS), parse_number(text), None, flag)


def read_scenario_data(path: Path, traffic: Traffic = Traffic()) -> dict:
    """The scenario as a mapping (sweeps apply overrides to it), with the workload and SLO flags' values;
    validated by the first load."""
    scenario_with_flags(path, traffic)
    return with_flags(load_yaml(path), traffic)


def emits_to_stdout(fmt: str | None, emit_to: Path | None) -> bool:
    """--emit without --emit-to: stdout is the configuration alone (`| kubectl apply -f -`), the rest stderr."""
    return fmt is not None and emit_to is None


def closed_loop_flag(concurrency: int | None, rate: float | None) -> Variant:
    """--concurrency N: the workload becomes a closed loop of N clients (its rate cleared), checked up front."""
    if concurrency is None:
        return Variant()
    if rate is not None:
        raise InputError(None, "--concurrency", "with --rate: give one; a closed loop's clients set the rate")
    check_range(concurrency, "--concurrency", 1, MAX_CONCURRENCY)
    return Variant(arrival_process="closed", concurrency=concurrency, clear_rate=True)
