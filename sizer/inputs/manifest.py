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
import sys
from dataclasses import dataclass
from pathlib import Path

from sizer.errors import InputError
from sizer.inputs.checkpoint import find_config
from sizer.inputs.hardware import is_profile_path, scenario_hardware
from sizer.inputs.manifests.commands import (
    SERVER_COMMANDS,
    container_env,
    model_reference,
    parse_server_args,
    run_time_env,
)
from sizer.inputs.manifests.fields import MAX_GPUS_PER_POD, get
from sizer.inputs.manifests.gpus import GPU_LABELS, INSTANCE_LABELS, MIG_RESOURCE, read_label
from sizer.inputs.manifests.helm_charts import helm_servers
from sizer.inputs.manifests.kubernetes import KINDS, Server, kind_read, kubernetes_servers
from sizer.inputs.manifests.operators import OPERATOR_KINDS, operator_servers
from sizer.inputs.manifests.pod_fields import check_object_fields
from sizer.inputs.model_spec import CATALOG_DIR
from sizer.inputs.scenario import ENGINE_NAMES, SLOSection, WorkloadSection, load_scenario, scenario_from_dict
from sizer.inputs.traffic import Traffic, with_traffic
from sizer.words import count
from validation.errors import FieldError, excerpt
from validation.safe_yaml import MAX_YAML_BYTES, load_yaml, load_yaml_all, loads_yaml, loads_yaml_all
from validation.schema import build, field, join


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
    has_workload: bool = True   # False: no workload stated; scenario_data holds NOMINAL_WORKLOAD, the slo rule skipped
    sources: tuple[Source, ...] = ()    # where the model, the GPU and the GPU count came from


@dataclass(frozen=True)
class Source:
    """One setting `check` read, its value and where it came from (a flag, the `sizer:` block, a manifest field)."""
    setting: str                # "model", "gpu", "gpus_per_replica"
    value: str
    source: str


@dataclass(frozen=True)
class CheckFlags:
    """`check --model`, `--gpu`, `--gpus-per-replica`: they replace the `sizer:` block's and the manifest's."""
    model: str | None = None
    gpu: str | None = None
    gpus_per_replica: int | None = None


# A manifest with no workload is planned at this nominal one: the memory and max_model_len rules do not
# read the traffic (beyond the fixes' longest request, not offered without a workload), and the slo
# rule is skipped, so it shows in no verdict.
NOMINAL_WORKLOAD = {"arrival": {"rate_per_s": 1.0}, "prompt_tokens": {"distribution": "fixed", "value": 1024},
                    "output_tokens": {"distribution": "fixed", "value": 256}}
STDIN = "<stdin>"
# A document without a `kind` is read as a scenario when it has one of these (else as Helm values).
# A file with one of these top-level keys is read as a scenario (a gateway document: refused as one, naming it).
SCENARIO_KEYS = {"model", "hardware", "deployment", "workload", "gateway"}


@dataclass(frozen=True)
class SizerBlock:
    """The `sizer:` block of a manifest: what Kubernetes cannot say."""
    workload: WorkloadSection = field(default_factory=WorkloadSection, doc="the traffic, as in a scenario; left "
                                      "out, from --rate, --prompt-tokens and --output-tokens, or none")
    slo: SLOSection = field(default_factory=SLOSection, doc="latency targets, as in a scenario")
    gpu: str | None = field(None, doc="accelerator profile; default from a node-selector label")
    model: str | None = field(None, doc="catalog name or config.json path; default from the HF repo id")
    gpus_per_replica: int | None = field(None, ge=1, le=MAX_GPUS_PER_POD,
                                         doc="GPUs one replica has; default from the pods' GPU resources")
    replicas: int | None = field(None, ge=1, doc="default: the Deployment's spec.replicas or Helm replicaCount")
    price_usd_per_gpu_hour: float | None = field(None, ge=0, doc="default: the hardware profile's price")
    budget_usd_per_hour: float | None = field(None, gt=0, doc="cost rule: most the deployment may cost per hour")
    kv_share: float = field(0.0, ge=0.0, le=1.0, doc="max_model_len rule: share of max_num_seqs to hold at full length")
    speculative_acceptance_rate: float | None = field(
        None, ge=0.0, le=0.999, doc="alpha, for --speculative-config (SGLang: --speculative-algorithm), as a "
                                    "scenario's speculative_config.acceptance_rate: solved from vLLM's logged 'Mean "
                                    "acceptance length', not its 'Avg Draft acceptance rate' (docs/scenario.md)")


