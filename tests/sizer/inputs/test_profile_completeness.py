"""A GPU is one YAML file (issue 22, item 3; hardware_profiles/README.md, "Adding a GPU"): every bundled profile
states each fact the rest of sizer reads about a GPU (null, with a comment saying why, where the GPU lacks it), no
two profiles claim one cluster name, and a copy of a profile under a new id in the user's profile folder, and
nothing else, is planned, emitted for Kubernetes and read back by `sizer check`."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from hardware_profiles import LOCAL_DIR, PROFILES_DIR
from sizer.cli import app
from sizer.inputs.hardware import all_profiles, load_hardware
from sizer.inputs.manifest import read_check_input
from sizer.inputs.manifests.gpus import read_label

BUNDLED = sorted(PROFILES_DIR.glob("*.yaml")) + sorted(LOCAL_DIR.glob("*.yaml"))
# What sizer reads about a GPU beside its datasheet, and who reads it: MIG slices (inputs/hardware.py), the
# all-to-all's scale-up domain (inputs/hardware.py), the FP8 GEMM efficiency (analytic/roofline.py),
# aiconfigurator's system name (import-kernels) and the Kubernetes names (--emit k8s/gke, sizer check)
FACTS = ("mig", "scale_up_domain_gpus", "fp8_gemm_efficiency", "aiconfigurator_system", "kubernetes")
KUBERNETES = ("schedule", "product_names", "gke_accelerators", "karpenter_gpu", "ray_accelerator_types",
              "instance_types")
SCENARIO = Path(__file__).resolve().parents[3] / "scenarios" / "llama-3.1-8b-chat-h100.yaml"


def missing_facts(path: Path) -> list[str]:
    """The facts a profile file leaves out, or leaves null without a comment on its line saying why."""
    text = path.read_text()
    data = yaml.safe_load(text)
    wanted = [(key, data, key) for key in FACTS]
    if isinstance(data.get("kubernetes"), dict):
        wanted += [(key, data["kubernetes"], f"kubernetes.{key}") for key in KUBERNETES]
    if data.get("fp8_gemm_efficiency") is not None:
        wanted.append(("fp8_gemm_efficiency_source", data, "fp8_gemm_efficiency_source"))
    out = []
    for key, section, name in wanted:
        if key not in section:
            out.append(f"{name}: absent")
        elif section[key] is None and not re.search(rf"^\s*{key}:\s*null\s+#\s*\S", text, re.MULTILINE):
            out.append(f"{name}: null without a comment saying why")
    return out


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_every_bundled_profile_states_every_fact(path):
    assert missing_facts(path) == []


def test_the_check_names_an_omitted_fact(tmp_path):
    # the completeness check itself: h100-sxm without its MIG line, and with its aiconfigurator system null and
    # uncommented, fails on exactly those two
    text = (PROFILES_DIR / "h100-sxm.yaml").read_text()
    text = re.sub(r"^mig: .*\n", "", text, flags=re.MULTILINE)
    text = re.sub(r"^aiconfigurator_system: .*$", "aiconfigurator_system: null", text, flags=re.MULTILINE)
    (tmp_path / "h100-sxm.yaml").write_text(text)
    assert missing_facts(tmp_path / "h100-sxm.yaml") == ["mig: absent", "aiconfigurator_system: null without a "
                                                         "comment saying why"]


def test_no_two_profiles_claim_one_cluster_name():
    # a node label, GKE type, Karpenter name, Ray type or instance type names one GPU, or check could not tell which
    claims = Counter()
    for spec in all_profiles().values():
        k = spec.kubernetes
        if k is None:
            continue
        claims.update([("product", " ".join(sorted(w.split()))) for w in k.product_names]
                      + [("gke", v) for v in k.gke_accelerators] + [("ray", v) for v in k.ray_accelerator_types]
                      + [("instance", t) for t, _ in k.instance_types]
                      + ([("karpenter", k.karpenter_gpu, k.karpenter_memory_mib)] if k.karpenter_gpu else []))
    assert [claim for claim, n in claims.items() if n > 1] == []


def _new_gpu(folder: Path, drop: str | None = None) -> None:
    """The how-to's one step: a profile file for a new GPU, here the H100 SXM's figures under the id x9000 with
    its own names (`drop`: a fact left out)."""
    data = yaml.safe_load((PROFILES_DIR / "h100-sxm.yaml").read_text())
    data.update(id="x9000", name="Example X9000", aliases=["x9k"])
    data["kubernetes"] = {"schedule": {"resource": "nvidia.com/gpu",
                                       "node_label": {"key": "nvidia.com/gpu.product", "value": "NVIDIA-X9000-96GB"},
                                       "gpus_per_node": 4},
                          "product_names": ["x9000"], "gke_accelerators": ["nvidia-x9000"],
                          "karpenter_gpu": {"name": "x9000", "memory_mib": None}, "ray_accelerator_types": [],
                          "instance_types": {"x9.24xlarge": 4}}
    data.pop(drop, None)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "x9000.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def test_a_new_gpu_is_one_yaml_file(tmp_path, monkeypatch):
    monkeypatch.setenv("SIZER_HOME", str(tmp_path / "home"))
    _new_gpu(tmp_path / "home" / "profiles")
    runner = CliRunner()
    # plan: found by id and by alias, its figures (the H100 SXM's 85,045,477,376 B, what CUDA reports) planned
    assert load_hardware("x9k").id == "x9000"
    result = runner.invoke(app, ["plan", str(SCENARIO), "--gpu", "x9000", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert (plan["gpu"], plan["gpu_memory_bytes"]) == ("Example X9000", 85_045_477_376)
    assert any(a.startswith("hardware profile x9000: ") and a.endswith("(your profile folder)")
               for a in plan["assumptions"])
    # --emit k8s writes its schedule; sizer check reads the GPU back from the node label it wrote
    manifest = tmp_path / "x9000.yaml"
    result = runner.invoke(app, ["plan", str(SCENARIO), "--gpu", "x9000", "--emit", "k8s", "--emit-to",
                                 str(manifest)])
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load(manifest.read_text())
    assert doc["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-X9000-96GB"}
    assert read_check_input(str(manifest)).scenario_data["hardware"]["gpu"] == "x9000"
    # check's other lookups: GKE's accelerator type, Karpenter's GPU name, an instance type (4 GPUs each)
    assert read_label("cloud.google.com/gke-accelerator", "nvidia-x9000", {}).profile == "x9000"
    assert read_label("karpenter.k8s.aws/instance-gpu-name", "x9000", {}).profile == "x9000"
    assert read_label("node.kubernetes.io/instance-type", "x9.24xlarge", {}).reading == \
        "instance type x9.24xlarge (4 x x9000 per node)"
    # its MIG slices (mig: true, copied), priced at 3 of 7 compute slices
    assert load_hardware("x9000/mig-3g.40gb").peak_flops("bf16") == pytest.approx(989.4e12 * 3 / 7)


def test_a_user_profile_without_kubernetes_names_is_planned_and_refused_for_k8s(tmp_path, monkeypatch):
    # the section is optional for a user's profile: without it plan works, --emit k8s names the field and file
    monkeypatch.setenv("SIZER_HOME", str(tmp_path / "home"))
    _new_gpu(tmp_path / "home" / "profiles", drop="kubernetes")
    runner = CliRunner()
    assert runner.invoke(app, ["plan", str(SCENARIO), "--gpu", "x9000"]).exit_code == 0
    result = runner.invoke(app, ["plan", str(SCENARIO), "--gpu", "x9000", "--emit", "k8s"])
    assert result.exit_code == 2
    said = " ".join(result.output.split())
    assert "x9000.yaml: kubernetes.schedule: --emit: no Kubernetes resource known for x9000" in said
    assert "Traceback" not in result.output


@pytest.mark.parametrize("fact, value, said", [
    ("mig", "yes", "x9000.yaml: mig: expected true or false"),
    ("scale_up_domain_gpus", 0, "x9000.yaml: scale_up_domain_gpus: expected a whole number of GPUs from 1 to 1024"),
    ("fp8_gemm_efficiency", 1.5, "x9000.yaml: fp8_gemm_efficiency: expected a share in (0, 1]"),
    ("kubernetes", {"schedule": {"resource": "nvidia.com/gpu", "gpus_per_node": 8}},
     "x9000.yaml: kubernetes.schedule.node_label: expected a mapping of key, value"),
    ("kubernetes", {"product_name": ["x9000"]}, "x9000.yaml: kubernetes.product_name: unknown key"),
    # karpenter_gpu.name is one name (hardware_profiles/README.md), not a list: the message says so
    ("kubernetes", {"karpenter_gpu": {"name": 5}}, "x9000.yaml: kubernetes.karpenter_gpu.name: expected a name, "
                                                   "not 5"),
    # an instance type is a name: YAML's `null: 8` key was read as an instance type called "none"
    ("kubernetes", {"instance_types": {None: 8}}, "x9000.yaml: kubernetes.instance_types: expected instance type "
                                                  "names as keys, not None"),
    ("kubernetes", {"instance_types": {"": 8}}, "x9000.yaml: kubernetes.instance_types: expected instance type "
                                                "names as keys"),
])
def test_a_bad_fact_is_one_line_naming_the_file_and_field(tmp_path, monkeypatch, fact, value, said):
    monkeypatch.setenv("SIZER_HOME", str(tmp_path / "home"))
    _new_gpu(tmp_path / "home" / "profiles")
    path = tmp_path / "home" / "profiles" / "x9000.yaml"
    data = yaml.safe_load(path.read_text())
    data[fact] = value
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = CliRunner().invoke(app, ["plan", str(SCENARIO), "--gpu", "x9000"])
    assert result.exit_code == 2 and said in " ".join(result.output.split())
    assert "Traceback" not in result.output


@pytest.mark.parametrize("name, profile", [
    # the rule with the most words wins: "h100 pcie" (2) over "h100" (1); "a100 nvlink 80gb" over "a100 nvlink",
    # a part without a profile (A100 NVLink, memory unsaid)
    ("NVIDIA-H100-PCIe", "h100-pcie"), ("A100_NVLINK_80GB", "a100-80gb"), ("A100_NVLINK", None),
    # a tie with a part that has no profile is refused, not guessed: V100 PCIe 32GB fits "v100 32gb" (v100-32gb,
    # the SXM2 part) and "v100 pcie" (no profile) equally
    ("Tesla-V100-PCIE-32GB", None), ("Tesla-V100-SXM2-32GB", "v100-32gb"),
    # a variant sizer has no profile for beats the part it varies: H100 NVL, H200 NVL
    ("NVIDIA-H100-NVL", None), ("NVIDIA-H200-NVL", None),
])
def test_a_device_name_is_read_by_its_most_specific_rule(name, profile):
    assert read_label("nvidia.com/gpu.product", name, {}).profile == profile
