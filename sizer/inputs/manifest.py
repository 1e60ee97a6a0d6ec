"""Reading what `sizer check` checks: a scenario, or a Kubernetes Deployment / Helm values file
that runs `vllm serve`, with the `sizer:` block (an annotation or a top-level key) for what a
manifest cannot say. vLLM flags map to scenario fields; the HF repo id maps to the catalog by its
`_sizer.hf_repo`; the GPU type comes from the block or a node-selector label.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from sizer.errors import InputError
from sizer.inputs.model_spec import CATALOG_DIR, catalog_names
from sizer.inputs.safe_load import excerpt, load_json, load_yaml_all, loads_json, loads_yaml
from sizer.inputs.scenario import SLOSection, WorkloadSection, scenario_from_dict
from sizer.inputs.schema import build, field


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


def read_check_input(path: str, kv_share: float | None = None, budget_usd_per_hour: float | None = None) -> CheckInput:
    """A scenario YAML, or a Kubernetes/Helm YAML with a `vllm serve` container and a `sizer:` block."""
    file = str(path)
    docs = [d for d in load_yaml_all(path) if d is not None]
    vllm = [c for doc in docs for c in _containers(doc) if _is_vllm(_tokens(c))]
    if not vllm and len(docs) == 1 and isinstance(docs[0], dict) and "sizer" not in docs[0] and "kind" not in docs[0]:
        data = docs[0]
        scenario = scenario_from_dict(data, file, default_name=Path(path).stem)
        d = scenario.deployment
        gpus = d.tensor_parallel_size * d.pipeline_parallel_size * d.data_parallel_size
        return CheckInput(file, "scenario", scenario.name, data, d.replicas or 1, gpus, gpus,
                          0.0 if kv_share is None else kv_share, budget_usd_per_hour)
    return _from_manifest(docs, file, Path(path).stem, kv_share, budget_usd_per_hour)


def _from_manifest(docs: list, file: str, stem: str, kv_share: float | None, budget: float | None) -> CheckInput:
    found = [(doc, c) for doc in docs for c in _containers(doc) if _is_vllm(_tokens(c))]
    if not found:
        raise InputError(file, None, "neither a scenario (model, hardware) "
                                     "nor a manifest with a container that runs `vllm serve`")
    if len(found) > 1:
        raise InputError(file, None, f"{len(found)} containers run vLLM; sizer check takes one deployment per file")
    doc, container = found[0]
    block = _sizer_block(docs, doc, file)
    engine, model_ref, notes = parse_vllm_args(_tokens(container), file)
    model = block.model or catalog_name_for(model_ref, file)
    gpu = block.gpu or _gpu_from_labels(doc, file)
    limits = {**((container.get("resources") or {}).get("requests") or {}),
              **((container.get("resources") or {}).get("limits") or {})}
    requested = limits.get("nvidia.com/gpu", limits.get("amd.com/gpu"))
    if requested is None:
        raise InputError(file, "resources.limits.nvidia.com/gpu", "missing; a vLLM pod needs its GPU count")
    requested = _int_value(requested, file, "resources.limits.nvidia.com/gpu")
    used = (engine.get("tensor_parallel_size", 1) * engine.get("pipeline_parallel_size", 1)
            * engine.get("data_parallel_size", 1))
    if requested < used:
        raise InputError(file, "resources.limits.nvidia.com/gpu", f"{requested} GPUs, but tensor x pipeline x data "
                         f"parallel size needs {used}")
    if requested > used:
        notes.append(f"each pod requests {requested} GPUs but vLLM uses {used}; the cost counts {requested}")
    spec = engine.pop("speculative_config", None)
    if spec is not None:
        if block.speculative_acceptance_rate is None:
            raise InputError(file, "sizer.speculative_acceptance_rate",
                             "missing; --speculative-config needs an acceptance rate")
        engine["speculative_config"] = {**spec, "acceptance_rate": block.speculative_acceptance_rate}
    replicas = block.replicas or _replicas(doc)
    name = ((doc.get("metadata") or {}).get("name") if doc.get("kind") else None) or stem
    w, slo = block.workload, block.slo
    data = {"name": name, "model": {"name": model}, "hardware": {"gpu": gpu},
            "deployment": {"engine": "vllm", **engine, "replicas": replicas},
            "workload": _as_dict(w), "slo": _as_dict(slo),
            "cost": {"price_usd_per_gpu_hour": block.price_usd_per_gpu_hour}}
    kind = "kubernetes manifest" if doc.get("kind") else "helm values"
    return CheckInput(file, kind, name, data, replicas, used, requested,
                      block.kv_share if kv_share is None else kv_share,
                      block.budget_usd_per_hour if budget is None else budget, tuple(notes))


def _as_dict(section) -> dict:
    """A built section back to a mapping without its unset (None) fields."""
    def clean(value):
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if v is not None}
        return value
    return clean(dataclasses.asdict(section))


def _containers(node) -> list[dict]:
    """Every mapping with `args` or `command` anywhere in a document (pod specs, Helm values)."""
    out = []
    if isinstance(node, dict):
        if "args" in node or "command" in node:
            out.append(node)
        for value in node.values():
            out += _containers(value)
    elif isinstance(node, list):
        for value in node:
            out += _containers(value)
    return out


def _tokens(container: dict) -> list[str]:
    """command + args as argv; a shell string (`sh -c "vllm serve ..."`) is split like a shell would."""
    parts = []
    for key in ("command", "args"):
        value = container.get(key)
        parts += [value] if isinstance(value, str) else [str(v) for v in value or []]
    argv = []
    for part in parts:
        argv += shlex.split(part) if any(ch.isspace() for ch in part) else [part]
    return argv


def _is_vllm(argv: list[str]) -> bool:
    return any(t.endswith("vllm") and i + 1 < len(argv) and argv[i + 1] == "serve" for i, t in enumerate(argv)) \
        or any("vllm.entrypoints" in t for t in argv)


def _sizer_block(docs: list, doc: dict, file: str) -> SizerBlock:
    raw = doc.get("sizer")
    if raw is None:
        annotation = ((doc.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
        if annotation is not None:
            # an annotation's value is a string of YAML; anything else is left for the schema to refuse
            where = f"metadata.annotations.{ANNOTATION}"
            raw = loads_yaml(annotation, file, where) if isinstance(annotation, str) else annotation
    if raw is None:
        raw = next((d["sizer"] for d in docs if isinstance(d, dict) and "sizer" in d), None)
    if raw is None:
        raise InputError(file, "sizer", f"missing; add a `sizer:` block (Helm values) or the annotation {ANNOTATION} "
                         "with workload and slo (docs/ci.md)")
    return build(SizerBlock, raw, "sizer", file)


ANNOTATION = "sizer.dev/check"

# vLLM flag -> (deployment field, parser). Short aliases as vLLM's argument parser defines them.
_INT, _FLOAT = "int", "float"
VALUE_FLAGS = {
    "--tensor-parallel-size": ("tensor_parallel_size", _INT), "-tp": ("tensor_parallel_size", _INT),
    "--pipeline-parallel-size": ("pipeline_parallel_size", _INT), "-pp": ("pipeline_parallel_size", _INT),
    "--data-parallel-size": ("data_parallel_size", _INT), "-dp": ("data_parallel_size", _INT),
    "--max-model-len": ("max_model_len", _INT), "--max-num-seqs": ("max_num_seqs", _INT),
    "--max-num-batched-tokens": ("max_num_batched_tokens", _INT), "--block-size": ("block_size", _INT),
    "--gpu-memory-utilization": ("gpu_memory_utilization", _FLOAT),
    "--quantization": ("quantization", "quantization"), "-q": ("quantization", "quantization"),
    "--kv-cache-dtype": ("kv_cache_dtype", "kv"), "--dtype": ("dtype", "dtype"),
    "--speculative-config": ("speculative_config", "json"), "--model": ("model", "str"),
}
BOOL_FLAGS = {"--enable-prefix-caching": ("enable_prefix_caching", True),
              "--no-enable-prefix-caching": ("enable_prefix_caching", False),
              "--enable-chunked-prefill": ("enable_chunked_prefill", True),
              "--no-enable-chunked-prefill": ("enable_chunked_prefill", False),
              "--enable-expert-parallel": ("enable_expert_parallel", True)}
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


def _flag_value(flag: str, value: str, kind: str, file: str):
    if kind == _INT:
        return _int_value(value, file, flag)
    if kind == _FLOAT:
        try:
            return float(value)
        except ValueError:
            raise InputError(file, flag, f"expected a number, got {excerpt(value)}") from None
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
        out = {"method": method, "num_speculative_tokens": spec["num_speculative_tokens"]}
        if method == "draft_model":
            out["model"] = catalog_name_for(str(spec.get("model")), file)
        return out
    return value


def _int_value(value, file: str, where: str) -> int:
    """An integer, also in vLLM's human-readable forms: 32k = 32,000, 32K = 32,768 (k/m/g decimal, K/M/G binary)."""
    text = str(value).strip()
    scale = {"k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    try:
        number = float(text[:-1] if scale > 1 else text)
    except ValueError:
        raise InputError(file, where, f"expected an integer, got {excerpt(value)}") from None
    if number * scale != int(number * scale):
        raise InputError(file, where, f"expected an integer, got {excerpt(value)}")
    return int(number * scale)


def catalog_name_for(model_ref: str, file: str) -> str:
    """An HF repo id (or catalog name, or config path) -> what `model.name` accepts.

    Exact `_sizer.hf_repo` match first; then the same repo without -Instruct/-Chat/-it/-hf
    words and a leading Meta- (a fine-tune has its base model's architecture).
    """
    names = catalog_names()
    if model_ref.lower() in names or Path(model_ref).exists():
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


def _base_repo(repo: str) -> str:
    """`meta-llama/Meta-Llama-3.1-8B-Instruct` -> `meta-llama/llama-3.1-8b`: fine-tunes share the base's shapes."""
    org, _, name = repo.lower().partition("/")
    words = [w for w in re.sub(r"^meta-", "", name).split("-") if w not in ("instruct", "chat", "it", "hf")]
    return f"{org}/{'-'.join(words)}"


GPU_LABELS = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator", "karpenter.k8s.aws/instance-gpu-name")
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
    for key, value in _labels(doc):
        if key in GPU_LABELS:
            gpu = gpu_for_label(str(value))
            if gpu is None:
                raise InputError(file, f"nodeSelector.{excerpt(key, quote=False)}",
                                 f"no hardware profile for {excerpt(value)}; set sizer.gpu (`sizer gpus`)")
            return gpu
    raise InputError(file, "sizer.gpu", f"missing, and no node selector names the GPU ({', '.join(GPU_LABELS)})")


def _labels(node) -> list[tuple[str, object]]:
    """(key, value) of every nodeSelector entry and nodeAffinity `In` expression in a document."""
    out = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "nodeSelector" and isinstance(value, dict):
                out += list(value.items())
            elif key == "matchExpressions" and isinstance(value, list):
                out += [(e.get("key"), (e.get("values") or [None])[0]) for e in value
                        if isinstance(e, dict) and e.get("operator") == "In"]
            else:
                out += _labels(value)
    elif isinstance(node, list):
        for value in node:
            out += _labels(value)
    return out


def _replicas(doc: dict) -> int:
    if doc.get("kind"):
        return int((doc.get("spec") or {}).get("replicas", 1))
    return int(doc.get("replicaCount", doc.get("replicas", 1)))