def read_check_input(path: str, kv_share: float | None = None, budget_usd_per_hour: float | None = None,
                     traffic: Traffic = Traffic(), scenario: str | None = None,
                     flags: CheckFlags = CheckFlags()) -> CheckInput:
    """A scenario YAML, or a YAML with an inference server (and a `sizer:` block for the workload and
    SLO, or a side `scenario` file's, or `traffic`, or none); `-` reads standard input. `flags`
    replace the model, GPU and GPU count the file states."""
    file, stem = (STDIN, "stdin") if str(path) == "-" else (str(path), Path(path).stem)
    docs = [d for d in (_stdin_documents() if file == STDIN else load_yaml_all(path)) if d is not None]
    servers = find_servers(docs, file)
    side = side_scenario(scenario) if scenario is not None else {}
    if not servers and len(docs) == 1 and isinstance(docs[0], dict) and "sizer" not in docs[0] \
            and "kind" not in docs[0] and (SCENARIO_KEYS & set(docs[0]) or not docs[0]):
        workload, slo = with_traffic(side.get("workload") or docs[0].get("workload") or {},
                                     side.get("slo") or docs[0].get("slo") or {}, traffic)
        data = {**docs[0], "workload": workload, "slo": slo}
        if side.get("cost"):
            data["cost"] = side["cost"]
        if flags.gpus_per_replica is not None:
            raise InputError(None, "--gpus-per-replica", f"not with a scenario ({file}): its deployment section "
                                                         "states the split (tensor, pipeline, data parallel sizes)")
        if flags.model is not None:
            data["model"] = {**(data.get("model") if isinstance(data.get("model"), dict) else {}),
                             "name": _model_flag(flags.model)[0]}
        if flags.gpu is not None:
            data["hardware"] = {**(data.get("hardware") if isinstance(data.get("hardware"), dict) else {}),
                                "gpu": _gpu_flag(flags.gpu)}
        scenario_ = scenario_from_dict(data, file, default_name=stem)
        d = scenario_.deployment
        gpus = d.tensor_parallel_size * d.pipeline_parallel_size * d.data_parallel_size
        sources = (Source("model", scenario_.model.name, "--model" if flags.model else "model.name"),
                   Source("gpu", scenario_.hardware.gpu, "--gpu" if flags.gpu else "hardware.gpu"),
                   Source("gpus_per_replica", str(gpus), "deployment (TP x PP x DP)"))
        return CheckInput(file, "scenario", scenario_.name, data, d.replicas or 1, gpus, gpus,
                          0.0 if kv_share is None else kv_share, budget_usd_per_hour, sources=sources)
    return _from_manifest(docs, servers, file, stem, kv_share, budget_usd_per_hour, traffic, side, flags)


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
              "KServe InferenceService, ServingRuntime or LLMInferenceService, a RayService's Ray Serve LLM, a "
              "DynamoGraphDeployment's workers, or Helm values (vLLM's chart, production-stack "
              "servingEngineSpec.modelSpec[], llm-d modelservice decode/prefill)")


def find_servers(docs: list, file: str) -> list[Server]:
    """Every inference server in a file's documents: Kubernetes objects, then Helm values. An object of a kind sizer
    does not read that runs a server is refused (its replicas and pods mean what that kind says, not a Deployment's);
    other objects (a Service, a Secret) are left alone."""
    for doc in docs:
        if isinstance(doc, dict) and "kind" in doc and not (isinstance(doc["kind"], str) and doc["kind"].strip()):
            raise InputError(file, "kind", f"expected the object's kind (a document without one is read as Helm "
                                           f"values), got {excerpt(doc['kind'])}")
    values = [d for d in docs if isinstance(d, dict) and not d.get("kind")]
    plain = [d for d in docs if not (isinstance(d, dict) and d.get("kind") in OPERATOR_KINDS)]
    servers = kubernetes_servers(plain, file)
    unread = next((s.kind for s in servers if s.kind not in KINDS), None)
    if unread is not None:
        raise InputError(file, "kind", f"expected one of {', '.join(KINDS + OPERATOR_KINDS)} (the kinds sizer reads; "
                                       f"a document without a kind is read as Helm values), got {excerpt(unread)}")
    servers += operator_servers(docs, file)
    for doc in {id(s.doc): s.doc for s in servers}.values():
        if kind_read(doc) in KINDS:         # pod templates as core/v1 types them (an operator's CRD has its own)
            check_object_fields(doc, file)
    return servers + [s for doc in values for s in helm_servers(doc, file)]


