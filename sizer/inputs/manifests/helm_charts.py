"""Helm values, read as the containers the chart would write.

A chart that takes a container (vLLM's own chart `image.command`, most others): the container with
a server's command line anywhere in the values; its GPUs from its `resources`, else the values'
top-level `resources` (vLLM's chart); replicas `replicaCount` (or `replicas`); vLLM's chart's
`gpuModels` is the `nvidia.com/gpu.product` its node affinity asks for
(vllm-project/vllm examples/online_serving/chart-helm/templates/deployment.yaml).

vLLM production-stack (vllm-project/production-stack helm/values.yaml): each
`servingEngineSpec.modelSpec[]` entry is a Deployment of `replicaCount` pods running `vllm serve
modelURL` with `requestGPU` GPUs and its `vllmConfig` as flags (VLLM_CONFIG below; `extraArgs`
as written).

llm-d modelservice (llm-d-incubation/llm-d-modelservice charts/llm-d-modelservice/values.yaml):
`decode` and `prefill` each a Deployment (a LeaderWorkerSet of `parallelism.workers` pods when
`multinode`) of `replicas` pods; a container with `modelCommand: vllmServe` runs `vllm serve` on
`modelArtifacts` (`uri: hf://org/name`, else `name`), `custom` its own command, `imageDefault`
its args; each pod has `parallelism.dataLocal x tensor` GPUs unless its resources say
(templates/_helpers.tpl numGpuPerWorker), and vLLM runs TP `parallelism.tensor`, DP
`parallelism.data`. With prefill replicas too, the deployment is disaggregated (P/D).
"""

from __future__ import annotations

from sizer.errors import InputError
from sizer.inputs.manifests.commands import VALUE_FLAGS, server_start, tokens
from sizer.inputs.manifests.fields import get, hf_repo_id
from sizer.inputs.manifests.kubernetes import Server, containers, pod_gpus
from sizer.inputs.number_text import parse_number
from sizer.inputs.scenario import DeploymentSection
from validation.errors import excerpt
from validation.schema import check_key, join, key_for

# production-stack vllmConfig key -> vLLM flag (helm/templates/deployment-vllm-multi.yaml writes each so)
VLLM_CONFIG = {"tensorParallelSize": "--tensor-parallel-size", "pipelineParallelSize": "--pipeline-parallel-size",
               "maxModelLen": "--max-model-len", "dtype": "--dtype", "maxNumSeqs": "--max-num-seqs",
               "gpuMemoryUtilization": "--gpu-memory-utilization", "blockSize": "--block-size",
               "maxNumBatchedTokens": "--max-num-batched-tokens", "quantization": "--quantization",
               "kvCacheDtype": "--kv-cache-dtype"}
VLLM_CONFIG_SWITCHES = {"enablePrefixCaching": "prefix-caching", "enableChunkedPrefill": "chunked-prefill"}
MODEL_COMMANDS = ("vllmServe", "imageDefault", "custom")


def helm_servers(doc: dict, file: str) -> list[Server]:
    """Every inference server in a Helm values document (one without a `kind`)."""
    if "servingEngineSpec" in doc:
        return _production_stack(doc, file)
    if "modelArtifacts" in doc:
        return _llm_d(doc, file)
    out = []
    for path, container in containers(doc, ""):
        argv = tokens(container, path, file, doc)
        if server_start(argv) is None:
            continue
        gpus, where = pod_gpus(container, path, file)
        if gpus is None and get(doc, "resources", "", file):    # vLLM's chart: the values' top-level resources
            gpus, where = pod_gpus(doc, "", file)
        key = "replicaCount" if "replicaCount" in doc else "replicas"
        # vLLM's chart writes a node affinity on nvidia.com/gpu.product In gpuModels (templates/deployment.yaml)
        models = doc.get("gpuModels")
        labels = (("nvidia.com/gpu.product", str(models[0]), "gpuModels[0]"),) \
            if isinstance(models, list) and models else ()
        out.append(Server(doc, path, container, "helm values", tuple(argv), gpus, where, get(doc, key, "", file),
                          gpu_labels=labels))
    return out


