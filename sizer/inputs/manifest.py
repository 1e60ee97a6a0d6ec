"""Reading what `sizer check` checks: a scenario, or a manifest that runs an inference server
(sizer/inputs/manifests/: Kubernetes objects, KServe, LeaderWorkerSet, Helm values of vLLM's,
production-stack's and llm-d's charts; vLLM, SGLang and TensorRT-LLM command lines), from a file
or standard input (`-`). What a manifest cannot say (workload, SLO, budget) comes from its
`sizer:` block (an annotation or a top-level key), a side scenario (`--scenario`) or `check`'s
flags (`Traffic`), each later one replacing the earlier's values; a manifest with none is checked
for what needs no traffic. Server flags map to scenario fields; the HF repo id maps to the catalog
by its `_sizer.hf_repo`; the GPU type comes from the block or a node-selector label.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from simulator.errors import excerpt
from simulator.safe_yaml import MAX_YAML_BYTES, load_yaml, load_yaml_all, loads_yaml, loads_yaml_all
from simulator.schema import build, field, join
from sizer.errors import InputError
from sizer.inputs.manifests.commands import ENGINE_NAMES, catalog_name_for, container_env, parse_server_args
from sizer.inputs.manifests.fields import get
from sizer.inputs.manifests.helm_charts import helm_servers
from sizer.inputs.manifests.kubernetes import Server, kubernetes_servers
from sizer.inputs.scenario import SLOSection, WorkloadSection, load_scenario, scenario_from_dict
from sizer.inputs.traffic import Traffic, with_traffic
from sizer.words import count


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
                     traffic: Traffic = Traffic(), scenario: str | None = None) -> CheckInput:
    """A scenario YAML, or a YAML with an inference server (and a `sizer:` block for the workload and
    SLO, or a side `scenario` file's, or `traffic`, or none); `-` reads standard input."""
    file, stem = (STDIN, "stdin") if str(path) == "-" else (str(path), Path(path).stem)
    docs = [d for d in (_stdin_documents() if file == STDIN else load_yaml_all(path)) if d is not None]
    servers = find_servers(docs, file)
    side = side_scenario(scenario) if scenario is not None else {}
    if not servers and len(docs) == 1 and isinstance(docs[0], dict) and "sizer" not in docs[0] \
            and "kind" not in docs[0]:
        workload, slo = with_traffic(side.get("workload") or docs[0].get("workload") or {},
                                     side.get("slo") or docs[0].get("slo") or {}, traffic)
        data = {**docs[0], "workload": workload, "slo": slo}
        if side.get("cost"):
            data["cost"] = side["cost"]
        scenario_ = scenario_from_dict(data, file, default_name=stem)
        d = scenario_.deployment
        gpus = d.tensor_parallel_size * d.pipeline_parallel_size * d.data_parallel_size
        return CheckInput(file, "scenario", scenario_.name, data, d.replicas or 1, gpus, gpus,
                          0.0 if kv_share is None else kv_share, budget_usd_per_hour)
    return _from_manifest(docs, servers, file, stem, kv_share, budget_usd_per_hour, traffic, side)


def side_scenario(path: str) -> dict:
    """The workload, SLO and cost sections of a scenario file (`--scenario`), checked as that scenario; a
    trace's path made absolute (it is relative to that file)."""
    load_scenario(path)
    data = load_yaml(path)
    workload = dict(data.get("workload") or {})
    if isinstance(workload.get("trace"), dict) and workload["trace"].get("path"):
        trace = Path(path).parent / workload["trace"]["path"]
        workload["trace"] = {**workload["trace"], "path": str(trace.resolve())}
    return {"workload": workload, "slo": data.get("slo") or {}, "cost": data.get("cost") or {}}


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




# ---- reading a manifest ------------------------------------------------------------------------

LOOKED_FOR = ("a container running `vllm serve`, `python -m vllm.entrypoints.openai.api_server`, "
              "`sglang.launch_server` or `trtllm-serve` in a Deployment, StatefulSet, Pod, Job, LeaderWorkerSet, "
              "KServe InferenceService or ServingRuntime, or Helm values (vLLM's chart, production-stack "
              "servingEngineSpec.modelSpec[], llm-d modelservice decode/prefill)")


def find_servers(docs: list, file: str) -> list[Server]:
    """Every inference server in a file's documents: Kubernetes objects, then Helm values."""
    values = [d for d in docs if isinstance(d, dict) and not d.get("kind")]
    return kubernetes_servers(docs, file) + [s for doc in values for s in helm_servers(doc, file)]


def _from_manifest(docs: list, servers: list[Server], file: str, stem: str, kv_share: float | None,
                   budget: float | None, traffic: Traffic, side: dict) -> CheckInput:
    if not servers:
        raise InputError(file, None, f"neither a scenario (model, hardware) nor a manifest with {LOOKED_FOR}")
    decode = [s for s in servers if s.role != "prefill"]
    prefill = [s for s in servers if s.role == "prefill"]
    if len(decode) != 1 or len(prefill) > 1:
        where = ", ".join(s.path or "(top level)" for s in servers)
        raise InputError(file, None, f"{len(servers)} containers run an inference server ({where}); "
                                     "sizer check takes one deployment per file")
    server = decode[0]
    doc = server.doc
    block = _sizer_block(docs, doc, file)
    engine_fields, model_ref, notes = _engine(server, file)
    model = block.model or catalog_name_for(model_ref, file, _model_field(server))
    gpu = block.gpu or _gpu_from_labels([doc] + [d for d in docs if d is not doc], file)
    used = (engine_fields.get("tensor_parallel_size", 1) * engine_fields.get("pipeline_parallel_size", 1)
            * engine_fields.get("data_parallel_size", 1))
    requested = server.gpus_per_pod * server.pods
    pods = f" ({server.pods} pods x {server.gpus_per_pod})" if server.pods > 1 else ""
    if requested < used:
        raise InputError(file, server.gpus_where, f"{count(requested, 'GPU')}{pods}, but tensor x pipeline x data "
                         f"parallel size needs {used}")
    if requested > used:
        notes.append(f"each {'replica' if pods else 'pod'} requests {count(requested, 'GPU')}{pods} but "
                     f"{ENGINE_NAMES[engine_fields['engine']]} uses {used}; the cost counts {requested}")
    spec = engine_fields.pop("speculative_config", None)
    if spec is not None:
        if block.speculative_acceptance_rate is None:
            raise InputError(file, "sizer.speculative_acceptance_rate",
                             "missing; --speculative-config needs an acceptance rate")
        engine_fields["speculative_config"] = {**spec, "acceptance_rate": block.speculative_acceptance_rate}
    replicas = block.replicas or server.replicas or 1
    deployment = {**engine_fields, "replicas": replicas}
    if prefill:
        p_fields, _, p_notes = _engine(prefill[0], file)
        differs = sorted(k for k in set(p_fields) | set(engine_fields) if p_fields.get(k) != engine_fields.get(k)
                         and k != "speculative_config")
        if differs:
            notes.append(f"prefill pods differ from decode pods in {', '.join(differs)}; sizer models both "
                         "with the decode pods' settings")
        # sizer's disaggregated replica is one pair of pools (sizer/sizing/cost.py gpus_per_replica): here
        # all of them, each pod planned with the decode pods' split; the GPUs billed are each pod's own
        pools = {"prefill_replicas": prefill[0].replicas or 1, "decode_replicas": replicas}
        deployment = {**engine_fields, "replicas": 1, "disaggregated": pools}
        p_requested = prefill[0].gpus_per_pod * prefill[0].pods
        used *= pools["prefill_replicas"] + pools["decode_replicas"]
        requested = requested * pools["decode_replicas"] + p_requested * pools["prefill_replicas"]
        replicas = 1
    name = server.name or stem
    workload, slo = with_traffic(side.get("workload") or _as_dict(block.workload),
                                 side.get("slo") or _as_dict(block.slo), traffic)
    has_workload = bool((workload.get("arrival") or {}).get("rate_per_s") or workload.get("trace"))
    price = (side.get("cost") or {}).get("price_usd_per_gpu_hour", block.price_usd_per_gpu_hour)
    data = {"name": name, "model": {"name": model}, "hardware": {"gpu": gpu}, "deployment": deployment,
            "workload": workload if has_workload else NOMINAL_WORKLOAD, "slo": slo,
            "cost": {"price_usd_per_gpu_hour": price}}
    kind = "kubernetes manifest" if doc.get("kind") else server.kind
    return CheckInput(file, kind, name, data, replicas, used, requested,
                      block.kv_share if kv_share is None else kv_share,
                      block.budget_usd_per_hour if budget is None else budget, tuple(notes), has_workload)


# Environment variable prefixes of the engines' own settings (VLLM_ATTENTION_BACKEND, SGLANG_..., TLLM_...):
# none sets a field sizer models, so each one set is named.
ENGINE_ENV = ("VLLM_", "SGLANG_", "SGL_", "TRTLLM_", "TLLM_")


def _engine(server: Server, file: str) -> tuple[dict, str, list[str]]:
    """The server's deployment fields (engine among them), model reference and notes."""
    engine, fields, model_ref, notes = parse_server_args(list(server.argv), file, server.model)
    notes += server.notes
    if server.pods > 1:
        notes.append(f"a {server.kind} of {server.pods} pods per replica, {count(server.gpus_per_pod, 'GPU')} each")
    env = sorted(k for k in container_env(server.container, server.path, file) if k.startswith(ENGINE_ENV))
    if env:
        notes.append(f"{ENGINE_NAMES[engine]} environment not modelled: {' '.join(env)}")
    return fields, model_ref, notes


def _model_field(server: Server) -> str:
    """The field that named the model, for a model not in the catalog."""
    if server.model is None:
        return "vllm serve"
    return {"InferenceService": "spec.predictor.model.storageUri",
            "production-stack values": f"{server.path}.modelURL",
            "llm-d modelservice values": "modelArtifacts.uri"}.get(server.kind, "vllm serve")


def _sizer_block(docs: list, doc: dict, file: str) -> SizerBlock:
    raw = doc.get("sizer")
    if raw is None:
        metadata = get(doc, "metadata", "", file)
        annotation = get(metadata, "metadata.annotations", "metadata", file).get(ANNOTATION)
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

def _as_dict(section) -> dict:
    """A built section back to a mapping without its unset (None) fields."""
    def clean(value):
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if v is not None}
        return value
    return clean(dataclasses.asdict(section))


