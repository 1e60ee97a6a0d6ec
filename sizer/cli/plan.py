"""`sizer plan`: memory, split, Little's-law capacity, step times and cost; with --simulate, the sizing pipeline.

Exit 0 whenever a plan is printed, with --simulate too: a deployment that misses the SLO, or one
where no request rate meets it, is a verdict in the plan (`sizer check` is the gate that exits 1).
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import typer

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
    naming_traffic_flags,
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
from validation.errors import excerpt

# A plan from flags alone (no scenario file) asks about this workload: 1 request/s of 1,024
# prompt and 256 output tokens. The plan's assumptions show it like any scenario's.
FLAGS_ONLY_WORKLOAD = {"workload": {"arrival": {"rate_per_s": 1.0},
                                    "prompt_tokens": {"distribution": "fixed", "value": 1024},
                                    "output_tokens": {"distribution": "fixed", "value": 256}}}


def build_scenario(scenario: Path | None, variant: Variant, traffic: Traffic = Traffic(),
                   sources: dict[str, str] | None = None) -> Scenario:
    """A scenario from a file (with the flags' changes) or from flags alone; `traffic`'s lengths and SLO
    targets replace the scenario's (its rate is the variant's). Each workload and SLO value knows its source
    (the plan's assumptions print it), and so does each setting a flag set: a flag (the Variant's fields by
    FLAGS; `sources`: the lengths' and targets' scenario paths -> their flags), the scenario, or a default."""
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
    return with_sources(built, flags | (sources or {}))


def _gpu_or_profile(gpu: str | None, profile: Path | None) -> tuple[str | None, str | None]:
    """--profile is a hardware profile file (then it is the GPU) or a calibrated profile folder."""
    if profile is not None and profile.is_dir() and not (profile / "profile.yaml").is_file():
        raise InputError(str(profile), "--profile", "a folder without profile.yaml, so no calibrated profile "
                                                    "(`sizer calibrate` writes one); expected one, or a hardware "
                                                    "profile .yaml file")
    if profile is None or profile.is_dir():
        return gpu, str(profile.resolve()) if profile else None
    if gpu is not None:
        raise InputError(None, "--profile", f"a hardware profile file ({excerpt(str(profile))}) names the device, "
                                            f"and so does --gpu; expected one of the two")
    if not is_profile_path(str(profile)) or not profile.is_file():
        raise InputError(str(profile), "--profile", "expected a hardware profile .yaml file or a calibrated profile "
                                                    "folder" + ("" if profile.exists() else ", and nothing is there"))
    return str(profile), None


def _in_range(lo: float, hi: float) -> Callable[[object, str], object]:
    def check(value, flag: str):
        check_range(value, flag, lo, hi)
        return value
    return check


def _one_of(choices: object) -> Callable[[object, str], object]:
    def check(value, flag: str):
        check_choices((value,) if value is not None else None, flag, typing.get_args(choices))
        return value
    return check


@dataclass(frozen=True)
class PlanFlag:
    """One `plan` option, declared once: the option (its flag and help, Typer's), the parameter's type, the
    Variant field it sets (None: the command reads it itself), the check its value passes first (one line naming
    the flag), the scenario paths whose source it becomes where it sets no Variant field (a length or SLO target),
    the other Variant fields it is named for (in refusals and sources), and whether a gateway document takes it."""
    option: typer.models.OptionInfo
    annotation: object
    field: str | None = None
    check: Callable[[object, str], object] | None = None
    sources: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    traffic: bool = False               # a workload length or SLO target (`traffic_from_flags`)
    on_gateway: bool = False

    @property
    def flag(self) -> str:
        return self.option.param_decls[0]

    @property
    def param(self) -> str:
        """The command's parameter: the flag's name (`--kv-cache-dtype` -> kv_cache_dtype)."""
        return self.flag.removeprefix("--").replace("-", "_")


# Every flag of `plan`, in --help's order. A flag that changes the deployment sets its Variant field here and
# nowhere else; --gpu and --profile (a hardware profile file or a calibrated folder), --rate and --concurrency
# (a closed loop clears the rate) and the output flags are read by `command`.
PLAN_FLAGS = (
    PlanFlag(typer.Option(False, "--json", help="print the plan as JSON"), bool, on_gateway=True),
    PlanFlag(MODEL, str | None, "model", lambda value, flag: check_model(value, flag)),
    PlanFlag(GPU, str | None, "gpu", lambda value, flag: check_gpu(value, flag)),
    PlanFlag(typer.Option(None, "--tp", help="tensor_parallel_size"), int | None, "tensor_parallel_size",
             _in_range(1, MAX_REPLICAS)),
    PlanFlag(typer.Option(None, "--pp", help="pipeline_parallel_size"), int | None, "pipeline_parallel_size",
             _in_range(1, MAX_REPLICAS)),
    PlanFlag(typer.Option(None, "--memory-gb", help="your device's memory as sold (a 64 GB M3 Max: 64), in place of "
                                                    "the profile's (hardware.memory_gb)"),
             float | None, "memory_gb", _in_range(1e-3, MAX_HARDWARE_GB)),
    PlanFlag(typer.Option(None, "--engine", help="serving engine: " + ", ".join(typing.get_args(Engine))
                          + "; default the scenario's, else llama.cpp for GGUF weights or an Apple GPU or CPU, else "
                            "vllm"), str | None, "engine", _one_of(Engine)),
    PlanFlag(typer.Option(False, "--attention-dp", help="MoE: attention data-parallel on the --tp GPUs, experts "
                                                        "spread over them (enable_attention_dp: TensorRT-LLM's DEP)"),
             bool, "enable_attention_dp", lambda value, flag: value or None),
    PlanFlag(typer.Option(None, "--weights", help="weight format: bf16, fp16, fp8, int8, awq, gptq, nvfp4, mxfp4; "
                                                  "GGUF presets (q4_k_m, q8_0, ...) for llama.cpp and ollama"),
             str | None, "quantization", _one_of(WeightFormat)),
    PlanFlag(typer.Option(None, "--kv-cache-dtype", help="auto, bf16, fp16, fp8"), str | None, "kv_cache_dtype",
             _one_of(KVCacheDtype)),
    PlanFlag(typer.Option(None, "--max-model-len", help="longest context per sequence (vLLM, SGLang, ...)"),
             int | None, "max_model_len", _in_range(1, MAX_TOKENS)),
    PlanFlag(typer.Option(None, "--ctx-size", help="llama.cpp: total context of all slots (-c); default the "
                                                   "model's"), int | None, "ctx_size", _in_range(1, MAX_TOKENS)),
    PlanFlag(RATE, float | None, "rate_per_s", _in_range(MIN_RATE_PER_S, MAX_RATE_PER_S)),
    PlanFlag(CONCURRENCY, int | None, names=("concurrency", "arrival_process")),
    PlanFlag(PROMPT_TOKENS, str | None, sources=("workload.prompt_tokens",), traffic=True),
    PlanFlag(OUTPUT_TOKENS, str | None, sources=("workload.output_tokens",), traffic=True),
    PlanFlag(TTFT_MS, float | None, sources=("slo.ttft_ms",), traffic=True),
    PlanFlag(ITL_MS, float | None, sources=("slo.itl_ms",), traffic=True),
    PlanFlag(TPOT_MS, float | None, sources=("slo.tpot_ms",), traffic=True),
    PlanFlag(typer.Option(None, "--profile", help="a hardware profile YAML file (your own device: hardware_profiles/"
                                                  "README.md; the same as --gpu FILE), or a calibrated profile folder "
                                                  "(sizer calibrate): measured step times"),
             Path | None, "calibrated_profile"),
    PlanFlag(typer.Option(False, "--simulate", help="add simulated latency at the scenario's rate and the goodput "
                                                    "rate (a gateway: the cheapest sizing search)"),
             bool, on_gateway=True),
    PlanFlag(typer.Option(None, "--emit", help=EMIT_HELP), str | None),
    PlanFlag(typer.Option(None, "--emit-to", help=EMIT_TO_HELP), Path | None),
    PlanFlag(WIDE, bool, on_gateway=True),
)
# Variant field -> the flag that sets it, for refusals of the field it set (`naming_flags`).
FLAGS = {name: f.flag for f in PLAN_FLAGS for name in (f.field, *f.names) if name}


def command(scenario: Path | None = typer.Argument(None, help="scenario YAML (see docs/scenario.md)"),
            **given: object) -> None:
    """Memory, parallel split, Little's-law capacity, step times and cost for a scenario.

    --prompt-tokens and --output-tokens replace the scenario's lengths with fixed ones, --ttft-ms and
    --itl-ms its SLO targets (with --simulate, the replicas are sized to meet them)."""
    flags = {f.flag: given[f.param] for f in PLAN_FLAGS}
    as_json, emit, emit_to = flags["--json"], flags["--emit"], flags["--emit-to"]
    if scenario is not None and is_gateway(scenario):
        gateway = kind("gateway")
        gateway.refuse_flags({f.flag: flags[f.flag] for f in PLAN_FLAGS if not f.on_gateway})
        return gateway.plan(scenario, as_json, search=flags["--simulate"], wide=flags["--wide"])
    flags["--gpu"], flags["--profile"] = _gpu_or_profile(flags["--gpu"], flags["--profile"])
    for f in PLAN_FLAGS:
        if f.check is not None:
            flags[f.flag] = f.check(flags[f.flag], f.flag)
    traffic = traffic_from_flags(None, **{f.param: flags[f.flag] for f in PLAN_FLAGS if f.traffic})
    emitter = kind("emit") if emit is not None or emit_to is not None else None
    if emitter is not None:
        emitter.check_emit(emit, emit_to, as_json, (scenario, flags["--model"], flags["--gpu"]))
    variant = dataclasses.replace(closed_loop_flag(flags["--concurrency"], flags["--rate"]),
                                  **{f.field: flags[f.flag] for f in PLAN_FLAGS if f.field})
    sources = {path: f.flag for f in PLAN_FLAGS if flags[f.flag] is not None for path in f.sources}
    file = str(scenario) if scenario is not None else None
    with naming_flags(variant, FLAGS, file), naming_traffic_flags(traffic, file):
        resolved = resolve(build_scenario(scenario, variant, traffic, sources))
    result = make_plan(resolved)
    if flags["--simulate"]:
        result = kind("day").add_energy(kind("simulate").add_simulation(result, resolved), resolved)
        if resolved.workload.schedule is not None:
            result = kind("simulate").add_day(result, resolved)
    text = emitter.plan_emitted(emit, resolved, result) if emitter is not None else None
    if as_json:
        typer.echo(to_json(result))
    else:
        render_plan(result, terminal(flags["--wide"], stderr=emits_to_stdout(emit, emit_to)))
    if emitter is not None:
        emitter.write_emitted(text, emit_to)
        emitter.note_memory_only(resolved, result)


# Typer reads a command's options from its signature: the table's, in its order, after the scenario argument.
command.__signature__ = inspect.Signature(
    [inspect.signature(command).parameters["scenario"]]
    + [inspect.Parameter(f.param, inspect.Parameter.KEYWORD_ONLY, default=f.option, annotation=f.annotation)
       for f in PLAN_FLAGS])
