"""`sizer plan`: memory, split, Little's-law capacity, step times and cost; with --simulate, the sizing pipeline.

Exit 0 whenever a plan is printed, with --simulate too: a deployment that misses the SLO, or one
where no request rate meets it, is a verdict in the plan (`sizer check` is the gate that exits 1).
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import typer

from simulator.errors import excerpt
from sizer.cli.flags import check_choices, check_gpu, check_model, check_range, naming_flags
from sizer.cli.options import (
    CONCURRENCY,
    EMIT_HELP,
    EMIT_TO_HELP,
    GPU,
    ITL_MS,
    MODEL,
    OUTPUT_TOKENS,
    PROMPT_TOKENS,
    RATE,
    TPOT_MS,
    TTFT_MS,
    WIDE,
    closed_loop_flag,
    emits_to_stdout,
    scenario_with_flags,
    traffic_from_flags,
    traffic_variant,
)
from sizer.cli.render import render_plan, terminal
from sizer.errors import InputError
from sizer.inputs.hardware import is_profile_path
from sizer.inputs.scenario import (
    MAX_HARDWARE_GB,
    MAX_RATE_PER_S,
    MAX_REPLICAS,
    MAX_TOKENS,
    MIN_RATE_PER_S,
    Engine,
    KVCacheDtype,
    Scenario,
    WeightFormat,
    is_gateway,
    scenario_from_dict,
    stated_sources,
    with_sources,
)
from sizer.inputs.traffic import Traffic
from sizer.inputs.variant import Variant
from sizer.kinds import kind
from sizer.outputs.serialise import to_json
from sizer.sizing.plan import make_plan
from sizer.sizing.resolve import resolve

# A plan from flags alone (no scenario file) asks about this workload: 1 request/s of 1,024
# prompt and 256 output tokens. The plan's assumptions show it like any scenario's.
FLAGS_ONLY_WORKLOAD = {"workload": {"arrival": {"rate_per_s": 1.0},
                                    "prompt_tokens": {"distribution": "fixed", "value": 1024},
                                    "output_tokens": {"distribution": "fixed", "value": 256}}}


# Variant field -> the flag of `plan` that sets it.
FLAGS = {"model": "--model", "gpu": "--gpu", "tensor_parallel_size": "--tp", "pipeline_parallel_size": "--pp",
         "quantization": "--weights", "kv_cache_dtype": "--kv-cache-dtype", "max_model_len": "--max-model-len",
         "rate_per_s": "--rate", "calibrated_profile": "--profile", "concurrency": "--concurrency",
         "arrival_process": "--concurrency", "engine": "--engine", "memory_gb": "--memory-gb",
         "ctx_size": "--ctx-size", "enable_attention_dp": "--attention-dp"}


def build_scenario(scenario: Path | None, variant: Variant, traffic: Traffic = Traffic()) -> Scenario:
    """A scenario from a file (with the flags' changes) or from flags alone; `traffic`'s lengths and SLO
    targets replace the scenario's (its rate is the variant's). Each workload and SLO value knows its source
    (the plan's assumptions print it), and so does each setting a flag set: a flag, the scenario, or a default."""
    if scenario is not None:
        built = scenario_with_flags(scenario, traffic, variant)
    elif variant.model is None or variant.gpu is None:
        raise InputError(None, "--model/--gpu", "give a scenario file, or both --model and --gpu")
    else:
        built = scenario_from_dict(FLAGS_ONLY_WORKLOAD, None, traffic_variant(traffic, variant),
                                   default_name="command-line")
        built = with_sources(built, {path: "default: no scenario file"
                                     for path, _ in stated_sources(FLAGS_ONLY_WORKLOAD)})
    flags = {path: FLAGS[name] for name, path in variant.fields_set().items() if name in FLAGS}
    flags |= {"workload.prompt_tokens": "--prompt-tokens" if traffic.prompt_tokens is not None else None,
              "workload.output_tokens": "--output-tokens" if traffic.output_tokens is not None else None,
              "slo.ttft_ms": "--ttft-ms" if traffic.ttft_ms is not None else None,
              "slo.itl_ms": "--itl-ms" if traffic.itl_ms is not None else None,
              "slo.tpot_ms": "--tpot-ms" if traffic.tpot_ms is not None else None}
    return with_sources(built, {path: flag for path, flag in flags.items() if flag})


def _gpu_or_profile(gpu: str | None, profile: Path | None) -> tuple[str | None, str | None]:
    """--profile is a hardware profile file (then it is the GPU) or a calibrated profile folder."""
    if profile is None or profile.is_dir():
        return gpu, str(profile.resolve()) if profile else None
    if gpu is not None:
        raise InputError(None, "--profile", f"a hardware profile file ({excerpt(str(profile))}) names the device, "
                                            f"and so does --gpu; expected one of the two")
    if not is_profile_path(str(profile)):
        raise InputError(None, "--profile", f"expected a hardware profile .yaml file or a calibrated profile folder, "
                                            f"got {excerpt(str(profile))}")
    return str(profile), None


def command(
    scenario: Path | None = typer.Argument(None, help="scenario YAML (see docs/scenario.md)"),
    as_json: bool = typer.Option(False, "--json", help="print the plan as JSON"),
    model: str | None = MODEL,
    gpu: str | None = GPU,
    tp: int | None = typer.Option(None, "--tp", help="tensor_parallel_size"),
    pp: int | None = typer.Option(None, "--pp", help="pipeline_parallel_size"),
    memory_gb: float | None = typer.Option(None, "--memory-gb",
                                           help="your device's memory as sold (a 64 GB M3 Max: 64), in place of the "
                                                "profile's (hardware.memory_gb)"),
    engine: str | None = typer.Option(None, help="serving engine: " + ", ".join(typing.get_args(Engine))
                                      + "; default the scenario's, else llama.cpp for GGUF weights or an Apple GPU or "
                                        "CPU, else vllm"),
    attention_dp: bool = typer.Option(False, "--attention-dp",
                                      help="MoE: attention data-parallel on the --tp GPUs, experts spread over them "
                                           "(enable_attention_dp: TensorRT-LLM's DEP)"),
    weights: str | None = typer.Option(None, help="weight format: bf16, fp16, fp8, int8, awq, gptq, nvfp4, mxfp4; "
                                                  "GGUF presets (q4_k_m, q8_0, ...) for llama.cpp and ollama"),
    kv_cache_dtype: str | None = typer.Option(None, help="auto, bf16, fp16, fp8"),
    max_model_len: int | None = typer.Option(None, help="longest context per sequence (vLLM, SGLang, ...)"),
    ctx_size: int | None = typer.Option(None, "--ctx-size",
                                        help="llama.cpp: total context of all slots (-c); default the model's"),
    rate: float | None = RATE,
    concurrency: int | None = CONCURRENCY,
    prompt_tokens: str | None = PROMPT_TOKENS,
    output_tokens: str | None = OUTPUT_TOKENS,
    ttft_ms: float | None = TTFT_MS,
    itl_ms: float | None = ITL_MS,
    tpot_ms: float | None = TPOT_MS,
    profile: Path | None = typer.Option(None, "--profile",
                                        help="a hardware profile YAML file (your own device: hardware_profiles/"
                                             "README.md; the same as --gpu FILE), or a calibrated profile folder "
                                             "(sizer calibrate): measured step times"),
    simulate: bool = typer.Option(False, "--simulate",
                                  help="add simulated latency at the scenario's rate and the goodput rate "
                                       "(a gateway: the cheapest sizing search)"),
    emit: str | None = typer.Option(None, "--emit", help=EMIT_HELP),
    emit_to: Path | None = typer.Option(None, "--emit-to", help=EMIT_TO_HELP),
    wide: bool = WIDE,
) -> None:
    """Memory, parallel split, Little's-law capacity, step times and cost for a scenario.

    --prompt-tokens and --output-tokens replace the scenario's lengths with fixed ones, --ttft-ms and
    --itl-ms its SLO targets (with --simulate, the replicas are sized to meet them)."""
    if scenario is not None and is_gateway(scenario):
        gateway = kind("gateway")
        gateway.refuse_flags({"--model": model, "--gpu": gpu, "--engine": engine, "--memory-gb": memory_gb,
                              "--tp": tp, "--pp": pp,
                              "--weights": weights, "--attention-dp": attention_dp or None,
                              "--kv-cache-dtype": kv_cache_dtype, "--max-model-len": max_model_len,
                              "--ctx-size": ctx_size, "--rate": rate,
                              "--concurrency": concurrency, "--prompt-tokens": prompt_tokens,
                              "--output-tokens": output_tokens,
                              "--ttft-ms": ttft_ms, "--itl-ms": itl_ms, "--tpot-ms": tpot_ms,
                              "--profile": profile, "--emit": emit, "--emit-to": emit_to})
        return gateway.plan(scenario, as_json, search=simulate, wide=wide)
    check_choices((engine,) if engine is not None else None, "--engine", typing.get_args(Engine))
    gpu, calibrated = _gpu_or_profile(gpu, profile)
    check_range(memory_gb, "--memory-gb", 1e-3, MAX_HARDWARE_GB)
    check_range(tp, "--tp", 1, MAX_REPLICAS)
    check_range(pp, "--pp", 1, MAX_REPLICAS)
    check_choices((weights,) if weights is not None else None, "--weights", typing.get_args(WeightFormat))
    check_choices((kv_cache_dtype,) if kv_cache_dtype is not None else None, "--kv-cache-dtype",
                  typing.get_args(KVCacheDtype))
    check_range(max_model_len, "--max-model-len", 1, MAX_TOKENS)
    check_range(ctx_size, "--ctx-size", 1, MAX_TOKENS)
    traffic = traffic_from_flags(None, prompt_tokens, output_tokens, ttft_ms, itl_ms, tpot_ms=tpot_ms)
    check_range(rate, "--rate", MIN_RATE_PER_S, MAX_RATE_PER_S)
    emitter = kind("emit") if emit is not None or emit_to is not None else None
    if emitter is not None:
        emitter.check_emit(emit, emit_to, as_json)
    variant = dataclasses.replace(
        closed_loop_flag(concurrency, rate), model=check_model(model), gpu=check_gpu(gpu), tensor_parallel_size=tp,
        pipeline_parallel_size=pp, quantization=weights, kv_cache_dtype=kv_cache_dtype, max_model_len=max_model_len,
        rate_per_s=rate, calibrated_profile=calibrated, engine=engine, memory_gb=memory_gb,
        ctx_size=ctx_size, enable_attention_dp=attention_dp or None)
    with naming_flags(variant, FLAGS, str(scenario) if scenario is not None else None):
        resolved = resolve(build_scenario(scenario, variant, traffic))
    result = make_plan(resolved)
    if simulate:
        result = kind("day").add_energy(kind("simulate").add_simulation(result, resolved), resolved)
        if resolved.workload.schedule is not None:
            result = kind("simulate").add_day(result, resolved)
    text = emitter.plan_emitted(emit, resolved, result) if emitter is not None else None
    if as_json:
        typer.echo(to_json(result))
    else:
        render_plan(result, terminal(wide, stderr=emits_to_stdout(emit, emit_to)))
    if emitter is not None:
        emitter.write_emitted(text, emit_to)
        emitter.note_memory_only(resolved, result)