GPU_LABELS = ("nvidia.com/gpu.product", "amd.com/gpu.product-name", "cloud.google.com/gke-accelerator",
              "karpenter.k8s.aws/instance-gpu-name")
# Ordered: the first rule whose words all occur in the normalised label wins.
GPU_RULES = (("gh200", None), ("gb200", "gb200"), ("b300", "b300"), ("b200", "b200"), ("h200", "h200"),
             ("h100 pcie", "h100-pcie"), ("h100 nvl", None), ("h100", "h100-sxm"), ("h20", "h20"),
             ("a100 40gb", "a100-40gb"), ("a100 pcie", "a100-pcie-80gb"), ("a100", "a100-80gb"),
             ("l40s", "l40s"), ("l4", "l4"), ("mi300x", "mi300x"), ("mi325x", "mi325x"), ("mi355x", "mi355x"),
             ("mi325", "mi325x"), ("mi355", "mi355x"))       # AMD's node labeller: AMD_Instinct_MI325_OAM


def gpu_for_label(label: str) -> str | None:
    """`NVIDIA-H100-80GB-HBM3` -> h100-sxm; None when no profile matches."""
    words = set(re.split(r"[^a-z0-9]+", label.lower()))
    for rule, profile in GPU_RULES:
        if all(w in words for w in rule.split()):
            return profile
    return None


def _gpu_from_labels(docs: list, file: str) -> str:
    for key, value, where in (label for doc in docs for label in _labels(doc, "", file)):
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
                selector = get(node, "nodeSelector", path, file)
                out += [(k, v, join(where, k)) for k, v in selector.items()]
            elif key == "acceleratorTypes" and isinstance(value, dict) and value.get("labelKey"):
                # llm-d modelservice: a node affinity on labelKey In labelValues
                values = get(value, "acceleratorTypes.labelValues", where, file) or [None]
                out.append((value.get("labelKey"), values[0], join(where, "labelValues[0]")))
            elif key == "matchExpressions":
                for i, e in enumerate(get(node, "matchExpressions", path, file) or []):
                    if not isinstance(e, dict):
                        raise InputError(file, f"{where}[{i}]", f"expected a mapping, got {excerpt(e)}")
                    if e.get("operator") != "In":
                        continue
                    values = get(e, "matchExpressions[].values", f"{where}[{i}]", file) or [None]
                    out.append((e.get("key"), values[0], f"{where}[{i}].values[0]"))
            else:
                out += _labels(value, where, file)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _labels(value, f"{path}[{i}]", file)
    return out
