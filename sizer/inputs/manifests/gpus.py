"""The GPU a pod runs on, from wherever a cluster puts it: node labels (selectors, affinity,
tolerations), cloud instance types, MIG resource names. What names a GPU sizer has a profile for is
that profile's `kubernetes:` section (sizer/inputs/kubernetes_names.py; its sources in
hardware_profiles/README.md), read from every profile into one table per kind of name, a user's claim
shadowing a bundled one (NameTables); the tables below hold
only the parts clusters name that have no profile (the caller then asks for --gpu), with their sources.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from sizer.inputs.hardware import all_profiles, profile_paths

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
# Cloud Run's GPU node selector (a Knative Service's template, cloud.google.com/run/docs/configuring/services/gpu):
# GKE's accelerator names ("nvidia-l4", "nvidia-rtx-pro-6000")
CLOUD_RUN_LABEL = "run.googleapis.com/accelerator"
KARPENTER_LABEL = "karpenter.k8s.aws/instance-gpu-name"
KARPENTER_MEMORY = "karpenter.k8s.aws/instance-gpu-memory"      # MiB per GPU
# The node's machine type: Kubernetes' well-known label (EKS, GKE, AKS set it), its deprecated beta
# spelling, and GPU feature discovery's `nvidia.com/gpu.machine` (the instance type on clouds).
INSTANCE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type", "nvidia.com/gpu.machine")
# Ray's `accelerator_type` (ray python/ray/util/accelerators/accelerators.py): "H100", "L4", "A10G",
# "A100-40G", "A100-80G"; a bare "A100" or "V100" does not say which memory size.
RAY_ACCELERATOR = "ray accelerator_type"
GPU_LABELS = PRODUCT_LABELS + (GKE_LABEL, CLOUD_RUN_LABEL, KARPENTER_LABEL) + INSTANCE_LABELS + (RAY_ACCELERATOR,)

# ---- parts clusters name that have no profile ----------------------------------------------------
#
# Each maps what names the part to a reason, or to None where the name alone says why (a variant of a profiled
# part: H200 NVL, H100 NVL, A100 PCIe 40GB, V100 PCIe; a bare name that does not say its memory). A profile that
# names the same words, GKE type, Karpenter name, Ray type or instance type takes it over (adding its YAML is all).
NO_PROFILE_PRODUCTS = {"gh200": None, "h200 nvl": None, "h100 nvl": None, "a100 pcie 40gb": None,
                       # CoreWeave's A100_NVLINK_80GB says its memory; a bare A100_NVLINK does not: refused (naming
                       # --gpu), not guessed
                       "a100 nvlink": None, "v100 pcie": None,
                       "l20": "its tensor throughput is not in the sources read",
                       "a10g": "NVIDIA publishes no A10G datasheet; its tensor throughput is not in the sources read"}
# GKE's `cloud.google.com/gke-accelerator` values (cloud.google.com/kubernetes-engine/docs/how-to/gpus,
# "Available GPU models"; cloud.google.com/compute/docs/gpus)
NO_PROFILE_GKE = ("nvidia-tesla-t4", "nvidia-tesla-p100", "nvidia-tesla-p4", "nvidia-rtx-pro-6000")
# Karpenter's `karpenter.k8s.aws/instance-gpu-name`: EC2's GpuInfo name, lower case (aws/karpenter-provider-aws,
# pkg/providers/instancetype)
NO_PROFILE_KARPENTER = {"t4": None, "t4g": None, "a10g": NO_PROFILE_PRODUCTS["a10g"]}
NO_PROFILE_RAY = ("a100", "v100")
# AWS G5 (A10G): aws.amazon.com/ec2/instance-types/g5
NO_PROFILE_INSTANCES = {f"g5{size}": (n, "a10g") for size, n in (
    (".xlarge", 1), (".2xlarge", 1), (".4xlarge", 1), (".8xlarge", 1), (".16xlarge", 1), (".12xlarge", 4),
    (".24xlarge", 4), (".48xlarge", 8))}


@dataclass(frozen=True)
class GpuLabel:
    """What one label value says: the profile (None: a part sizer has no profile for), and how it was read."""
    profile: str | None
    reading: str                    # "GKE accelerator nvidia-tesla-a100", "instance type p5.48xlarge (8 x GPU)"


@dataclass(frozen=True)
class NameTables:
    """Every profile's Kubernetes names, one table per kind of name, each name once: a user's profile claims a name
    before a bundled one does (the rule all_profiles applies to ids), so a user's copy of a bundled profile under a
    new id takes over every name the copy keeps, alike for every kind."""
    product: dict[frozenset, str]                    # a device name's words -> profile id
    gke: dict[str, str]                              # GKE accelerator type -> profile id
    karpenter: dict[tuple[str, int | None], str]     # (Karpenter GPU name, MiB per GPU or None) -> profile id
    ray: dict[str, str]                              # Ray accelerator_type -> profile id
    instance: dict[str, tuple[str, int]]             # instance type -> (profile id, GPUs per instance)


def _names() -> NameTables:
    """The name tables, built once per set of profile files (the user's folder is looked up at each call)."""
    return _tables(profile_paths())


@lru_cache(maxsize=4)
def _tables(paths: tuple) -> NameTables:
    del paths                           # the cache key: the profile files all_profiles reads
    tables = NameTables({}, {}, {}, {}, {})
    for spec in all_profiles().values():
        k = spec.kubernetes
        if k is None:
            continue
        for words in k.product_names:
            tables.product.setdefault(frozenset(words.split()), spec.id)
        for value in k.gke_accelerators:
            tables.gke.setdefault(value, spec.id)
        if k.karpenter_gpu:
            tables.karpenter.setdefault((k.karpenter_gpu, k.karpenter_memory_mib), spec.id)
        for value in k.ray_accelerator_types:
            tables.ray.setdefault(value, spec.id)
        for name, n in k.instance_types:
            tables.instance.setdefault(name, (spec.id, n))
    return tables


def _missing(part: str, reason: str | None) -> str:
    return f": {part.upper()}, for which sizer has no profile" + (f" ({reason})" if reason else "")


def _product(value: str, names: NameTables) -> tuple[str | None, str]:
    """(profile, why none) for a device name: the rule with the most words that all occur wins; a tie between
    parts, or with a part that has no profile, is refused rather than guessed."""
    words = set(re.split(r"[^a-z0-9]+", value.lower()))
    rules = list(names.product.items()) + [(frozenset(w.split()), None) for w in NO_PROFILE_PRODUCTS
                                           if frozenset(w.split()) not in names.product]
    fits = [(rule, profile) for rule, profile in rules if rule <= words]
    if not fits:
        return None, ""
    most = max(len(rule) for rule, _ in fits)
    best = {profile for rule, profile in fits if len(rule) == most}
    if len(best) > 1:
        return None, ""
    (profile,) = best
    if profile is None:
        reasons = [(rule, NO_PROFILE_PRODUCTS[rule]) for rule in NO_PROFILE_PRODUCTS
                   if len(rule.split()) == most and set(rule.split()) <= words and NO_PROFILE_PRODUCTS[rule]]
        return None, _missing(*reasons[0]) if reasons else ""
    return profile, ""


def _gke(value: str, names: NameTables) -> tuple[str | None, str]:
    """(profile, why none) for a GKE accelerator type, else a device name."""
    low = value.lower()
    if low in names.gke:
        return names.gke[low], ""
    return (None, "") if low in NO_PROFILE_GKE else _product(value, names)


def read_label(key: str, value: str, labels: dict[str, str]) -> GpuLabel | None:
    """The GPU a node label names (`labels`: the other labels beside it); None for a key that names no GPU."""
    text = str(value)
    low = text.lower()
    names = _names()
    if key in PRODUCT_LABELS:
        mig = re.search(r"-mig-(\d+g\.\d+gb)$", low)
        if mig:                         # GPU feature discovery's single MIG strategy: every GPU sliced alike
            whole = text[:mig.start()]
            parent = _product(whole, names)[0]
            return GpuLabel(parent and f"{parent}/mig-{mig.group(1)}", f"MIG slice {mig.group(1)} of {whole}")
        profile, why = _product(text, names)
        return GpuLabel(profile, text + why)
    if key == RAY_ACCELERATOR:
        if low in names.ray:
            return GpuLabel(names.ray[low], f"Ray accelerator_type {text}")
        if low in NO_PROFILE_RAY:
            return GpuLabel(None, f"Ray accelerator_type {text}")
        profile, why = _product(text, names)
        return GpuLabel(profile, f"Ray accelerator_type {text}{why}")
    if key in (GKE_LABEL, CLOUD_RUN_LABEL):
        profile, why = _gke(text, names)
        return GpuLabel(profile, f"{'GKE' if key == GKE_LABEL else 'Cloud Run'} accelerator {text}{why}")
    if key == KARPENTER_LABEL:
        found = [(profile, mib) for (name, mib), profile in names.karpenter.items() if name == low]
        if any(mib is not None for _, mib in found):      # parts that share the name, told apart by their memory
            memory = labels.get(KARPENTER_MEMORY)
            by_memory = {mib: profile for profile, mib in found}
            profile = by_memory.get(int(memory)) if str(memory).isdigit() else None
            return GpuLabel(profile, f"Karpenter GPU {text}" + (f" with {memory} MiB" if memory else
                                                                  f" (no {KARPENTER_MEMORY} to tell its size)"))
        if found:
            return GpuLabel(found[0][0], f"Karpenter GPU {text}")
        reason = NO_PROFILE_KARPENTER.get(low)
        return GpuLabel(None, f"Karpenter GPU {text}" + (_missing(low, reason) if reason else ""))
    if key in INSTANCE_LABELS:
        if low in names.instance:
            profile, n = names.instance[low]
            return GpuLabel(profile, f"instance type {text} ({n} x {profile} per node)")
        if low in NO_PROFILE_INSTANCES:
            n, part = NO_PROFILE_INSTANCES[low]
            return GpuLabel(None, f"instance type {text} ({n} x {part} per node)"
                                  f"{_missing(part, NO_PROFILE_PRODUCTS[part])}")
        return GpuLabel(None, f"instance type {text} (not one sizer maps to a GPU)")
    return None


# ---- MIG -----------------------------------------------------------------------------------------

# `nvidia.com/mig-3g.40gb`: the mixed MIG strategy's resource, one per slice (NVIDIA GPU operator, "MIG support").
MIG_RESOURCE = re.compile(r"nvidia\.com/mig-(\d)g\.(\d+)gb")
