"""Real published manifests, one per kind `sizer check` reads, each checked as published or with only
--gpu / --model added (issue 26). tests/data/manifests/README.md cites each file's repository, path
and commit; the expected numbers below are read off the file itself (its flags, counts and labels)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.cli import app
from sizer.inputs.manifest import CheckFlags, read_check_input
from sizer.outputs.check import check_file
from validation.errors import FieldError

DATA = Path(__file__).resolve().parents[2] / "data" / "manifests"


def read(name: str, **flags):
    return read_check_input(str(DATA / name), flags=CheckFlags(**flags))


def sources(inp) -> dict[str, tuple[str, str]]:
    return {s.setting: (s.value, s.source) for s in inp.sources}


def resolved(inp) -> tuple[str, str, int, int]:
    """(model, GPU, GPUs one replica requests, replicas)."""
    return inp.scenario_data["model"]["name"], inp.scenario_data["hardware"]["gpu"], inp.gpus_requested, inp.replicas


# ---- Deployments -----------------------------------------------------------------------------


def test_gke_deployment_on_nvidia_tesla_a100_is_the_40_gb_part():
    # GKE's accelerator nvidia-tesla-a100 is the A100 40GB (A2 Standard); nvidia-a100-80gb is the 80 GB one.
    # As published: gemma-3-27b-it from $(MODEL_ID), --tensor-parallel-size=2 on `nvidia.com/gpu : "2"`.
    inp = read("gke-vllm-gemma-3-27b-a100-40gb.yaml")
    assert resolved(inp) == ("gemma-3-27b", "a100-40gb", 2, 1)
    assert sources(inp)["gpu"] == ("a100-40gb", "spec.template.spec.nodeSelector.cloud.google.com/gke-accelerator "
                                                "(GKE accelerator nvidia-tesla-a100)")
    assert inp.scenario_data["deployment"]["max_model_len"] == 4096
    result = check_file(str(DATA / "gke-vllm-gemma-3-27b-a100-40gb.yaml"))
    assert result.exit_code == 0
    # the 40 GB part leaves about 10.7 GiB of KV cache per GPU (issue 26: 49.2 GiB were planned on the 80 GB part)
    assert "leave 10.7 GiB KV cache" in result.rules[1].message


def test_gke_deployment_on_l4():
    inp = read("gke-vllm-gemma-2-9b-it.yaml")              # nvidia-l4, 2 GPUs, TP 2
    assert resolved(inp) == ("gemma-2-9b", "l4", 2, 1)
    assert check_file(str(DATA / "gke-vllm-gemma-2-9b-it.yaml")).exit_code == 0


def test_vllm_docs_deployment_nvidia_with_gpu_flag():
    # `sh -c "vllm serve mistralai/Mistral-7B-Instruct-v0.3 ... --max_num_batched_tokens 1024"`; no node label
    inp = read("vllm-docs-deployment-nvidia.yaml", gpu="l4")
    assert resolved(inp) == ("mistral-7b-v0.3", "l4", 1, 1)
    assert sources(inp)["gpu"] == ("l4", "--gpu")
    d = inp.scenario_data["deployment"]
    assert (d["enable_chunked_prefill"], d["max_num_batched_tokens"]) == (True, 1024)


def test_vllm_docs_deployment_amd_counts_amd_gpus():
    inp = read("vllm-docs-deployment-amd.yaml", gpu="mi300x")
    # mistralai/Mistral-7B-v0.3 (the base model) on `amd.com/gpu: "1"`
    assert resolved(inp) == ("mistral-7b-v0.3", "mi300x", 1, 1)
    assert sources(inp)["gpus_per_replica"] == ("1", "spec.template.spec.containers[0].resources.limits.amd.com/gpu")


# ---- LeaderWorkerSets --------------------------------------------------------------------------


def test_lws_vllm_on_ray_is_one_server_over_the_group():
    # size 2 x `nvidia.com/gpu: "8"` = 16 = --tensor-parallel-size 8 x --pipeline_parallel_size 2; replicas 2
    inp = read("lws-vllm-ray-multinode.yaml", gpu="h100")
    assert resolved(inp) == ("llama-3.1-405b", "h100-sxm", 16, 2)
    d = inp.scenario_data["deployment"]
    assert (d["tensor_parallel_size"], d["pipeline_parallel_size"]) == (8, 2)


def test_lws_sglang_leader_and_workers_are_one_server():
    # leader and worker both run sglang.launch_server (--node-rank): one server per group,
    # size 2 x 1 GPU = --tp 2
    inp = read("lws-sglang-multinode.yaml", gpu="h100")
    assert resolved(inp) == ("llama-3.1-8b", "h100-sxm", 2, 2)
    assert inp.scenario_data["deployment"]["engine"] == "sglang"
    assert inp.scenario_data["deployment"]["tensor_parallel_size"] == 2


def test_gke_lws_reads_the_gke_accelerator_of_the_leader():
    inp = read("gke-lws-vllm-llama3-405b-a3.yaml")        # nvidia-h100-80gb, as published
    assert resolved(inp) == ("llama-3.1-405b", "h100-sxm", 16, 1)
    assert check_file(str(DATA / "gke-lws-vllm-llama3-405b-a3.yaml")).exit_code == 0


def test_deepseek_r1_checks_as_published_and_with_a_model_flag():
    # deepseek-ai/DeepSeek-R1 is read offline from sizer's bundled HF configs (sizer/inputs/catalog/hf)
    assert resolved(read("gke-lws-vllm-deepseek-r1-a3.yaml")) == ("deepseek-ai/DeepSeek-R1", "h100-sxm", 16, 1)
    # R1 has DeepSeek-V3's architecture: --model deepseek-v3 (a stand-in, stated by the flag's source)
    inp = read("gke-lws-vllm-deepseek-r1-a3.yaml", model="deepseek-v3")
    assert resolved(inp) == ("deepseek-v3", "h100-sxm", 16, 1)
    assert sources(inp)["model"] == ("deepseek-v3", "--model")


# ---- operators ---------------------------------------------------------------------------------


def test_kserve_llm_inference_service_fails_memory_on_l4():
    # KServe's template runs `vllm serve` at the model's full 131,072-token context: on an L4 (24 GB) one
    # sequence of that length (7.0 GiB) does not fit beside 14.2 GiB of weights: the memory rule fails (exit 1)
    inp = read("kserve-llmisvc-qwen2.5-7b.yaml", gpu="l4")
    assert resolved(inp) == ("qwen2.5-7b", "l4", 1, 3)                     # spec.replicas 3
    assert sources(inp)["model"][1] == "spec.model.uri 'Qwen/Qwen2.5-7B-Instruct'"
    result = check_file(str(DATA / "kserve-llmisvc-qwen2.5-7b.yaml"), flags=CheckFlags(gpu="l4"))
    assert result.exit_code == 1 and result.rules[1].name == "memory" and result.rules[1].status == "fail"


def test_kserve_llm_inference_service_on_amd():
    inp = read("kserve-llmisvc-qwen2.5-7b-amd.yaml", gpu="mi300x")
    assert resolved(inp) == ("qwen2.5-7b", "mi300x", 1, 2)
    assert check_file(str(DATA / "kserve-llmisvc-qwen2.5-7b-amd.yaml"), flags=CheckFlags(gpu="mi300x")).exit_code == 0


def test_kserve_llm_inference_service_with_a_prefill_pool():
    # spec.replicas 1 decode pod and spec.prefill.replicas 2 prefill pods, each `nvidia.com/gpu: "1"`;
    # VLLM_ADDITIONAL_ARGS (--kv_transfer_config) is appended by KServe's template: read, and named as not modelled
    inp = read("kserve-llmisvc-pd-qwen2.5-7b.yaml", gpu="h100")
    d = inp.scenario_data["deployment"]
    assert d["disaggregated"] == {"prefill_replicas": 2, "decode_replicas": 1}
    assert inp.gpus_requested == 3
    assert ("vLLM flags unknown to sizer, not modelled and not checked (a flag vLLM does not have stops it at start): "
            "--kv_transfer_config") in inp.notes
    assert not any(n.startswith("vLLM environment not modelled") for n in inp.notes)


def test_ray_serve_llm_engine_kwargs_are_vllm_flags():
    inp = read("kuberay-ray-serve-llm.yaml", gpu="l4")
    # engine_kwargs max_model_len 1024, gpu_memory_utilization 0.75; TP 1 -> 1 GPU; autoscaling min_replicas 1
    assert resolved(inp) == ("qwen2.5-7b", "l4", 1, 1)
    d = inp.scenario_data["deployment"]
    assert (d["max_model_len"], d["gpu_memory_utilization"]) == (1024, 0.75)
    assert "autoscaling from 1 to 4 replicas; checked at the minimum" in inp.notes


def test_dynamo_graph_deployment_worker():
    # Qwen/Qwen3-0.6B is no catalog model but is in sizer's bundled HF configs (sizer/inputs/catalog/hf)
    assert resolved(read("dynamo-vllm-agg.yaml", gpu="h100")) == ("Qwen/Qwen3-0.6B", "h100-sxm", 1, 1)
    inp = read("dynamo-vllm-agg.yaml", gpu="h100", model="qwen3-8b")
    assert resolved(inp) == ("qwen3-8b", "h100-sxm", 1, 1)                 # resources.limits.gpu "1"
    assert sources(inp)["gpus_per_replica"] == ("1", "spec.services.worker.resources.limits.gpu")


def test_dynamo_sglang_prefill_and_decode_workers_are_a_disaggregated_deployment():
    # services decode and prefill (subComponentType, --disaggregation-mode), each `gpu: "1"` and 1 replica
    inp = read("dynamo-sglang-disagg.yaml", gpu="h100", model="qwen3-8b")
    d = inp.scenario_data["deployment"]
    assert (d["engine"], d["disaggregated"]) == ("sglang", {"prefill_replicas": 1, "decode_replicas": 1})
    assert inp.gpus_requested == 2                                      # 1 decode pod + 1 prefill pod


@pytest.mark.parametrize("decode, prefill, noted", [('{"max_window_layers": 28}', '{"max_window_layers": 28}', False),
                                                    ('{"max_window_layers": 28}', None, True)])
def test_prefill_pods_overriding_other_config_keys_are_noted(tmp_path, decode, prefill, noted):
    # --json-model-override-args on both kinds of pod alike is no difference; on the decode pods alone it is one
    text = (DATA / "dynamo-sglang-disagg.yaml").read_text()
    pods = text.split("            - --disaggregation-mode\n")
    overrides = [decode, prefill]
    for i, value in enumerate(overrides):
        if value is not None:
            pods[i] += f"            - --json-model-override-args\n            - '{value}'\n"
    f = tmp_path / "disagg.yaml"
    f.write_text("            - --disaggregation-mode\n".join(pods))
    inp = read_check_input(str(f), flags=CheckFlags(gpu="h100", model="qwen3-8b"))
    assert inp.scenario_data["model"]["overrides"] == {"max_window_layers": 28}
    assert any("differ from decode pods in model_overrides" in n for n in inp.notes) is noted


# ---- Helm values -------------------------------------------------------------------------------


def test_llm_d_guide_values_derive_gpus_from_parallelism():
    # no GPU resource in the container: the chart writes tensor x dataLocal = 1 x 1 GPU; decode.replicas 2
    inp = read("llm-d-guide-inference-scheduling-values.yaml", gpu="h100", model="qwen3-8b")
    assert resolved(inp) == ("qwen3-8b", "h100-sxm", 1, 2)
    assert sources(inp)["gpus_per_replica"] == ("1", "decode.parallelism")


def test_production_stack_tutorial_values_without_chunked_prefill():
    # enableChunkedPrefill: false with maxModelLen 4096: vLLM raises its step budget to max_model_len
    inp = read("production-stack-basic-config-values.yaml", gpu="l40s")
    assert resolved(inp) == ("llama-3.1-8b", "l40s", 1, 1)
    d = inp.scenario_data["deployment"]
    assert (d["enable_chunked_prefill"], d["enable_prefix_caching"], d["gpu_memory_utilization"]) == (False, False, 0.8)
    assert check_file(str(DATA / "production-stack-basic-config-values.yaml"),
                      flags=CheckFlags(gpu="l40s")).exit_code == 0


def test_vllm_chart_values_with_a_weights_path_and_a_placeholder_gpu():
    # image.command `vllm serve /data/` (weights synced from S3) names no model: the error names --model;
    # gpuModels ["TYPE_GPU_USED"] (the chart's node affinity on nvidia.com/gpu.product) names no GPU: --gpu
    with pytest.raises(FieldError, match="model '/data/' is not in the catalog .*give --model"):
        read("vllm-chart-helm-values.yaml")
    with pytest.raises(FieldError, match="no hardware profile for TYPE_GPU_USED; give --gpu") as err:
        read("vllm-chart-helm-values.yaml", model="llama-3.2-1b")
    assert err.value.field == "gpuModels[0]"
    inp = read("vllm-chart-helm-values.yaml", model="llama-3.2-1b", gpu="l4")
    assert resolved(inp) == ("llama-3.2-1b", "l4", 1, 1)                 # resources.limits nvidia.com/gpu 1
    assert inp.scenario_data["deployment"]["block_size"] == 16


def test_another_charts_values_are_named_not_read_as_a_scenario():
    result = CliRunner().invoke(app, ["check", str(DATA / "gke-slurm-chart-values.yaml")])
    assert result.exit_code == 2
    assert "an unrecognised values file (top-level keys 'controller, loginsets, nodesets, restapi')" in result.output
    assert "unknown key" not in result.output


def test_every_published_manifest_gets_a_verdict():
    """Exit 0 or 1 (a verdict), never 2, as published or with only --gpu / --model."""
    runs = {"gke-vllm-gemma-3-27b-a100-40gb.yaml": [], "gke-vllm-gemma-2-9b-it.yaml": [],
            "gke-lws-vllm-llama3-405b-a3.yaml": [], "gke-lws-vllm-deepseek-r1-a3.yaml": ["--model", "deepseek-v3"],
            "vllm-docs-deployment-nvidia.yaml": ["--gpu", "l4"], "vllm-docs-deployment-amd.yaml": ["--gpu", "mi300x"],
            "lws-vllm-ray-multinode.yaml": ["--gpu", "h100"], "lws-sglang-multinode.yaml": ["--gpu", "h100"],
            "kserve-llmisvc-qwen2.5-7b.yaml": ["--gpu", "l4"],
            "kserve-llmisvc-qwen2.5-7b-amd.yaml": ["--gpu", "mi300x"],
            "kserve-llmisvc-pd-qwen2.5-7b.yaml": ["--gpu", "h100"],
            "kuberay-ray-serve-llm.yaml": ["--gpu", "l4"],
            "dynamo-vllm-agg.yaml": ["--gpu", "h100", "--model", "qwen3-8b"],
            "dynamo-sglang-disagg.yaml": ["--gpu", "h100", "--model", "qwen3-8b"],
            "llm-d-guide-inference-scheduling-values.yaml": ["--gpu", "h100", "--model", "qwen3-8b"],
            "production-stack-basic-config-values.yaml": ["--gpu", "l40s"],
            "vllm-chart-helm-values.yaml": ["--gpu", "l4", "--model", "llama-3.2-1b"]}
    for name, flags in runs.items():
        result = CliRunner().invoke(app, ["check", str(DATA / name), *flags])
        assert result.exit_code in (0, 1), (name, result.output)
