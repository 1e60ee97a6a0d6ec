"""Where `sizer check` finds the GPU, the model and the GPU count, and the flags that replace them (issue 26):
node labels of every kind clusters use, instance types, tolerations, MIG slices, model paths, and
--gpu / --model / --gpus-per-replica with each value's source."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from typer.testing import CliRunner

from sizer.cli import app
from sizer.inputs.hardware import all_profiles, load_hardware
from sizer.inputs.manifest import CheckFlags, read_check_input
from sizer.inputs.manifests.commands import model_reference, parse_server_args
from sizer.inputs.manifests.gpus import read_label
from sizer.outputs.emit import GKE_LABEL
from validation.errors import FieldError

DATA = Path(__file__).resolve().parents[2] / "data" / "manifests"

# A Deployment with no node label: the test adds the one it is about.
POD = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: t}}
spec:
  replicas: 2
  template:
    spec:
{extra}
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.11.0
        {command}
        resources:
          limits: {{{resource}: "{count}"}}
"""


def said(result) -> str:
    """The command's output with its line wrapping undone (check wraps its summary to the terminal, 80 columns)."""
    return " ".join(result.output.split())


def manifest(tmp_path, extra: str = "", command: str = 'command: ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]',
             resource: str = "nvidia.com/gpu", count: int = 1) -> str:
    path = tmp_path / "m.yaml"
    path.write_text(POD.format(extra=extra, command=command, resource=resource, count=count))
    return str(path)


@pytest.mark.parametrize("key, value, profile", [
    # GKE: nvidia-tesla-a100 is the A100 40GB (A2 Standard), nvidia-a100-80gb the 80 GB (A2 Ultra)
    ("cloud.google.com/gke-accelerator", "nvidia-tesla-a100", "a100-40gb"),
    ("cloud.google.com/gke-accelerator", "nvidia-a100-80gb", "a100-80gb"),
    ("cloud.google.com/gke-accelerator", "nvidia-h100-80gb", "h100-sxm"),
    ("cloud.google.com/gke-accelerator", "nvidia-h100-mega-80gb", "h100-sxm"),
    ("cloud.google.com/gke-accelerator", "nvidia-h200-141gb", "h200"),
    ("cloud.google.com/gke-accelerator", "nvidia-l4", "l4"),
    ("cloud.google.com/gke-accelerator", "nvidia-tesla-v100", "v100-16gb"),
    # GPU feature discovery product names
    ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3", "h100-sxm"),
    ("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB", "a100-40gb"),
    ("nvidia.com/gpu.product", "Tesla-V100-SXM2-32GB", "v100-32gb"),
    ("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb", "a100-40gb/mig-3g.20gb"),
    # AMD's node labeller writes MI325 and MI355 without the X
    ("amd.com/gpu.product-name", "AMD_Instinct_MI300X_OAM", "mi300x"),
    ("amd.com/gpu.product-name", "AMD_Instinct_MI325_OAM", "mi325x"),
    ("amd.com/gpu.product-name", "AMD_Instinct_MI355_OAM", "mi355x"),
    # cloud instance types (AWS, Google Cloud, Azure documentation of each machine's GPUs)
    ("node.kubernetes.io/instance-type", "p4d.24xlarge", "a100-40gb"),
    ("node.kubernetes.io/instance-type", "p4de.24xlarge", "a100-80gb"),
    ("node.kubernetes.io/instance-type", "p5.48xlarge", "h100-sxm"),
    ("node.kubernetes.io/instance-type", "p5e.48xlarge", "h200"),
    ("node.kubernetes.io/instance-type", "p5en.48xlarge", "h200"),
    ("node.kubernetes.io/instance-type", "g6.24xlarge", "l4"),
    ("node.kubernetes.io/instance-type", "g6e.12xlarge", "l40s"),
    ("node.kubernetes.io/instance-type", "a2-highgpu-8g", "a100-40gb"),
    ("node.kubernetes.io/instance-type", "a3-ultragpu-8g", "h200"),
    ("node.kubernetes.io/instance-type", "Standard_ND96isr_H100_v5", "h100-sxm"),
    ("karpenter.k8s.aws/instance-gpu-name", "h100", "h100-sxm"),
    ("gpu.nvidia.com/class", "H100_NVLINK_80GB", "h100-sxm"),
    ("gpu.nvidia.com/class", "A100_NVLINK_80GB", "a100-80gb"),
])
def test_gpu_labels_name_their_profile(key, value, profile):
    assert read_label(key, value, {}).profile == profile
    load_hardware(profile)                  # a profile (or slice) sizer has