def _from_manifest(docs: list, servers: list[Server], file: str, stem: str, kv_share: float | None,
                   budget: float | None, traffic: Traffic, side: dict, flags: CheckFlags) -> CheckInput:
    if not servers:
        values = [d for d in docs if isinstance(d, dict) and not d.get("kind")]
        if values and len(values) == len(docs):
            keys = ", ".join(sorted(str(k) for d in values for k in d)[:8])
            raise InputError(file, None, f"an unrecognised values file (top-level keys {excerpt(keys)}): neither a "
                                         f"scenario (model, hardware) nor a file with {LOOKED_FOR}")
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
    model, model_from = _model_of(flags, block, model_ref, file, _model_field(server, engine_fields["engine"]), notes)
    gpu, gpu_from, gpu_notes = (_gpu_flag(flags.gpu), "--gpu", ()) if flags.gpu else \
        (block.gpu, "sizer.gpu", ()) if block.gpu else \
        _gpu_from_labels([doc] + [d for d in docs if d is not doc], file, server.gpu_labels)
    notes += gpu_notes
    mig = MIG_RESOURCE.search(server.gpus_where)
    if mig and "/mig-" not in gpu:      # the pod asks for MIG slices (mixed strategy): a slice of that GPU
        gpu, gpu_from = f"{gpu}/mig-{mig.group(1)}g.{mig.group(2)}gb", f"{gpu_from}, sliced as {server.gpus_where}"
        # a slice the part does not have is refused naming where the part came from
        scenario_hardware(gpu, None if gpu_from.startswith("--") else file, gpu_from.split(" (")[0].split(",")[0])
    used = (engine_fields.get("tensor_parallel_size", 1) * engine_fields.get("pipeline_parallel_size", 1)
            * engine_fields.get("data_parallel_size", 1))
    requested, requested_from = _gpus_of(server, flags, block, file)
    pods = f" ({server.pods} pods x {server.gpus_per_pod})" if server.pods > 1 and server.gpus_per_pod else ""
    if requested < used:
        raise InputError(None if requested_from.startswith("--") else file,
                         requested_from if requested_from.startswith(("--", "sizer.")) else server.gpus_where,
                         f"{count(requested, 'GPU')}{pods}, but tensor x pipeline x data "
                         f"parallel size needs {used}")
    if requested > used:
        notes.append(f"each {'replica' if pods else 'pod'} requests {count(requested, 'GPU')}{pods} but "
                     f"{ENGINE_NAMES[engine_fields['engine']]} uses {used}; the cost counts {requested}")
    spec = engine_fields.pop("speculative_config", None)
    if spec is not None:
        if block.speculative_acceptance_rate is None:
            raise InputError(file, "sizer.speculative_acceptance_rate",
                             "missing; speculative decoding (vLLM's --speculative-config, SGLang's "
                             "--speculative-algorithm) needs an acceptance rate")
        engine_fields["speculative_config"] = {**spec, "acceptance_rate": block.speculative_acceptance_rate}
    overrides = engine_fields.pop("model_overrides", None)        # --hf-overrides, --json-model-override-args
    replicas = block.replicas or server.replicas or 1
    deployment = {**engine_fields, "replicas": replicas}
    if prefill:
        p_fields, _, p_notes = _engine(prefill[0], file)
        decode_fields = {**engine_fields, "model_overrides": overrides}       # as the decode pods' command line has it
        differs = sorted(k for k in set(p_fields) | set(decode_fields) if p_fields.get(k) != decode_fields.get(k)
                         and k != "speculative_config")
        if differs:
            notes.append(f"prefill pods differ from decode pods in {', '.join(differs)}; sizer models both "
                         "with the decode pods' settings")
        # sizer's disaggregated replica is one pair of pools (sizer/sizing/cost.py gpus_per_replica): here
        # all of them, each pod planned with the decode pods' split; the GPUs billed are each pod's own
        pools = {"prefill_replicas": prefill[0].replicas or 1, "decode_replicas": replicas}
        deployment = {**engine_fields, "replicas": 1, "disaggregated": pools}
        p_requested, p_from = _gpus_of(prefill[0], flags, block, file)
        used *= pools["prefill_replicas"] + pools["decode_replicas"]
        requested = requested * pools["decode_replicas"] + p_requested * pools["prefill_replicas"]
        requested_from = f"decode and prefill pods ({requested_from}; {p_from})"
        replicas = 1
    name = server.name or stem
    workload, slo = with_traffic(side.get("workload") or _as_dict(block.workload),
                                 side.get("slo") or _as_dict(block.slo), traffic)
    # a workload stated is checked whole: a closed loop has no rate, and lengths without a rate are refused naming it
    arrival = workload.get("arrival") or {}
    has_workload = any((arrival.get("rate_per_s"), arrival.get("process") == "closed", workload.get("trace"),
                        workload.get("prompt_tokens"), workload.get("output_tokens")))
    price = (side.get("cost") or {}).get("price_usd_per_gpu_hour", block.price_usd_per_gpu_hour)
    data = {"name": name, "model": {"name": model} | ({"overrides": overrides} if overrides else {}),
            "hardware": {"gpu": gpu}, "deployment": deployment,
            "workload": workload if has_workload else NOMINAL_WORKLOAD, "slo": slo,
            "cost": {"price_usd_per_gpu_hour": price}}
    kind = "kubernetes manifest" if doc.get("kind") else server.kind
    sources = (Source("model", model, model_from), Source("gpu", gpu, gpu_from),
               Source("gpus_per_replica", str(requested), requested_from))
    return CheckInput(file, kind, name, data, replicas, used, requested,
                      block.kv_share if kv_share is None else kv_share,
                      block.budget_usd_per_hour if budget is None else budget, tuple(notes), has_workload, sources)


