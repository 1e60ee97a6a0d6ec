"""Where the serving container is in Kubernetes objects, and what one replica of it is.

Deployment (and ReplicaSet, Argo Rollout, OpenShift DeploymentConfig), StatefulSet, Pod, Job: the
container whose command line starts an inference server (sizer/inputs/manifests/commands.py), anywhere in the document;
one replica is one pod (`spec.replicas`; a Pod 1; a Job `spec.parallelism`). LeaderWorkerSet
(leaderworkerset.x-k8s.io/v1): one replica is a group of `leaderWorkerTemplate.size` pods, the
leader's command line the server's, each pod with its own GPU limit, so a replica has size x
that many GPUs (vLLM's multi-node example: TP within a node, PP across). KServe
(serving.kserve.io): an InferenceService's `spec.predictor.model` runs on the ServingRuntime it
names (`runtime`, in the same file) or, with `modelFormat: huggingface`, KServe's Hugging Face
server (vLLM); the model from its `storageUri` (`hf://org/name`) when the command line names the
mounted folder; replicas `spec.predictor.minReplicas`. A ServingRuntime alone is its container. A
Knative Service (serving.knative.dev/v1; Google Cloud Run's service YAML is one): the revision template's
container; replicas its lower scale bound (`autoscaling.knative.dev/min-scale`, Cloud Run's service-level
`run.googleapis.com/minScale`, or `manualInstanceCount` under manual scaling), 1 where it scales to zero,
with the bounds and the scale from zero named as not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

from sizer.errors import InputError
from sizer.inputs.manifests.commands import server_start, tokens
from sizer.inputs.manifests.fields import get, hf_repo_id
from sizer.inputs.manifests.gpus import MIG_RESOURCE
from validation.errors import excerpt
from validation.schema import join

# The kinds read here; an object of another kind running a server is refused (sizer/inputs/manifest.py find_servers).
# A ReplicaSet, an Argo Rollout (argoproj.io) and an OpenShift DeploymentConfig (apps.openshift.io) hold a
# Deployment's spec.replicas and pod template, and are read as one.
KINDS = ("Deployment", "ReplicaSet", "Rollout", "DeploymentConfig", "StatefulSet", "Pod", "Job", "LeaderWorkerSet",
         "InferenceService", "ServingRuntime", "ClusterServingRuntime", "Knative Service")
KNATIVE_API = "serving.knative.dev/"
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
# KServe's Hugging Face serving runtime (kserve/huggingfaceserver): vLLM behind KServe's own flags
# (--model_id, --model_name, --backend), with vLLM's engine flags passed through.
HUGGINGFACE_SERVER = ("python", "-m", "huggingfaceserver")
# The ClusterServingRuntimes KServe installs that run it (kserve/kserve config/runtimes/kserve-huggingfaceserver*.yaml):
# an InferenceService naming one need not carry the runtime in its file.
KSERVE_HUGGINGFACE_RUNTIMES = ("kserve-huggingfaceserver", "kserve-huggingfaceserver-multinode")


@dataclass(frozen=True)
class Server:
    """One inference server found in a file, with what its object says about it."""
    doc: dict                       # the document it is in (name, node labels, a `sizer:` block)
    path: str                       # the container's field path
    container: dict                 # command, args, env, resources
    kind: str                       # what was read: "Deployment", "LeaderWorkerSet", "production-stack values", ...
    argv: tuple[str, ...]           # its command line, `$(VAR)` expanded
    gpus_per_pod: int | None        # None: the pod names no GPU resource (--gpus-per-replica may say)
    gpus_where: str                 # the field that gave gpus_per_pod (or would have)
    replicas: int | None            # None: not stated (1)
    pods: int = 1                   # pods per replica: a LeaderWorkerSet group
    model: str | None = None        # stated by the object (storageUri, modelURL, modelArtifacts.uri)
    role: str | None = None         # "prefill" or "decode" in a disaggregated deployment
    name: str | None = None
    notes: tuple[str, ...] = ()     # settings of the object that sizer does not model
    gpu_labels: tuple[tuple[str, str, str], ...] = ()   # (label key, value, field) naming the GPU outside node labels
    model_where: str | None = None  # the field that named `model`, where the kind alone does not say


def pod_gpus(container: dict, path: str, file: str) -> tuple[int | None, str]:
    """GPUs one pod asks for (`resources.limits`, else `requests`; a MIG slice counts as one), and the field
    that says so; None (with the field that would) when the pod names no GPU resource. Requests that state another
    count than the limits are refused: Kubernetes takes an extended resource's requests equal to its limits."""
    resources = get(container, "resources", path, file)
    rpath = join(path, "resources")
    requests = get(resources, "resources.requests", rpath, file)
    limits = {**requests, **get(resources, "resources.limits", rpath, file)}
    key = next((k for k in GPU_RESOURCES if k in limits), None) \
        or next((k for k in limits if isinstance(k, str) and MIG_RESOURCE.fullmatch(k)), None)
    if key is None:
        return None, join(rpath, "limits.nvidia.com/gpu")
    spec = "resources.limits.nvidia.com/gpu" if key not in GPU_RESOURCES else f"resources.limits.{key}"

    def count(source: dict, at: str) -> int:
        return get({"nvidia.com/gpu": source[key]} if key not in GPU_RESOURCES else source, spec, join(rpath, at),
                   file)

    gpus = count(limits, "limits")
    if key in requests and (asked := count(requests, "requests")) != gpus:
        raise InputError(file, join(rpath, f"requests.{key}"), f"{asked}, but limits.{key} is {gpus}; expected "
                                                               "requests equal to limits (Kubernetes refuses a GPU "
                                                               "request other than its limit)")
    return gpus, join(rpath, f"limits.{key}")


