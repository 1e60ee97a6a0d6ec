"""Every object `--emit k8s` writes validates, offline, against the Kubernetes OpenAPI schema of a pinned release
(apps/v1 Deployment) and the LeaderWorkerSet CRD of a pinned release (tests/data/k8s_schemas/, with sources):
field names, types, required fields, and no field the API server does not know."""

from pathlib import Path

import jsonschema
import pytest
import yaml

from sizer.inputs.hardware import load_hardware
from sizer.inputs.scenario import load_scenario, scenario_from_dict
from sizer.outputs.emit import emit, serving_config
from sizer.sizing.plan import make_plan
from sizer.sizing.resolve import resolve
from validation.safe_load import load_json

DATA = Path(__file__).resolve().parents[2] / "data" / "k8s_schemas"
KUBERNETES = load_json(DATA / "kubernetes-release-1.36.json")
LWS = load_json(DATA / "lws-v0.10.0.json")


def validator(kind: str) -> jsonschema.protocols.Validator:
    if kind == "LeaderWorkerSet":
        schema = LWS["schema"]
    else:
        schema = {**KUBERNETES["kinds"][kind], "$defs": KUBERNETES["$defs"]}
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema)


def validate(doc: dict) -> None:
    """The object against its kind's schema; apiVersion and kind as the API serves them."""
    expected = {"Deployment": "apps/v1", "LeaderWorkerSet": f"{LWS['group']}/{LWS['source']['version']}"}
    assert doc["apiVersion"] == expected[doc["kind"]]
    errors = sorted(validator(doc["kind"]).iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, "; ".join(f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5])


def emitted(**deployment) -> dict:
    r = resolve(scenario_from_dict({"model": deployment.pop("model", "llama-3.1-8b"),
                                    "hardware": deployment.pop("gpu", "h100-sxm"),
                                    "deployment": {"max_model_len": 8192, **deployment},
                                    "workload": {"arrival": {"rate_per_s": 2},
                                                 "prompt_tokens": {"distribution": "fixed", "value": 1000},
                                                 "output_tokens": {"distribution": "fixed", "value": 200}}}, None))
    plan = make_plan(r)
    (doc,) = list(yaml.safe_load_all(emit("k8s", serving_config(r, plan.cost, plan.verdict))))
    return doc


def test_the_schemas_refuse_what_the_api_server_refuses():
    # the validator is not vacuous: an unknown field, a missing required field and a wrong type each fail
    doc = emitted()
    validate(doc)
    container = doc["spec"]["template"]["spec"]["containers"][0]
    for broken in ({**container, "gpus": 1},                      # no such Container field
                   {k: v for k, v in container.items() if k != "name"},   # Container.name is required
                   {**container, "ports": [{"containerPort": "8000"}]}):  # containerPort is an integer
        bad = {**doc, "spec": {**doc["spec"], "template": {**doc["spec"]["template"], "spec": {
            **doc["spec"]["template"]["spec"], "containers": [broken]}}}}
        assert list(validator("Deployment").iter_errors(bad))
    lws = emitted(model="llama-3.1-405b", tensor_parallel_size=8, pipeline_parallel_size=2)
    validate(lws)
    assert list(validator("LeaderWorkerSet").iter_errors({**lws, "spec": {**lws["spec"], "size": 2}}))


@pytest.mark.parametrize("path", sorted(p for p in Path("scenarios").glob("*.yaml")
                                        if not p.name.startswith("gateway-")), ids=lambda p: p.stem)
def test_every_bundled_scenarios_manifest_validates(path):
    r = resolve(load_scenario(str(path)))
    if r.slots or not r.memory.fits or r.hardware.kubernetes is None or r.hardware.kubernetes.schedule is None:
        pytest.skip("no Kubernetes manifest for this plan (a slot engine, a plan that does not fit, or a GPU "
                    "with no known device plugin)")
    plan = make_plan(r)
    (doc,) = list(yaml.safe_load_all(emit("k8s", serving_config(r, plan.cost, plan.verdict))))
    validate(doc)


@pytest.mark.parametrize("deployment", [
    dict(),                                                                               # Deployment
    dict(model="llama-3.1-405b", tensor_parallel_size=8, pipeline_parallel_size=2),       # LeaderWorkerSet
    dict(enable_lora=True, max_loras=4, max_lora_rank=16),                                # env for LoRA
    dict(model="qwen3-8b"),                                                               # optional token
    dict(gpu="mi355x", model="llama-3.1-70b", tensor_parallel_size=2),                   # AMD resources
    dict(speculative_config={"method": "eagle", "num_speculative_tokens": 3, "acceptance_rate": 0.7}),
], ids=["deployment", "lws", "lora", "ungated", "amd", "eagle"])
def test_each_emitted_shape_validates(deployment):
    validate(emitted(**deployment))


def test_amd_node_labels_are_the_ones_real_nodes_show():
    # AMD's GPU operator node labeller writes the driver's product name: MI325 and MI355 OAM parts have no X
    # (ROCm/gpu-operator docs; the nodes show AMD_Instinct_MI325_OAM / AMD_Instinct_MI355_OAM)
    doc = emitted(gpu="mi355x", model="llama-3.1-70b", tensor_parallel_size=2)
    assert doc["spec"]["template"]["spec"]["nodeSelector"] == {"amd.com/gpu.product-name": "AMD_Instinct_MI355_OAM"}
    assert load_hardware("mi325x").kubernetes.schedule.label_value == "AMD_Instinct_MI325_OAM"


@pytest.mark.parametrize("gpu, value", [("h200", "nvidia-h200-141gb"), ("a100-40gb", "nvidia-tesla-a100"),
                                        ("a100-80gb", "nvidia-a100-80gb")])
def test_gke_selects_its_accelerator_label(gpu, value):
    # GKE node pools carry Google's accelerator type (nvidia-tesla-a100 is the 40 GB part), not the
    # nvidia.com/gpu.product label of GPU feature discovery
    r = resolve(scenario_from_dict({"model": "llama-3.1-8b", "hardware": gpu, "deployment": {"max_model_len": 8192},
                                    "workload": {"arrival": {"rate_per_s": 2},
                                                 "prompt_tokens": {"distribution": "fixed", "value": 1000},
                                                 "output_tokens": {"distribution": "fixed", "value": 200}}}, None))
    plan = make_plan(r)
    (doc,) = list(yaml.safe_load_all(emit("gke", serving_config(r, plan.cost, plan.verdict))))
    validate(doc)
    assert doc["spec"]["template"]["spec"]["nodeSelector"] == {"cloud.google.com/gke-accelerator": value}
