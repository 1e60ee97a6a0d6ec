"""Runnable output: the configuration sizer planned, as a `vllm serve` command, a Kubernetes
Deployment (a LeaderWorkerSet when one replica spans nodes), an `sglang.launch_server` command,
a `llama-server` command, or an Ollama Modelfile with the `ollama serve` environment.

`serving_config` gathers every setting the plan relied on from a `Resolved` (the split, the
formats, the scheduling settings with engine defaults applied, the speculative config) and the
replica count; the writers turn that one typed value into text. Nothing is left to the engine's
defaults: a default that changes between engine versions would change what was sized.
`sizer check` reads an emitted manifest back (sizer/inputs/manifest.py) to the same plan.

Safe by construction, whatever a name or path holds: commands are argv lists rendered with shell
quoting, manifests are built as objects and written by the YAML library (one document), `$` in a
container's command or arguments is written `$$` (Kubernetes expands `$(VAR)` there and un-escapes
`$$`), comment lines escape every non-printable character, and the Modelfile is written by `printf`
with quoted lines, not a heredoc. A model, draft model or GGUF path holding a control character or
a line separator, which no engine or Hugging Face id has, is refused in one line (`_check_loadable`).
"""

from __future__ import annotations

import json
import math
import re
import shlex
import unicodedata
from dataclasses import dataclass, replace
from decimal import Decimal

import yaml

from sizer.analytic.format_support import MARLIN_KERNELS as WEIGHT_ONLY_KERNELS
from sizer.analytic.format_support import NOT_MARLIN
from sizer.analytic.offload import all_gpu_layers
from sizer.errors import InputError
from sizer.inputs.hardware import all_profiles, is_bundled
from sizer.inputs.kubernetes_names import KubernetesNames, Schedule
from sizer.inputs.manifests.commands import DTYPES as ENGINE_DTYPES
from sizer.inputs.manifests.commands import (
    EMITTED_QUANTIZATION,
    QUANTIZATION,
    SGLANG_SERVER_WIDE,
    SGLANG_SPECULATIVE,
    flag_for,
    spelling,
)
from sizer.inputs.manifests.commands import TABLES as FLAG_TABLES
from sizer.inputs.model_spec import catalog_names, load_config
from sizer.inputs.scenario import ENGINE_NAMES
from sizer.sizing.cost import CostSummary
from sizer.sizing.presets import VLLM_BLOCK_SIZES
from sizer.sizing.resolve import QUANTISED_CACHE_TYPES, Resolved, SlotSettings, context_limit
from sizer.words import count
from validation.errors import excerpt, printable

FORMATS = ("vllm", "k8s", "sglang", "llamacpp", "ollama", "gke")   # gke: k8s selecting GKE's accelerator label
# --emit value -> the engine it runs, then the deployment.engine values whose plans it writes. vLLM's and SGLang's
# plans are each other's (every setting is written out, and both read them alike); another engine's plan rests on
# that engine's defaults (TensorRT-LLM's 32-token blocks and 2,048 sequences, its gpu_memory_utilization a share of
# the memory left free) and is refused, not written into a vLLM or SGLang command.
EMIT_ENGINES = {"vllm": ("vllm", "vllm", "sglang"), "k8s": ("vllm", "vllm", "sglang"),
                "gke": ("vllm", "vllm", "sglang"), "sglang": ("sglang", "sglang", "vllm"),
                "llamacpp": ("llama.cpp", "llama.cpp"), "ollama": ("ollama", "ollama")}

