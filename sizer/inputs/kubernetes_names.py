"""How a cluster names and schedules one GPU: a hardware profile's `kubernetes:` section
(hardware_profiles/README.md). `--emit k8s` and `--emit gke` write its `schedule` (device-plugin resource,
node label, GPUs per node); `sizer check` reads every name in it back to the profile (node product labels,
GKE's accelerator types, Karpenter's GPU names, Ray's accelerator types, cloud instance types). A profile
with no section (`kubernetes: null`, or a user's profile without one) is a GPU no cluster label names:
check asks for --gpu and emit refuses, naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sizer.errors import InputError
from validation.errors import excerpt

FIELDS = ("schedule", "product_names", "gke_accelerators", "karpenter_gpu", "ray_accelerator_types",
          "instance_types")
SCHEDULE_FIELDS = ("resource", "node_label", "gpus_per_node")


@dataclass(frozen=True)
class Schedule:
    """What `--emit k8s` writes: the device plugin's resource, a node label naming the GPU, and the GPUs one node
    holds (the node-size assumption behind a single-node Deployment)."""
    resource: str                   # "nvidia.com/gpu", "amd.com/gpu"
    label_key: str                  # "nvidia.com/gpu.product"
    label_value: str                # "NVIDIA-H100-80GB-HBM3"
    gpus_per_node: int


@dataclass(frozen=True)
class KubernetesNames:
    schedule: Schedule | None                    # None: --emit k8s is not offered for this GPU
    product_names: tuple[str, ...]               # words of a device name that mean this part ("h100 pcie")
    gke_accelerators: tuple[str, ...]            # GKE's accelerator types; the first is what --emit gke selects
    karpenter_gpu: str | None                    # Karpenter's instance-gpu-name
    karpenter_memory_mib: int | None             # ... and its instance-gpu-memory, where parts share the name
    ray_accelerator_types: tuple[str, ...]       # Ray accelerator_type values the product names do not cover
    instance_types: tuple[tuple[str, int], ...]  # cloud instance type (lower case) -> GPUs per instance


def _strings(value, path: Path, field: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise InputError(str(path), field, f"expected a list of names, not {excerpt(value)}")
    return tuple(v.lower() for v in value)


def _name(value, path: Path, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(str(path), field, f"expected a name, not {excerpt(value)}")
    return value.lower()


def _count(value, path: Path, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 1024:
        raise InputError(str(path), field, f"expected a whole number of GPUs from 1 to 1024, not {excerpt(value)}")
    return value


def _mapping(value, path: Path, field: str, keys: tuple[str, ...]) -> dict:
    if not isinstance(value, dict):
        raise InputError(str(path), field, f"expected a mapping of {', '.join(keys)}, not {excerpt(value)}")
    unknown = sorted(str(k) for k in value if k not in keys)
    if unknown:
        raise InputError(str(path), f"{field}.{unknown[0]}", f"unknown key; expected one of {', '.join(keys)}")
    return value


def _schedule(value, path: Path) -> Schedule | None:
    if value is None:
        return None
    field = "kubernetes.schedule"
    s = _mapping(value, path, field, SCHEDULE_FIELDS)
    label = _mapping(s.get("node_label"), path, f"{field}.node_label", ("key", "value"))
    texts = {"resource": s.get("resource"), "node_label.key": label.get("key"), "node_label.value": label.get("value")}
    for name, text in texts.items():
        _name(text, path, f"{field}.{name}")
    return Schedule(s["resource"], label["key"], label["value"],
                    _count(s.get("gpus_per_node"), path, f"{field}.gpus_per_node"))


def kubernetes_names(data: dict, path: Path) -> KubernetesNames | None:
    """The profile's `kubernetes:` section; None when it has none (null or absent). Keys absent inside it name
    nothing (a bundled profile states each: tests/sizer/inputs/test_profile_completeness.py)."""
    section = data.get("kubernetes")
    if section is None:
        return None
    k = _mapping(section, path, "kubernetes", FIELDS)
    karpenter = k.get("karpenter_gpu")
    name = memory = None
    if karpenter is not None:
        karpenter = _mapping(karpenter, path, "kubernetes.karpenter_gpu", ("name", "memory_mib"))
        name = _name(karpenter.get("name"), path, "kubernetes.karpenter_gpu.name")
        memory = karpenter.get("memory_mib")
        if memory is not None and (isinstance(memory, bool) or not isinstance(memory, int) or memory <= 0):
            raise InputError(str(path), "kubernetes.karpenter_gpu.memory_mib",
                             f"expected MiB per GPU (a whole number above 0) or null, not {excerpt(memory)}")
    instances = k.get("instance_types") or {}
    if not isinstance(instances, dict):
        raise InputError(str(path), "kubernetes.instance_types", f"expected a mapping of instance type to GPUs, "
                                                                 f"not {excerpt(instances)}")
    for t in instances:                 # YAML reads `null:` or `8:` as a key that is not a name
        if not isinstance(t, str) or not t.strip():
            raise InputError(str(path), "kubernetes.instance_types", f"expected instance type names as keys, "
                                                                     f"not {excerpt(t)}")
    return KubernetesNames(
        schedule=_schedule(k.get("schedule"), path),
        product_names=_strings(k.get("product_names", []), path, "kubernetes.product_names"),
        gke_accelerators=_strings(k.get("gke_accelerators", []), path, "kubernetes.gke_accelerators"),
        karpenter_gpu=name, karpenter_memory_mib=memory,
        ray_accelerator_types=_strings(k.get("ray_accelerator_types", []), path, "kubernetes.ray_accelerator_types"),
        instance_types=tuple((t.lower(), _count(n, path, f"kubernetes.instance_types.{t}"))
                             for t, n in instances.items()))
