"""Accelerator profiles: datasheet figures with their sources, from `hardware_profiles/*.yaml`;
the links between GPUs and to the host, with the one fallback for a profile that lacks a figure;
and the host CPU the bundled engine runs on (`hardware: cpu`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from hardware_profiles import LOCAL_DIR, PROFILES_DIR
from simulator.errors import excerpt
from simulator.safe_yaml import load_yaml
from sizer.errors import InputError
from sizer.inputs import preloaded

# PCIe x16, bytes per second in one direction, by generation: PCI-SIG's x16 figures are 64, 128 and
# 256 GB/s bidirectional for PCIe 4.0 (16 GT/s per lane), 5.0 (32 GT/s) and 6.0 (64 GT/s), halved here
# (https://pcisig.com/specifications, "PCI Express Base Specification" bandwidth table).
PCIE_X16_BYTES_PER_S_PER_DIRECTION = {4: 32e9, 5: 64e9, 6: 128e9}
# A profile with no PCIe generation at all is assumed to be the slowest on current accelerators.
PCIE_GEN_ASSUMED = 4
HOST_CPU = "cpu"        # `hardware: cpu`: the machine the bundled engine runs on, not a datasheet profile
# What a profile's `device.kind` may be: a discrete GPU, an Apple GPU on unified memory, or a CPU alone.
DEVICE_KINDS = ("gpu", "apple-gpu", "cpu")


@dataclass(frozen=True)
class HardwareSpec:
    id: str
    name: str
    aliases: tuple[str, ...]
    memory_bytes: int
    memory_as_printed: str
    memory_source: str
    memory_bandwidth_bytes_per_s: float
    peak_flops_per_s: dict[str, float | None]     # dense, per format
    supported_formats: tuple[str, ...]
    compute_efficiency: float                      # achievable fraction of peak FLOP/s
    compute_efficiency_source: str
    bandwidth_efficiency: float                    # achievable fraction of peak bandwidth
    bandwidth_efficiency_source: str
    interconnect_type: str
    interconnect_bytes_per_s_per_direction: float | None
    pcie_gen: int | None
    pcie_bytes_per_s_per_direction: float | None
    price_usd_per_gpu_hour: float | None
    price_rule: str
    sources: tuple[str, ...]
    has_datasheet: bool = True                     # False for the host CPU: no figures a roofline could use
    architecture: str = ""                         # e.g. "Hopper (GH100), sm_90": which kernels engines have for it
    device_kind: str = "gpu"                       # one of DEVICE_KINDS
    unified_memory_bytes: int | None = None        # unified memory (Apple, Jetson): the whole, of which the GPU
    #                                                may use memory_bytes (the working-set limit)
    memory_limit_source: str = ""                  # why memory_bytes is below the unified memory
    host_memory_bytes: int | None = None           # a discrete GPU's host: where layers not offloaded live
    host_memory_bandwidth_bytes_per_s: float | None = None
    host_source: str = ""
    tdp_w: float | None = None                     # board power
    reserved_usd_per_gpu_hour: float | None = None  # a committed (reserved) GPU-hour, where the profile quotes one
    reserved_price_rule: str = ""
    power_w: dict[str, float] | None = None        # idle_w, decode_w, prefill_w (sizer/analytic/energy.py)
    power_source: str = ""

    def peak_flops(self, fmt: str) -> float:
        """Dense peak for a compute format, falling back to bf16 when the format has no datapath."""
        value = self.peak_flops_per_s.get(fmt)
        if value:
            return float(value)
        return float(self.peak_flops_per_s["bf16"])

    def supports(self, fmt: str) -> bool:
        return fmt in self.supported_formats


def _device(data: dict, path: Path) -> dict:
    """The optional `device` and `host` sections of a local profile (hardware_profiles/local/README.md)."""
    device, host = data.get("device") or {}, data.get("host") or {}
    for name, section in (("device", device), ("host", host)):
        if not isinstance(section, dict):
            raise InputError(str(path), name, f"expected a mapping, not {excerpt(section)}")
    kind = device.get("kind", "gpu")
    if kind not in DEVICE_KINDS:
        raise InputError(str(path), "device.kind", f"expected one of {', '.join(DEVICE_KINDS)}, not {excerpt(kind)}")
    fraction = device.get("gpu_working_set_fraction", 1.0)
    if not isinstance(fraction, float | int) or not 0 < fraction <= 1:
        raise InputError(str(path), "device.gpu_working_set_fraction", f"expected a share in (0, 1], not "
                                                                       f"{excerpt(fraction)}")
    for key in ("memory_bytes", "memory_bandwidth_bytes_per_s"):
        if key in host and (not isinstance(host[key], float | int) or host[key] <= 0):
            raise InputError(str(path), f"host.{key}", f"expected a positive number, not {excerpt(host[key])}")
    total = int(data["memory"]["bytes"])
    unified = bool(device.get("unified_memory", False))
    return {"device_kind": kind, "memory_bytes": int(total * fraction),
            "unified_memory_bytes": total if unified else None,
            "memory_limit_source": str(device.get("gpu_working_set_source", "")) if fraction < 1 else "",
            "host_memory_bytes": int(host["memory_bytes"]) if "memory_bytes" in host else None,
            "host_memory_bandwidth_bytes_per_s": (float(host["memory_bandwidth_bytes_per_s"])
                                                  if "memory_bandwidth_bytes_per_s" in host else None),
            "host_source": str(host.get("source", ""))}


def _from_yaml(data: dict, path: Path) -> HardwareSpec:
    try:
        eff = data["efficiency"]
        link = data.get("interconnect") or {}
        pcie = data.get("pcie") or {}
        price = data.get("price") or {}
        return HardwareSpec(
            id=data["id"],
            name=data["name"],
            aliases=tuple(str(a).lower() for a in data.get("aliases", [])),
            memory_as_printed=str(data["memory"].get("as_printed", "")),
            memory_source=str(data["memory"].get("bytes_source", "")),
            memory_bandwidth_bytes_per_s=float(data["memory_bandwidth_bytes_per_s"]),
            peak_flops_per_s={k: (float(v) if v is not None else None)
                              for k, v in data["peak_dense_flops_per_s"].items()},
            supported_formats=tuple(data.get("supported_formats", [])),
            compute_efficiency=float(eff["compute"]),
            compute_efficiency_source=str(eff.get("compute_source", "")),
            bandwidth_efficiency=float(eff["memory_bandwidth"]),
            bandwidth_efficiency_source=str(eff.get("memory_bandwidth_source", "")),
            interconnect_type=str(link.get("type", "none")),
            interconnect_bytes_per_s_per_direction=link.get("bytes_per_s_per_direction"),
            pcie_gen=pcie.get("gen"),
            pcie_bytes_per_s_per_direction=pcie.get("bytes_per_s_per_direction"),
            price_usd_per_gpu_hour=price.get("usd_per_gpu_hour"),
            price_rule=str(price.get("rule", "")),
            sources=tuple(str(s) for s in data.get("sources", [])),
            architecture=str(data.get("architecture", "")),
            tdp_w=float(data["tdp_w"]) if data.get("tdp_w") else None,
            reserved_usd_per_gpu_hour=price.get("reserved_usd_per_gpu_hour"),
            reserved_price_rule=str(price.get("reserved_rule", "")),
            power_w={k: float(v) for k, v in (data.get("power") or {}).items() if k.endswith("_w")} or None,
            power_source=str((data.get("power") or {}).get("source", "")),
            **_device(data, path),
        )
    except InputError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(str(path), None, f"malformed hardware profile ({excerpt(exc)})") from None


@lru_cache(maxsize=1)
def all_profiles() -> dict[str, HardwareSpec]:
    profiles = {}
    for path in sorted(PROFILES_DIR.glob("*.yaml")) + sorted(LOCAL_DIR.glob("*.yaml")):
        spec = _from_yaml(load_yaml(path), path)
        profiles[spec.id] = spec
    return profiles


@lru_cache(maxsize=1)
def local_profiles() -> tuple[str, ...]:
    """The ids of the local device profiles (hardware_profiles/local/: workstation, Apple, edge, CPU), which
    llama.cpp and Ollama serve on; the rest are data-centre accelerators."""
    return tuple(_from_yaml(load_yaml(path), path).id for path in sorted(LOCAL_DIR.glob("*.yaml")))


@lru_cache(maxsize=64)
def profile_by_id(key: str) -> HardwareSpec | None:
    """The profile whose id is `key`, from its one file (each profile's file is named by its id; no alias
    shadows an id, tests/sizer/inputs/test_catalog_data.py): a plan need not read all of them."""
    for path in sorted(PROFILES_DIR.glob("*.yaml")) + sorted(LOCAL_DIR.glob("*.yaml")):
        if path.stem == key:
            spec = _from_yaml(load_yaml(path), path)
            return spec if spec.id == key else None
    return None


def load_hardware(name: str, file: str | None = None, field_path: str = "hardware.gpu") -> HardwareSpec:
    """A profile by id or alias, case-insensitive (`h100`, `h100-sxm`, `H200`)."""
    key = str(name).lower()
    profiles = preloaded.profiles()         # a sweep worker: the driver's (sizer/inputs/preloaded.py)
    if not profiles:
        named = profile_by_id(key)
        if named is not None:
            return named
        profiles = all_profiles()
    for spec in profiles.values():
        if key == spec.id or key in spec.aliases:
            return spec
    known = ", ".join(sorted(profiles))
    raise InputError(file, field_path, f"unknown GPU {excerpt(name)}; expected one of: {known}")


def host_cpu() -> HardwareSpec:
    """The host CPU (`hardware: cpu`), where the bundled engine runs for `sizer validate`: its
    memory is the machine's RAM as the OS reports it; it has no datasheet figures, so its steps
    are priced only by a calibrated profile."""
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return HardwareSpec(
        id=HOST_CPU, name="host CPU", aliases=(), memory_bytes=ram, memory_as_printed=f"{ram / 2**30:.1f} GiB",
        memory_source="physical memory as the OS reports it", memory_bandwidth_bytes_per_s=0.0, peak_flops_per_s={},
        supported_formats=(), compute_efficiency=1.0, compute_efficiency_source="", bandwidth_efficiency=1.0,
        bandwidth_efficiency_source="", interconnect_type="none", interconnect_bytes_per_s_per_direction=None,
        pcie_gen=None, pcie_bytes_per_s_per_direction=None, price_usd_per_gpu_hour=None, price_rule="", sources=(),
        has_datasheet=False)


def measured_host_cpu(matmul_flops_per_s: float, copy_bytes_per_s: float, source: str) -> HardwareSpec:
    """The host CPU with the ceilings `sizer calibrate` measured on it in place of datasheet figures (at 100%
    efficiency: they are achieved rates): what prices the parts of a step its kernel tables lack."""
    return replace(host_cpu(), memory_bandwidth_bytes_per_s=copy_bytes_per_s,
                   peak_flops_per_s={fmt: matmul_flops_per_s for fmt in ("fp32", "bf16", "fp16")},
                   compute_efficiency_source=source, bandwidth_efficiency_source=source, sources=(source,),
                   has_datasheet=True)


def scenario_hardware(name: str, file: str | None, field_path: str = "hardware.gpu") -> HardwareSpec:
    """A scenario's `hardware.gpu`: a profile by id or alias, or `cpu` for the host CPU."""
    return host_cpu() if str(name).lower() == HOST_CPU else load_hardware(name, file, field_path)


