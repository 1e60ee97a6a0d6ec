"""The manifest fields sizer reads, declared once, and numbers written as text.

A manifest is someone else's document: each field sizer reads is a `Key` (validation/schema.py),
other keys are ignored. A value that sets a scenario field (a vLLM flag, the replica count) is
checked against that field's own declaration in sizer/inputs/scenario.py (`key_for`). Numbers may
be written as text: vLLM's flags always are, Kubernetes quantities often are ("1", "32k").
"""

from __future__ import annotations

import re

from sizer.errors import InputError
from sizer.inputs.manifests.pod_fields import check_integer, yaml11_integer
from sizer.inputs.number_text import parse_number
from sizer.inputs.scenario import MAX_REPLICAS, DeploymentSection
from validation.errors import excerpt
from validation.schema import Key, check_key, join, key_for

# GPUs one pod asks for: 1,024, the most in any one parallel dimension of a deployment.
MAX_GPUS_PER_POD = 1024
_GPUS = {"ge": 0, "le": MAX_GPUS_PER_POD, "nullable": False}      # 0: "needs N" says more
_REPLICAS = key_for(DeploymentSection, "replicas")
# Knative's scale bounds (knative.dev/docs/serving/autoscaling/scale-bounds: the revision template's annotations, the
# camel-case spelling older) and Cloud Run's service-level ones (cloud.google.com/run/docs/reference/yaml/v1)
KNATIVE_SCALE = ("autoscaling.knative.dev/min-scale", "autoscaling.knative.dev/minScale",
                 "autoscaling.knative.dev/max-scale", "autoscaling.knative.dev/maxScale",
                 "run.googleapis.com/minScale", "run.googleapis.com/maxScale", "run.googleapis.com/manualInstanceCount")
# Manifest paths (relative to the document, or to the vLLM container for `resources.*`) -> the key.
# A mapping that is absent or null reads as empty; `command` and `args` are lists of strings
# (Kubernetes; Helm values may give one shell command line as a string).
MANIFEST_FIELDS = {
    "metadata": Key("metadata", dict), "metadata.annotations": Key("annotations", dict),
    "metadata.name": Key("name", str), "spec": Key("spec", dict),
    "spec.replicas": _REPLICAS,                                               # Deployment, StatefulSet, LWS
    "replicaCount": key_for(DeploymentSection, "replicas", "replicaCount"),   # Helm values
    "replicas": _REPLICAS,
    "spec.parallelism": key_for(DeploymentSection, "replicas", "parallelism"),  # Job: pods run at once
    "command": Key("command", list), "args": Key("args", list), "env": Key("env", list),
    "env[].name": Key("name", str), "env[].value": Key("value", str),
    "resources": Key("resources", dict), "resources.limits": Key("limits", dict),
    "resources.requests": Key("requests", dict),
    "resources.limits.nvidia.com/gpu": Key("nvidia.com/gpu", int, **_GPUS),
    "resources.limits.amd.com/gpu": Key("amd.com/gpu", int, **_GPUS),
    "nodeSelector": Key("nodeSelector", dict), "matchExpressions": Key("matchExpressions", list),
    "matchExpressions[].values": Key("values", list),
    "acceleratorTypes.labelValues": Key("labelValues", list),       # llm-d modelservice's node affinity
    # LeaderWorkerSet (leaderworkerset.x-k8s.io/v1): pods per group, each group one replica
    "spec.leaderWorkerTemplate": Key("leaderWorkerTemplate", dict),
    "leaderWorkerTemplate.size": Key("size", int, ge=1, le=MAX_GPUS_PER_POD, nullable=False),
    # KServe (serving.kserve.io/v1beta1 InferenceService, v1alpha1 ServingRuntime)
    "spec.predictor": Key("predictor", dict), "predictor.model": Key("model", dict),
    # 0: KServe's serverless mode scales the predictor to zero when idle
    "predictor.minReplicas": Key("minReplicas", int, ge=0, le=MAX_REPLICAS, nullable=False),
    "predictor.maxReplicas": Key("maxReplicas", int, ge=0, le=MAX_REPLICAS, nullable=False),
    "predictor.model.runtime": Key("runtime", str), "predictor.model.storageUri": Key("storageUri", str),
    "predictor.model.modelFormat": Key("modelFormat", dict), "modelFormat.name": Key("name", str),
    # Knative Serving (serving.knative.dev/v1 Service; Google Cloud Run's service YAML is one): the revision template
    "spec.template": Key("template", dict), "template.spec": Key("spec", dict),
    # at most 1,000: Knative's container-concurrency-max-limit (config-defaults)
    "containerConcurrency": Key("containerConcurrency", int, ge=0, le=1000, nullable=False),
    **{f"annotations.{name}": Key(name, int, ge=0, le=MAX_REPLICAS, nullable=False) for name in KNATIVE_SCALE},
    "annotations.run.googleapis.com/scalingMode": Key("run.googleapis.com/scalingMode", str),
    # vLLM production-stack chart (servingEngineSpec.modelSpec[])
    "servingEngineSpec": Key("servingEngineSpec", dict), "modelSpec": Key("modelSpec", list),
    "modelSpec[].modelURL": Key("modelURL", str), "modelSpec[].name": Key("name", str),
    "modelSpec[].requestGPU": Key("requestGPU", int, **_GPUS),
    "modelSpec[].vllmConfig": Key("vllmConfig", dict), "vllmConfig.extraArgs": Key("extraArgs", list),
    # llm-d modelservice chart
    "modelArtifacts": Key("modelArtifacts", dict), "modelArtifacts.uri": Key("uri", str),
    "modelArtifacts.name": Key("name", str), "multinode": Key("multinode", bool),
    "decode": Key("decode", dict), "prefill": Key("prefill", dict), "containers": Key("containers", list),
    "parallelism": Key("parallelism", dict), "modelCommand": Key("modelCommand", str),
    "role.replicas": Key("replicas", int, ge=0, le=MAX_REPLICAS, nullable=False),     # 0: the role is not deployed
    "role.create": Key("create", bool),
    # KServe LLMInferenceService (serving.kserve.io/v1alpha1, v1alpha2)
    "llmisvc.model": Key("model", dict), "llmisvc.model.uri": Key("uri", str), "llmisvc.model.name": Key("name", str),
    "llmisvc.prefill": Key("prefill", dict), "llmisvc.template": Key("template", dict),
    "llmisvc.worker": Key("worker", dict),
    "count.tensor": Key("tensor", int, ge=1, le=MAX_GPUS_PER_POD, nullable=False),
    "count.data": Key("data", int, ge=1, le=MAX_GPUS_PER_POD, nullable=False),
    "count.dataLocal": Key("dataLocal", int, ge=1, le=MAX_GPUS_PER_POD, nullable=False),
    # Ray Serve LLM in a KubeRay RayService (ray.io/v1): serveConfigV2's llm_configs[]
    "ray.serveConfigV2": Key("serveConfigV2", str), "ray.model_loading_config": Key("model_loading_config", dict),
    "ray.model_id": Key("model_id", str), "ray.engine_kwargs": Key("engine_kwargs", dict),
    "ray.deployment_config": Key("deployment_config", dict),
    "ray.num_replicas": key_for(DeploymentSection, "replicas", "num_replicas"),
    "ray.autoscaling_config": Key("autoscaling_config", dict),
    "ray.min_replicas": Key("min_replicas", int, ge=0, le=MAX_REPLICAS, nullable=False),
    # NVIDIA Dynamo DynamoGraphDeployment (nvidia.com/v1alpha1)
    "dynamo.services": Key("services", dict), "dynamo.extraPodSpec": Key("extraPodSpec", dict),
    "dynamo.mainContainer": Key("mainContainer", dict), "dynamo.gpu": Key("gpu", int, **_GPUS),
    "dynamo.multinode": Key("multinode", dict),
    "dynamo.nodeCount": Key("nodeCount", int, ge=1, le=MAX_GPUS_PER_POD, nullable=False),
    "kube.replicas": _REPLICAS,     # a custom resource's replicas (LLMInferenceService, a Dynamo service): int32
}