def containers(node, path: str) -> list[tuple[str, dict]]:
    """(path, mapping) of every mapping with `args` or `command` anywhere in a document (pod specs, Helm values)."""
    out = []
    if isinstance(node, dict):
        if "args" in node or "command" in node:
            out.append((path, node))
        for key, value in node.items():
            out += containers(value, join(path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += containers(value, f"{path}[{i}]")
    return out


def kubernetes_servers(docs: list, file: str) -> list[Server]:
    """Every inference server in the Kubernetes objects (documents with a `kind`) of a file."""
    objects = [d for d in docs if isinstance(d, dict) and d.get("kind")]
    runtimes = {_name(d, file): d for d in objects if d.get("kind") in ("ServingRuntime", "ClusterServingRuntime")}
    used, out = set(), []
    # InferenceServices first: the ServingRuntime each uses is read as part of it, not alone
    for doc in sorted(objects, key=lambda d: d.get("kind") != "InferenceService"):
        if doc.get("kind") == "InferenceService":
            server, runtime = _inference_service(doc, runtimes, file)
            if server is not None:
                out.append(server)
                used.add(runtime)
                continue
        if doc.get("kind") in ("ServingRuntime", "ClusterServingRuntime") and _name(doc, file) in used:
            continue
        found = []
        for path, container in containers(doc, ""):
            argv, notes = with_entrypoint(container, tokens(container, path, file, doc))
            if server_start(argv) is not None:
                found.append((path, container, argv, notes))
        if doc.get("kind") == "LeaderWorkerSet" and any(".leaderTemplate." in f[0] for f in found):
            # SGLang, TensorRT-LLM: each worker runs the server too (--node-rank N); one group is one server
            found = [f for f in found if ".workerTemplate." not in f[0]]
        for path, container, argv, notes in found:
            gpus, where = pod_gpus(container, path, file)
            if doc.get("kind") == "LeaderWorkerSet":
                _check_workers(doc, gpus, where, file)
            replicas, scaling = _knative_scale(doc, file) if is_knative(doc) else (_replicas(doc, file), ())
            out.append(Server(doc, path, container, kind_read(doc), tuple(argv), gpus, where, replicas,
                              _group_size(doc, file), name=_name(doc, file), notes=notes + scaling))
    return out


def _check_workers(doc: dict, leader_gpus: int | None, leader_where: str, file: str) -> None:
    """A LeaderWorkerSet's worker pods hold the GPUs the leader's pod holds: sizer counts a group as its size times the
    leader's (TP within a pod, PP across, as vLLM's multi-node example runs), so workers with fewer, more or none
    are refused naming the worker's resource field."""
    workers = [pod_gpus(c, path, file) for path, c in containers(doc, "") if ".workerTemplate." in path]
    if workers and leader_gpus is not None:
        held = sum(n or 0 for n, _ in workers)
        if held != leader_gpus:
            raise InputError(file, workers[0][1], f"{held} GPUs a worker pod, where the leader's holds {leader_gpus} "
                                                  f"({leader_where}); expected every pod of a group to hold the same")


def is_knative(doc: dict) -> bool:
    return doc.get("kind") == "Service" and str(doc.get("apiVersion", "")).startswith(KNATIVE_API)


def kind_read(doc: dict) -> str:
    """The object's kind as KINDS names it: "Knative Service" for a Service of serving.knative.dev."""
    return "Knative Service" if is_knative(doc) else str(doc.get("kind"))


def _knative_scale(doc: dict, file: str) -> tuple[int, tuple[str, ...]]:
    """A Knative Service's replicas, the lower scale bound, and what its autoscaling does that sizer does not model.
    Knative's own bounds sit on the revision template, Cloud Run's service-level ones on the Service; min-scale
    unset is 0 (scale to zero, Knative's default with enable-scale-to-zero), max-scale unset unbounded."""
    def scale(annotations: dict, path: str, *names: str) -> int | None:
        return next((v for name in names if (v := get(annotations, f"annotations.{name}", path, file)) is not None),
                    None)

    spec = get(doc, "spec", "", file)
    template = get(spec, "spec.template", "spec", file)
    tpath = "spec.template.metadata.annotations"
    revision = get(get(template, "metadata", "spec.template", file), "metadata.annotations", "spec.template.metadata",
                   file)
    service = get(get(doc, "metadata", "", file), "metadata.annotations", "metadata", file)
    mode = get(service, "annotations.run.googleapis.com/scalingMode", "metadata.annotations", file)
    if mode not in (None, "automatic", "manual"):
        raise InputError(file, "metadata.annotations.run.googleapis.com/scalingMode",
                         f"expected automatic or manual (Cloud Run's scaling modes), got {excerpt(mode)}")
    if mode == "manual":
        count = scale(service, "metadata.annotations", "run.googleapis.com/manualInstanceCount")
        if not count:
            raise InputError(file, "metadata.annotations.run.googleapis.com/manualInstanceCount",
                             f"expected the instances manual scaling runs (at least 1), got {excerpt(count)}")
        return count, ()
    low = scale(revision, tpath, "autoscaling.knative.dev/min-scale", "autoscaling.knative.dev/minScale") \
        or scale(service, "metadata.annotations", "run.googleapis.com/minScale") or 0
    high = scale(revision, tpath, "autoscaling.knative.dev/max-scale", "autoscaling.knative.dev/maxScale") \
        or scale(service, "metadata.annotations", "run.googleapis.com/maxScale")
    if high and low > high:         # Knative's webhook refuses the revision
        raise InputError(file, f"{tpath}.autoscaling.knative.dev/min-scale", f"{low} above max-scale {high}; expected "
                                                                              "min-scale <= max-scale")
    bounds = f"between min-scale {low} and " + (f"max-scale {high}" if high else "no max-scale")
    notes = [f"Knative scales this service {bounds} with load (not modelled): checked at "
             + (f"its min-scale, {low} replica(s)" if low else
                "1 replica; it scales to zero when idle, and a start from zero (the server's start-up and model load "
                "before the first token) is not modelled")]
    concurrency = get(get(template, "template.spec", "spec.template", file), "containerConcurrency",
                      "spec.template.spec", file)
    if concurrency:
        notes.append(f"containerConcurrency {concurrency}: Knative's queue-proxy holds a pod's requests beyond "
                     f"{concurrency} in flight (not modelled)")
    return max(low, 1), tuple(notes)


# Images whose entrypoint starts the server, so that a container with only `args:` runs it: vLLM's
# vllm/vllm-openai (docker/Dockerfile, `ENTRYPOINT ["vllm", "serve"]`), also as mirrored elsewhere.
IMAGE_ENTRYPOINTS = {"vllm/vllm-openai": ("vllm", "serve")}


def with_entrypoint(container: dict, argv: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """argv with the image's entrypoint in front when the container gives no `command` (Kubernetes then
    runs the image's ENTRYPOINT with `args`), and a note saying so."""
    image = container.get("image")
    if "command" in container or not isinstance(image, str) or server_start(argv) is not None:
        return argv, ()
    repo = image.split("@")[0]
    if ":" in repo.rsplit("/", 1)[-1]:           # a tag, not a registry's port
        repo = repo.rsplit(":", 1)[0]
    for name, entrypoint in IMAGE_ENTRYPOINTS.items():
        if repo == name or repo.endswith("/" + name):
            return [*entrypoint, *argv], (f"no command: the {name} image's entrypoint `{' '.join(entrypoint)}` "
                                          "runs the args",)
    return argv, ()


def _name(doc: dict, file: str) -> str | None:
    return get(get(doc, "metadata", "", file), "metadata.name", "metadata", file)


def _replicas(doc: dict, file: str) -> int | None:
    spec = get(doc, "spec", "", file)
    if doc.get("kind") == "Pod":
        return 1
    if doc.get("kind") == "Job":
        return get(spec, "spec.parallelism", "spec", file) if "parallelism" in spec else 1
    return get(spec, "spec.replicas", "spec", file)



def _group_size(doc: dict, file: str) -> int:
    if doc.get("kind") != "LeaderWorkerSet":
        return 1
    template = get(get(doc, "spec", "", file), "spec.leaderWorkerTemplate", "spec", file)
    size = get(template, "leaderWorkerTemplate.size", "spec.leaderWorkerTemplate", file)
    return 1 if size is None else size


def _inference_service(doc: dict, runtimes: dict, file: str) -> tuple[Server | None, str | None]:
    """The server of an InferenceService's `predictor.model` (None when it has only `containers`)."""
    predictor = get(get(doc, "spec", "", file), "spec.predictor", "spec", file)
    ppath = "spec.predictor"
    model = get(predictor, "predictor.model", ppath, file)
    if not model:
        return None, None
    mpath = join(ppath, "model")
    runtime_name = get(model, "predictor.model.runtime", mpath, file)
    fmt = get(get(model, "predictor.model.modelFormat", mpath, file), "modelFormat.name", join(mpath, "modelFormat"),
              file)
    container, cpath, prefix = dict(model), mpath, ()
    if runtime_name is not None and runtime_name in runtimes:
        runtime = runtimes[runtime_name]
        found = containers(get(runtime, "spec", "", file), "spec")
        if not found:
            raise InputError(file, f"{mpath}.runtime", f"ServingRuntime {excerpt(runtime_name)} has no container "
                                                       "with a command line")
        servers = [p for p, c in found if server_start(tokens(c, p, file, runtime)) is not None]
        if len(servers) > 1:        # the first was read, the second ignored
            raise InputError(file, f"{mpath}.runtime", f"ServingRuntime {excerpt(runtime_name)} runs {len(servers)} "
                                                       f"inference servers ({', '.join(servers)}); sizer check takes "
                                                       "one deployment per file")
        rpath, rcontainer = found[0]
        prefix = tuple(tokens({k: rcontainer[k] for k in ("command", "args", "env") if k in rcontainer},
                              rpath, file, runtime))
        container = {**rcontainer, **{k: v for k, v in model.items() if k in ("resources", "env")}}
        container["args"] = model.get("args") or []
        cpath = mpath if "resources" in model else rpath
    elif (fmt or "").lower() == "huggingface" or runtime_name in KSERVE_HUGGINGFACE_RUNTIMES:
        prefix = HUGGINGFACE_SERVER
    else:
        raise InputError(file, join(mpath, "runtime"), f"expected a ServingRuntime in this file, or modelFormat "
                                                       f"huggingface; got {excerpt(runtime_name)}")
    argv = prefix + tuple(tokens({k: container[k] for k in ("args", "env") if k in container}, cpath, file, doc))
    if server_start(list(argv)) is None:
        raise InputError(file, join(mpath, "runtime"), "the runtime's command line starts no inference server "
                                                       "sizer reads (vllm serve, sglang.launch_server, trtllm-serve)")
    gpus, where = pod_gpus(container, cpath, file)
    uri = get(model, "predictor.model.storageUri", mpath, file)
    stated = hf_repo_id(uri, file, join(mpath, "storageUri")) if uri and uri.startswith("hf://") \
        else None
    replicas = get(predictor, "predictor.minReplicas", ppath, file)
    most = get(predictor, "predictor.maxReplicas", ppath, file)
    if most and replicas and replicas > most:       # maxReplicas 0: KServe's "no limit"
        raise InputError(file, f"{ppath}.minReplicas", f"{replicas} above maxReplicas {most}; expected "
                                                       "minReplicas <= maxReplicas")
    notes = () if replicas != 0 else ("minReplicas 0: KServe scales the predictor to zero when idle; checked at 1 "
                                      "replica, and a start from zero (the server's start-up and model load before "
                                      "the first token) is not modelled",)
    return Server(doc, cpath, container, "InferenceService", argv, gpus, where, replicas or None, model=stated,
                  name=_name(doc, file), notes=notes), runtime_name