def test_a_label_that_does_not_say_which_a100_is_not_guessed():
    # CoreWeave's bare A100_NVLINK names no memory size (its 80 GB class says 80GB): no profile, so check asks
    # for --gpu rather than planning the 80 GB part's KV cache on what may be a 40 GB GPU
    assert read_label("gpu.nvidia.com/class", "A100_NVLINK", {}).profile is None


def test_instance_types_say_how_many_gpus_a_node_has():
    # AWS: g6.24xlarge has 4 L4; p5.48xlarge 8 H100
    assert read_label("node.kubernetes.io/instance-type", "g6.24xlarge", {}).reading == \
        "instance type g6.24xlarge (4 x l4 per node)"


def test_ambiguous_or_missing_parts_are_refused_with_the_reason():
    # Karpenter's `a100` is either size: the GPU memory label beside it tells them apart
    assert read_label("karpenter.k8s.aws/instance-gpu-name", "a100", {}).profile is None
    assert read_label("karpenter.k8s.aws/instance-gpu-name", "a100",
                      {"karpenter.k8s.aws/instance-gpu-memory": "81920"}).profile == "a100-80gb"
    g5 = read_label("node.kubernetes.io/instance-type", "g5.12xlarge", {})
    assert g5.profile is None and "A10G, for which sizer has no profile" in g5.reading


def test_a_label_stated_twice_is_read_at_its_first_value(tmp_path):
    # the node selector's GPU memory (40 GiB: an A100 40GB) comes first, a node affinity restates it as 80 GiB:
    # the GPU is read from the first GPU label, so the memory beside it is the first one too (it was the last)
    affinity = """      nodeSelector:
        karpenter.k8s.aws/instance-gpu-name: a100
        karpenter.k8s.aws/instance-gpu-memory: "40960"
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions:
              - {key: karpenter.k8s.aws/instance-gpu-memory, operator: In, values: ["81920"]}"""
    assert read_check_input(manifest(tmp_path, affinity)).scenario_data["hardware"]["gpu"] == "a100-40gb"


def test_node_affinity_with_an_eks_instance_type(tmp_path):
    affinity = """      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions:
              - {key: node.kubernetes.io/instance-type, operator: In, values: [p4d.24xlarge]}"""
    inp = read_check_input(manifest(tmp_path, affinity))
    assert inp.scenario_data["hardware"]["gpu"] == "a100-40gb"
    (gpu,) = [s for s in inp.sources if s.setting == "gpu"]
    assert gpu.source.endswith("(instance type p4d.24xlarge (8 x a100-40gb per node))")


def test_a_toleration_naming_the_gpu(tmp_path):
    toleration = """      tolerations:
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
      - {key: cloud.google.com/gke-accelerator, operator: Equal, value: nvidia-l4, effect: NoSchedule}"""
    inp = read_check_input(manifest(tmp_path, toleration))
    assert inp.scenario_data["hardware"]["gpu"] == "l4"


