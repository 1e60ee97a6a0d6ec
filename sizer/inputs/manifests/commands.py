"""A container's command line and the inference server it starts, as scenario deployment fields.

Servers read: `vllm serve MODEL` and `python -m vllm.entrypoints.openai.api_server --model MODEL`
(engine vllm); KServe's Hugging Face server `python -m huggingfaceserver --model_id MODEL`, which
runs vLLM with vLLM's own flags (engine vllm); `python -m sglang.launch_server --model-path MODEL`
(engine sglang); `trtllm-serve MODEL` (engine tensorrt-llm). Each server's flags that set a
deployment field are a table below (name -> field, parser); other flags are named as unknown to
sizer, neither modelled nor checked against the engine's own.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from sizer.errors import InputError
from sizer.inputs.config_keys import KEYS
from sizer.inputs.hf_store import bundled
from sizer.inputs.manifests.fields import HF_ID, get, hf_repo_id
from sizer.inputs.model_spec import CATALOG_DIR, catalog_names, load_config
from sizer.inputs.number_text import human_readable_int, parse_number
from sizer.inputs.scenario import ENGINE_NAMES, DeploymentSection, SpeculativeSection
from validation.errors import FieldError, excerpt
from validation.safe_load import load_json, loads_json
from validation.schema import check_key, join, key_for, read_key

SHELLS = ("sh", "bash", "dash", "ash", "zsh")
SHELL_OPERATORS = ("&&", "||", ";", ";;", "|", "&", "(", ")", ">", "<", ">>", "|&", ">&", "<&", "&>", "&>>", ">|")
# the redirections among them: a number just before one is its file descriptor (`2>&1`), not an argument
REDIRECTIONS = (">", "<", ">>", ">&", "<&", ">|")


# ---- argv from a container ------------------------------------------------------------------


def container_env(container: dict, path: str, file: str) -> dict[str, str]:
    """The container's `env` entries known before it runs: a literal `value`, or "" for an entry with neither value
    nor `valueFrom` (Kubernetes sets it empty); a `valueFrom` is known only at run time (`run_time_env`)."""
    out = {}
    for name, item, where in _env_entries(container, path, file):
        if "valueFrom" not in item:
            value = get(item, "env[].value", where, file)
            out[name] = "" if value is None else value
    return out


def run_time_env(container: dict, path: str, file: str) -> list[str]:
    """Names of the container's `env` entries whose value comes from `valueFrom` (a secret, a config map, a field of
    the pod): sizer cannot read them."""
    return [name for name, item, _ in _env_entries(container, path, file) if "valueFrom" in item]


def _env_entries(container: dict, path: str, file: str) -> list[tuple[str, dict, str]]:
    """(name, entry, its path) of each named `env` entry."""
    where, out = join(path, "env"), []
    for i, item in enumerate(get(container, "env", path, file) or []):
        if not isinstance(item, dict):
            raise InputError(file, f"{where}[{i}]", f"expected a mapping with name and value, got {excerpt(item)}")
        name = get(item, "env[].name", f"{where}[{i}]", file)
        if name is not None:
            out.append((name, item, f"{where}[{i}]"))
    return out


def expand(text: str, env: dict[str, str], shell: bool) -> str:
    """Kubernetes' `$(VAR)` from the container's env (`$$` is a literal `$`, so `$$(VAR)` stays `$(VAR)`; an
    unknown name stays as written, as Kubernetes leaves it); in a shell script also `$VAR` and `${VAR}`, as the
    shell would."""
    text = re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(1) is None else env.get(m.group(1), m.group(0)), text)
    if shell:
        text = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)",
                      lambda m: env.get(m.group(1) or m.group(2), m.group(0)), text)
    return text


def tokens(container: dict, path: str, file: str, doc=None) -> list[str]:
    """command + args as argv, each list item one argument (as Kubernetes passes them, spaces and
    all), `$(VAR)` expanded from the container's env. Only the script of `sh -c` / `bash -c` is
    split, as that shell would (shlex); Helm values may give `command` or `args` as one such line."""
    env = container_env(container, path, file)
    items: list[tuple[str, str, bool]] = []          # (argument, field path, already split)
    for key in ("command", "args"):
        where = join(path, key)
        value = container.get(key)
        if value is None:
            continue
        if isinstance(value, str) and not (isinstance(doc, dict) and doc.get("kind")):
            items += [(expand(t, env, True), where, True) for t in shell_split(value, file, where)]
            continue
        kubernetes = isinstance(doc, dict) and bool(doc.get("kind"))
        for i, item in enumerate(get(container, key, path, file)):
            if isinstance(item, bool) or not isinstance(item, (str, int, float)):
                raise InputError(file, f"{where}[{i}]", f"expected a string, got {excerpt(item)}")
            if kubernetes and not isinstance(item, str):
                # Kubernetes' command and args are []string: the API server refuses a number ("cannot unmarshal
                # number into Go struct field Container...args of type string"); Helm values are text a template
                # quotes into the manifest
                raise InputError(file, f"{where}[{i}]", f"expected a string, got the number {excerpt(item)} "
                                                        f"(Kubernetes' {key} are strings: quote it, \"{item}\")")
            items.append((expand(item, env, False) if isinstance(item, str) else str(item), f"{where}[{i}]", False))
    argv: list[str] = []
    i = 0
    while i < len(items):
        token = items[i][0]
        argv.append(token)
        i += 1
        if Path(token).name not in SHELLS:
            continue
        # `sh -c SCRIPT`, `bash -ec SCRIPT`, `sh -x -c SCRIPT`: the script is one string to split
        while i < len(items) and items[i][0].startswith("-") and not items[i][0].startswith("--"):
            flag = items[i][0]
            argv.append(flag)
            i += 1
            if "c" in flag[1:]:
                if i < len(items) and not items[i][2]:
                    argv += [expand(t, env, True) for t in shell_split(items[i][0], file, items[i][1])]
                    i += 1
                break
    return argv


def shell_split(text: str, file: str, where: str) -> list[str]:
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)   # `a;b` and `a && b` split at the operator
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError as exc:
        raise InputError(file, where, f"not a valid shell command line ({exc}): {excerpt(text)}") from None


# `python3 -m dynamo.vllm` / `dynamo.sglang` (ai-dynamo/dynamo components/src/dynamo/{vllm,sglang}/args.py: the
# engine's argument parser with Dynamo's own flags added).
DYNAMO_WORKERS = {"dynamo.vllm": "vllm", "dynamo.sglang": "sglang"}


def server_start(argv: list[str]) -> tuple[str, int] | None:
    """(engine, index of the first argument after the server's command) of the first server in argv, or None."""
    for i, t in enumerate(argv):
        name = Path(t).name
        if name == "vllm" and argv[i + 1:i + 2] == ["serve"]:
            return "vllm", i + 2
        if "vllm.entrypoints" in t or name == "huggingfaceserver":
            return "vllm", i + 1
        if "sglang.launch_server" in t:
            return "sglang", i + 1
        if t in DYNAMO_WORKERS:             # NVIDIA Dynamo's workers take their engine's own flags
            return DYNAMO_WORKERS[t], i + 1
        if name == "trtllm-serve":
            return "tensorrt-llm", i + 2 if argv[i + 1:i + 2] == ["serve"] else i + 1
    return None


# ---- flag tables ------------------------------------------------------------------------------
#
# flag -> (deployment field, parser). A number sets the scenario's deployment field of that name and is
# checked against its declaration; "-" flags as each server's argument parser spells them, with `_`
# read as `-` (vLLM and TensorRT-LLM accept both). One table per engine, read both ways: `sizer check`
# reads a command line through it, and `--emit` writes each field with the first flag that sets it
# (sizer/outputs/emit.py with `flag_for` below and its `switch_for`), so a flag is added or renamed here once. The first
# spelling of each field is the pinned release's (tests/data/engine_args/, checked by
# tests/sizer/outputs/test_emit_args.py); later ones are older or shorter spellings still read.

_NUMBER = "number"
# Words a switch would be read with as its value (`--enable-prefix-caching false`): the engines' switches take none
SWITCH_WORDS = ("true", "false", "yes", "no", "on", "off", "0", "1")
VALUE_FLAGS = {                      # vLLM: `vllm serve --help` (vllm/engine/arg_utils.py)
    "--tensor-parallel-size": ("tensor_parallel_size", _NUMBER), "-tp": ("tensor_parallel_size", _NUMBER),
    "--pipeline-parallel-size": ("pipeline_parallel_size", _NUMBER), "-pp": ("pipeline_parallel_size", _NUMBER),
    "--data-parallel-size": ("data_parallel_size", _NUMBER), "-dp": ("data_parallel_size", _NUMBER),
    "--max-model-len": ("max_model_len", "length"), "--max-num-seqs": ("max_num_seqs", _NUMBER),
    "--max-num-batched-tokens": ("max_num_batched_tokens", _NUMBER), "--block-size": ("block_size", _NUMBER),
    "--gpu-memory-utilization": ("gpu_memory_utilization", _NUMBER),
    "--quantization": ("quantization", "quantization"), "-q": ("quantization", "quantization"),
    "--kv-cache-dtype": ("kv_cache_dtype", "kv"), "--dtype": ("dtype", "dtype"),
    "--speculative-config": ("speculative_config", "json"), "--model": ("model", "str"),
    "--model-id": ("model", "str"),                   # KServe huggingfaceserver's --model_id
    "--max-loras": ("max_loras", _NUMBER), "--max-lora-rank": ("max_lora_rank", _NUMBER),
    "--max-cpu-loras": ("max_cpu_loras", _NUMBER), "--stream-interval": ("stream_interval", _NUMBER),
    "--moe-backend": ("moe_backend", "moe_backend"),
    "--hf-overrides": ("model_overrides", "overrides"),   # config.json keys changed: the scenario's model.overrides
}
BOOL_FLAGS = {"--enable-prefix-caching": ("enable_prefix_caching", True),
              "--disable-prefix-caching": ("enable_prefix_caching", False),        # vLLM 0.33
              "--no-enable-prefix-caching": ("enable_prefix_caching", False),      # before it
              "--enable-chunked-prefill": ("enable_chunked_prefill", True),
              "--disable-chunked-prefill": ("enable_chunked_prefill", False),
              "--no-enable-chunked-prefill": ("enable_chunked_prefill", False),
              "--enable-expert-parallel": ("enable_expert_parallel", True),
              "--enable-lora": ("enable_lora", True)}
# SGLang: `python -m sglang.launch_server --help` (sglang/srt/server_args.py). --mem-fraction-static is the
# share of memory for weights and the KV pool, read as gpu_memory_utilization (as --emit sglang writes it);
# --chunked-prefill-size -1 turns chunked prefill off, and --ep-size above 1 shards the experts.
SGLANG_VALUE_FLAGS = {
    "--model-path": ("model", "str"), "--model": ("model", "str"),
    "--json-model-override-args": ("model_overrides", "overrides"),
    "--tp-size": ("tensor_parallel_size", _NUMBER), "--tp": ("tensor_parallel_size", _NUMBER),
    "--tensor-parallel-size": ("tensor_parallel_size", _NUMBER),
    "--pp-size": ("pipeline_parallel_size", _NUMBER), "--pipeline-parallel-size": ("pipeline_parallel_size", _NUMBER),
    "--dp-size": ("data_parallel_size", _NUMBER), "--dp": ("data_parallel_size", _NUMBER),
    "--data-parallel-size": ("data_parallel_size", _NUMBER),
    "--context-length": ("max_model_len", _NUMBER), "--mem-fraction-static": ("gpu_memory_utilization", _NUMBER),
    "--max-running-requests": ("max_num_seqs", _NUMBER), "--max-prefill-tokens": ("max_num_batched_tokens", _NUMBER),
    "--chunked-prefill-size": ("chunked_prefill_size", "chunk"), "--page-size": ("block_size", _NUMBER),
    "--quantization": ("quantization", "quantization"), "--kv-cache-dtype": ("kv_cache_dtype", "kv"),
    "--dtype": ("dtype", "dtype"), "--ep-size": ("expert_parallel_size", "ep"),
    "--expert-parallel-size": ("expert_parallel_size", "ep"),
    "--max-loras-per-batch": ("max_loras", _NUMBER), "--max-lora-rank": ("max_lora_rank", _NUMBER),
    "--stream-interval": ("stream_interval", _NUMBER),
    "--scheduler-recv-interval": ("scheduler_recv_interval", _NUMBER),
    # speculative decoding as separate flags (server_args.py), gathered into speculative_config: the algorithm,
    # its steps (the draft length), the draft model; sizer models a chain of drafts, so top-k 1 and steps + 1 draft
    # tokens, which --emit sglang writes
    "--speculative-algorithm": ("speculative_algorithm", "sglang_spec"),
    "--speculative-num-steps": ("speculative_num_steps", "spec_tokens"),
    "--speculative-eagle-topk": ("speculative_eagle_topk", "count"),
    "--speculative-num-draft-tokens": ("speculative_num_draft_tokens", "count"),
    "--speculative-draft-model-path": ("speculative_draft_model", "str"),
}
# sizer's speculative method -> SGLang's --speculative-algorithm (server_args.py; NEXTN is its MTP)
SGLANG_SPECULATIVE = {"eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN", "draft_model": "STANDALONE",
                      "ngram": "NGRAM"}
# SGLang 0.5.23 has no --enable-ep-moe (removed; --ep-size shards the experts)
SGLANG_BOOL_FLAGS = {"--disable-radix-cache": ("enable_prefix_caching", False),
                     "--enable-lora": ("enable_lora", True), "--enable-dp-attention": ("enable_attention_dp", True)}
# SGLang under attention DP (`--dp-size N --enable-dp-attention`, v0.5.23's `--attn-dp-size N`) reads these two as
# the whole server's and gives each of its N ranks value // N, where sizer's deployment fields (and vLLM's flags) are
# one rank's. SGLang v0.5.23 (the release of tests/data/engine_args/sglang.json), python/sglang/srt/arg_groups/
# parallel_hook.py `_handle_data_parallelism`: "chunked_prefill_size=cfg.chunked_prefill_size // cfg.attn_dp_size"
# ("DP attention is enabled. chunked prefill size is adjusted from ..."); python/sglang/srt/mem_cache/
# kv_cache_configurator.py `resolve_max_num_reqs` ("max concurrent requests (per dp worker)"): "requested_per_worker =
# max(1, max_num_reqs // self.attn_dp_size)". --max-prefill-tokens is not divided: each rank's scheduler takes it
# whole (scheduler.py, tp_worker.py get_schedule().max_prefill_tokens). --emit sglang writes these fields times the
# ranks; `sizer check` divides them back (`_sglang_attention_dp`).
SGLANG_SERVER_WIDE = ("max_num_seqs", "chunked_prefill_size")
# Flags an engine has removed, with what replaced them: named, never read. SGLang's --enable-ep-moe: "set
# --ep-size to the same value as --tp-size instead" (sglang docs/advanced_features/server_arguments.md).
REMOVED_FLAGS = {"sglang": {"--enable-ep-moe": "--ep-size N (the --tp-size value)"}}
# TensorRT-LLM: `trtllm-serve --help` (tensorrt_llm/commands/serve.py). --kv_cache_free_gpu_memory_fraction
# is read as gpu_memory_utilization, which for engine tensorrt-llm is the KV cache's share of the memory the
# weights and the activation peak leave (memory_budget's share_of_free), as TensorRT-LLM takes it.
TRTLLM_VALUE_FLAGS = {
    "--model": ("model", "str"), "--tp-size": ("tensor_parallel_size", _NUMBER),
    "--pp-size": ("pipeline_parallel_size", _NUMBER), "--ep-size": ("expert_parallel_size", "ep"),
    "--max-batch-size": ("max_num_seqs", _NUMBER), "--max-num-tokens": ("max_num_batched_tokens", _NUMBER),
    "--max-seq-len": ("max_model_len", _NUMBER),
    "--kv-cache-free-gpu-memory-fraction": ("gpu_memory_utilization", _NUMBER),
}
TABLES = {"vllm": (VALUE_FLAGS, BOOL_FLAGS), "sglang": (SGLANG_VALUE_FLAGS, SGLANG_BOOL_FLAGS),
          "tensorrt-llm": (TRTLLM_VALUE_FLAGS, {})}


def flag_for(engine: str, *settings: str) -> str | None:
    """The engine's flag (its first spelling in TABLES, valued flags before switches) that sets one of `settings`
    (deployment fields); None when it has none. `sizer check` names it, `--emit` writes it."""
    values, bools = TABLES.get(engine, ({}, {}))
    return next((flag for table in (values, bools) for flag, (setting, _) in table.items() if setting in settings),
                None)
# Values, both ways: each spelling an engine's flag takes -> sizer's value; --emit writes a value's first spelling
# (`spelling`). --quantization: the weight format (w8a8_int8, SGLang's INT8 W8A8, before vLLM's MoE-only
# experts_int8); EMITTED_QUANTIZATION: the formats --emit names a method for on each engine (a format a checkpoint
# must already be in, except fp8, which the engines quantise on load); 16-bit formats are a --dtype instead.
QUANTIZATION = {"fp8": "fp8", "awq": "awq", "awq_marlin": "awq", "gptq": "gptq", "gptq_marlin": "gptq",
                "modelopt": "fp8", "modelopt_fp4": "nvfp4", "mxfp4": "mxfp4", "compressed-tensors": "auto",
                "fbgemm_fp8": "fp8", "w8a8_int8": "int8", "experts_int8": "int8", "w8a8_fp8": "fp8"}
# An explicit `--quantization gptq` or `awq` keeps vLLM's and SGLang's own slower kernels where Marlin runs the
# checkpoint (override_quantization_method; sizer/analytic/format_support.py [VLLM-MARLIN-COMPAT])
FORCED_KERNELS = {m: (f"{ENGINE_NAMES['vllm']} and SGLang then run their {k} kernel even where Marlin could "
                      f"(only {m}_marlin, or no --quantization for a checkpoint that states it, asks for Marlin); "
                      f"sizer prices the {m.upper()} weights as the plan's kernel line says, not that kernel's speed")
                  for m, k in (("gptq", "ExLlama gptq_gemm"), ("awq", "awq_gemm"))}
EMITTED_QUANTIZATION = {"vllm": ("fp8", "awq", "gptq", "nvfp4", "mxfp4"),
                        "sglang": ("fp8", "awq", "gptq", "nvfp4", "mxfp4", "int8")}
KV_DTYPES = {"auto": "auto", "fp8": "fp8", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2",
             "bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "half": "fp16"}
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32", "auto": None}
# vLLM's --moe-backend values sizer prices (its other kernels are refused naming these): auto, and Marlin for MXFP4
# experts (deployment.moe_backend)
MOE_BACKENDS = {"auto": "auto", "marlin": "marlin"}


def spelling(table: dict[str, str | None], value: str) -> str:
    """What --emit writes for sizer's `value`: the first spelling `table` reads as it."""
    return next(spelled for spelled, meant in table.items() if meant == value)


# --max-model-len auto (or -1): vLLM fits the longest context its KV cache holds, at most the model's
# (vllm-project/vllm#29431).
AUTO_LENGTHS = ("auto", "-1")
SPEC_METHODS = {"ngram": "ngram", "eagle": "eagle", "eagle3": "eagle3", "medusa": "medusa", "mtp": "mtp",
                "deepseek_mtp": "mtp", "draft_model": "draft_model"}


def parse_vllm_args(argv: list[str], file: str) -> tuple[dict, str, list[str]]:
    """vLLM's command line -> (deployment fields, model reference, notes on flags not modelled)."""
    _, fields, model, notes = parse_server_args(argv, file)
    return {k: v for k, v in fields.items() if k != "engine"}, model, notes


def dashed(flag: str) -> str:
    """A long flag as the tables spell it: argparse and click take `--max_model_len` for `--max-model-len`."""
    return "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag


def parse_server_args(argv: list[str], file: str, stated_model: str | None = None) -> tuple[str, dict, str, list[str]]:
    """A server's command line -> (engine, deployment fields, model reference, notes on flags not modelled).
    `stated_model`: the model its object names (a KServe storageUri, a chart's model), which the
    command line loads from wherever that object puts it."""
    engine, start = server_start(argv) or ("vllm", len(argv))
    values, bools = TABLES[engine]
    rest, model, fields, ignored, removed, notes_on_repeats = argv[start:], None, {}, [], [], []
    # a shell script goes on after the server's command line (`vllm serve ... && echo done`)
    end = next((i for i, t in enumerate(rest) if t in SHELL_OPERATORS), len(rest))
    if 0 < end < len(rest) and rest[end] in REDIRECTIONS and rest[end - 1].isdigit() and not (
            end > 1 and rest[end - 2].startswith("-") and rest[end - 2].lstrip("-") and "=" not in rest[end - 2]
            and rest[end - 2] not in bools):
        end -= 1                            # `2>&1`: the 2 is the descriptor (after a valued flag, its value)
    rest = rest[:end]
    if rest and not rest[0].startswith("-"):
        model, rest = rest[0], rest[1:]
        if rest and not rest[0].startswith("-"):
            raise InputError(file, excerpt(rest[0], quote=False),
                             f"a second positional argument after the model {excerpt(model)}; "
                             f"{ENGINE_NAMES[engine]} takes one (its argument parser refuses another)")
    i, stated = 0, {}                   # stated: field -> (the flag as written, its value) that set it last
    while i < len(rest):
        token = rest[i]
        typed, equals, inline = token.partition("=")
        flag = dashed(typed)                                        # --max_model_len too
        if typed.startswith("-") and len(typed.split()) > 1:
            # `- --tensor-parallel-size 2` as one list item: Kubernetes passes it whole, and the engine's parser reads
            # an argument holding a space as a positional one (argparse's _parse_optional), which it refuses
            raise InputError(file, typed.split()[0], f"one argument holds the flag and more ({excerpt(token)}): the "
                                                     f"server gets it as one word, which {ENGINE_NAMES[engine]}'s "
                                                     "parser refuses; write the flag and its value as two arguments, "
                                                     f"or as {typed.split()[0]}=VALUE")
        if flag in bools:
            following = rest[i + 1] if i + 1 < len(rest) else ""
            given = inline or (following if following.lower() in SWITCH_WORDS else "")
            if "=" in token or given:
                raise InputError(file, excerpt(typed, quote=False),
                                 f"is a switch, given {excerpt(given)}: it takes no value (the engine's argument "
                                 "parser refuses one); write the flag alone, or leave it out to keep the engine's "
                                 "default")
            key, value = bools[flag]
            _restated(stated, key, typed, value, notes_on_repeats, engine)
            fields[key] = value
            i += 1
            continue
        following = rest[i + 1] if i + 1 < len(rest) else None
        # `--flag=VALUE` holds its value (`--flag=` an empty one: the next argument is not it)
        takes_next = not equals and following is not None and not (
            following.startswith("-") and not isinstance(parse_number(following), (int, float)))
        value = inline if equals else following if takes_next else None
        i += 1 + (1 if takes_next else 0)
        if flag in REMOVED_FLAGS.get(engine, {}):
            removed.append(f"{typed} (use {REMOVED_FLAGS[engine][flag]})")
            i -= 1 if takes_next else 0         # a switch: what follows is the next flag
            continue
        if flag not in values:
            if not flag.startswith("-"):
                raise InputError(file, excerpt(token, quote=False),
                                 f"a word {ENGINE_NAMES[engine]} does not take here (a second value for a flag, or a "
                                 "positional argument its parser refuses)")
            ignored.append(typed)
            continue
        if value is None or not value.strip():
            raise InputError(file, typed, "expected a value" + (f", got {excerpt(value)}" if value else ""))
        key, kind = values[flag]
        fields[key] = _flag_value(typed, key, value, kind, file)     # errors name the flag as written
        _restated(stated, key, typed, fields[key], notes_on_repeats, engine)
        if key == "quantization" and value.strip() in FORCED_KERNELS and engine in ("vllm", "sglang"):
            notes_on_repeats.append(f"{typed} {value.strip()}: {FORCED_KERNELS[value.strip()]}")
    # `vllm serve A --model B` serves A: the positional model_tag replaces --model (vllm/entrypoints/cli/serve.py)
    model = stated_model or (model if engine == "vllm" and model else None) or fields.pop("model", None) or model
    fields.pop("model", None)
    if not model:
        raise InputError(file, SERVER_COMMANDS[engine],
                         f"no model given ({SERVER_COMMANDS[engine]} MODEL or --model MODEL)")
    dtype = fields.pop("dtype", None)
    if dtype and "quantization" not in fields:
        fields["quantization"] = dtype
    if engine == "sglang":
        notes_on_repeats += _sglang_attention_dp(fields, stated, file)
    chunk = fields.pop("chunked_prefill_size", None)
    if chunk is not None:
        fields["enable_chunked_prefill"] = chunk > 0
        if chunk > 0:
            fields["max_num_batched_tokens"] = chunk
    if fields.pop("expert_parallel_size", 1) > 1:
        fields["enable_expert_parallel"] = True
    notes = _sglang_speculative(fields, file, model) + notes_on_repeats
    notes += [unread_flags_note(engine, ignored)] if ignored else []
    notes += [f"{ENGINE_NAMES[engine]} flag removed from the engine, not read: {r}" for r in removed]
    if fields.get("max_model_len") == "auto":
        del fields["max_model_len"]
        notes.append("--max-model-len auto: vLLM fits the longest context its KV cache holds, at most the model's; "
                     "sizer checks the model's own limit, which vLLM shortens where it does not fit")
    return engine, {"engine": engine, **fields}, model, notes


def _sglang_attention_dp(fields: dict, stated: dict, file: str) -> list[str]:
    """SGLang's `--tp-size T --dp-size N --enable-dp-attention` in sizer's fields (docs/moe.md): T GPUs in N
    attention-DP ranks of T / N GPUs each, the experts spread over all T; its whole-server limits
    (SGLANG_SERVER_WIDE) as one rank's. N = T is sizer's `enable_attention_dp` on T GPUs; N < T keeps T / N GPUs of
    tensor parallelism in each rank: data_parallel_size N with enable_expert_parallel. Notes on what SGLang changed."""
    if not fields.pop("enable_attention_dp", False):
        return []
    switch = stated["enable_attention_dp"][0]
    gpus, ranks = fields.get("tensor_parallel_size", 1), fields.get("data_parallel_size", 1)
    if ranks == 1:          # parallel_hook.py: attention DP runs only with more than one rank (attn_dp_enabled_of)
        return [f"{switch} with one data-parallel rank: SGLang runs no attention DP"]
    if gpus % ranks:
        flag = stated["data_parallel_size"][0]
        tp = stated.get("tensor_parallel_size", ("--tp-size (default 1)",))[0]
        raise InputError(file, flag, f"{ranks} attention-DP ranks ({switch}) do not divide the {gpus} GPUs of {tp} "
                                     f"(SGLang asserts tp_size % dp_size == 0); expected a divisor of {gpus}")
    notes = []
    for field in SGLANG_SERVER_WIDE:
        whole = fields.get(field)
        if whole is None or whole <= 0:             # -1: SGLang's chunked prefill off
            continue
        fields[field] = whole // ranks if field == "chunked_prefill_size" else max(1, whole // ranks)
        if fields[field] == 0:
            notes.append(f"{stated[field][0]} {whole} under {switch} gives each of {ranks} ranks {whole} // "
                         f"{ranks} = 0 tokens: SGLang turns chunked prefill off")
    if gpus == ranks:
        fields["enable_attention_dp"] = True
        fields.pop("data_parallel_size")
    else:
        fields["tensor_parallel_size"] = gpus // ranks
        fields["enable_expert_parallel"] = True
    return notes


def _restated(stated: dict, key: str, typed: str, value, notes: list[str], engine: str) -> None:
    """Record that flag `typed` set field `key` to `value`; a field set before to another value gets a note: the
    engine's parser keeps the last (argparse, click), and so does sizer, but a command line that says two things
    usually means one of them was not meant."""
    if key in stated and stated[key][1] != value:
        before, was = stated[key]
        shown = lambda flag, v: flag if isinstance(v, bool) else f"{flag} {v}"      # noqa: E731
        notes.append(f"{shown(before, was)} and later {shown(typed, value)} set the same setting: "
                     f"{ENGINE_NAMES[engine]} takes the last, and so does this check")
    stated[key] = (typed, value)


def unread_flags_note(engine: str, flags: list[str]) -> str:
    """The note on flags in no table above. sizer holds only the flags it reads, not each engine's whole list
    (tests/data/engine_args/ pins one release's, for tests), so it cannot tell an engine's own flag from one the
    engine lacks, which stops the engine at start: the note says they are unchecked."""
    name = ENGINE_NAMES[engine]
    return (f"{name} flags unknown to sizer, not modelled and not checked (a flag {name} does not have stops it "
            f"at start): {' '.join(sorted(set(flags)))}")


# SGLang's own (steps, top-k, draft tokens) when --speculative-num-steps is not given (and neither are top-k nor
# draft tokens: SGLang asserts all three or none): `_auto_choose_speculative_params` in
# python/sglang/srt/arg_groups/speculative_hook.py of SGLang v0.5.23 (the release of tests/data/engine_args/
# sglang.json), called for the EAGLE family (EAGLE, EAGLE3, NEXTN) and STANDALONE: STANDALONE (3, 1, 4); else by
# the target's architecture, (5, 4, 8) for those below, (3, 1, 4) for any other. NGRAM chooses by its own BFS
# breadth (`_handle_ngram`), not modelled.
SGLANG_AUTO_SPECULATIVE = (3, 1, 4)
SGLANG_AUTO_SPECULATIVE_WIDE = {arch: (5, 4, 8) for arch in ("LlamaForCausalLM", "Grok1ForCausalLM",
                                                             "Grok1VForCausalLM")}


def _sglang_auto_speculative(algorithm: str, model: str, file: str) -> tuple[tuple[int, int, int], str] | None:
    """(SGLang's auto-chosen steps, top-k, draft tokens, why) for an algorithm given without its draft length; None
    where sizer cannot tell which SGLang picks (NGRAM, or a target whose config.json sizer cannot read)."""
    if algorithm == "draft_model":
        return SGLANG_AUTO_SPECULATIVE, "for STANDALONE"
    if algorithm == "ngram":
        return None
    try:
        config = load_config(model_reference(model, file, "--model-path")[0], file, "--model-path")
        arch = (read_key(KEYS["architectures"], config.config, config.config_file)[0] or ["unknown"])[0]
    except FieldError:                  # the model's own error is raised where the plan reads it
        return None
    return SGLANG_AUTO_SPECULATIVE_WIDE.get(arch, SGLANG_AUTO_SPECULATIVE), f"for {arch}"


def _sglang_speculative(fields: dict, file: str, model: str) -> list[str]:
    """SGLang's speculative flags (popped from `fields`) -> `speculative_config`, as vLLM's JSON reads; the notes on
    what sizer does not model (a tree of drafts) and on the draft length SGLang chose itself."""
    algorithm, steps = fields.pop("speculative_algorithm", None), fields.pop("speculative_num_steps", None)
    topk, drafts = fields.pop("speculative_eagle_topk", None), fields.pop("speculative_num_draft_tokens", None)
    draft = fields.pop("speculative_draft_model", None)
    if algorithm is None:
        return []
    notes = []
    if steps is None:
        name = SGLANG_SPECULATIVE[algorithm]
        if algorithm != "ngram" and (topk is not None or drafts is not None):
            raise InputError(file, "--speculative-num-steps", f"expected beside --speculative-eagle-topk and "
                                                              f"--speculative-num-draft-tokens: SGLang sets all "
                                                              f"three for {name} or chooses all three itself")
        auto = _sglang_auto_speculative(algorithm, model, file)
        if auto is None:
            return [f"SGLang --speculative-algorithm {name} without --speculative-num-steps: SGLang chooses the draft "
                    "length itself, which sizer does not model here; planned without speculative decoding"]
        (steps, topk, drafts), why = auto
        notes.append(f"SGLang --speculative-algorithm {name} without --speculative-num-steps: SGLang chooses "
                     f"{steps} steps, top-k {topk}, {drafts} draft tokens {why} (_auto_choose_speculative_params, "
                     "SGLang 0.5.23); sizer prices those")
    spec = {"method": algorithm, "num_speculative_tokens": steps}
    if algorithm == "draft_model":
        if draft is None:
            raise InputError(file, "--speculative-algorithm", "STANDALONE: expected --speculative-draft-model-path")
        spec["model"] = catalog_name_for(draft, file, "--speculative-draft-model-path")
    fields["speculative_config"] = spec
    if (topk or 1) > 1 or (drafts is not None and drafts != steps + 1):
        stated = (("--speculative-eagle-topk", topk), ("--speculative-num-draft-tokens", drafts))
        given = (" ".join(f"{flag} {value}" for flag, value in stated if value is not None) if not notes else
                 f"top-k {topk}, {drafts} draft tokens")
        notes.append(f"SGLang {given}: a tree of drafts, not modelled; sizer prices a chain of {steps} (top-k 1, "
                     f"{steps + 1} draft tokens)")
    return notes


MAX_COUNT = 1024            # SGLang's draft top-k and draft tokens: a bound on a count no server approaches
SERVER_COMMANDS = {"vllm": "vllm serve", "sglang": "sglang.launch_server", "tensorrt-llm": "trtllm-serve"}
SPECULATIVE_TOKENS = key_for(SpeculativeSection, "num_speculative_tokens")


# vLLM's flags that take its human-readable integers (`32k`, `1M`: vllm/utils/argparse_utils.py human_readable_int;
# docs.vllm.ai/en/latest/cli "Human-readable integer arguments"); its other integer flags, and SGLang's (argparse) and
# trtllm-serve's (click), read the text as Python's int() does, and refuse `1k`, `64.0` or `1e3`
HUMAN_READABLE_FLAGS = ("--max-model-len", "--max-num-batched-tokens")


def engine_number(text: str, flag: str, tp: type = int):
    """A flag's value as the engine's parser reads it (an int, a float), or the text as it is where the parser
    refuses it (for its key to refuse, naming the flag)."""
    try:
        if tp is float:
            return float(text)
        return human_readable_int(text) if dashed(flag) in HUMAN_READABLE_FLAGS else int(text)
    except ValueError:              # also a number of more digits than int() reads
        return text


def _engine_int(value: str, flag: str, file: str, tp: type = int):
    """engine_number, with a number the engine's parser refuses (`1k` on --max-num-seqs, `64.0`, `1e3`: sizer's own
    number text) refused naming the flag and why."""
    number = engine_number(value, flag, tp)
    if isinstance(number, str) and tp is int and isinstance(parse_number(value), (int, float)):
        if dashed(flag) in HUMAN_READABLE_FLAGS:
            raise InputError(file, flag, f"expected an integer in digits or with vLLM's suffix (32k = 32,000; 32K = "
                                         f"32,768, a binary suffix on a whole number only), got {excerpt(value)}")
        suffixed = value.strip()[-1:] in "kKmMgGtT"
        raise InputError(file, flag, f"expected an integer written in digits, got {excerpt(value)}: the server's "
                                     "parser reads this flag with int() and refuses it"
                                     + (f" (suffixes such as 32k are vLLM's on {' and '.join(HUMAN_READABLE_FLAGS)} "
                                        "only)" if suffixed else ""))
    return number


def _flag_value(flag: str, key: str, value: str, kind: str, file: str):
    if kind == "length" and value.strip().lower() in AUTO_LENGTHS:
        return "auto"
    if kind in (_NUMBER, "length"):
        spec = key_for(DeploymentSection, key, flag)
        return check_key(spec, _engine_int(value, flag, file, float if spec.tp is float else int), file, flag)
    if kind == "spec_tokens":
        return check_key(SPECULATIVE_TOKENS, _engine_int(value, flag, file), file, flag)
    if kind == "count":
        number = _engine_int(value, flag, file)
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= MAX_COUNT:
            raise InputError(file, flag, f"expected a whole number from 1 to {MAX_COUNT}, got {excerpt(value)}")
        return number
    if kind == "sglang_spec":
        methods = {name: method for method, name in SGLANG_SPECULATIVE.items()}
        if value.upper() not in methods:
            raise InputError(file, flag, f"{excerpt(value)} is not modelled; expected one of: {', '.join(methods)}")
        return methods[value.upper()]
    if kind in ("chunk", "ep"):                  # -1 / 0: off (SGLang's chunked prefill), else a size
        number = _engine_int(value, flag, file)
        if isinstance(number, bool) or not isinstance(number, int) or number < -1:
            raise InputError(file, flag, f"expected a whole number (-1 for off), got {excerpt(value)}")
        return number
    table = {"quantization": QUANTIZATION, "kv": KV_DTYPES, "dtype": DTYPES, "moe_backend": MOE_BACKENDS}.get(kind)
    if table is not None:
        if value.lower() not in table:
            raise InputError(file, flag, f"{excerpt(value)} is not modelled; expected one of: {', '.join(table)}")
        return table[value.lower()]
    if kind == "overrides":
        overrides = loads_json(value, file, flag)
        if not isinstance(overrides, dict):
            raise InputError(file, flag, f"expected a JSON object of config.json keys, got {excerpt(overrides)}")
        return overrides
    if kind == "json":
        spec = loads_json(value, file, flag)
        if not isinstance(spec, dict):
            raise InputError(file, flag, f"expected a JSON object, got {excerpt(spec)}")
        method = SPEC_METHODS.get(str(spec.get("method", "draft_model" if spec.get("model") else "")).lower())
        if method is None or "num_speculative_tokens" not in spec:
            raise InputError(file, flag,
                             f"expected method (one of {', '.join(SPEC_METHODS)}) and num_speculative_tokens")
        # JSON text ("4") would be read by vLLM as a string: `check_key` refuses it too
        tokens = check_key(SPECULATIVE_TOKENS, spec["num_speculative_tokens"], file, f"{flag}.num_speculative_tokens")
        out = {"method": method, "num_speculative_tokens": tokens}
        if method == "draft_model":
            draft = spec.get("model")
            if not isinstance(draft, str):
                raise InputError(file, f"{flag}.model", f"expected a model name, got {excerpt(draft)}")
            out["model"] = catalog_name_for(draft, file)
        return out
    return value


# ---- the model -------------------------------------------------------------------------------


def catalog_name_for(model_ref: str, file: str | None, field: str = "vllm serve") -> str:
    """An HF repo id (or catalog name, or config path; `hf://` stripped) -> what `model.name` accepts."""
    return model_reference(model_ref, file, field)[0]


def model_reference(model_ref: str, file: str | None, field: str = "vllm serve") -> tuple[str, str | None]:
    """An HF repo id, catalog name, config path or weights folder -> (what `model.name` accepts, the
    assumption made to get there, None when none was).

    Exact `_sizer.hf_repo` match first; then the same repo without -Instruct/-Chat/-it/-hf words and
    a leading Meta- (a fine-tune has its base model's architecture); then an HF id in sizer's bundled
    configs (sizer.inputs.hf_store), read as itself. A path that is not here (weights
    synced into the pod: `/models/gpt-oss-120b`, `/data/Qwen/Qwen2.5-7B-Instruct`, a Hugging Face cache
    folder `models--org--name`) is read as the model its last components name, and says so.
    """
    hub = model_ref.startswith("hf://")
    model_ref = hf_repo_id(model_ref, file, field) if hub else model_ref
    names = catalog_names()
    if model_ref.lower() in names or (not hub and _exists(model_ref)):
        return model_ref, None
    repos = _catalog_repos(tuple(names))
    for key in (model_ref.lower(), _base_repo(model_ref)):
        if key in repos:
            return repos[key], None
    if HF_ID.fullmatch(model_ref) and bundled(model_ref):      # read offline from sizer's bundled HF configs
        return model_ref, None
    if not hub and "/" in model_ref.strip("/") and not HF_ID.fullmatch(model_ref) or model_ref.startswith("/"):
        for candidate in _path_candidates(model_ref):
            found = candidate.lower() if candidate.lower() in names else \
                repos.get(candidate.lower()) or repos.get(_base_repo(candidate)) or _by_repo_name(candidate, repos) \
                or (candidate if HF_ID.fullmatch(candidate) and bundled(candidate) else None)
            if found:
                return found, (f"model path {excerpt(model_ref)} is not on this machine; read as {found}, "
                               f"from its folder name {excerpt(candidate)}")
    raise InputError(file, field, f"model {excerpt(model_ref)} is not in the catalog (`sizer models`); give --model "
                     "(a catalog name or config.json path) or sizer.model")


def _catalog_repos(names: tuple[str, ...]) -> dict[str, str]:
    """Each catalog model's HF repo id (and its base repo's), lower case -> catalog name."""
    repos: dict[str, str] = {}
    for name in names:
        repo = load_json(CATALOG_DIR / f"{name}.json").get("_sizer", {}).get("hf_repo")
        if repo:
            repos[repo.lower()] = name
            repos[_base_repo(repo)] = repos.get(_base_repo(repo), name)
    return repos


def _path_candidates(path: str) -> list[str]:
    """What a weights folder's path may name, most specific first: a Hugging Face cache folder's repo
    (`models--org--name/snapshots/HASH`), the last two components as `org/name`, the last one."""
    parts = [p for p in re.split(r"[/\\]+", path) if p and p not in (".", "..")]
    out = []
    for p in parts:
        m = re.fullmatch(r"models--([^/]+?)--(.+)", p)
        if m:
            out.append(f"{m.group(1)}/{m.group(2)}")
    if len(parts) >= 2:
        out.append("/".join(parts[-2:]))
    if parts:
        out.append(parts[-1])
    return out


def _by_repo_name(name: str, repos: dict[str, str]) -> str | None:
    """A folder named as a repo without its organisation (`Llama-3.1-8B-Instruct`) -> the catalog model whose
    repo that is, when exactly one is."""
    if "/" in name:
        return None
    hits = {v for k, v in repos.items() if k.partition("/")[2] in (name.lower(), _base_repo(f"x/{name}")[2:])}
    return hits.pop() if len(hits) == 1 else None


def _exists(path: str) -> bool:
    try:
        return Path(path).exists()
    except (OSError, ValueError):           # a name too long for a path, a NUL byte
        return False


def _base_repo(repo: str) -> str:
    """`meta-llama/Meta-Llama-3.1-8B-Instruct` -> `meta-llama/llama-3.1-8b`: fine-tunes share the base's shapes."""
    org, _, name = repo.lower().partition("/")
    words = [w for w in re.sub(r"^meta-", "", name).split("-") if w not in ("instruct", "chat", "it", "hf")]
    return f"{org}/{'-'.join(words)}"
