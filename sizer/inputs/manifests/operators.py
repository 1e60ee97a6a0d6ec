"""Custom resources of serving operators that write the pods themselves, read as the server they run.

KServe `LLMInferenceService` (serving.kserve.io/v1alpha1, v1alpha2): its default template
(kserve/kserve config/llmisvcconfig/config-llm-template.yaml) runs `vllm serve /mnt/models
--served-model-name {spec.model.name} --tensor-parallel-size {spec.parallelism.tensor}` with the
main container's args appended; with `spec.worker` (config-llm-worker-data-parallel.yaml) also
`--data-parallel-size {data}` over data / dataLocal pods. Model: `spec.model.uri` (`hf://`) else
`spec.model.name`; replicas `spec.replicas`; `spec.prefill` a prefill pool with its own settings.

Ray Serve LLM in a KubeRay `RayService` (ray.io/v1): `spec.serveConfigV2` (YAML in a string) with an
application built by `ray.serve.llm:build_openai_app` (or `build_llm_deployment`); each
`args.llm_configs[]` entry is a vLLM engine: `model_loading_config.model_source`, `engine_kwargs`
(vLLM's EngineArgs, written as flags), `deployment_config.num_replicas` (else the autoscaler's
`min_replicas`), `accelerator_type` (Ray's GPU name); one replica takes tensor x pipeline
parallel size GPUs (ray python/ray/llm/_internal/serve/configs/server_models.py placement).

NVIDIA Dynamo `DynamoGraphDeployment` (nvidia.com/v1alpha1): each service with a worker command
(`python3 -m dynamo.vllm`, `dynamo.sglang`) in `extraPodSpec.mainContainer`; GPUs
`resources.limits.gpu`, replicas `replicas`, pods `multinode.nodeCount`; a worker with
`subComponentType: prefill`, `--is-prefill-worker` (vLLM) or `--disaggregation-mode prefill` (SGLang)
is the prefill pool
(ai-dynamo/dynamo examples/backends/*/deploy).
"""

from __future__ import annotations

from sizer.errors import InputError
from sizer.inputs.manifests.commands import container_env, server_start, shell_split, tokens
from sizer.inputs.manifests.fields import get, hf_repo_id, parse_number
from sizer.inputs.manifests.gpus import RAY_ACCELERATOR
from sizer.inputs.manifests.kubernetes import Server, containers, pod_gpus
from validation.errors import excerpt
from validation.safe_yaml import loads_yaml
from validation.schema import join

OPERATOR_KINDS = ("LLMInferenceService", "RayService", "DynamoGraphDeployment")
RAY_LLM_BUILDERS = ("ray.serve.llm:build_openai_app", "ray.serve.llm:build_llm_deployment")


def operator_servers(docs: list, file: str) -> list[Server]:
    """Every inference server in the operator resources of a file."""
    out = []
    for doc in docs:
        kind = doc.get("kind") if isinstance(doc, dict) else None
        if kind == "LLMInferenceService":
            out += _llm_inference_service(doc, file)
        elif kind == "RayService":
            out += _ray_service(doc, file)
        elif kind == "DynamoGraphDeployment":
            out += _dynamo(doc, file)
    return out


def _name(doc: dict, file: str) -> str | None:
    return get(get(doc, "metadata", "", file), "metadata.name", "metadata", file)


def _count(node: dict, key: str, path: str, file: str) -> int | None:
    return get(node, f"count.{key}", path, file) if key in node else None


# ---- KServe LLMInferenceService -------------------------------------------------------------


def _llm_inference_service(doc: dict, file: str) -> list[Server]:
    spec = get(doc, "spec", "", file)
    model_spec = get(spec, "llmisvc.model", "spec", file)
    uri = get(model_spec, "llmisvc.model.uri", "spec.model", file) or ""
    model = hf_repo_id(uri, file, "spec.model.uri") if uri.startswith("hf://") else \
        get(model_spec, "llmisvc.model.name", "spec.model", file)
    if not model:
        raise InputError(file, "spec.model.uri", "missing; an hf:// uri or spec.model.name names the model")
    out = [_llmisvc_pool(doc, spec, "spec", model, None, file)]
    prefill = get(spec, "llmisvc.prefill", "spec", file)
    if prefill:
        out.append(_llmisvc_pool(doc, prefill, "spec.prefill", model, "prefill", file))
    return out