def test_no_gpu_anywhere_names_the_flag(tmp_path):
    result = CliRunner().invoke(app, ["check", manifest(tmp_path)])
    assert result.exit_code == 2 and "--gpu: missing: no node label names the GPU" in said(result)
    unknown = manifest(tmp_path, "      nodeSelector: {nvidia.com/gpu.product: Tesla-T4}")
    result = CliRunner().invoke(app, ["check", unknown])
    assert result.exit_code == 2 and "no hardware profile for Tesla-T4; give --gpu" in said(result)
    # a control character in the label (\x1e, which str.splitlines splits on; found by test_fuzz_manifest.py) is
    # escaped, so the refusal stays one line
    control = manifest(tmp_path, '      nodeSelector: {nvidia.com/gpu.product: "T4\\x1e"}')
    result = CliRunner().invoke(app, ["check", control])
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert "no hardware profile for T4\\x1e; give --gpu" in said(result)


def test_flags_replace_block_and_manifest_and_say_so(tmp_path):
    path = manifest(tmp_path, "      nodeSelector: {nvidia.com/gpu.product: NVIDIA-L40S}")
    inp = read_check_input(path, flags=CheckFlags(gpu="h200", model="llama-3.1-70b", gpus_per_replica=4))
    assert inp.scenario_data["hardware"]["gpu"] == "h200" and inp.scenario_data["model"]["name"] == "llama-3.1-70b"
    assert (inp.gpus_requested, inp.gpus_per_replica) == (4, 1)      # 4 billed, TP 1 used: a note says so
    assert {s.setting: s.source for s in inp.sources} == {"model": "--model", "gpu": "--gpu",
                                                          "gpus_per_replica": "--gpus-per-replica"}
    result = CliRunner().invoke(app, ["check", path, "--gpu", "h200", "--json"])
    assert json.loads(result.output)["sources"]["gpu"] == {"value": "h200", "from": "--gpu"}


def test_sizer_block_sits_between_flags_and_manifest(tmp_path):
    path = Path(manifest(tmp_path, "      nodeSelector: {nvidia.com/gpu.product: NVIDIA-L40S}"))
    path.write_text(path.read_text() + "---\nsizer: {gpu: h100, workload: {arrival: {rate_per_s: 1}, prompt_tokens: "
                    "{distribution: fixed, value: 100}, output_tokens: {distribution: fixed, value: 10}}}\n")
    assert {s.setting: s.source for s in read_check_input(str(path)).sources}["gpu"] == "sizer.gpu"
    assert read_check_input(str(path), flags=CheckFlags(gpu="h200")).scenario_data["hardware"]["gpu"] == "h200"


def test_gpus_per_replica_where_the_manifest_has_none(tmp_path):
    path = manifest(tmp_path, "      nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}",
                    resource="memory", count=16)
    with pytest.raises(FieldError, match="needs its GPU count \\(or give --gpus-per-replica\\)"):
        read_check_input(path)
    assert read_check_input(path, flags=CheckFlags(gpus_per_replica=1)).gpus_requested == 1
    result = CliRunner().invoke(app, ["check", path, "--gpus-per-replica", "0"])
    assert result.exit_code == 2 and "--gpus-per-replica" in said(result)


def test_mig_slice_resource_plans_a_slice(tmp_path):
    # nvidia.com/mig-3g.40gb on an H100 80GB: 3 of 7 compute slices, 40 of 80 GB and half the bandwidth
    path = manifest(tmp_path, resource="nvidia.com/mig-3g.40gb")
    inp = read_check_input(path, flags=CheckFlags(gpu="h100"))
    assert inp.scenario_data["hardware"]["gpu"] == "h100-sxm/mig-3g.40gb"
    whole, part = load_hardware("h100-sxm"), load_hardware("h100-sxm/mig-3g.40gb")
    assert part.memory_bytes == whole.memory_bytes // 2
    assert part.peak_flops_per_s["bf16"] == pytest.approx(whole.peak_flops_per_s["bf16"] * 3 / 7)
    assert part.memory_bandwidth_bytes_per_s == pytest.approx(whole.memory_bandwidth_bytes_per_s / 2)
    with pytest.raises(FieldError, match="no MIG slice '3g.40gb' of NVIDIA L4"):
        read_check_input(path, flags=CheckFlags(gpu="l4"))


