"""Reading what `sizer check` checks: a scenario, or a Kubernetes Deployment / Helm values file
that runs `vllm serve`, from a file or standard input (`-`). What a manifest cannot say (workload,
SLO, budget) comes from its `sizer:` block (an annotation or a top-level key) or `check`'s flags
(`Traffic`); a manifest with neither is checked for what needs no traffic. vLLM flags map to
scenario fields; the HF repo id maps to the catalog by its `_sizer.hf_repo`; the GPU type comes
from the block or a node-selector label.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from simulator.errors import excerpt
from simulator.safe_yaml import MAX_YAML_BYTES, load_yaml_all, loads_yaml, loads_yaml_all
from simulator.schema import Key, build, check_key, field, join, key_for
from sizer.errors import InputError
from sizer.inputs.model_spec import CATALOG_DIR, catalog_names
from sizer.inputs.safe_load import load_json, loads_json
from sizer.inputs.scenario import (
    DeploymentSection,
    SLOSection,
    SpeculativeSection,
    WorkloadSection,
    scenario_from_dict,
)


@dataclass(frozen=True)
class CheckInput:
    """What the rules need: a scenario as a mapping (so fixes can re-plan with overrides) and thresholds."""
    file: str
    kind: str
    name: str
    scenario_data: dict
    replicas: int
    gpus_per_replica: int       # what the engine uses: TP x PP x DP
    gpus_requested: int         # what each pod asks for (and is billed)
    kv_share: float
    budget_usd_per_hour: float | None
    notes: tuple[str, ...] = ()
    has_workload: bool = True   # False: no rate stated; scenario_data holds NOMINAL_WORKLOAD, the slo rule is skipped


@dataclass(frozen=True)
class Traffic:
    """Workload and SLO from `sizer check`'s flags; each one given replaces the `sizer:` block's (or the
    scenario's) value. Token counts are fixed lengths."""
    rate_per_s: float | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    ttft_ms: float | None = None
    itl_ms: float | None = None


# A manifest with no workload is planned at this nominal one: the memory and max_model_len rules do not
# read the traffic (beyond the fixes' longest request, not offered without a workload), and the slo
# rule is skipped, so it shows in no verdict.
NOMINAL_WORKLOAD = {"arrival": {"rate_per_s": 1.0}, "prompt_tokens": {"distribution": "fixed", "value": 1024},
                    "output_tokens": {"distribution": "fixed", "value": 256}}
STDIN = "<stdin>"


@dataclass(frozen=True)
class SizerBlock:
    """The `sizer:` block of a manifest: what Kubernetes cannot say."""
    workload: WorkloadSection = field(doc="the traffic, as in a scenario")
    slo: SLOSection = field(default_factory=SLOSection, doc="latency targets, as in a scenario")
    gpu: str | None = field(None, doc="accelerator profile; default from a node-selector label")
    model: str | None = field(None, doc="catalog name or config.json path; default from the HF repo id")
    replicas: int | None = field(None, ge=1, doc="default: the Deployment's spec.replicas or Helm replicaCount")
    price_usd_per_gpu_hour: float | None = field(None, ge=0, doc="default: the hardware profile's price")
    budget_usd_per_hour: float | None = field(None, gt=0, doc="cost rule: most the deployment may cost per hour")
    kv_share: float = field(0.0, ge=0.0, le=1.0, doc="max_model_len rule: share of max_num_seqs to hold at full length")
    speculative_acceptance_rate: float | None = field(None, ge=0.0, le=0.999, doc="alpha, for --speculative-config")


def read_check_input(path: str, kv_share: float | None = None, budget_usd_per_hour: float | None = None,
                     traffic: Traffic = Traffic()) -> CheckInput:
    """A scenario YAML, or a Kubernetes/Helm YAML with a `vllm serve` container (and a `sizer:` block for
    the workload and SLO, or `traffic`, or neither); `-` reads standard input."""
    file, stem = (STDIN, "stdin") if str(path) == "-" else (str(path), Path(path).stem)
    docs = [d for d in (_stdin_documents() if file == STDIN else load_yaml_all(path)) if d is not None]
    vllm = [c for doc in docs for c in _containers(doc, "") if _is_vllm(_tokens(c[1], c[0], file, doc))]
    if not vllm and len(docs) == 1 and isinstance(docs[0], dict) and "sizer" not in docs[0] and "kind" not in docs[0]:
        workload, slo = with_traffic(docs[0].get("workload") or {}, docs[0].get("slo") or {}, traffic)
        data = {**docs[0], "workload": workload, "slo": slo}
        scenario = scenario_from_dict(data, file, default_name=stem)
        d = scenario.deployment
        gpus = d.tensor_parallel_size * d.pipeline_parallel_size * d.data_parallel_size
        return CheckInput(file, "scenario", scenario.name, data, d.replicas or 1, gpus, gpus,
                          0.0 if kv_share is None else kv_share, budget_usd_per_hour)
    return _from_manifest(docs, file, stem, kv_share, budget_usd_per_hour, traffic)


def _stdin_documents() -> list:
    """The YAML documents on standard input, under the bound a YAML file has."""
    data = sys.stdin.buffer.read(MAX_YAML_BYTES + 1)
    if len(data) > MAX_YAML_BYTES:
        raise InputError(STDIN, None, f"larger than {MAX_YAML_BYTES >> 20} MiB, the most a YAML file may be")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(STDIN, None, f"not UTF-8 text (byte {exc.start})") from None
    return loads_yaml_all(text, STDIN)


_TOKEN_FLAGS = {"prompt_tokens": "--prompt-tokens", "output_tokens": "--output-tokens"}


def with_traffic(workload: dict, slo: dict, traffic: Traffic) -> tuple[dict, dict]:
    """`workload` and `slo` (scenario mappings) with the flags' values in place of theirs. A workload
    that a flag completes must then be whole: a rate and both lengths (or a trace)."""
    workload, slo = dict(workload), dict(slo)
    if traffic.rate_per_s is not None:
        workload["arrival"] = {**(workload.get("arrival") or {}), "rate_per_s": traffic.rate_per_s}
    for key in _TOKEN_FLAGS:
        value = getattr(traffic, key)
        if value is not None:
            workload[key] = {"distribution": "fixed", "value": value}
    for key in ("ttft_ms", "itl_ms"):
        if getattr(traffic, key) is not None:
            slo[key] = getattr(traffic, key)
    if traffic != Traffic() and not workload.get("trace"):
        missing = [flag for key, flag in (("rate_per_s", "--rate"), *_TOKEN_FLAGS.items())
                   if (workload.get("arrival") or {}).get(key) is None and workload.get(key) is None]
        if missing:
            raise InputError(None, missing[0], "missing; a workload needs --rate, --prompt-tokens and "
                                               "--output-tokens (or a `sizer:` block that states them)")
    return workload, slo


# ---- the manifest fields sizer reads, declared once --------------------------------------------
#
# A manifest is someone else's document: each field sizer reads is a `Key` (simulator/schema.py),
# other keys are ignored. A value that sets a scenario field (a vLLM flag, the replica count) is
# checked against that field's own declaration in sizer/inputs/scenario.py (`key_for`). Numbers may
# be written as text: vLLM's flags always are, Kubernetes quantities often are ("1", "32k").

# GPUs one pod asks for: 1,024, the most in any one parallel dimension of a deployment.
MAX_GPUS_PER_POD = 1024
_GPUS = {"ge": 0, "le": MAX_GPUS_PER_POD, "nullable": False}      # 0: "needs N" says more
# Manifest paths (relative to the document, or to the vLLM container for `resources.*`) -> the key.
# A mapping that is absent or null reads as empty; `command` and `args` are lists of strings
# (Kubernetes; Helm values may give one shell command line as a string).
MANIFEST_FIELDS = {
    "metadata": Key("metadata", dict), "metadata.annotations": Key("annotations", dict),
    "metadata.name": Key("name", str), "spec": Key("spec", dict),
    "spec.replicas": key_for(DeploymentSection, "replicas"),                  # Kubernetes Deployment
    "replicaCount": key_for(DeploymentSection, "replicas", "replicaCount"),   # Helm values
    "replicas": key_for(DeploymentSection, "replicas"),
    "command": Key("command", list), "args": Key("args", list),
    "resources": Key("resources", dict), "resources.limits": Key("limits", dict),
    "resources.requests": Key("requests", dict),
    "resources.limits.nvidia.com/gpu": Key("nvidia.com/gpu", int, **_GPUS),
    "resources.limits.amd.com/gpu": Key("amd.com/gpu", int, **_GPUS),
    "nodeSelector": Key("nodeSelector", dict), "matchExpressions": Key("matchExpressions", list),
    "matchExpressions[].values": Key("values", list),
}


def _get(node: dict, schema_key: str, path: str, file: str):
    """MANIFEST_FIELDS[schema_key] of mapping `node` (at `path`), checked: None when absent, {} for an
    absent or null mapping."""
    spec = MANIFEST_FIELDS[schema_key]
    value = node.get(spec.name)
    if spec.name not in node or (value is None and spec.nullable):
        return {} if spec.tp is dict else None
    return check_key(spec, parse_number(value) if spec.tp in (int, float) else value, file, join(path, spec.name))


_SUFFIXES = {"k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}


def parse_number(value):
    """A number written as text ("2", "0.9", "1e4", vLLM's "32k" and "10M": decimal suffixes lower
    case, binary upper case) as that number; anything else as it is, for its key to check."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    scale = _SUFFIXES.get(text[-1:], 1)
    digits = text[:-1] if scale > 1 else text
    if len(digits) > 40:                  # a 5,000-digit number is no count of anything
        return value
    for parse in (int, float):
        try:
            return parse(digits) * scale
        except ValueError:
            continue
    return value


# ---- reading a manifest ------------------------------------------------------------------------


def _from_manifest(docs: list, file: str, stem: str, kv_share: float | None, budget: float | None,
                   traffic: Traffic) -> CheckInput:
    found = [(doc, path, c) for doc in docs for path, c in _containers(doc, "")
             if _is_vllm(_tokens(c, path, file, doc))]
    if not found:
        raise InputError(file, None, "neither a scenario (model, hardware) "
                                     "nor a manifest with a container that runs `vllm serve`")
    if len(found) > 1:
        raise InputError(file, None, f"{len(found)} containers run vLLM; sizer check takes one deployment per file")
    doc, cpath, container = found[0]
    if not isinstance(doc, dict):
        raise InputError(file, "(top level)", f"expected a mapping, got {excerpt(doc)}")
    block = _sizer_block(docs, doc, file)
    engine, model_ref, notes = parse_vllm_args(_tokens(container, cpath, file, doc), file)
    model = block.model or catalog_name_for(model_ref, file)
    gpu = block.gpu or _gpu_from_labels(doc, file)
    resources = _get(container, "resources", cpath, file)
    rpath = join(cpath, "resources")
    limits = {**_get(resources, "resources.requests", rpath, file), **_get(resources, "resources.limits", rpath, file)}
    key = next((k for k in ("nvidia.com/gpu", "amd.com/gpu") if k in limits), None)
    if key is None:
        raise InputError(file, join(rpath, "limits.nvidia.com/gpu"), "missing; a vLLM pod needs its GPU count")
    where = join(rpath, f"limits.{key}")
    requested = _get(limits, f"resources.limits.{key}", join(rpath, "limits"), file)
    used = (engine.get("tensor_parallel_size", 1) * engine.get("pipeline_parallel_size", 1)
            * engine.get("data_parallel_size", 1))
    if requested < used:
        raise InputError(file, where, f"{requested} GPUs, but tensor x pipeline x data "
                         f"parallel size needs {used}")
    if requested > used:
        notes.append(f"each pod requests {requested} GPUs but vLLM uses {used}; the cost counts {requested}")
    spec = engine.pop("speculative_config", None)
    if spec is not None:
        if block.speculative_acceptance_rate is None:
            raise InputError(file, "sizer.speculative_acceptance_rate",
                             "missing; --speculative-config needs an acceptance rate")
        engine["speculative_config"] = {**spec, "acceptance_rate": block.speculative_acceptance_rate}
    replicas = block.replicas or _replicas(doc, file)
    name = (_get(_get(doc, "metadata", "", file), "metadata.name", "metadata", file)
            if doc.get("kind") else None) or stem
    workload, slo = with_traffic(_as_dict(block.workload), _as_dict(block.slo), traffic)
    has_workload = bool((workload.get("arrival") or {}).get("rate_per_s") or workload.get("trace"))
    data = {"name": name, "model": {"name": model}, "hardware": {"gpu": gpu},
            "deployment": {"engine": "vllm", **engine, "replicas": replicas},
            "workload": workload if has_workload else NOMINAL_WORKLOAD, "slo": slo,
            "cost": {"price_usd_per_gpu_hour": block.price_usd_per_gpu_hour}}
    kind = "kubernetes manifest" if doc.get("kind") else "helm values"
    return CheckInput(file, kind, name, data, replicas, used, requested,
                      block.kv_share if kv_share is None else kv_share,
                      block.budget_usd_per_hour if budget is None else budget, tuple(notes), has_workload)


def _as_dict(section) -> dict:
    """A built section back to a mapping without its unset (None) fields."""
    def clean(value):
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if v is not None}
        return value
    return clean(dataclasses.asdict(section))


def _containers(node, path: str) -> list[tuple[str, dict]]:
    """(path, mapping) of every mapping with `args` or `command` anywhere in a document (pod specs, Helm values)."""
    out = []
    if isinstance(node, dict):
        if "args" in node or "command" in node:
            out.append((path, node))
        for key, value in node.items():
            out += _containers(value, join(path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _containers(value, f"{path}[{i}]")
    return out


SHELLS = ("sh", "bash", "dash", "ash", "zsh")
SHELL_OPERATORS = ("&&", "||", ";", ";;", "|", "&", "(", ")", ">", "<", ">>", "|&")


def _tokens(container: dict, path: str, file: str, doc=None) -> list[str]:
    """command + args as argv, each list item one argument (as Kubernetes passes them, spaces and
    all). Only the script of `sh -c` / `bash -c` is split, as that shell would (shlex); Helm
    values may give `command` or `args` as one such command line."""
    items: list[tuple[str, str, bool]] = []          # (argument, field path, already split)
    for key in ("command", "args"):
        where = join(path, key)
        value = container.get(key)
        if value is None:
            continue
        if isinstance(value, str) and not (isinstance(doc, dict) and doc.get("kind")):
            items += [(t, where, True) for t in _shell_split(value, file, where)]
            continue
        for i, item in enumerate(_get(container, key, path, file)):
            if isinstance(item, bool) or not isinstance(item, (str, int, float)):
                raise InputError(file, f"{where}[{i}]", f"expected a string, got {excerpt(item)}")
            items.append((item if isinstance(item, str) else str(item), f"{where}[{i}]", False))
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
                    argv += _shell_split(items[i][0], file, items[i][1])
                    i += 1
                break
    return argv


def _shell_split(text: str, file: str, where: str) -> list[str]:
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)   # `a;b` and `a && b` split at the operator
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError as exc:
        raise InputError(file, where, f"not a valid shell command line ({exc}): {excerpt(text)}") from None


def _is_vllm(argv: list[str]) -> bool:
    return any(t.endswith("vllm") and i + 1 < len(argv) and argv[i + 1] == "serve" for i, t in enumerate(argv)) \
        or any("vllm.entrypoints" in t for t in argv)


def _sizer_block(docs: list, doc: dict, file: str) -> SizerBlock:
    raw = doc.get("sizer")
    if raw is None:
        metadata = _get(doc, "metadata", "", file)
        annotation = _get(metadata, "metadata.annotations", "metadata", file).get(ANNOTATION)
        if annotation is not None:
            # an annotation's value is a string of YAML; anything else is left for the schema to refuse
            where = f"metadata.annotations.{ANNOTATION}"
            raw = loads_yaml(annotation, file, where) if isinstance(annotation, str) else annotation
    if raw is None:
        raw = next((d["sizer"] for d in docs if isinstance(d, dict) and "sizer" in d), None)
    if raw is None:                 # a manifest as deployed: the traffic from flags, or none
        return SizerBlock(workload=WorkloadSection())
    return build(SizerBlock, raw, "sizer", file)


ANNOTATION = "sizer.dev/check"

# vLLM flag -> (deployment field, parser). Short aliases as vLLM's argument parser defines them.
# A number sets the scenario's deployment field of that name and is checked against its declaration.
_NUMBER = "number"
VALUE_FLAGS = {
    "--tensor-parallel-size": ("tensor_parallel_size", _NUMBER), "-tp": ("tensor_parallel_size", _NUMBER),
    "--pipeline-parallel-size": ("pipeline_parallel_size", _NUMBER), "-pp": ("pipeline_parallel_size", _NUMBER),
    "--data-parallel-size": ("data_parallel_size", _NUMBER), "-dp": ("data_parallel_size", _NUMBER),
    "--max-model-len": ("max_model_len", _NUMBER), "--max-num-seqs": ("max_num_seqs", _NUMBER),
    "--max-num-batched-tokens": ("max_num_batched_tokens", _NUMBER), "--block-size": ("block_size", _NUMBER),
    "--gpu-memory-utilization": ("gpu_memory_utilization", _NUMBER),
    "--quantization": ("quantization", "quantization"), "-q": ("quantization", "quantization"),
    "--kv-cache-dtype": ("kv_cache_dtype", "kv"), "--dtype": ("dtype", "dtype"),
    "--speculative-config": ("speculative_config", "json"), "--model": ("model", "str"),
    "--max-loras": ("max_loras", _NUMBER), "--max-lora-rank": ("max_lora_rank", _NUMBER),
    "--max-cpu-loras": ("max_cpu_loras", _NUMBER),
}
BOOL_FLAGS = {"--enable-prefix-caching": ("enable_prefix_caching", True),
              "--no-enable-prefix-caching": ("enable_prefix_caching", False),
              "--enable-chunked-prefill": ("enable_chunked_prefill", True),
              "--no-enable-chunked-prefill": ("enable_chunked_prefill", False),
              "--enable-expert-parallel": ("enable_expert_parallel", True),
              "--enable-lora": ("enable_lora", True)}
QUANTIZATION = {"fp8": "fp8", "awq": "awq", "awq_marlin": "awq", "gptq": "gptq", "gptq_marlin": "gptq",
                "modelopt": "fp8", "modelopt_fp4": "nvfp4", "mxfp4": "mxfp4", "compressed-tensors": "auto",
                "fbgemm_fp8": "fp8", "experts_int8": "int8"}
KV_DTYPES = {"auto": "auto", "fp8": "fp8", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2",
             "bfloat16": "bf16", "float16": "fp16", "half": "fp16"}
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "auto": None}
SPEC_METHODS = {"ngram": "ngram", "eagle": "eagle", "eagle3": "eagle3", "medusa": "medusa", "mtp": "mtp",
                "deepseek_mtp": "mtp", "draft_model": "draft_model"}


def parse_vllm_args(argv: list[str], file: str) -> tuple[dict, str, list[str]]:
    """vLLM's command line -> (deployment fields, model reference, notes on flags not modelled)."""
    start = next((i + 2 for i, t in enumerate(argv) if t.endswith("vllm") and argv[i + 1:i + 2] == ["serve"]),
                 next((i + 1 for i, t in enumerate(argv) if "vllm.entrypoints" in t), len(argv)))
    rest, model, fields, ignored = argv[start:], None, {}, []
    # a shell script goes on after the server's command line (`vllm serve ... && echo done`)
    rest = rest[:next((i for i, t in enumerate(rest) if t in SHELL_OPERATORS), len(rest))]
    if rest and not rest[0].startswith("-"):
        model, rest = rest[0], rest[1:]
    i = 0
    while i < len(rest):
        token = rest[i]
        flag, _, inline = token.partition("=")
        if flag.startswith("--"):
            flag = "--" + flag[2:].replace("_", "-")      # vLLM accepts --max_model_len too
        if flag in BOOL_FLAGS:
            key, value = BOOL_FLAGS[flag]
            fields[key] = value
            i += 1
            continue
        takes_next = not inline and i + 1 < len(rest) and not rest[i + 1].startswith("-")
        value = inline or (rest[i + 1] if takes_next else None)
        i += 1 + (1 if takes_next else 0)
        if flag not in VALUE_FLAGS:
            if flag.startswith("-"):
                ignored.append(flag)
            continue
        if value is None:
            raise InputError(file, flag, "expected a value")
        key, kind = VALUE_FLAGS[flag]
        fields[key] = _flag_value(flag, value, kind, file)
    model = fields.pop("model", None) or model
    if not model:
        raise InputError(file, "vllm serve", "no model given (vllm serve MODEL or --model MODEL)")
    dtype = fields.pop("dtype", None)
    if dtype and "quantization" not in fields:
        fields["quantization"] = dtype
    notes = [f"vLLM flags not modelled: {' '.join(sorted(set(ignored)))}"] if ignored else []
    return fields, model, notes


SPECULATIVE_TOKENS = key_for(SpeculativeSection, "num_speculative_tokens")


def _flag_value(flag: str, value: str, kind: str, file: str):
    key = VALUE_FLAGS[flag][0]
    if kind == _NUMBER:
        return check_key(key_for(DeploymentSection, key, flag), parse_number(value), file, flag)
    table = {"quantization": QUANTIZATION, "kv": KV_DTYPES, "dtype": DTYPES}.get(kind)
    if table is not None:
        if value.lower() not in table:
            raise InputError(file, flag, f"{excerpt(value)} is not modelled; expected one of: {', '.join(table)}")
        return table[value.lower()]
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


def catalog_name_for(model_ref: str, file: str) -> str:
    """An HF repo id (or catalog name, or config path) -> what `model.name` accepts.

    Exact `_sizer.hf_repo` match first; then the same repo without -Instruct/-Chat/-it/-hf
    words and a leading Meta- (a fine-tune has its base model's architecture).
    """
    names = catalog_names()
    if model_ref.lower() in names or _exists(model_ref):
        return model_ref
    repos = {}
    for name in names:
        repo = load_json(CATALOG_DIR / f"{name}.json").get("_sizer", {}).get("hf_repo")
        if repo:
            repos[repo.lower()] = name
            repos[_base_repo(repo)] = repos.get(_base_repo(repo), name)
    key = model_ref.lower()
    if key in repos:
        return repos[key]
    if _base_repo(model_ref) in repos:
        return repos[_base_repo(model_ref)]
    raise InputError(file, "vllm serve", f"model {excerpt(model_ref)} is not in the catalog (`sizer models`); "
                     "set sizer.model to a catalog name or a config.json path")


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


GPU_LABELS = ("nvidia.com/gpu.product", "amd.com/gpu.product-name", "cloud.google.com/gke-accelerator",
              "karpenter.k8s.aws/instance-gpu-name")
# Ordered: the first rule whose words all occur in the normalised label wins.
GPU_RULES = (("gh200", None), ("gb200", "gb200"), ("b300", "b300"), ("b200", "b200"), ("h200", "h200"),
             ("h100 pcie", "h100-pcie"), ("h100 nvl", None), ("h100", "h100-sxm"), ("h20", "h20"),
             ("a100 40gb", "a100-40gb"), ("a100 pcie", "a100-pcie-80gb"), ("a100", "a100-80gb"),
             ("l40s", "l40s"), ("l4", "l4"), ("mi300x", "mi300x"), ("mi325x", "mi325x"), ("mi355x", "mi355x"))


def gpu_for_label(label: str) -> str | None:
    """`NVIDIA-H100-80GB-HBM3` -> h100-sxm; None when no profile matches."""
    words = set(re.split(r"[^a-z0-9]+", label.lower()))
    for rule, profile in GPU_RULES:
        if all(w in words for w in rule.split()):
            return profile
    return None


def _gpu_from_labels(doc: dict, file: str) -> str:
    for key, value, where in _labels(doc, "", file):
        if key in GPU_LABELS:
            gpu = gpu_for_label(str(value))
            if gpu is None:
                raise InputError(file, where, f"no hardware profile for {excerpt(value)}; set sizer.gpu (`sizer gpus`)")
            return gpu
    raise InputError(file, "sizer.gpu", f"missing, and no node selector names the GPU ({', '.join(GPU_LABELS)})")


def _labels(node, path: str, file: str) -> list[tuple[object, object, str]]:
    """(key, value, field path) of every nodeSelector entry and nodeAffinity `In` expression in a document."""
    out = []
    if isinstance(node, dict):
        for key, value in node.items():
            where = join(path, key)
            if key == "nodeSelector":
                selector = _get(node, "nodeSelector", path, file)
                out += [(k, v, join(where, k)) for k, v in selector.items()]
            elif key == "matchExpressions":
                for i, e in enumerate(_get(node, "matchExpressions", path, file) or []):
                    if not isinstance(e, dict):
                        raise InputError(file, f"{where}[{i}]", f"expected a mapping, got {excerpt(e)}")
                    if e.get("operator") != "In":
                        continue
                    values = _get(e, "matchExpressions[].values", f"{where}[{i}]", file) or [None]
                    out.append((e.get("key"), values[0], f"{where}[{i}].values[0]"))
            else:
                out += _labels(value, where, file)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _labels(value, f"{path}[{i}]", file)
    return out


def _replicas(doc: dict, file: str) -> int:
    if doc.get("kind"):
        replicas = _get(_get(doc, "spec", "", file), "spec.replicas", "spec", file)
    else:
        replicas = _get(doc, "replicaCount" if "replicaCount" in doc else "replicas", "", file)
    return 1 if replicas is None else replicas