@dataclass(frozen=True)
class Link:
    """A link's bandwidth in one direction and where the figure comes from."""
    bytes_per_s_per_direction: float
    source: str
    assumed: bool          # the profile lacks the figure: a fallback stands in (the plan states it)


def host_link(hw: HardwareSpec) -> Link:
    """The GPU's link to the host (x16, one direction): the profile's figure, else PCI-SIG's for
    the profile's PCIe generation, else for PCIe Gen 4."""
    if hw.pcie_bytes_per_s_per_direction:
        return Link(float(hw.pcie_bytes_per_s_per_direction), f"PCIe Gen {hw.pcie_gen} x16 ({hw.id} profile)", False)
    gen = hw.pcie_gen if hw.pcie_gen in PCIE_X16_BYTES_PER_S_PER_DIRECTION else PCIE_GEN_ASSUMED
    why = ("the profile gives its PCIe generation but no figure" if gen == hw.pcie_gen
           else "the profile gives no PCIe figure")
    bw = PCIE_X16_BYTES_PER_S_PER_DIRECTION[gen]
    return Link(bw, f"PCIe Gen {gen} x16, {bw / 1e9:.0f} GB/s per direction per PCI-SIG ({why})", True)


def scale_up_link(hw: HardwareSpec) -> Link:
    """The link between the GPUs of one replica (collectives, KV transfer): the profile's
    interconnect, else its host link (PCIe)."""
    if hw.interconnect_bytes_per_s_per_direction:
        return Link(float(hw.interconnect_bytes_per_s_per_direction), f"{hw.interconnect_type} ({hw.id} profile)",
                    False)
    host = host_link(hw)
    return Link(host.bytes_per_s_per_direction,
                f"no interconnect figure in the {hw.id} profile ({hw.interconnect_type}); its host link: {host.source}",
                True)
