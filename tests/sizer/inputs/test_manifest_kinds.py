"""Every manifest kind `sizer check` reads, from real-shaped files (tests/data/manifests/README.md cites
each one's source): the deployment read back, setting by setting."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.cli import app
from sizer.inputs.manifest import read_check_input
from sizer.inputs.manifests.commands import parse_server_args
from validation.errors import FieldError

DATA = Path(__file__).resolve().parents[2] / "data" / "manifests"


def model_and_gpu(inp) -> tuple[str, str]:
    return inp.scenario_data["model"]["name"], inp.scenario_data["hardware"]["gpu"]


def read(name: str):
    inp = read_check_input(str(DATA / name))
    return inp, inp.scenario_data["deployment"]


def test_statefulset_with_module_entrypoint_and_model_from_env():
    inp, d = read("statefulset-vllm.yaml")
    # $(MODEL_ID) is Kubernetes' expansion of the container's env: Qwen/Qwen2.5-7B-Instruct -> qwen2.5-7b
    assert model_and_gpu(inp) == ("qwen2.5-7b", "l40s")
    assert (inp.replicas, inp.gpus_per_replica, inp.gpus_requested) == (3, 1, 1)
    assert d == {"engine": "vllm", "max_model_len": 16384, "gpu_memory_utilization": 0.92, "replicas": 3}
    # an engine env var with no scenario field is named; HF_TOKEN (valueFrom) is neither read nor named
    assert "vLLM environment not modelled: VLLM_ATTENTION_BACKEND" in inp.notes


def test_pod_running_sglang():
    inp, d = read("pod-sglang.yaml")
    assert model_and_gpu(inp) == ("llama-3.1-70b", "h100-sxm")
    assert (inp.replicas, inp.gpus_per_replica, inp.gpus_requested) == (1, 4, 4)      # a Pod is one replica
    # --chunked-prefill-size -1 is SGLang's "off"; --max-prefill-tokens is its per-step token budget
    assert d == {"engine": "sglang", "tensor_parallel_size": 4, "gpu_memory_utilization": 0.85, "max_model_len": 32768,
                 "max_num_seqs": 128, "enable_chunked_prefill": False, "max_num_batched_tokens": 32768, "replicas": 1}
    assert ("SGLang flags unknown to sizer, not modelled and not checked (a flag SGLang does not have stops it at "
            "start): --host --port") in inp.notes


def test_job_running_trtllm_serve():
    inp, d = read("job-trtllm.yaml")
    assert model_and_gpu(inp) == ("llama-3.1-8b", "h200")
    assert (inp.replicas, inp.gpus_per_replica, inp.gpus_requested) == (2, 2, 2)      # spec.parallelism pods
    assert d == {"engine": "tensorrt-llm", "tensor_parallel_size": 2, "pipeline_parallel_size": 1, "max_num_seqs": 64,
                 "max_num_batched_tokens": 8192, "max_model_len": 8192, "gpu_memory_utilization": 0.85, "replicas": 2}
    # the fraction is read as TensorRT-LLM takes it (a share of the memory left after weights and activations,
    # memory_budget's share_of_free for engine tensorrt-llm): no note of a misreading
    assert not any("kv_cache_free_gpu_memory_fraction" in n for n in inp.notes)


def test_leaderworkerset_counts_every_pod_of_a_group():
    inp, d = read("lws-vllm-tp8-pp2.yaml")
    # size 2 x 8 GPUs per pod = 16 = TP 8 x PP 2: the split fits the group, not one pod
    assert inp.scenario_data["model"] == {"name": "llama-3.1-405b"}
    assert (inp.replicas, inp.gpus_per_replica, inp.gpus_requested) == (2, 16, 16)
    assert (d["tensor_parallel_size"], d["pipeline_parallel_size"], d["max_model_len"]) == (8, 2, 32768)
    result = CliRunner().invoke(app, ["check", str(DATA / "lws-vllm-tp8-pp2.yaml")])
    assert result.exit_code == 0, result.output


def test_leaderworkerset_group_too_small_names_the_limit(tmp_path):
    text = (DATA / "lws-vllm-tp8-pp2.yaml").read_text().replace("size: 2", "size: 1")
    (tmp_path / "lws.yaml").write_text(text)
    with pytest.raises(FieldError, match="8 GPUs, but tensor x pipeline x data parallel size needs 16") as err:
        read_check_input(str(tmp_path / "lws.yaml"))
    assert err.value.field == ("spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0]"
                               ".resources.limits.nvidia.com/gpu")


def test_kserve_huggingface_runtime():
    inp, d = read("kserve-huggingface.yaml")
    # --model_id names the model; minReplicas the replicas; the node selector under spec.predictor the GPU
    assert model_and_gpu(inp) == ("llama-3.1-8b", "a100-80gb")
    assert (inp.replicas, inp.gpus_per_replica, inp.gpus_requested) == (2, 1, 1)
    assert d == {"engine": "vllm", "max_model_len": 8192, "replicas": 2}
    assert ("vLLM flags unknown to sizer, not modelled and not checked (a flag vLLM does not have stops it at start): "
            "--model_name") in inp.notes         # named as written


def test_kserve_serving_runtime_with_storage_uri():
    inp, d = read("kserve-servingruntime.yaml")
    # the runtime's command line (TP 2 on /mnt/models), the InferenceService's hf:// model and GPU limit
    assert model_and_gpu(inp) == ("mistral-7b-v0.3", "l4")
    assert (inp.replicas, inp.gpus_per_replica, inp.gpus_requested) == (1, 2, 2)
    assert d == {"engine": "vllm", "tensor_parallel_size": 2, "max_model_len": 16384, "replicas": 1}


def test_production_stack_values():
    inp, d = read("production-stack-values.yaml")
    assert inp.kind == "production-stack values" and inp.name == "llama70b"
    assert model_and_gpu(inp) == ("llama-3.1-70b", "h100-sxm")
    assert (inp.replicas, inp.gpus_per_replica, inp.gpus_requested) == (2, 4, 4)
    # vllmConfig keys as the flags the chart writes; extraArgs as written (64 a number in YAML)
    assert d == {"engine": "vllm", "enable_prefix_caching": True, "max_model_len": 16384, "quantization": "bf16",
                 "tensor_parallel_size": 4, "gpu_memory_utilization": 0.9, "max_num_seqs": 64, "replicas": 2}
    assert "production-stack vllmConfig keys not modelled: v1" in inp.notes


def test_llm_d_prefill_decode_is_disaggregated():
    inp, d = read("llm-d-pd-values.yaml")
    assert inp.kind == "llm-d modelservice values"
    assert model_and_gpu(inp) == ("llama-3.1-8b", "h100-sxm")
    # one replica = the pair of pools: 2 decode pods of TP 2 (parallelism.tensor, so dataLocal 1 x tensor 2 =
    # 2 GPUs each) and 4 prefill pods planned at the decode split: 6 x 2 = 12 GPUs; billed as requested:
    # 2 x 2 decode + 4 x 1 prefill (tensor 1) = 8
    assert (inp.gpus_per_replica, inp.gpus_requested, inp.replicas) == (12, 8, 1)
    assert d == {"engine": "vllm", "max_model_len": 16384, "tensor_parallel_size": 2, "data_parallel_size": 1,
                 "replicas": 1, "disaggregated": {"prefill_replicas": 4, "decode_replicas": 2}}
    assert any(n.startswith("prefill pods differ from decode pods in tensor_parallel_size") for n in inp.notes)


def test_vllm_chart_values_with_top_level_resources():
    inp, d = read("vllm-chart-values.yaml")
    assert inp.kind == "helm values"
    assert model_and_gpu(inp) == ("mistral-7b-v0.3", "l40s")
    assert (inp.replicas, inp.gpus_per_replica, inp.gpus_requested) == (2, 1, 1)
    assert d == {"engine": "vllm", "max_model_len": 8192, "replicas": 2}


def test_a_file_that_runs_no_server_says_what_was_looked_for(tmp_path):
    (tmp_path / "svc.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: []}\n")
    result = CliRunner().invoke(app, ["check", str(tmp_path / "svc.yaml")])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    for looked_for in ("vllm serve", "sglang.launch_server", "trtllm-serve", "LeaderWorkerSet", "InferenceService",
                       "production-stack", "llm-d"):
        assert looked_for in result.output


@pytest.mark.parametrize("argv, engine, fields", [
    (["trtllm-serve", "m", "--ep_size", "4", "--tp_size", "4"], "tensorrt-llm",
     {"tensor_parallel_size": 4, "enable_expert_parallel": True}),
    (["python3", "-m", "sglang.launch_server", "--model", "m", "--disable-radix-cache", "--page-size", "16",
      "--chunked-prefill-size", "4096"], "sglang",
     {"enable_prefix_caching": False, "block_size": 16, "enable_chunked_prefill": True,
      "max_num_batched_tokens": 4096}),
])
def test_server_flags_map_to_fields(argv, engine, fields):
    got_engine, got, model, _ = parse_server_args(argv, "f.yaml")
    assert (got_engine, model) == (engine, "m") and got == {"engine": engine, **fields}


def test_shell_variables_expand_from_env_in_a_script(tmp_path):
    text = (DATA / "statefulset-vllm.yaml").read_text().replace(
        'command: ["python3", "-m", "vllm.entrypoints.openai.api_server"]\n'
        '          args: ["--model", "$(MODEL_ID)", "--max-model-len", "16384", "--gpu-memory-utilization", "0.92"]',
        'command: ["bash", "-c", "vllm serve ${MODEL_ID} -tp=$TP"]')
    text = text.replace("            - name: VLLM_ATTENTION_BACKEND", '            - {name: TP, value: "2"}\n'
                                                                      "            - name: VLLM_ATTENTION_BACKEND")
    (tmp_path / "s.yaml").write_text(text.replace('nvidia.com/gpu: "1"', 'nvidia.com/gpu: "2"'))
    inp = read_check_input(str(tmp_path / "s.yaml"))
    assert inp.scenario_data["model"] == {"name": "qwen2.5-7b"}
    assert inp.scenario_data["deployment"]["tensor_parallel_size"] == 2


def test_llm_d_args_that_set_the_split_win_over_the_charts(tmp_path):
    # the decode container's own --tensor-parallel-size is the one vLLM gets; the chart adds parallelism.tensor
    # only when the args do not set it (a second flag would override the first)
    text = (DATA / "llm-d-pd-values.yaml").read_text().replace(
        '"--max-model-len", "16384"]\n      env:',
        '"--max-model-len", "16384", "--tensor-parallel-size", "1"]\n      env:')
    (tmp_path / "v.yaml").write_text(text)
    inp = read_check_input(str(tmp_path / "v.yaml"))
    assert inp.scenario_data["deployment"]["tensor_parallel_size"] == 1
    assert any("2 GPUs" in n and "uses 1" in n for n in inp.notes)     # the pod still asks for tensor 2 x dataLocal 1


def test_the_leaderworkerset_plan_emits_reads_back(tmp_path):
    # 405B in bf16 needs TP 8 x PP 2 = 16 H100s, two nodes of 8: `--emit k8s` writes a LeaderWorkerSet
    # (sizer/outputs/emit.py), which check reads back as one replica of 2 pods x 8 GPUs
    emitted = CliRunner().invoke(app, ["plan", "--model", "llama-3.1-405b", "--gpu", "h100", "--tp", "8", "--pp", "2",
                                       "--max-model-len", "16384", "--emit", "k8s"])
    assert emitted.exit_code == 0 and "kind: LeaderWorkerSet" in emitted.stdout, emitted.output
    (tmp_path / "lws.yaml").write_text(emitted.stdout)
    inp = read_check_input(str(tmp_path / "lws.yaml"))
    assert (inp.replicas, inp.gpus_per_replica, inp.gpus_requested) == (1, 16, 16)
    d = inp.scenario_data["deployment"]
    assert (d["tensor_parallel_size"], d["pipeline_parallel_size"], d["max_model_len"]) == (8, 2, 16384)


MARLIN_MANIFEST = """apiVersion: apps/v1
kind: Deployment
metadata: {name: gpt-oss}
spec:
  replicas: 1
  selector: {matchLabels: {app: gpt-oss}}
  template:
    metadata: {labels: {app: gpt-oss}}
    spec:
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-H200}
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.2
          command: ["vllm", "serve", "openai/gpt-oss-120b", "--tensor-parallel-size", "2"]
          env: [{name: VLLM_MXFP4_USE_MARLIN, value: "VALUE"}]
          resources: {limits: {nvidia.com/gpu: 2}}