def _production_stack(doc: dict, file: str) -> list[Server]:
    spec = get(doc, "servingEngineSpec", "", file)
    out = []
    for i, entry in enumerate(get(spec, "modelSpec", "servingEngineSpec", file) or []):
        path = f"servingEngineSpec.modelSpec[{i}]"
        if not isinstance(entry, dict):
            raise InputError(file, path, f"expected a mapping, got {excerpt(entry)}")
        model = get(entry, "modelSpec[].modelURL", path, file)
        if model is None:
            raise InputError(file, join(path, "modelURL"), "missing; the model the engine serves")
        config = get(entry, "modelSpec[].vllmConfig", path, file)
        cpath = join(path, "vllmConfig")
        argv, ignored = ["vllm", "serve", model], []
        for key, value in config.items():
            if key in VLLM_CONFIG:
                field_name, kind = VALUE_FLAGS[VLLM_CONFIG[key]]
                if kind == "number":        # checked here, to name the values field, not the flag it becomes
                    check_key(key_for(DeploymentSection, field_name, key), parse_number(value), file, join(cpath, key))
                argv += [VLLM_CONFIG[key], str(value)]
            elif key in VLLM_CONFIG_SWITCHES:
                argv.append(f"--{'' if value else 'no-'}enable-{VLLM_CONFIG_SWITCHES[key]}")
            elif key != "extraArgs":
                ignored.append(key)
        extra = {"args": [str(a) for a in get(config, "vllmConfig.extraArgs", cpath, file) or []],
                 "env": entry.get("env")}
        argv += tokens({k: v for k, v in extra.items() if v is not None}, cpath, file, doc)
        gpus = get(entry, "modelSpec[].requestGPU", path, file)
        out.append(Server(doc, path, entry, "production-stack values", tuple(argv), gpus, join(path, "requestGPU"),
                          get(entry, "replicaCount", path, file), model=model,
                          name=get(entry, "modelSpec[].name", path, file),
                          notes=(f"production-stack vllmConfig keys not modelled: {' '.join(ignored)}",) if ignored
                          else ()))
    return out


def _llm_d(doc: dict, file: str) -> list[Server]:
    artifacts = get(doc, "modelArtifacts", "", file)
    uri = get(artifacts, "modelArtifacts.uri", "modelArtifacts", file) or ""
    name = get(artifacts, "modelArtifacts.name", "modelArtifacts", file)
    model = hf_repo_id(uri, file, "modelArtifacts.uri") if uri.startswith("hf://") and "{{" not in uri else name
    multinode = get(doc, "multinode", "", file) or False
    out = []
    for role in ("decode", "prefill"):
        section = get(doc, role, "", file)
        replicas = get(section, "role.replicas", role, file)
        if not section or get(section, "role.create", role, file) is False or replicas == 0:
            continue
        parallel = get(section, "parallelism", role, file)
        tp, data, local, workers = (_count(parallel, k, join(role, "parallelism"), file)
                                    for k in ("tensor", "data", "dataLocal", "workers"))
        local = local or (data // (workers or 1) if data else 1)
        workers = workers or (data // local if data else 1)
        for i, container in enumerate(get(section, "containers", role, file) or []):
            path = f"{role}.containers[{i}]"
            if not isinstance(container, dict):
                raise InputError(file, path, f"expected a mapping, got {excerpt(container)}")
            command = get(container, "modelCommand", path, file) or "imageDefault"
            if command not in MODEL_COMMANDS:
                raise InputError(file, join(path, "modelCommand"), f"{excerpt(command)} is not one of "
                                                                     f"{', '.join(MODEL_COMMANDS)}")
            own = {k: container[k] for k in ("args", "env") if k in container}
            if command == "custom":
                own["command"] = container.get("command")
            argv = tokens(own, path, file, doc)
            if command == "vllmServe":
                argv = ["vllm", "serve", model or "", *argv]
            if server_start(argv) is None:
                continue
            if command == "vllmServe":       # the chart's parallelism, unless the args set it themselves
                given = {t.partition("=")[0].replace("_", "-") for t in argv}
                argv += [f"{flag}={value}" for flag, value in (("--tensor-parallel-size", tp or 1),
                                                               ("--data-parallel-size", (data or local) or 1))
                         if flag not in given]
            gpus, where = pod_gpus(container, path, file)
            if gpus is None:                # the chart's own count (numGpuPerWorker)
                gpus, where = (local or 1) * (tp or 1), join(role, "parallelism")
            out.append(Server(doc, path, container, "llm-d modelservice values", tuple(argv), gpus, where, replicas,
                              pods=workers if multinode else 1, model=model, role=role, name=name))
    return out


def _count(parallel: dict, key: str, path: str, file: str) -> int | None:
    value = parallel.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1024:
        raise InputError(file, join(path, key), f"expected a whole number from 1 to 1024, got {excerpt(value)}")
    return value
