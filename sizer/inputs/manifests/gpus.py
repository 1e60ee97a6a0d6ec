"""The GPU a pod runs on, from wherever a cluster puts it: node labels (selectors, affinity,
tolerations), cloud instance types, MIG resource names. Each table maps a value to a hardware
profile id (hardware_profiles/), or to None where sizer has no profile for that part (the caller
then asks for --gpu). Sources are cited per table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# ---- node labels ---------------------------------------------------------------------------------
#
# NVIDIA GPU feature discovery `nvidia.com/gpu.product` is the device name with spaces as dashes
# ("NVIDIA-H100-80GB-HBM3", "Tesla-V100-SXM2-16GB", "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb" under the
# single MIG strategy): NVIDIA/k8s-device-plugin, internal/lm/resource.go. AMD's node labeller
# `amd.com/gpu.product-name` ("AMD_Instinct_MI300X_OAM", "AMD_Instinct_MI325_OAM",
# "AMD_Instinct_MI355_OAM"): ROCm/k8s-device-plugin, cmd/k8s-node-labeller. CoreWeave's
# `gpu.nvidia.com/class` ("H100_NVLINK_80GB", "A100_NVLINK_80GB"): CoreWeave docs, node selectors.
PRODUCT_LABELS = ("nvidia.com/gpu.product", "amd.com/gpu.product-name", "gpu.nvidia.com/class")
GKE_LABEL = "cloud.google.com/gke-accelerator"
KARPENTER_LABEL = "karpenter.k8s.aws/instance-gpu-name"
KARPENTER_MEMORY = "karpenter.k8s.aws/instance-gpu-memory"      # MiB per GPU
# The node's machine type: Kubernetes' well-known label (EKS, GKE, AKS set it), its deprecated beta
# spelling, and GPU feature discovery's `nvidia.com/gpu.machine` (the instance type on clouds).
INSTANCE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type", "nvidia.com/gpu.machine")
# Ray's `accelerator_type` (ray python/ray/util/accelerators/accelerators.py): "H100", "L4", "A10G",
# "A100-40G", "A100-80G"; a bare "A100" or "V100" does not say which memory size.
RAY_ACCELERATOR = "ray accelerator_type"
RAY_ACCELERATORS = {"a100-40g": "a100-40gb", "a100-80g": "a100-80gb", "a100": None, "v100": None}
GPU_LABELS = PRODUCT_LABELS + (GKE_LABEL, KARPENTER_LABEL) + INSTANCE_LABELS + (RAY_ACCELERATOR,)

# A product name, split into lower-case words: the first rule whose words all occur wins (specific first).
PRODUCT_RULES = (
    ("gh200", None), ("gb200", "gb200"), ("b300", "b300"), ("b200", "b200"),
    ("h200 nvl", None), ("h200", "h200"), ("h100 pcie", "h100-pcie"), ("h100 nvl", None), ("h100", "h100-sxm"),
    ("h20", "h20"), ("a100 pcie 40gb", None), ("a100 40gb", "a100-40gb"), ("a100 pcie", "a100-pcie-80gb"),
    # CoreWeave's A100_NVLINK_80GB says its memory; a bare A100_NVLINK does not: refused (naming --gpu), not guessed
    ("a100 nvlink 80gb", "a100-80gb"), ("a100 nvlink", None),
    ("a100", "a100-80gb"), ("l40s", "l40s"), ("l20", "l20"), ("l4", "l4"), ("a10g", "a10g"),
    ("v100 pcie", None), ("v100 32gb", "v100-32gb"), ("v100 16gb", "v100-16gb"),
    ("mi300x", "mi300x"), ("mi325", "mi325x"), ("mi325x", "mi325x"), ("mi355", "mi355x"), ("mi355x", "mi355x"),
)

# GKE's `cloud.google.com/gke-accelerator` values (cloud.google.com/kubernetes-engine/docs/how-to/gpus,
# "Available GPU models"; cloud.google.com/compute/docs/gpus). `nvidia-tesla-a100` is the 40 GB A100 (A2
# Standard), `nvidia-a100-80gb` the 80 GB one (A2 Ultra).
GKE_ACCELERATORS = {
    "nvidia-gb200": "gb200", "nvidia-b200": "b200", "nvidia-h200-141gb": "h200", "nvidia-h100-mega-80gb": "h100-sxm",
    "nvidia-h100-80gb": "h100-sxm", "nvidia-a100-80gb": "a100-80gb", "nvidia-tesla-a100": "a100-40gb",
    "nvidia-l4": "l4", "nvidia-tesla-v100": "v100-16gb", "nvidia-tesla-t4": None, "nvidia-tesla-p100": None,
    "nvidia-tesla-p4": None, "nvidia-rtx-pro-6000": None,
}

# Karpenter's `karpenter.k8s.aws/instance-gpu-name`: EC2's GpuInfo name, lower case (aws/karpenter-provider-aws,
# pkg/providers/instancetype). A name two parts share is told apart by `instance-gpu-memory` (MiB per GPU).
KARPENTER_GPUS = {"h200": "h200", "h100": "h100-sxm", "b200": "b200", "l40s": "l40s", "l4": "l4", "a10g": "a10g",
                  "t4": None, "t4g": None}
KARPENTER_BY_MEMORY = {"a100": {40960: "a100-40gb", 81920: "a100-80gb"},
                       "v100": {16384: "v100-16gb", 32768: "v100-32gb"}}


# ---- cloud instance types --------------------------------------------------------------------------
#
# instance type -> (GPUs per instance, profile). Lower case.
# AWS: aws.amazon.com/ec2/instance-types/ (Accelerated Computing: P6, P5, P4, P3, G6e, G6, G5).
# Google Cloud: cloud.google.com/compute/docs/accelerator-optimized-machines (A4, A3, A2, G2).
# Azure: learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ (ND H200 v5, ND H100 v5,
# ND MI300X v5, ND A100 v4, NDm A100 v4, NC A100 v4, NCv3, NDv2).
def _sizes(prefix: str, gpu: str, counts: dict[str, int]) -> dict[str, tuple[int, str]]:
    return {f"{prefix}{size}": (n, gpu) for size, n in counts.items()}


_G_FAMILY = {".xlarge": 1, ".2xlarge": 1, ".4xlarge": 1, ".8xlarge": 1, ".16xlarge": 1, ".12xlarge": 4,
             ".24xlarge": 4, ".48xlarge": 8}
INSTANCE_TYPES: dict[str, tuple[int, str]] = {
    "p6-b200.48xlarge": (8, "b200"), "p5en.48xlarge": (8, "h200"), "p5e.48xlarge": (8, "h200"),
    "p5.48xlarge": (8, "h100-sxm"), "p5.4xlarge": (1, "h100-sxm"), "p4de.24xlarge": (8, "a100-80gb"),
    "p4d.24xlarge": (8, "a100-40gb"), "p3dn.24xlarge": (8, "v100-32gb"), "p3.16xlarge": (8, "v100-16gb"),
    "p3.8xlarge": (4, "v100-16gb"), "p3.2xlarge": (1, "v100-16gb"),
    **_sizes("g6e", "l40s", _G_FAMILY), **_sizes("g6", "l4", _G_FAMILY), **_sizes("g5", "a10g", _G_FAMILY),
    "a4-highgpu-8g": (8, "b200"), "a3-ultragpu-8g": (8, "h200"), "a3-megagpu-8g": (8, "h100-sxm"),
    "a3-edgegpu-8g": (8, "h100-sxm"),
    **_sizes("a3-highgpu-", "h100-sxm", {"1g": 1, "2g": 2, "4g": 4, "8g": 8}),
    **_sizes("a2-ultragpu-", "a100-80gb", {"1g": 1, "2g": 2, "4g": 4, "8g": 8}),
    **_sizes("a2-highgpu-", "a100-40gb", {"1g": 1, "2g": 2, "4g": 4, "8g": 8}), "a2-megagpu-16g": (16, "a100-40gb"),
    **_sizes("g2-standard-", "l4", {"4": 1, "8": 1, "12": 1, "16": 1, "32": 1, "24": 2, "48": 4, "96": 8}),
    "standard_nd96isr_h200_v5": (8, "h200"), "standard_nd96isr_h100_v5": (8, "h100-sxm"),
    "standard_nd96isr_mi300x_v5": (8, "mi300x"), "standard_nd96amsr_a100_v4": (8, "a100-80gb"),
    "standard_nd96asr_v4": (8, "a100-40gb"), "standard_nc24ads_a100_v4": (1, "a100-pcie-80gb"),
    "standard_nc48ads_a100_v4": (2, "a100-pcie-80gb"), "standard_nc96ads_a100_v4": (4, "a100-pcie-80gb"),
    "standard_nc6s_v3": (1, "v100-16gb"), "standard_nc12s_v3": (2, "v100-16gb"), "standard_nc24s_v3": (4, "v100-16gb"),
    "standard_nd40rs_v2": (8, "v100-32gb"),
}


# Parts real manifests name that have no hardware profile yet: the label is read, and the refusal says why.
MISSING_PROFILES = {
    "a10g": "NVIDIA publishes no A10G datasheet; its tensor throughput is not in the sources read",
    "l20": "its tensor throughput is not in the sources read",
}


@dataclass(frozen=True)
class GpuLabel:
    """What one label value says: the profile (None: a part sizer has no profile for), and how it was read."""
    profile: str | None
    reading: str                    # "GKE accelerator nvidia-tesla-a100", "instance type p5.48xlarge (8 x GPU)"


def product_profile(value: str) -> str | None:
    """A device name (`NVIDIA-H100-80GB-HBM3`, `AMD_Instinct_MI325_OAM`) -> a profile id, None when none fits."""
    words = set(re.split(r"[^a-z0-9]+", value.lower()))
    for rule, profile in PRODUCT_RULES:
        if all(w in words for w in rule.split()):
            return profile
    return None


def read_label(key: str, value: str, labels: dict[str, str]) -> GpuLabel | None:
    """The GPU a node label names (`labels`: the other labels beside it); None for a key that names no GPU."""
    label = _read_label(key, value, labels)
    if label is not None and label.profile in MISSING_PROFILES:
        return GpuLabel(None, f"{label.reading}: {label.profile.upper()}, for which sizer has no profile "
                              f"({MISSING_PROFILES[label.profile]})")
    return label


def _read_label(key: str, value: str, labels: dict[str, str]) -> GpuLabel | None:
    text = str(value)
    low = text.lower()
    if key in PRODUCT_LABELS:
        mig = re.search(r"-mig-(\d+g\.\d+gb)$", low)
        if mig:                         # GPU feature discovery's single MIG strategy: every GPU sliced alike
            whole = text[:mig.start()]
            parent = product_profile(whole)
            return GpuLabel(parent and f"{parent}/mig-{mig.group(1)}", f"MIG slice {mig.group(1)} of {whole}")
        return GpuLabel(product_profile(text), text)
    if key == RAY_ACCELERATOR:
        return GpuLabel(RAY_ACCELERATORS[low] if low in RAY_ACCELERATORS else product_profile(text),
                        f"Ray accelerator_type {text}")
    if key == GKE_LABEL:
        return GpuLabel(GKE_ACCELERATORS.get(low, product_profile(text)), f"GKE accelerator {text}")
    if key == KARPENTER_LABEL:
        if low in KARPENTER_BY_MEMORY:
            memory = labels.get(KARPENTER_MEMORY)
            profile = KARPENTER_BY_MEMORY[low].get(int(memory)) if str(memory).isdigit() else None
            return GpuLabel(profile, f"Karpenter GPU {text}" + (f" with {memory} MiB" if memory else
                                                                  f" (no {KARPENTER_MEMORY} to tell its size)"))
        return GpuLabel(KARPENTER_GPUS.get(low), f"Karpenter GPU {text}")
    if key in INSTANCE_LABELS:
        found = INSTANCE_TYPES.get(low)
        if found is None:
            return GpuLabel(None, f"instance type {text} (not one sizer maps to a GPU)")
        return GpuLabel(found[1], f"instance type {text} ({found[0]} x {found[1]} per node)")
    return None


# ---- MIG -----------------------------------------------------------------------------------------

# `nvidia.com/mig-3g.40gb`: the mixed MIG strategy's resource, one per slice (NVIDIA GPU operator, "MIG support").
MIG_RESOURCE = re.compile(r"nvidia\.com/mig-(\d)g\.(\d+)gb")