def _llmisvc_pool(doc: dict, pool: dict, path: str, model: str, role: str | None, file: str) -> Server:
    """One pool (the main spec, or spec.prefill) as KServe's template writes its pods."""
    parallel = get(pool, "parallelism", path, file)
    ppath = join(path, "parallelism")
    tp, data, local = (_count(parallel, k, ppath, file) for k in ("tensor", "data", "dataLocal"))
    template = get(pool, "llmisvc.template", path, file)
    tpath = join(path, "template")
    found = [(p, c) for p, c in containers(template, tpath) if c.get("name") in ("main", None)] or \
        [(join(tpath, f"containers[{i}]"), c) for i, c in enumerate(template.get("containers") or [])
         if isinstance(c, dict) and c.get("name") == "main"]
    cpath, container = found[0] if found else (join(tpath, "containers[0]"), {})
    own = tokens({k: container[k] for k in ("command", "args", "env") if k in container}, cpath, file, doc)
    notes: tuple[str, ...] = ()
    argv = own
    if server_start(own) is None:
        # the template's `eval "exec vllm serve ... ${VLLM_ADDITIONAL_ARGS} $@"`: that variable, then the args
        extra = container_env(container, cpath, file).get("VLLM_ADDITIONAL_ARGS", "")
        argv = ["vllm", "serve", model, *shell_split(extra, file, join(cpath, "env")), *own]
        notes = ("KServe's LLMInferenceService template runs `vllm serve` with VLLM_ADDITIONAL_ARGS and the main "
                 "container's args",)
    given = {t.partition("=")[0].replace("_", "-") for t in argv}
    for flag, value in (("--tensor-parallel-size", tp), ("--data-parallel-size", data)):
        if value and flag not in given:
            argv += [flag, str(value)]
    pods = data // (local or 1) if get(pool, "llmisvc.worker", path, file) and data else 1
    gpus, where = pod_gpus(container, cpath, file) if container else (None, join(cpath, "resources"))
    if gpus is None and (tp or local):
        gpus, where = (tp or 1) * (local or 1), ppath
    replicas = get(pool, "kube.replicas", path, file)
    return Server(doc, cpath, container, "LLMInferenceService", tuple(argv), gpus, where, replicas, pods,
                  model=model, role=role, name=_name(doc, file), notes=notes)


# ---- Ray Serve LLM (RayService) ----------------------------------------------------------------


def _ray_service(doc: dict, file: str) -> list[Server]:
    spec = get(doc, "spec", "", file)
    text = get(spec, "ray.serveConfigV2", "spec", file)
    if not text:
        return []
    config = loads_yaml(text, file, "spec.serveConfigV2")
    if not isinstance(config, dict):
        raise InputError(file, "spec.serveConfigV2", f"expected a mapping of applications, got {excerpt(config)}")
    out = []
    for i, app in enumerate(config.get("applications") or []):
        apath = f"spec.serveConfigV2.applications[{i}]"
        if not isinstance(app, dict) or app.get("import_path") not in RAY_LLM_BUILDERS:
            continue
        args = app.get("args") if isinstance(app.get("args"), dict) else {}
        for j, llm in enumerate(args.get("llm_configs") or []):
            out.append(_ray_llm(doc, spec, llm, f"{apath}.args.llm_configs[{j}]", file))
    return out