def test_model_paths_are_read_by_their_folder_name():
    assert model_reference("/models/gpt-oss-120b", "f") == (
        "gpt-oss-120b", "model path '/models/gpt-oss-120b' is not on this machine; read as gpt-oss-120b, from its "
                        "folder name 'gpt-oss-120b'")
    assert model_reference("/data/Qwen/Qwen2.5-7B-Instruct", "f")[0] == "qwen2.5-7b"        # org/name components
    assert model_reference("/cache/models--meta-llama--Llama-3.1-8B-Instruct/snapshots/0e9e", "f")[0] == \
        "llama-3.1-8b"                                                                     # a Hugging Face cache
    with pytest.raises(FieldError, match="not in the catalog .*give --model"):
        model_reference("/models/my-finetune", "f")


def test_model_path_in_a_manifest_is_an_assumption(tmp_path):
    path = manifest(tmp_path, "      nodeSelector: {nvidia.com/gpu.product: NVIDIA-H200}",
                    command='command: ["vllm", "serve", "/models/gpt-oss-120b"]')
    inp = read_check_input(path)
    assert inp.scenario_data["model"]["name"] == "gpt-oss-120b"
    assert any(n.startswith("assumed: model path '/models/gpt-oss-120b'") for n in inp.notes)


def test_args_only_container_runs_the_vllm_image_entrypoint(tmp_path):
    path = manifest(tmp_path, "      nodeSelector: {nvidia.com/gpu.product: NVIDIA-H200}",
                    command='args: ["meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"]')
    inp = read_check_input(path)
    assert inp.scenario_data["deployment"]["max_model_len"] == 8192
    assert any("vllm/vllm-openai image's entrypoint `vllm serve`" in n for n in inp.notes)


def test_engine_flags_as_current_engines_spell_them():
    _, fields, _, notes = parse_server_args(["vllm", "serve", "m", "--disable-prefix-caching", "--dtype", "float",
                                             "--max-model-len", "auto"], "f")
    assert fields == {"engine": "vllm", "enable_prefix_caching": False, "quantization": "fp32"}
    assert any(n.startswith("--max-model-len auto: vLLM fits the longest context") for n in notes)
    _, fields, _, notes = parse_server_args(["python", "-m", "sglang.launch_server", "--model-path", "m",
                                             "--enable-ep-moe", "--tp", "2"], "f")
    assert fields == {"engine": "sglang", "tensor_parallel_size": 2}      # removed: not read as expert parallel
    assert "SGLang flag removed from the engine, not read: --enable-ep-moe (use --ep-size N (the --tp-size value))" \
        in notes


def test_check_header_counts_replicas_in_words():
    result = CliRunner().invoke(app, ["check", str(DATA / "pod-sglang.yaml")])
    # one Pod of 4 GPUs: "1 replica × 4", not "1 x 4"
    assert "llama-3.1-70b on 1 replica × 4 NVIDIA H100" in said(result)


def test_junit_properties_say_where_each_setting_came_from(tmp_path):
    junit = tmp_path / "check.xml"
    path = manifest(tmp_path, "      nodeSelector: {cloud.google.com/gke-accelerator: nvidia-h100-80gb}")
    CliRunner().invoke(app, ["check", path, "--model", "llama-3.1-8b", "--junit", str(junit)])
    props = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert props["model"] == "llama-3.1-8b (from --model)"
    assert props["gpu"] == ("h100-sxm (from spec.template.spec.nodeSelector.cloud.google.com/gke-accelerator "
                            "(GKE accelerator nvidia-h100-80gb))")
    assert props["gpus_per_replica"] == "1 (from spec.template.spec.containers[0].resources.limits.nvidia.com/gpu)"