def _model_flag(name: str) -> tuple[str, str | None]:
    """--model: a catalog name, HF id, config path or weights folder named as a model (`model_reference`); else a
    cached HF id or checkpoint folder as `plan --model` reads it; refused naming the flag."""
    try:
        return model_reference(name, None, "--model")
    except FieldError:
        find_config(name, CATALOG_DIR, None, "--model")
        return name, None


def _gpu_flag(name: str) -> str:
    """--gpu: a profile id or alias (its id), or a profile file (its absolute path, so a scenario elsewhere finds
    it), refused naming the flag."""
    spec = scenario_hardware(name, None, "--gpu")
    return str(Path(name).resolve()) if is_profile_path(name) else spec.id


def _model_of(flags: CheckFlags, block: SizerBlock, model_ref: str, file: str, field_name: str,
              notes: list[str]) -> tuple[str, str]:
    """The model and where it came from: --model, sizer.model, else the manifest (a path read as the model its
    folder names adds that assumption to `notes`)."""
    if flags.model:
        name, assumed = _model_flag(flags.model)
        source = "--model"
    elif block.model:
        return block.model, "sizer.model"
    else:
        name, assumed = model_reference(model_ref, file, field_name)
        source = f"{field_name} {excerpt(model_ref)}" if model_ref != name else field_name
    if assumed:
        notes.append(f"assumed: {assumed}")
    return name, source


def _gpus_of(server: Server, flags: CheckFlags, block: SizerBlock, file: str) -> tuple[int, str]:
    """GPUs one replica requests and where that came from: --gpus-per-replica, sizer.gpus_per_replica, else
    each pod's GPU resource (or what its chart derives) times the pods of a replica."""
    if flags.gpus_per_replica is not None:
        return flags.gpus_per_replica, "--gpus-per-replica"
    if block.gpus_per_replica is not None:
        return block.gpus_per_replica, "sizer.gpus_per_replica"
    if server.gpus_per_pod is None:
        raise InputError(file, server.gpus_where, "missing; an inference pod needs its GPU count (or give "
                                                  "--gpus-per-replica)")
    where = server.gpus_where + (f" x {server.pods} pods" if server.pods > 1 else "")
    return server.gpus_per_pod * server.pods, where