"""


@pytest.mark.parametrize(("value", "backend"), [("1", "marlin"), ("0", "auto")])
def test_vllms_marlin_environment_variable_is_read_as_the_moe_backend(tmp_path, value, backend):
    # InferenceMAX's Hopper gpt-oss scripts export VLLM_MXFP4_USE_MARLIN=1 (vllm/envs.py reads it as int(value) != 0;
    # later vLLM releases spell it --moe-backend marlin): read, not named as unmodelled environment
    path = tmp_path / "gpt-oss.yaml"
    path.write_text(MARLIN_MANIFEST.replace("VALUE", value))
    inp = read_check_input(str(path))
    assert inp.scenario_data["deployment"]["moe_backend"] == backend
    assert not any("VLLM_MXFP4_USE_MARLIN" in n for n in inp.notes)
    path.write_text(MARLIN_MANIFEST.replace("VALUE", "yes"))
    with pytest.raises(FieldError, match=r"env\.VLLM_MXFP4_USE_MARLIN: expected 0 or 1, got 'yes'"):
        read_check_input(str(path))


def test_engine_environment_known_only_when_the_pod_runs_is_named_not_read(tmp_path):
    # a value from a config map (valueFrom) is not in the manifest: the plan names the variable and what it took
    # instead; an entry with neither value nor valueFrom is set empty by Kubernetes, which vLLM's int('') refuses
    path = tmp_path / "gpt-oss.yaml"
    from_config_map = "valueFrom: {configMapKeyRef: {name: knobs, key: marlin}}"
    path.write_text(MARLIN_MANIFEST.replace('value: "VALUE"', from_config_map))
    inp = read_check_input(str(path))
    assert "moe_backend" not in inp.scenario_data["deployment"]
    [note] = [n for n in inp.notes if "VLLM_MXFP4_USE_MARLIN" in n]
    assert "valueFrom" in note and "moe_backend taken as auto" in note
    path.write_text(MARLIN_MANIFEST.replace(', value: "VALUE"', ""))
    with pytest.raises(FieldError, match=r"env\.VLLM_MXFP4_USE_MARLIN: expected 0 or 1, got ''"):
        read_check_input(str(path))


KNATIVE = DATA / "knative-cloud-run-vllm.yaml"


def test_a_knative_service_is_read_at_its_lower_scale_bound_with_the_autoscaling_named():
    inp, d = read("knative-cloud-run-vllm.yaml")
    # the GPU from Cloud Run's node selector (GKE's accelerator names), the model from the vLLM image's args
    assert model_and_gpu(inp) == ("qwen2.5-7b", "l4")
    assert {s.setting: s.source for s in inp.sources}["gpu"] == (
        "spec.template.spec.nodeSelector.run.googleapis.com/accelerator (Cloud Run accelerator nvidia-l4)")
    # autoscaling.knative.dev/minScale "2": the replicas the service always has; maxScale 6 and the queue-proxy's
    # containerConcurrency named, not modelled
    assert (inp.replicas, inp.gpus_per_replica) == (2, 1) and d["max_model_len"] == 8192
    assert ("Knative scales this service between min-scale 2 and max-scale 6 with load (not modelled): checked at "
            "its min-scale, 2 replica(s)") in inp.notes
    assert any(n.startswith("containerConcurrency 64:") for n in inp.notes)


@pytest.mark.parametrize("old, new, replicas, says", [
    # no min-scale: Knative scales to zero when idle; checked at one replica, the start from zero named
    ('        autoscaling.knative.dev/minScale: "2"\n', "", 1, "it scales to zero when idle"),
    # the current spelling; Cloud Run's service-level bound where the revision states none
    ("autoscaling.knative.dev/minScale", "autoscaling.knative.dev/min-scale", 2, "min-scale 2"),
    ('        autoscaling.knative.dev/minScale: "2"\n', "", 3, "min-scale 3",),
    # Cloud Run's manual scaling: a fixed instance count, no autoscaling note
    ("    run.googleapis.com/launch-stage: BETA\n", "    run.googleapis.com/scalingMode: manual\n"
     "    run.googleapis.com/manualInstanceCount: '4'\n", 4, None),
])
def test_a_knative_services_replicas_follow_its_scale_bounds(tmp_path, old, new, replicas, says):
    text = KNATIVE.read_text().replace(old, new, 1)
    if replicas == 3:
        text = text.replace("    run.googleapis.com/launch-stage: BETA\n", "    run.googleapis.com/minScale: '3'\n")
    path = tmp_path / "svc.yaml"
    path.write_text(text)
    inp = read_check_input(str(path))
    assert inp.replicas == replicas
    scaling = [n for n in inp.notes if n.startswith("Knative scales")]
    assert (scaling == []) if says is None else (says in scaling[0])


@pytest.mark.parametrize("old, new, field, says", [
    ('minScale: "2"', 'minScale: "two"', "spec.template.metadata.annotations.autoscaling.knative.dev/minScale", "two"),
    ("containerConcurrency: 64", "containerConcurrency: 5000", "spec.template.spec.containerConcurrency", "5000"),
    ('maxScale: "6"', 'maxScale: "1"', "spec.template.metadata.annotations.autoscaling.knative.dev/min-scale",
     "2 above max-scale 1"),
])
def test_a_knative_services_bad_scale_is_one_line_naming_the_field(tmp_path, old, new, field, says):
    path = tmp_path / "svc.yaml"
    path.write_text(KNATIVE.read_text().replace(old, new))
    with pytest.raises(FieldError) as err:
        read_check_input(str(path))
    assert err.value.field == field and says in err.value.message


def test_a_core_service_that_runs_a_server_is_not_read_as_knative(tmp_path):
    # kind Service under apiVersion v1 is the network object: a container in it is nothing Kubernetes runs
    path = tmp_path / "svc.yaml"
    path.write_text(KNATIVE.read_text().replace("apiVersion: serving.knative.dev/v1", "apiVersion: v1"))
    with pytest.raises(FieldError) as err:
        read_check_input(str(path))
    assert err.value.field == "kind" and err.value.message.endswith("got 'Service'")


# ---- what sizer does not read: named, never passed over ------------------------------------------

PASS = Path(__file__).resolve().parents[3] / "scenarios" / "deploy" / "pass-llama-8b-h100.yaml"
KINDS_READ = ("Deployment, ReplicaSet, Rollout, DeploymentConfig, StatefulSet, Pod, Job, LeaderWorkerSet, "
              "InferenceService, ServingRuntime, ClusterServingRuntime, Knative Service, "
              "LLMInferenceService, RayService, DynamoGraphDeployment")


def test_a_kind_sizer_does_not_read_running_a_server_is_refused_naming_the_kinds_it_reads(tmp_path):
    # a FrobSet's replicas and pods mean what that kind says: read as a Deployment, its 2 replicas were a guess
    path = tmp_path / "frob.yaml"
    path.write_text(PASS.read_text().replace("kind: Deployment", "kind: FrobSet"))
    with pytest.raises(FieldError) as err:
        read_check_input(str(path))
    assert (err.value.field, err.value.message) == (
        "kind", f"expected one of {KINDS_READ} (the kinds sizer reads; a document without a kind is read as Helm "
                "values), got 'FrobSet'")


@pytest.mark.parametrize("kind, api", [("Rollout", "argoproj.io/v1alpha1"),
                                       ("DeploymentConfig", "apps.openshift.io/v1"), ("ReplicaSet", "apps/v1")])
def test_kinds_with_a_deployments_replicas_and_pod_template_are_read_as_one(tmp_path, kind, api):
    # an Argo Rollout, an OpenShift DeploymentConfig and a ReplicaSet keep spec.replicas and spec.template as a
    # Deployment does: the same 2 replicas as the Deployment they replace
    path = tmp_path / "rollout.yaml"
    path.write_text(PASS.read_text().replace("apiVersion: apps/v1\nkind: Deployment",
                                             f"apiVersion: {api}\nkind: {kind}"))
    assert f"kind: {kind}" in path.read_text()
    assert read_check_input(str(path)).replicas == 2


def test_objects_of_other_kinds_beside_the_server_are_left_alone(tmp_path):
    # the file's Service, and a PodDisruptionBudget, run no server: they are not sizer's to read
    path = tmp_path / "with-pdb.yaml"
    path.write_text(PASS.read_text() + "---\napiVersion: policy/v1\nkind: PodDisruptionBudget\n"
                                       "metadata: {name: pdb}\nspec: {minAvailable: 1}\n")
    assert read_check_input(str(path)).replicas == 2          # the Deployment's spec.replicas


@pytest.mark.parametrize("doc, old, new, key", [
    (0, "sizer.dev/check:", "sizer.dev/check-x:", "sizer.dev/check-x"),
    (1, "metadata:\n", "metadata:\n  annotations: {sizer.dev/budget: '10'}\n", "sizer.dev/budget"),
])
def test_an_unknown_annotation_under_sizers_prefix_is_refused_on_any_document(tmp_path, doc, old, new, key):
    # sizer.dev/check-x on the Deployment left the check without its workload, SLO and budget (the slo and cost rules
    # skipped: a PASS); one on the Service (document 1) would be as silently lost
    docs = PASS.read_text().split("---\n")
    docs[doc] = docs[doc].replace(old, new, 1)
    path = tmp_path / "annotated.yaml"
    path.write_text("---\n".join(docs))
    with pytest.raises(FieldError) as err:
        read_check_input(str(path))
    assert (err.value.field, err.value.message) == (
        f"metadata.annotations.{key}", "unknown key under sizer.dev/; expected one of: sizer.dev/check")


def test_other_annotations_are_not_sizers(tmp_path):
    path = tmp_path / "scraped.yaml"
    path.write_text(PASS.read_text().replace("  annotations:\n", "  annotations:\n    prometheus.io/scrape: 'true'\n",
                                             1))
    assert read_check_input(str(path)).budget_usd_per_hour == 10     # the sizer.dev/check block still read


def test_a_flag_sizer_does_not_know_is_a_note_that_says_it_is_unchecked():
    # sizer ships no list of vLLM's own flags (tests/data/engine_args/ is a test fixture), so it cannot tell a
    # misspelt flag, which stops vLLM at start, from a real one it does not model: the note says both are unchecked
    _, _, _, notes = parse_server_args(["vllm", "serve", "m", "--frobnicate=3", "--port", "8000"], "f.yaml")
    assert notes == ["vLLM flags unknown to sizer, not modelled and not checked (a flag vLLM does not have stops it at "
                     "start): --frobnicate --port"]


def test_kserve_scaled_to_zero_is_checked_at_one_replica_with_the_start_from_zero_named(tmp_path):
    # KServe's serverless mode takes minReplicas 0 (scale to zero); it was refused as below 1, where a Knative
    # Service's min-scale 0 was read: both are checked at one replica now, the cold start named as not modelled
    path = tmp_path / "isvc.yaml"
    path.write_text((DATA / "kserve-huggingface.yaml").read_text().replace("minReplicas: 2", "minReplicas: 0"))
    assert "minReplicas: 0" in path.read_text()
    inp = read_check_input(str(path))
    assert inp.replicas == 1
    assert any(n.startswith("minReplicas 0: KServe scales the predictor to zero") for n in inp.notes)


def test_other_gpus_a_node_affinity_allows_are_named(tmp_path):
    # `In [H100, A100-40GB]`: the pod may land on either; only values[0] was read, and the A100 never named (a model
    # that fits the H100 and not the A100 passed)
    affinity = ("      affinity:\n        nodeAffinity:\n          requiredDuringSchedulingIgnoredDuringExecution:\n"
                "            nodeSelectorTerms:\n            - matchExpressions:\n"
                "              - {key: nvidia.com/gpu.product, operator: In, values: "
                "[NVIDIA-H100-80GB-HBM3, NVIDIA-A100-SXM4-40GB]}\n")
    text = PASS.read_text()
    start = text.index("      nodeSelector:")
    end = text.index("\n", text.index("nvidia.com/gpu.product", start)) + 1
    path = tmp_path / "affinity.yaml"
    path.write_text(text[:start] + affinity + text[end:])
    inp = read_check_input(str(path))
    assert model_and_gpu(inp)[1] == "h100-sxm"
    [note] = [n for n in inp.notes if "also allow" in n]
    assert note.startswith("the pod's node labels also allow NVIDIA-A100-SXM4-40GB (") and note.endswith(
        "values[1]): checked on h100-sxm alone; `--gpu` checks another")


def test_a_gpu_count_in_thousandths_is_read_as_kubernetes_reads_it(tmp_path):
    # Kubernetes quantities: "1000m" is 1 (sizer's number text read m as a million); "500m" (0.5) is no whole GPU
    path = tmp_path / "milli.yaml"
    path.write_text(PASS.read_text().replace("nvidia.com/gpu: 1", 'nvidia.com/gpu: "1000m"'))
    assert '"1000m"' in path.read_text()
    assert read_check_input(str(path)).gpus_requested == 1