def test_inference_service_on_kserves_own_huggingface_runtime(tmp_path):
    # `runtime: kserve-huggingfaceserver` is a ClusterServingRuntime KServe installs: not in the user's file
    path = tmp_path / "isvc.yaml"
    path.write_text("""apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: llama}
spec:
  predictor:
    nodeSelector: {nvidia.com/gpu.product: NVIDIA-L40S}
    model:
      modelFormat: {name: vllm}
      runtime: kserve-huggingfaceserver
      args: ["--model_id=meta-llama/Llama-3.1-8B-Instruct", "--max-model-len=8192"]
      resources: {limits: {nvidia.com/gpu: "1"}}
""")
    inp = read_check_input(str(path))
    assert inp.scenario_data["model"]["name"] == "llama-3.1-8b"
    assert inp.scenario_data["deployment"]["max_model_len"] == 8192


def test_v100_has_no_bf16_and_vllm_refuses_it(tmp_path):
    # NVIDIA's V100 datasheet: Tensor Cores take FP16 (125 TFLOPS), no bf16; vLLM asks for --dtype half
    bf16 = manifest(tmp_path, "      nodeSelector: {nvidia.com/gpu.product: Tesla-V100-SXM2-32GB}")
    result = CliRunner().invoke(app, ["check", bf16])
    assert result.exit_code == 1 and "vLLM refuses bf16 on NVIDIA V100 SXM2 32GB" in said(result)
    half = manifest(tmp_path, "      nodeSelector: {nvidia.com/gpu.product: Tesla-V100-SXM2-32GB}",
                    command='command: ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--dtype", "half", '
                            '"--max-model-len", "8192"]')
    result = CliRunner().invoke(app, ["check", half])
    assert result.exit_code == 0, result.output
    assert "fp16 weights run on NVIDIA V100 SXM2 32GB (fp16 GEMMs)" in said(result)


def test_flags_on_a_scenario_file():
    # a bundled scenario: only what the flags change is asserted
    scenario = Path(__file__).resolve().parents[3] / "scenarios" / "llama-3.1-8b-chat-h100.yaml"
    inp = read_check_input(str(scenario), flags=CheckFlags(gpu="h200", model="qwen3-8b"))
    assert (inp.scenario_data["hardware"]["gpu"], inp.scenario_data["model"]["name"]) == ("h200", "qwen3-8b")
    assert {s.setting: s.source for s in inp.sources}["gpu"] == "--gpu"
    result = CliRunner().invoke(app, ["check", str(scenario), "--gpus-per-replica", "2"])
    assert result.exit_code == 2 and "--gpus-per-replica: not with a scenario" in said(result)


def test_every_label_emit_writes_reads_back_as_its_profile():
    # --emit k8s writes these node labels (each profile's kubernetes.schedule, --emit gke its first GKE type); check
    # must read each back
    for gpu, spec in all_profiles().items():
        if spec.kubernetes and spec.kubernetes.schedule:
            acc = spec.kubernetes.schedule
            assert read_label(acc.label_key, acc.label_value, {}).profile == gpu, gpu
        for gke in spec.kubernetes.gke_accelerators if spec.kubernetes else ():
            assert read_label(GKE_LABEL, gke, {}).profile == gpu, gke


def test_cost_fix_counts_one_replica_in_words():
    # pass-llama-8b-h100 billed at 2 GPUs per replica: 2 x 2 x $3.99 = $15.96/hour over a $10 budget; one replica
    # (2 x $3.99 = $7.98/hour) meets its SLO: "1 replica meets", not "1 replicas meet"
    deploy = Path(__file__).resolve().parents[3] / "scenarios" / "deploy" / "pass-llama-8b-h100.yaml"
    result = CliRunner().invoke(app, ["check", str(deploy), "--gpus-per-replica", "2"])
    assert result.exit_code == 1 and "fix: 1 replica meets the SLO ($7.98/hour)" in said(result)