# Environment variable prefixes of the engines' own settings (VLLM_ATTENTION_BACKEND, SGLANG_..., TLLM_...):
# none sets a field sizer models, so each one set is named.
ENGINE_ENV = ("VLLM_", "SGLANG_", "SGL_", "TRTLLM_", "TLLM_")
# ... except those a kind's template reads as flags (sizer/inputs/manifests/operators.py), and vLLM's switch to Marlin's
# MXFP4 MoE (before --moe-backend marlin; read as deployment.moe_backend)
READ_ENV = {"LLMInferenceService": ("VLLM_ADDITIONAL_ARGS",)}
MARLIN_ENV = "VLLM_MXFP4_USE_MARLIN"


def _engine(server: Server, file: str) -> tuple[dict, str, list[str]]:
    """The server's deployment fields (engine among them), model reference and notes."""
    engine, fields, model_ref, notes = parse_server_args(list(server.argv), file, server.model)
    notes += server.notes
    if server.pods > 1:
        each = f", {count(server.gpus_per_pod, 'GPU')} each" if server.gpus_per_pod is not None else ""
        notes.append(f"a {server.kind} of {server.pods} pods per replica{each}")
    read = READ_ENV.get(server.kind, ())
    stated = container_env(server.container, server.path, file)
    if engine == "vllm" and MARLIN_ENV in stated:
        fields.setdefault("moe_backend", _marlin_env(stated[MARLIN_ENV], server, file))
        read += (MARLIN_ENV,)
    env = sorted(k for k in stated if k.startswith(ENGINE_ENV) and k not in read)
    if env:
        notes.append(f"{ENGINE_NAMES[engine]} environment not modelled: {' '.join(env)}")
    later = sorted(k for k in run_time_env(server.container, server.path, file) if k.startswith(ENGINE_ENV))
    if later:
        unread = " (moe_backend taken as auto; state --moe-backend in the arguments)" if (
            engine == "vllm" and MARLIN_ENV in later and "moe_backend" not in fields) else ""
        notes.append(f"{ENGINE_NAMES[engine]} environment set when the pod runs (valueFrom), not read: "
                     f"{' '.join(later)}{unread}")
    return fields, model_ref, notes


def _marlin_env(value: str, server: Server, file: str) -> str:
    """VLLM_MXFP4_USE_MARLIN as vLLM reads it (vllm/envs.py: maybe_convert_bool, int(value) as a bool): 1 runs MXFP4
    MoE experts by Marlin (deployment.moe_backend marlin), 0 leaves vLLM's choice."""
    if value.strip() not in ("0", "1"):
        raise InputError(file, f"{server.path}.env.{MARLIN_ENV}", f"expected 0 or 1, got {excerpt(value)}")
    return "marlin" if value.strip() == "1" else "auto"


def _model_field(server: Server, engine: str) -> str:
    """The field that named the model, for a model not in the catalog."""
    if server.model is None:
        return SERVER_COMMANDS[engine]
    if server.model_where:
        return server.model_where
    return {"InferenceService": "spec.predictor.model.storageUri",
            "production-stack values": f"{server.path}.modelURL",
            "llm-d modelservice values": "modelArtifacts.uri", "LLMInferenceService": "spec.model.uri",
            }.get(server.kind, SERVER_COMMANDS[engine])


def _sizer_block(docs: list, doc: dict, file: str) -> SizerBlock:
    _refuse_unknown_annotations(docs, file)
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
        return SizerBlock()
    return build(SizerBlock, raw, "sizer", file)


ANNOTATION = "sizer.dev/check"
ANNOTATION_PREFIX = "sizer.dev/"        # sizer's own annotations: ANNOTATION is the one it reads


def _refuse_unknown_annotations(docs: list, file: str) -> None:
    """An annotation under sizer's prefix other than ANNOTATION, on any document of the file (a misspelt
    `sizer.dev/check` would leave the check without its workload, SLO and budget); the annotations of a document whose
    metadata is not a mapping are not sizer's to read."""
    for doc in docs:
        metadata = doc.get("metadata") if isinstance(doc, dict) else None
        annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
        for key in annotations if isinstance(annotations, dict) else ():
            if isinstance(key, str) and key.startswith(ANNOTATION_PREFIX) and key != ANNOTATION:
                raise InputError(file, join("metadata.annotations", key),
                                 f"unknown key under {ANNOTATION_PREFIX}; expected one of: {ANNOTATION}")
        spec = doc.get("spec") if isinstance(doc, dict) else None
        template = spec.get("template") if isinstance(spec, dict) else None
        meta = template.get("metadata") if isinstance(template, dict) else None
        annotations = meta.get("annotations") if isinstance(meta, dict) else None
        key = next((k for k in annotations or () if isinstance(k, str) and k.startswith(ANNOTATION_PREFIX)), None) \
            if isinstance(annotations, dict) else None
        if key is not None:             # its budget and workload would go unread
            raise InputError(file, join("spec.template.metadata.annotations", key),
                             "is on the pod template, where sizer does not read it; expected it on the object's own "
                             "metadata.annotations")