# Numbers written as text, by how the tool that reads the field reads them: Kubernetes quantities (`500m` is 0.5,
# `2000m` is 2: resources), annotations as plain integers (Knative's `"2"`; `"1k"` is no integer there), and the
# rest as vLLM's number text (`32k`, `1m` a million: sizer/inputs/number_text.py).
QUANTITY_KEYS = ("resources.limits.nvidia.com/gpu", "resources.limits.amd.com/gpu", "dynamo.gpu",
                 "modelSpec[].requestGPU")
# Fields of Kubernetes objects whose API type is an integer (int32): the API server (and kubectl) refuses text there
# ("cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"), so `replicas: "2"` is
# refused, not read as 2. Helm values (replicaCount) are text a template writes into the manifest: read as numbers.
KUBERNETES_INTEGERS = ("spec.replicas", "spec.parallelism", "leaderWorkerTemplate.size", "predictor.minReplicas",
                       "predictor.maxReplicas", "containerConcurrency", "count.tensor", "count.data", "count.dataLocal",
                       "dynamo.nodeCount", "kube.replicas")


def _number(schema_key: str, value, file: str, path: str):
    if not isinstance(value, str):
        return value
    if schema_key in KUBERNETES_INTEGERS:
        check_integer(value, path, file)    # text: refused as the API server refuses it, but YAML 1.1's other bases
        whole = yaml11_integer(value)       # (`010`), which kubectl reads as integers
        return value if whole is None else whole
    if schema_key.startswith("annotations."):
        return int(value) if value.strip().isdecimal() else value
    text = value.strip()
    if schema_key in QUANTITY_KEYS and text.endswith("m") and text[:-1].isdecimal():
        thousandths = int(text[:-1])
        return thousandths // 1000 if thousandths % 1000 == 0 else thousandths / 1000
    return parse_number(value)


def get(node: dict, schema_key: str, path: str, file: str):
    """MANIFEST_FIELDS[schema_key] of mapping `node` (at `path`), checked: None when absent, {} for an
    absent or null mapping."""
    spec = MANIFEST_FIELDS[schema_key]
    value = node.get(spec.name)
    if spec.name not in node or (value is None and spec.nullable):
        return {} if spec.tp is dict else None
    where = join(path, spec.name)
    return check_key(spec, _number(schema_key, value, file, where) if spec.tp in (int, float) else value, file, where)


# A Hugging Face repo id: `org/name` (letters, digits, `.`, `_`, `-`; 96 characters each; no `..` or `--`),
# optionally `@revision` (a branch, tag or commit). Never a path: `hf://../../etc/passwd` is refused.
_HF_PART = r"(?!.*\.\.)(?!.*--)[A-Za-z0-9][A-Za-z0-9._-]{0,95}"
HF_ID = re.compile(rf"({_HF_PART}/{_HF_PART})(?:@((?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._/-]{{0,254}}))?")


def hf_repo_id(uri: str, file: str | None, field: str) -> str:
    """`hf://org/name[@revision]` -> `org/name`; anything else after `hf://` is refused naming the field."""
    m = HF_ID.fullmatch(uri.removeprefix("hf://"))
    if not m:
        raise InputError(file, field, f"expected hf://ORG/NAME[@REVISION] (a Hugging Face repo id of letters, "
                                      f"digits, '.', '_', '-'), got {excerpt(uri)}")
    return m.group(1)
