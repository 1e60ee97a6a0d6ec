"""Accelerator profiles: datasheet figures with their sources, from `hardware_profiles/*.yaml`."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from hardware_profiles import PROFILES_DIR
from sizer.errors import InputError

# libyaml's loader reads the ~20 profiles about 5x faster than the pure-Python one (every command pays it).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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
    pcie_bytes_per_s_per_direction: float | None
    price_usd_per_gpu_hour: float | None
    price_rule: str
    sources: tuple[str, ...]

    def peak_flops(self, fmt: str) -> float:
        """Dense peak for a compute format, falling back to bf16 when the format has no datapath."""
        value = self.peak_flops_per_s.get(fmt)
        if value:
            return float(value)
        return float(self.peak_flops_per_s["bf16"])

    def supports(self, fmt: str) -> bool:
        return fmt in self.supported_formats


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
            memory_bytes=int(data["memory"]["bytes"]),
            memory_as_printed=str(data["memory"].get("as_printed", "")),
            memory_source=str(data["memory"].get("bytes_source", "")),
            memory_bandwidth_bytes_per_s=float(data["memory_bandwidth_bytes_per_s"]),
            peak_flops_per_s={k: (float(v) if v is not None else None) for k, v in data["peak_dense_flops_per_s"].items()},
            supported_formats=tuple(data.get("supported_formats", [])),
            compute_efficiency=float(eff["compute"]),
            compute_efficiency_source=str(eff.get("compute_source", "")),
            bandwidth_efficiency=float(eff["memory_bandwidth"]),
            bandwidth_efficiency_source=str(eff.get("memory_bandwidth_source", "")),
            interconnect_type=str(link.get("type", "none")),
            interconnect_bytes_per_s_per_direction=link.get("bytes_per_s_per_direction"),
            pcie_bytes_per_s_per_direction=pcie.get("bytes_per_s_per_direction"),
            price_usd_per_gpu_hour=price.get("usd_per_gpu_hour"),
            price_rule=str(price.get("rule", "")),
            sources=tuple(str(s) for s in data.get("sources", [])),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(str(path), None, f"malformed hardware profile ({exc!r})") from None


@lru_cache(maxsize=1)
def all_profiles() -> dict[str, HardwareSpec]:
    profiles = {}
    for path in sorted(PROFILES_DIR.glob("*.yaml")):
        spec = _from_yaml(yaml.load(path.read_text(), Loader=_LOADER), path)
        profiles[spec.id] = spec
    return profiles


def load_hardware(name: str, file: str | None = None, field_path: str = "hardware.gpu") -> HardwareSpec:
    """A profile by id or alias, case-insensitive (`h100`, `h100-sxm`, `H200`)."""
    key = str(name).lower()
    for spec in all_profiles().values():
        if key == spec.id or key in spec.aliases:
            return spec
    known = ", ".join(sorted(all_profiles()))
    raise InputError(file, field_path, f"unknown GPU {name!r}; expected one of: {known}")