# The engine releases whose argument tables the emitted flags are checked against (tests/data/engine_args/):
# the image is pinned to the same release, and every default sizer assumed is written out explicitly, so a
# later release's defaults cannot change what was sized.
VLLM_RELEASE = "0.33.0"
# sizer's speculative methods that release's --speculative-config takes (vllm/config/speculative.py SpeculativeMethod
# in the 0.33.0 wheel: ngram, draft_model, suffix, custom_class and the EAGLE/MTP kinds; Medusa and MLP speculators
# were removed before it: tests/data/engine_args/vllm.json)
VLLM_SPECULATIVE = ("draft_model", "ngram", "eagle", "eagle3", "mtp")
VLLM_IMAGE = f"vllm/vllm-openai:v{VLLM_RELEASE}"            # vLLM's published OpenAI-compatible server image
VLLM_ROCM_IMAGE = f"vllm/vllm-openai-rocm:v{VLLM_RELEASE}"  # its ROCm build, same release
PORT = 8000                                      # vLLM's default port
LLAMA_SERVER_PORT = 8080                         # llama-server's default port (tools/server/README.md)
ALL_INTERFACES = "0.0.0.0"                       # llama-server binds 127.0.0.1 unless told: unreachable in a container
# A Hugging Face token for the download, from a Secret: required for the gated organisations below (their model
# pages ask each user to accept a licence first: meta-llama's Llama models, google's Gemma), optional otherwise
# (the Secret's name and key: `kubectl create secret generic hf-token --from-literal=token=...`)
HF_TOKEN_SECRET = ("hf-token", "token")
GATED_REPOS = ("meta-llama/", "google/gemma")
# Published EAGLE draft heads for catalog models, used when the scenario names none (vLLM and SGLang refuse EAGLE
# without one): the EAGLE authors' Hugging Face repos (huggingface.co/yuhuili), trained on the Instruct models
DRAFT_HEADS = {("llama-3.1-8b", "eagle"): "yuhuili/EAGLE-LLaMA3.1-Instruct-8B",
               ("llama-3.1-8b", "eagle3"): "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}
NEEDS_DRAFT = ("eagle", "eagle3", "medusa")      # methods that run a separate draft model or head
SGLANG_DIST_PORT = 20000                         # SGLang's --dist-init-addr port in its multi-node examples


# What --emit k8s and gke write for a GPU (resource, node label, GPUs per node, GKE's accelerator type) is its
# profile's `kubernetes:` section (sizer/inputs/kubernetes_names.py; sources in hardware_profiles/README.md);
# a profile without one (Gaudi, TPU, local devices) has no Kubernetes emitter. GKE's node pools carry
# `cloud.google.com/gke-accelerator` (Google's accelerator type) instead of the product label.
GKE_LABEL = "cloud.google.com/gke-accelerator"

# sizer's 16-bit formats (--dtype, spelt as the engines read them: commands.py DTYPES)
WIDE_FORMATS = tuple(dict.fromkeys(fmt for fmt in ENGINE_DTYPES.values() if fmt))
ONLINE_FORMATS = ("fp8",) + WIDE_FORMATS         # what an engine makes from a 16-bit checkpoint on load


@dataclass(frozen=True)
class Speculative:
    method: str                      # sizer's (vLLM's) method name
    num_speculative_tokens: int
    model: str | None                # the draft model, as a Hugging Face id where the catalog knows it


@dataclass(frozen=True)
class ServingConfig:
    """Every setting a plan relied on, in engine terms."""
    name: str
    engine: str                      # deployment.engine: the engine the plan is for (EMIT_ENGINES)
    model: str                       # Hugging Face repo id where the catalog knows it, else the path or name
    gpu: str                         # hardware profile id
    gpu_name: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_size: int
    enable_expert_parallel: bool
    weight_format: str               # sizer's format name
    weights_from_checkpoint: bool    # the checkpoint holds the weights in that format
    weights_read_by_engine: bool     # ... and states it where the engine reads it unasked (no --quantization needed)
    # GPTQ / AWQ run by Marlin (as the plan priced them): --quantization names gptq_marlin / awq_marlin, since an
    # explicit gptq or awq makes vLLM and SGLang force their slower kernels (format_support [VLLM-MARLIN-COMPAT])
    marlin: bool
    kv_cache_dtype: str              # resolved: bf16, fp16, fp8, fp8_e4m3, fp8_e5m2
    max_model_len: int
    gpu_memory_utilization: float
    block_size: int
    block_size_stated: bool          # written as --block-size (not on Blackwell when only the engine's default)
    max_num_seqs: int
    max_num_batched_tokens: int
    enable_prefix_caching: bool
    enable_chunked_prefill: bool
    speculative: Speculative | None
    replicas: int
    replicas_source: str
    verdict: str
    replicas_memory_only: bool = False  # a plan without --simulate: replicas for memory alone, not for the SLO
    slots: SlotSettings | None = None   # llama.cpp and Ollama: slots, context, cache types, batches
    n_gpu_layers: int | None = None     # llama.cpp: layers on the GPU (all_gpu_layers: layers + 1; 0 on a CPU)
    lora: tuple[int, int, int] | None = None     # (max_loras, max_lora_rank, max_cpu_loras) with enable_lora
    nodes: int = 1                   # nodes one replica spans (gpus_per_node of the GPU's Kubernetes node shape)
    kubernetes: KubernetesNames | None = None   # how clusters schedule the GPU (its profile's `kubernetes:`)
    user_profile_file: str = ""      # the GPU's profile when it is the user's own ("" for a bundled one), named
                                     # when it lacks what an emitter needs
    attention_dp: bool = False          # attention DP on data_parallel_size GPUs, experts spread over them (DEP)
    stream_interval: int = 1            # tokens per streamed message after the first (1: every token)
    moe_backend: str = "auto"           # vLLM's MoE kernel (deployment.moe_backend): marlin, or auto (vLLM's choice)
    scheduler_recv_interval: int = 1    # SGLang: decode-only steps between polls for new requests (1: every step)
    config_overrides: str = ""          # model.overrides as JSON: config.json keys the engine must change too
    sglang_context: int = 0             # the longest context SGLang serves the model at (0: unstated)

    @property
    def gated(self) -> bool:
        """The model's Hugging Face repository asks for a token (GATED_REPOS)."""
        return self.model.startswith(GATED_REPOS)

    @property
    def own_gguf(self) -> bool:
        """The scenario's model is a GGUF file, which llama.cpp and Ollama load as it is (`gguf_file`)."""
        return self.model.lower().endswith(".gguf")

    @property
    def gpus_per_replica(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size


def serving_config(r: Resolved, cost: CostSummary | None, verdict: str, memory_only: bool = False) -> ServingConfig:
    """The plan's settings (engine defaults already applied by `resolve`) and the replica count it was costed
    at (a plan's, or the sizing pipeline's); one replica when none was sized, as the verdict says.
    `memory_only`: the count is a plan's memory estimate, not sized for the SLO (the comments say so)."""
    if not r.memory.fits:
        raise InputError(r.file, "--emit", f"nothing to emit: {verdict}")
    replicas, replicas_source = (cost.replicas, cost.replicas_source) if cost else (1, "none was sized")
    d, e, p = r.deployment, r.engine, r.parallel
    sc = d.speculative_config
    spec = None if sc is None else Speculative(sc.method, sc.num_speculative_tokens,
                                               _draft_model(sc.method, sc.model, r.model_name,
                                                            r.file))
    blackwell = "blackwell" in r.hardware.architecture.lower()
    model = model_reference(r.model_name, r.checkpoint.config, r.checkpoint.found_as)
    k8s = r.hardware.kubernetes
    per_node = k8s.schedule.gpus_per_node if k8s and k8s.schedule else p.gpus_per_replica
    return ServingConfig(
        name=r.name, engine=d.engine, model=model,
        gpu=r.hardware.id, gpu_name=r.hardware.name, tensor_parallel_size=p.tp, pipeline_parallel_size=p.pp,
        data_parallel_size=p.dp, enable_expert_parallel=p.expert_parallel, attention_dp=p.experts_span_dp,
        weight_format=r.weight_format.name, weights_from_checkpoint=r.weight_format.from_checkpoint,
        weights_read_by_engine=r.weight_format.read_by_engine,
        marlin=r.weight_format.name in NOT_MARLIN and r.execution.kernel == WEIGHT_ONLY_KERNELS[r.weight_format.name],
        kv_cache_dtype=r.kv_cache_dtype, max_model_len=e.max_model_len,
        gpu_memory_utilization=d.gpu_memory_utilization, block_size=e.block_size,
        # a hybrid model's block (544 tokens for Qwen3-Next at TP 2) is not one --block-size takes: vLLM aligns it
        block_size_stated=e.block_size in VLLM_BLOCK_SIZES
        and (not blackwell or e.sources.get("block_size") == "scenario"), max_num_seqs=e.max_num_seqs,
        max_num_batched_tokens=e.max_num_batched_tokens, enable_prefix_caching=e.enable_prefix_caching,
        enable_chunked_prefill=e.enable_chunked_prefill, speculative=spec, replicas=replicas,
        replicas_source=replicas_source, verdict=verdict, replicas_memory_only=memory_only, slots=r.slots,
        n_gpu_layers=(d.n_gpu_layers if d.n_gpu_layers is not None else all_gpu_layers(r.model, r.hardware))
        if r.slots else None,
        lora=(d.max_loras, d.max_lora_rank, d.max_cpu_loras or d.max_loras) if d.enable_lora else None,
        nodes=math.ceil(p.gpus_per_replica / per_node), kubernetes=k8s, stream_interval=d.stream_interval or 1,
        moe_backend=d.moe_backend or "auto", scheduler_recv_interval=d.scheduler_recv_interval or 1,
        config_overrides=json.dumps(r.model_overrides, separators=(",", ":")) if r.model_overrides else "",
        sglang_context=context_limit(r.model, "sglang").tokens,
        user_profile_file="" if is_bundled(r.hardware) else r.hardware.profile_file)


def _draft_model(method: str, model: str | None, target: str, file: str | None) -> str | None:
    """The draft model an engine loads: the scenario's, else a published EAGLE head for the target; a method
    that needs one and has none is refused (the engine would not start)."""
    if model:
        return model_reference(model)
    if method not in NEEDS_DRAFT:
        return None
    head = DRAFT_HEADS.get((target.lower(), method))
    if head is None:
        raise InputError(file, "deployment.speculative_config.model",
                         f"{method} speculative decoding runs a draft head the engine must load; expected its "
                         f"Hugging Face repo (none is known for {excerpt(target)})")
    return head


def as_model_word(reference: str) -> str:
    """A model reference as a word an engine reads as a model, never as one of its flags: a path that begins with
    '-' (a folder named `--trust-remote-code` beside the scenario) as './-...' (a Hugging Face id cannot)."""
    return f"./{reference}" if reference.startswith("-") else reference


def model_reference(name: str, config: dict | None = None, found_as: str = "catalog") -> str:
    """What an engine loads: the catalog entry's Hugging Face repo (`_sizer.hf_repo`), else the name as given
    (a cached Hugging Face id, or a path). A draft model is looked up by name (`config` None)."""
    if config is None:
        if name.lower() not in catalog_names():
            return name
        config = load_config(name).config
    meta = config.get("_sizer") if found_as == "catalog" else None
    repo = meta.get("hf_repo") if isinstance(meta, dict) else None
    return repo if isinstance(repo, str) and repo else name


def emit(fmt: str, c: ServingConfig) -> str:
    """`c` as `fmt` (one of FORMATS); a slot engine's plan only as its own engine's configuration."""
    _check_loadable("the model", c.model)
    if c.speculative and c.speculative.model:
        _check_loadable("the draft model", c.speculative.model)
    runs, *takes = EMIT_ENGINES[fmt]
    if c.engine not in takes:
        targets = [f for f, (_, *engines) in EMIT_ENGINES.items() if c.engine in engines]
        to_do = (f"emit {', '.join(targets[:-1])} or {targets[-1]}" if len(targets) > 1 else f"emit {targets[0]}"
                 if targets else f"sizer writes no {ENGINE_NAMES[c.engine]} configuration: plan with "
                                 f"deployment.engine {' or '.join(takes)} (--engine) to emit {fmt}")
        raise InputError(None, "--emit", f"{fmt} runs {ENGINE_NAMES[runs]}, but the plan is for deployment.engine "
                                         f"{c.engine}, whose defaults and memory rules {ENGINE_NAMES[runs]} does not "
                                         f"share; {to_do}")
    if c.config_overrides and c.slots:       # llama.cpp's --override-kv names GGUF keys, not config.json's
        raise InputError(None, "--emit", f"{fmt}: model.overrides change config.json keys, which "
                                         f"{ENGINE_NAMES[c.engine]} does not read; the emitted server would run the "
                                         "model as its file states")
    return {"vllm": vllm_script, "k8s": kubernetes_manifest, "sglang": sglang_script, "llamacpp": llamacpp_script,
            "ollama": ollama_script, "gke": gke_manifest}[fmt](c)


# ---- vLLM ---------------------------------------------------------------------------------------


def switch_for(engine: str, field: str, on: bool) -> str:
    """The bare flag that turns deployment `field` on or off on `engine` (the same table)."""
    _, switches = FLAG_TABLES[engine]
    return next(flag for flag, (key, value) in switches.items() if key == field and value is on)


def _valued(engine: str, pairs: list[tuple[str, str]]) -> list[str]:
    return [word for field, value in pairs for word in (flag_for(engine, field), value)]


def vllm_argv(c: ServingConfig) -> list[str]:
    """`vllm serve MODEL --flag value ...` with every setting sizer relied on. A replica over several nodes runs
    on a Ray cluster (vLLM's multi-node serving: the default multiprocessing backend stays on one node)."""
    argv = ["vllm", "serve", as_model_word(c.model)] + _valued("vllm", [
        ("tensor_parallel_size", str(c.tensor_parallel_size)),
        ("pipeline_parallel_size", str(c.pipeline_parallel_size)), ("data_parallel_size", str(c.data_parallel_size))])
    if c.nodes > 1:
        argv += ["--distributed-executor-backend", "ray"]
    if c.enable_expert_parallel:
        argv.append(switch_for("vllm", "enable_expert_parallel", True))
    argv += _weights_flags(c, "vllm")
    argv += _valued("vllm", [("kv_cache_dtype", _kv_dtype(c.kv_cache_dtype, "fp8")),
                             ("max_model_len", str(c.max_model_len)),
                             ("gpu_memory_utilization", exact(c.gpu_memory_utilization))]
                    + [("block_size", str(c.block_size))] * c.block_size_stated
                    + [("max_num_seqs", str(c.max_num_seqs)),
                       ("max_num_batched_tokens", str(c.max_num_batched_tokens))])
    argv += [switch_for("vllm", "enable_prefix_caching", c.enable_prefix_caching),
             switch_for("vllm", "enable_chunked_prefill", c.enable_chunked_prefill)]
    argv += _valued("vllm", [("stream_interval", str(c.stream_interval))] * (c.stream_interval > 1)
                    + [("moe_backend", c.moe_backend)] * (c.moe_backend != "auto"))
    if c.speculative:
        s = c.speculative
        if s.method not in VLLM_SPECULATIVE:
            raise InputError(None, "--emit", f"vLLM {VLLM_RELEASE} has no {s.method} speculative decoding; "
                                             f"it runs {', '.join(VLLM_SPECULATIVE)}")
        spec = {"method": s.method, "num_speculative_tokens": s.num_speculative_tokens}
        if s.model:
            spec["model"] = s.model
        argv += _valued("vllm", [("speculative_config", json.dumps(spec, separators=(",", ":")))])
    if c.lora:
        argv += [switch_for("vllm", "enable_lora", True)] + _valued("vllm", [
            ("max_loras", str(c.lora[0])), ("max_lora_rank", str(c.lora[1])), ("max_cpu_loras", str(c.lora[2]))])
    if c.config_overrides:          # vLLM's config overrides: a JSON mapping (vllm/config/model.py hf_overrides)
        argv += _valued("vllm", [("model_overrides", c.config_overrides)])
    return argv


def vllm_script(c: ServingConfig) -> str:
    return _script(c, vllm_argv(c), "vLLM")


# ---- SGLang -------------------------------------------------------------------------------------


def sglang_argv(c: ServingConfig) -> list[str]:
    """`python3 -m sglang.launch_server` with the same settings in SGLang's names. SGLang has no paged
    block size to set for its radix cache (`--page-size` 1 is its default and sizer's prefix-cache model)."""
    # attention DP + EP: SGLang's TP group is every GPU, its attention split into as many DP ranks
    # (--enable-dp-attention, python/sglang/srt/server_args.py), the experts spread over them
    tp = c.tensor_parallel_size * c.data_parallel_size if c.attention_dp else c.tensor_parallel_size
    if c.sglang_context and c.max_model_len > c.sglang_context:     # a vLLM plan's RoPE-scaled context
        raise InputError(None, "--emit", f"sglang: max_model_len {c.max_model_len:,} is past the model's "
                                         f"max_position_embeddings {c.sglang_context:,}, which SGLang does not extend "
                                         "for a yarn scaling (get_context_length: a factor of 1 with "
                                         "original_max_position_embeddings); plan with deployment.engine sglang")
    argv = ["python3", "-m", "sglang.launch_server"] + _valued("sglang", [
        ("model", as_model_word(c.model)), ("tensor_parallel_size", str(tp)),
        ("pipeline_parallel_size", str(c.pipeline_parallel_size)), ("data_parallel_size", str(c.data_parallel_size))])
    if c.nodes > 1:         # this is node 0's line: each node runs it with its own --node-rank
        argv += ["--nnodes", str(c.nodes), "--node-rank", "0",
                 "--dist-init-addr", f"LEADER_ADDRESS:{SGLANG_DIST_PORT}"]
    if c.attention_dp:
        argv.append(switch_for("sglang", "enable_attention_dp", True))
    if c.enable_expert_parallel:
        argv += _valued("sglang", [("expert_parallel_size", str(tp))])
    argv += _weights_flags(c, "sglang")
    # under attention DP SGLang divides its whole-server limits by the ranks (SGLANG_SERVER_WIDE): one rank's times them
    ranks = c.data_parallel_size if c.attention_dp else 1
    limits = {"max_num_seqs": c.max_num_seqs,
              "chunked_prefill_size": c.max_num_batched_tokens if c.enable_chunked_prefill else -1}
    limits = {field: n * ranks if field in SGLANG_SERVER_WIDE and n > 0 else n for field, n in limits.items()}
    argv += _valued("sglang", [
        ("kv_cache_dtype", _kv_dtype(c.kv_cache_dtype, "fp8_e4m3")), ("max_model_len", str(c.max_model_len)),
        ("gpu_memory_utilization", exact(c.gpu_memory_utilization)), ("max_num_seqs", str(limits["max_num_seqs"])),
        ("max_num_batched_tokens", str(c.max_num_batched_tokens)),
        ("chunked_prefill_size", str(limits["chunked_prefill_size"]))])
    if not c.enable_prefix_caching:
        argv.append(switch_for("sglang", "enable_prefix_caching", False))
    argv += _valued("sglang", [("stream_interval", str(c.stream_interval))] * (c.stream_interval > 1)
                    + [("scheduler_recv_interval", str(c.scheduler_recv_interval))] * (c.scheduler_recv_interval > 1))
    if c.speculative:
        s = c.speculative
        if s.method not in SGLANG_SPECULATIVE:
            raise InputError(None, "--emit", f"SGLang has no {s.method} speculative decoding; "
                                             f"it runs {', '.join(SGLANG_SPECULATIVE)}")
        argv += _valued("sglang", [("speculative_algorithm", SGLANG_SPECULATIVE[s.method]),
                                   ("speculative_num_steps", str(s.num_speculative_tokens)),
                                   ("speculative_eagle_topk", "1"),
                                   ("speculative_num_draft_tokens", str(s.num_speculative_tokens + 1))]
                        + [("speculative_draft_model", as_model_word(s.model or ""))] * bool(s.model))
    if c.lora:        # SGLang's names: adapters per batch, the rank its buffers are sized for
        # SGLang sizes its LoRA buffers from the target modules: without them and without --lora-paths it refuses
        # to start; `all` covers any adapter loaded later through /load_lora_adapter
        argv += [switch_for("sglang", "enable_lora", True)] + _valued("sglang", [
            ("max_loras", str(c.lora[0])), ("max_lora_rank", str(c.lora[1]))]) + ["--lora-target-modules", "all"]
    if c.config_overrides:          # SGLang's: python/sglang/srt/server_args.py json_model_override_args
        argv += _valued("sglang", [("model_overrides", c.config_overrides)])
    return argv


def sglang_script(c: ServingConfig) -> str:
    chunks = f" and {c.max_num_batched_tokens}-token chunks" if c.enable_chunked_prefill else ""
    dp = (f"; under --enable-dp-attention SGLang divides --max-running-requests and --chunked-prefill-size by "
          f"--dp-size {c.data_parallel_size}: {c.max_num_seqs} sequences{chunks} per rank, as planned"
          ) if c.attention_dp else ""
    return _script(c, sglang_argv(c), "SGLang (--mem-fraction-static is the share of memory for weights and "
                                      f"the KV pool, vLLM's gpu_memory_utilization{dp})")


# ---- llama.cpp and Ollama -------------------------------------------------------------------------


def modelfile_path(c: ServingConfig) -> str:
    """The GGUF file as an Ollama Modelfile's FROM names it: Ollama reads FROM as a file path when it starts with '/',
    './' or '../' (else as a model name to pull), so a relative one gets './'; an absolute one stays as it is.
    A path Ollama would not read back as written is refused (`modelfile_reads_back`)."""
    gguf = gguf_file(c)
    path = gguf if gguf.startswith(("/", "./", "../")) else f"./{gguf}"
    if not modelfile_reads_back(path):
        raise InputError(None, "--emit", f"ollama: the GGUF path {excerpt(path)} holds a character an Ollama "
                                         "Modelfile drops (a space other than ' ', an invisible format character) "
                                         "or ends in a space, which it trims; FROM would name another file; rename "
                                         "the file")
    return path


def modelfile_reads_back(value: str) -> bool:
    """Ollama's Modelfile parser (parser/parser.go ParseFile) keeps a value as written: it drops every character Go's
    strconv.IsPrint rejects (U+00A0, U+200B, U+FEFF: Python's isprintable is the same set, with ' ' printable) and
    trims the value's spaces. A FROM naming a file it then does not find is pulled as a model name."""
    return value.isprintable() and value == value.strip()


def gguf_file(c: ServingConfig) -> str:
    """The GGUF file the server loads: the scenario's own .gguf, else a name to replace, after the model and format."""
    if c.own_gguf:
        return as_model_word(c.model)
    return as_model_word(f"{c.model.rsplit('/', 1)[-1]}-{c.weight_format.upper()}.gguf")


def llamacpp_argv(c: ServingConfig) -> list[str]:
    """`llama-server` with every setting sizer relied on (long flag names, tools/server/README.md)."""
    sl = c.slots
    fa = "auto" if sl.flash_attn is None else "on" if sl.flash_attn else "off"
    return ["llama-server", "--model", gguf_file(c),
            "--ctx-size", str(sl.ctx_total_tokens),
            "--parallel", str(sl.slots),
            "--kv-unified" if sl.kv_unified else "--no-kv-unified",
            "--batch-size", str(sl.batch_size),
            "--ubatch-size", str(sl.ubatch_size),
            "--cache-type-k", sl.cache_type_k,
            "--cache-type-v", sl.cache_type_v,
            "--flash-attn", fa,
            "--n-gpu-layers", str(c.n_gpu_layers),
            "--cont-batching",
            "--host", ALL_INTERFACES,
            "--port", str(LLAMA_SERVER_PORT)]


def llamacpp_script(c: ServingConfig) -> str:
    return _script(c, llamacpp_argv(c), "llama.cpp server (--ctx-size is all slots' context together)")


def ollama_script(c: ServingConfig) -> str:
    """A Modelfile (the model, num_ctx, num_batch) and the `ollama serve` environment (Ollama FAQ names)."""
    sl = c.slots
    name = k8s_name(c.name)
    env = {"OLLAMA_NUM_PARALLEL": str(sl.slots), "OLLAMA_MAX_LOADED_MODELS": str(sl.max_loaded_models),
           "OLLAMA_KEEP_ALIVE": f"{exact(sl.keep_alive_s)}s", "OLLAMA_KV_CACHE_TYPE": sl.cache_type_k,
           "OLLAMA_CONTEXT_LENGTH": str(sl.ctx_per_slot_tokens)}
    # auto: unset (Ollama chooses per GPU, llm/llama_server.go), but for a quantised cache, which needs flash
    # attention where Ollama before 0.12.4 leaves it off unless set: on, as the plan sized the cache
    if sl.flash_attn is not None or sl.cache_type_v in QUANTISED_CACHE_TYPES:
        env["OLLAMA_FLASH_ATTENTION"] = "0" if sl.flash_attn is False else "1"
    serve = " \\\n    ".join([f"{k}={shlex.quote(v)}" for k, v in env.items()] + ["ollama serve &"])
    modelfile = [f"FROM {modelfile_path(c)}", f"PARAMETER num_ctx {sl.ctx_per_slot_tokens}",
                 f"PARAMETER num_batch {sl.batch_size}", f"PARAMETER num_gpu {c.n_gpu_layers}"]
    lines = [_comment(line) for line in _comments(c)]
    lines += [shlex.join(["printf", "%s\\n", *modelfile]) + " > Modelfile", serve,
              shlex.join(["ollama", "create", name, "-f", "Modelfile"])]
    return "\n".join(lines) + "\n"


# ---- Kubernetes ---------------------------------------------------------------------------------


def _emit_refused(c: ServingConfig, field: str, said: str, offered: str) -> InputError:
    """`--emit k8s`/`gke` for a GPU whose profile lacks `field`: a bundled profile is sizer's gap, named as the flag
    with the profiles it does emit for; the user's own profile is named as its file and field."""
    if c.user_profile_file:
        return InputError(c.user_profile_file, field, f"--emit: {said}: its profile names none "
                                                      f"(hardware_profiles/README.md); {offered}")
    return InputError(None, "--emit", f"{said}; {offered}")


def schedule(c: ServingConfig) -> Schedule:
    """The GPU's device-plugin resource, node label and node size, from its profile."""
    if c.kubernetes is None or c.kubernetes.schedule is None:
        ids = [s.id for s in all_profiles().values() if s.kubernetes and s.kubernetes.schedule]
        raise _emit_refused(c, "kubernetes.schedule", f"no Kubernetes resource known for {c.gpu}",
                            f"k8s is emitted for {', '.join(sorted(ids))}")
    return c.kubernetes.schedule


def k8s_name(name: str) -> str:
    """A scenario name as a Kubernetes object name (DNS-1123 label: lower-case letters, digits, dashes; 63 at most)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:63].rstrip("-") or "sizer"


def gke_manifest(c: ServingConfig) -> str:
    """The Kubernetes manifest for GKE: its node pools carry `cloud.google.com/gke-accelerator`, not GPU feature
    discovery's product label."""
    if c.kubernetes is None or c.kubernetes.schedule is None or not c.kubernetes.gke_accelerators:
        ids = [s.id for s in all_profiles().values() if s.kubernetes and s.kubernetes.schedule
               and s.kubernetes.gke_accelerators]
        raise _emit_refused(c, "kubernetes.gke_accelerators", f"no GKE accelerator type known for {c.gpu}",
                            f"gke is emitted for {', '.join(sorted(ids))}")
    return kubernetes_manifest(c, replace(schedule(c), label_key=GKE_LABEL,
                                          label_value=c.kubernetes.gke_accelerators[0]))


def kubernetes_manifest(c: ServingConfig, acc: Schedule | None = None) -> str:
    """A Deployment of `replicas` pods, each with one replica's GPUs, on nodes labelled with the GPU; a
    LeaderWorkerSet (vLLM over Ray, as vLLM's LWS example) when one replica needs more GPUs than a node has."""
    acc = acc or schedule(c)
    nodes = c.nodes
    if c.gpus_per_replica % nodes:
        raise InputError(None, "--emit", f"{count(c.gpus_per_replica, 'GPU')} per replica do not split evenly over "
                                         f"{nodes} nodes of {acc.gpus_per_node}")
    per_pod = c.gpus_per_replica // nodes
    name = k8s_name(c.name)
    labels = {"app.kubernetes.io/name": name}
    image = VLLM_ROCM_IMAGE if acc.resource.startswith("amd") else VLLM_IMAGE
    argv = [_k8s_escaped(a) for a in vllm_argv(c)]

    def container(name: str, command: list[str], args: list[str] | None) -> dict:
        out = {"name": name, "image": image, "command": command}
        if args is not None:
            out["args"] = args
        out["env"] = _container_env(c)
        out |= {"ports": [{"containerPort": PORT}],
                "resources": {"limits": {acc.resource: per_pod}},
                "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}
        return out

    def pod(containers: list[dict]) -> dict:
        return {"nodeSelector": {acc.label_key: acc.label_value}, "containers": containers,
                "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]}

    header = _comments(c) + [f"node size assumed: {acc.gpus_per_node} x {c.gpu_name} per node "
                             f"(label {acc.label_key}={acc.label_value})"]
    if nodes == 1:
        doc = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels},
               "spec": {"replicas": c.replicas, "selector": {"matchLabels": labels},
                        "template": {"metadata": {"labels": labels},
                                     "spec": pod([container("vllm", argv[:2], argv[2:])])}}}
    else:
        header.append(f"one replica spans {nodes} nodes of {count(per_pod, 'GPU')}: a LeaderWorkerSet (vLLM over Ray)")
        ray = "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh"
        leader = f"{ray} leader --ray_cluster_size=$(LWS_GROUP_SIZE); {_k8s_escaped(shlex.join(vllm_argv(c)))}"
        worker = f"{ray} worker --ray_address=$(LWS_LEADER_ADDRESS)"
        doc = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
               "metadata": {"name": name, "labels": labels},
               "spec": {"replicas": c.replicas, "leaderWorkerTemplate": {
                   "size": nodes, "restartPolicy": "RecreateGroupOnPodRestart",
                   "leaderTemplate": {"metadata": {"labels": {**labels, "role": "leader"}},
                                      "spec": pod([container("vllm-leader", ["sh", "-c", leader], None)])},
                   "workerTemplate": {"spec": pod([container("vllm-worker", ["sh", "-c", worker], None)])}}}}
    return "".join(_comment(line) + "\n" for line in header) + yaml.dump(doc, Dumper=_PlainDumper, sort_keys=False,
                                                                            width=1000)


def _container_env(c: ServingConfig) -> list[dict]:
    """The Hugging Face token from a Secret (optional unless the model is gated) and, with LoRA, vLLM's runtime
    adapter loading (POST /v1/load_lora_adapter; sizer sizes the adapter slots, the adapters are the user's)."""
    name, key = HF_TOKEN_SECRET
    env = [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": name, "key": key, "optional": not c.gated}}}]
    if c.lora:
        env.append({"name": "VLLM_ALLOW_RUNTIME_LORA_UPDATING", "value": "True"})
    return env


def _k8s_escaped(word: str) -> str:
    """A container command or argument as Kubernetes must be given it: `$$` for `$`, so that `$(VAR)` in a value
    is not expanded (Kubernetes turns `$$` back into `$`)."""
    return word.replace("$", "$$")


class _PlainDumper(yaml.SafeDumper):
    """YAML without anchors: the labels appear in full wherever Kubernetes reads them. A string Kubernetes' YAML
    reader (kubectl, the API server: sigs.k8s.io/yaml's go-yaml v2) would read as a boolean, a number or a time is
    quoted, though PyYAML (YAML 1.1, and `sizer check`) reads it plain as text (`_KUBERNETES_TYPED`)."""

    def ignore_aliases(self, data) -> bool:
        return True


# Plain scalars go-yaml v2 types that PyYAML leaves plain: y, Y, n, N (booleans); integers in Go's prefixed spellings
# (0o17, 0b1, 0x1F) and numbers with an exponent but no point (1e3, 1e-05), underscores allowed (go-yaml drops them);
# a date with one-digit month or day (2024-1-2). A scenario named `y` or `1e3` made `metadata.name: y`, which kubectl
# refused ("cannot unmarshal bool into Go struct field ObjectMeta.metadata.labels of type string"). Quoting more than
# go-yaml types costs nothing: a quoted scalar is a string to every reader.
_KUBERNETES_TYPED = re.compile(r"""(?x)^(?:
    [yYnN]
  | [-+]?0[xXoObB][0-9a-fA-F_]+
  | [-+]?(?:\.[0-9_]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9_]+)?
  | [0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt\s].*)?
)$""")
_PlainDumper.add_implicit_resolver("tag:yaml.org,2002:kubernetes-typed", _KUBERNETES_TYPED, list("yYnN+-.0123456789"))


# ---- shared -------------------------------------------------------------------------------------


def _weights_flags(c: ServingConfig, engine: str) -> list[str]:
    """The weight format: a dtype for a 16-bit one; a quantization method unless the checkpoint states it where the
    engine reads it (an engine refuses a method that differs from the checkpoint's quantization_config; a GPTQ/AWQ
    sidecar, quantize_config.json or quant_config.json, is read only when the method is named)."""
    if c.weight_format in WIDE_FORMATS:
        return _valued(engine, [("dtype", spelling(ENGINE_DTYPES, c.weight_format))])
    if c.weights_read_by_engine or c.weight_format not in EMITTED_QUANTIZATION[engine]:
        return []
    method = f"{c.weight_format}_marlin" if c.marlin else spelling(QUANTIZATION, c.weight_format)
    return _valued(engine, [("quantization", method)])


def exact(x: float) -> str:
    """A planned number as an engine is given it: the shortest decimal that reads back as the same float (`:g` kept 6
    digits: 0.9999999 became 1), never in exponent form (Go's time.ParseDuration, which reads Ollama's
    OLLAMA_KEEP_ALIVE, takes none: 1234567 s was 1.23457e+06s), a whole number without '.0'."""
    text = format(Decimal(repr(float(x))), "f")
    return text.removesuffix(".0")


def _kv_dtype(kv: str, fp8: str) -> str:
    """16-bit KV is the engine's `auto` (the model's dtype); bare fp8 is the engine's own spelling."""
    return "auto" if kv in WIDE_FORMATS else fp8 if kv == "fp8" else kv


# A plan without --simulate counts replicas for memory alone; the emitted file and stderr say so.
MEMORY_ONLY_NOTE = ("replicas: {replicas} is memory-only (enough KV cache for the requests in flight), not sized for "
                    "the SLO; `sizer plan --simulate` sizes it")


def _comments(c: ServingConfig) -> list[str]:
    lines = [f"sizer: {c.name} on {c.gpus_per_replica} x {c.gpu_name} per replica; {c.verdict}",
             f"replicas: {c.replicas} ({c.replicas_source})"]
    if c.replicas_memory_only:
        lines.append(MEMORY_ONLY_NOTE.format(replicas=c.replicas))
    if c.slots and c.own_gguf:
        lines.append(f"weights: {c.weight_format}, the GGUF file {gguf_file(c)}")
    elif c.slots:
        lines.append(f"weights: {c.weight_format}; point the model at a GGUF file in that format "
                     f"({gguf_file(c)} here)")
    elif not c.weights_from_checkpoint and c.weight_format not in ONLINE_FORMATS:
        lines.append(f"weights: sized as {c.weight_format}; the engine quantises only fp8 on load, so point the "
                     f"model at a checkpoint already in {c.weight_format}")
    if c.speculative and c.speculative.model and c.speculative.method in NEEDS_DRAFT:
        lines.append(f"speculative decoding: draft head {c.speculative.model}")
    if c.gated and not c.slots:     # llama.cpp and Ollama load a GGUF file (gguf_file), never the Hugging Face repo
        lines.append(f"{c.model} is gated on Hugging Face: accept its licence there and give the server HF_TOKEN")
    if c.lora:
        lines.append("LoRA: load adapters at run time (vLLM: POST /v1/load_lora_adapter with "
                     "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True; SGLang: POST /load_lora_adapter)")
    if c.nodes > 1 and not c.slots:
        lines.append(f"one replica spans {c.nodes} nodes: vLLM runs it on a Ray cluster of those nodes; SGLang "
                     f"runs this line on each node with --node-rank 0..{c.nodes - 1} and node 0's address "
                     "for LEADER_ADDRESS")
    if not c.block_size_stated and not c.slots:      # llama-server and Ollama have no paged blocks to size
        why = (f"on {c.gpu_name} (its attention kernels pick the page size" if c.block_size in VLLM_BLOCK_SIZES
               else "(it aligns a hybrid model's block to its recurrent state's page")
        lines.append(f"--block-size left to the engine {why}; sized at {c.block_size}-token blocks)")
    return lines


def _check_loadable(what: str, value: str) -> None:
    """A model name or path an engine can load: no control character or line separator."""
    if any(unicodedata.category(ch) in ("Cc", "Zl", "Zp") for ch in value):
        raise InputError(None, "--emit", f"{what} {excerpt(value)} holds a control character or line separator; "
                                         "expected a name or path an engine can load")


def _comment(line: str) -> str:
    """One comment line (shell and YAML): a name or path in it cannot end it and start a command or document."""
    return f"# {printable(line)}"


def _script(c: ServingConfig, argv: list[str], engine: str) -> str:
    """A shell snippet: comments, then the command with one flag per line."""
    lines = _comments(c) + [f"run {count(c.replicas, 'such server')} behind a load balancer; {engine}"]
    words = [shlex.quote(a) for a in argv]
    parts, i = [" ".join(words[:3])], 3
    while i < len(words):
        takes_value = i + 1 < len(words) and not argv[i + 1].startswith("--")
        parts.append(" ".join(words[i:i + 1 + takes_value]))
        i += 1 + takes_value
    return "".join(_comment(line) + "\n" for line in lines) + " \\\n    ".join(parts) + "\n"