def test_check_gpu_takes_a_profile_file(tmp_path):
    # --gpu FILE.yaml on check, as on plan: the file's profile, not an id no folder holds (the scenario's
    # hardware.gpu became "h200x" and was refused as an unknown GPU)
    root = Path(__file__).resolve().parents[3]
    text = (root / "hardware_profiles" / "h200.yaml").read_text().replace("id: h200", "id: h200x", 1)
    profile = tmp_path / "mine.yaml"
    profile.write_text(text.replace("aliases: [h200-sxm, h200-sxm-141gb, h200_sxm_141gb]", "aliases: []", 1))
    scenario = root / "scenarios" / "llama-3.1-8b-chat-h100.yaml"
    result = CliRunner().invoke(app, ["check", str(scenario), "--gpu", str(profile), "--json"])
    assert result.exit_code in (0, 1), result.output
    assert json.loads(result.stdout)["sources"]["gpu"]["from"] == "--gpu"


def _user_copy_of_h100(home: Path) -> None:
    """docs/hardware.md's step: a copy of a bundled profile under a new id in $SIZER_HOME/profiles, keeping every
    cluster name of hardware_profiles/h100-sxm.yaml's `kubernetes:` section."""
    root = Path(__file__).resolve().parents[3]
    text = (root / "hardware_profiles" / "h100-sxm.yaml").read_text().replace("id: h100-sxm", "id: my-h100", 1)
    (home / "profiles").mkdir(parents=True)
    (home / "profiles" / "my-h100.yaml").write_text(text)


@pytest.mark.parametrize("key, value", [
    # one label of each kind h100-sxm.yaml names (its `kubernetes:` section): product words "h100", GKE type
    # nvidia-h100-80gb, instance type p5.48xlarge, Karpenter name h100, and Ray's "H100" read by the product words
    ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
    ("cloud.google.com/gke-accelerator", "nvidia-h100-80gb"),
    ("node.kubernetes.io/instance-type", "p5.48xlarge"),
    ("karpenter.k8s.aws/instance-gpu-name", "h100"),
    ("ray accelerator_type", "H100"),
])
def test_a_users_copy_of_a_bundled_profile_takes_every_name(tmp_path, monkeypatch, key, value):
    # hardware_profiles/README.md: a user's claim on a name shadows the bundled claim, as all_profiles lets a
    # user's id replace a bundled one; before, a product label or Ray type was refused as a tie (None), a GKE type
    # kept the bundled h100-sxm and an instance type or Karpenter name took the user's
    monkeypatch.setenv("SIZER_HOME", str(tmp_path / "home"))
    _user_copy_of_h100(tmp_path / "home")
    assert read_label(key, value, {}).profile == "my-h100"


def test_an_unreadable_user_profile_breaks_only_itself(tmp_path, monkeypatch):
    # a profile of yours that does not read (hardware_profiles/README.md): check reads an H100 label from the
    # bundled profiles with a warning naming the file; asking for the broken profile by id fails on it, exit 2
    monkeypatch.setenv("SIZER_HOME", str(tmp_path / "home"))
    (tmp_path / "home" / "profiles").mkdir(parents=True)
    broken = tmp_path / "home" / "profiles" / "broken.yaml"
    broken.write_text("id: broken\n")
    runner = CliRunner()
    result = runner.invoke(app, ["check", manifest(tmp_path, "      nodeSelector: "
                                                             "{nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}"),
                                 "--json"])
    assert result.exit_code in (0, 1), result.output
    assert json.loads(result.stdout)["sources"]["gpu"]["value"] == "h100-sxm"
    assert f"warning: {broken}: " in said(result)
    scenario = Path(__file__).resolve().parents[3] / "scenarios" / "llama-3.1-8b-chat-h100.yaml"
    # a plan by alias (h100: h100-sxm's) does not read the broken file either
    by_alias = runner.invoke(app, ["plan", str(scenario), "--gpu", "h100", "--json"])
    assert by_alias.exit_code == 0, by_alias.output
    assert json.loads(by_alias.stdout)["gpu"] == "NVIDIA H100 SXM5 80GB"
    refused = runner.invoke(app, ["plan", str(scenario), "--gpu", "broken"])
    assert refused.exit_code == 2 and f"error: {broken}: " in said(refused)
    assert "Traceback" not in refused.output