def _ray_llm(doc: dict, spec: dict, llm, path: str, file: str) -> Server:
    if not isinstance(llm, dict):
        raise InputError(file, path, f"expected a mapping (an LLMConfig), got {excerpt(llm)}")
    loading = get(llm, "ray.model_loading_config", path, file)
    source = loading.get("model_source")
    model = source if isinstance(source, str) else get(loading, "ray.model_id", join(path, "model_loading_config"),
                                                       file)
    if not model:
        raise InputError(file, join(path, "model_loading_config.model_source"), "missing; the model to serve")
    kwargs = get(llm, "ray.engine_kwargs", path, file)
    argv = ["vllm", "serve", model]
    for key, value in kwargs.items():
        flag = "--" + str(key).replace("_", "-")
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, (dict, list)):
            continue                        # structured engine settings: not a flag sizer maps
        else:
            argv += [flag, str(value)]
    deployment = get(llm, "ray.deployment_config", path, file)
    dpath = join(path, "deployment_config")
    replicas = get(deployment, "ray.num_replicas", dpath, file)
    notes = ["Ray Serve LLM engine_kwargs read as vLLM flags"]
    if replicas is None:
        autoscaling = get(deployment, "ray.autoscaling_config", dpath, file)
        replicas = get(autoscaling, "ray.min_replicas", join(dpath, "autoscaling_config"), file)
        if autoscaling:
            notes.append(f"autoscaling from {replicas or 1} to {autoscaling.get('max_replicas', '?')} replicas; "
                         "checked at the minimum")
    tp = parse_number(kwargs.get("tensor_parallel_size", 1))
    pp = parse_number(kwargs.get("pipeline_parallel_size", 1))
    gpus = tp * pp if isinstance(tp, int) and isinstance(pp, int) else None
    accelerator = llm.get("accelerator_type")
    labels = ((RAY_ACCELERATOR, str(accelerator), join(path, "accelerator_type")),) if accelerator else ()
    where = join(path, "model_loading_config." + ("model_source" if isinstance(source, str) else "model_id"))
    return Server(doc, path, {}, "RayService (Ray Serve LLM)", tuple(argv), gpus, join(path, "engine_kwargs"),
                  replicas, model=model, name=_name(doc, file), notes=tuple(notes), gpu_labels=labels,
                  model_where=where)


# ---- NVIDIA Dynamo DynamoGraphDeployment ----------------------------------------------------------


PREFILL_FLAGS = ("--is-prefill-worker",)


def _dynamo(doc: dict, file: str) -> list[Server]:
    spec = get(doc, "spec", "", file)
    services = get(spec, "dynamo.services", "spec", file)
    out = []
    for name, service in services.items():
        path = join("spec.services", str(name))
        if not isinstance(service, dict):
            raise InputError(file, path, f"expected a mapping, got {excerpt(service)}")
        pod = get(service, "dynamo.extraPodSpec", path, file)
        main = get(pod, "dynamo.mainContainer", join(path, "extraPodSpec"), file)
        cpath = join(path, "extraPodSpec.mainContainer")
        argv = tokens({k: main[k] for k in ("command", "args", "env") if k in main}, cpath, file, doc)
        if server_start(argv) is None:
            continue
        resources = get(service, "resources", path, file)
        limits = get(resources, "resources.limits", join(path, "resources"), file)
        gpus = get(limits, "dynamo.gpu", join(path, "resources.limits"), file)
        multinode = get(service, "dynamo.multinode", path, file)
        pods = get(multinode, "dynamo.nodeCount", join(path, "multinode"), file) or 1
        role = "prefill" if service.get("subComponentType") == "prefill" or any(t in PREFILL_FLAGS for t in argv) \
            or _sglang_prefill(argv) else None
        argv = [t for t in argv if t not in PREFILL_FLAGS]
        out.append(Server(doc, cpath, main, "DynamoGraphDeployment", tuple(argv), gpus,
                          join(path, "resources.limits.gpu"), get(service, "kube.replicas", path, file), pods,
                          role=role, name=f"{_name(doc, file)}/{name}",
                          notes=("a Dynamo worker: its engine's flags read as that engine's",)))
    return out


def _sglang_prefill(argv: list[str]) -> bool:
    """SGLang's `--disaggregation-mode prefill` (also `--disaggregation-mode=prefill`)."""
    for i, t in enumerate(argv):
        if t == "--disaggregation-mode=prefill" or (t == "--disaggregation-mode" and argv[i + 1:i + 2] == ["prefill"]):
            return True
    return False