def _as_dict(section) -> dict:
    """A built section back to a mapping without its unset (None) fields."""
    def clean(value):
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if v is not None}
        return value
    return clean(dataclasses.asdict(section))


def _gpu_from_labels(docs: list, file: str, stated: tuple = ()) -> tuple[str, str, tuple[str, ...]]:
    """(profile, where it was read, notes) from the first node label that names a GPU: node selectors and node
    affinity first, then tolerations; one that names a part sizer has no profile for is refused, naming --gpu. Other
    GPUs a node affinity allows beside it (`In` [H100, A100]: the pod may land on either) are named in a note: the
    check is of the first."""
    labels: list[tuple[object, object, str]] = []
    tolerations: list[tuple[object, object, str]] = []
    for doc in docs:
        _node_names(doc, "", file, labels, tolerations)
    found = labels + tolerations + list(stated)
    beside: dict[str, str] = {}
    for key, value, _ in found:
        beside.setdefault(str(key), str(value))    # a key's first value, as the first GPU label is the one checked
    readings = [(key, where, read_label(str(key), str(value), beside)) for key, value, where in found
                if key in GPU_LABELS and value is not None]
    if readings:
        _, where, label = readings[0]
        if label.profile is None:
            raise InputError(file, where, f"no hardware profile for {excerpt(label.reading, quote=False)}; give --gpu "
                                          "(`sizer gpus`) or sizer.gpu")
        selectors = {w for _, _, w in labels}          # a toleration or a stated label allows no other node
        others = [f"{o.reading} ({w})" for k, w, o in readings[1:] if w in selectors and o.profile != label.profile
                  and (o.profile or k not in INSTANCE_LABELS)]    # an unmapped instance type: any machine type
        notes = (f"the pod's node labels also allow {', '.join(others)}: checked on {label.profile} alone; `--gpu` "
                 "checks another",) if others else ()
        return label.profile, f"{where} ({label.reading})", notes
    raise InputError(file, "--gpu", "missing: no node label names the GPU (in a node selector, node affinity or "
                                    "toleration: GPU product, GKE accelerator, instance type); give --gpu (`sizer "
                                    "gpus`) or sizer.gpu")


def _node_names(node, path: str, file: str, labels: list, tolerations: list) -> None:
    """(key, value, field path) of every nodeSelector entry and nodeAffinity `In` expression in a document, added to
    `labels`, and of every toleration with a value, added to `tolerations`: one walk of the document."""
    if isinstance(node, dict):
        for key, value in node.items():
            where = join(path, key)
            if key == "nodeSelector":
                selector = get(node, "nodeSelector", path, file)
                labels.extend((k, v, join(where, k)) for k, v in selector.items())
            elif key == "acceleratorTypes" and isinstance(value, dict) and value.get("labelKey"):
                # llm-d modelservice: a node affinity on labelKey In labelValues
                values = get(value, "acceleratorTypes.labelValues", where, file) or [None]
                labels.extend((value.get("labelKey"), v, join(where, f"labelValues[{j}]"))
                              for j, v in enumerate(values))
            elif key == "matchExpressions":
                for i, e in enumerate(get(node, "matchExpressions", path, file) or []):
                    if not isinstance(e, dict):
                        raise InputError(file, f"{where}[{i}]", f"expected a mapping, got {excerpt(e)}")
                    if e.get("operator") != "In":
                        continue
                    values = get(e, "matchExpressions[].values", f"{where}[{i}]", file) or [None]
                    labels.extend((e.get("key"), v, f"{where}[{i}].values[{j}]") for j, v in enumerate(values))
            elif key == "tolerations" and isinstance(value, list):
                tolerations.extend((t.get("key"), t.get("value"), f"{where}[{i}].value") for i, t in enumerate(value)
                                   if isinstance(t, dict) and t.get("value") is not None)
            else:
                _node_names(value, where, file, labels, tolerations)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _node_names(value, f"{path}[{i}]", file, labels, tolerations)
