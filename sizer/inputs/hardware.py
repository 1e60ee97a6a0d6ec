"""Accelerator profiles: datasheet figures with their sources, from the user's profile folder
(`$SIZER_HOME/profiles`, searched first), `hardware_profiles/*.yaml` or a profile file named by path; a
scenario's overrides of a profile's figures (`hardware: {base: m3-max, memory_gb: 64}`); the links
between GPUs and to the host, with the one fallback for a profile that lacks a figure; and the host
CPU the bundled engine runs on (`hardware: cpu`)."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from hardware_profiles import LOCAL_DIR, PROFILES_DIR
from sizer.errors import InputError
from sizer.inputs import preloaded
from sizer.inputs.kubernetes_names import KubernetesNames, kubernetes_names
from validation.errors import FieldError, excerpt
from validation.safe_yaml import load_yaml

# PCIe x16, bytes per second in one direction, by generation: PCI-SIG's x16 figures are 64, 128 and
# 256 GB/s bidirectional for PCIe 4.0 (16 GT/s per lane), 5.0 (32 GT/s) and 6.0 (64 GT/s), halved here
# (https://pcisig.com/specifications, "PCI Express Base Specification" bandwidth table).
PCIE_X16_BYTES_PER_S_PER_DIRECTION = {4: 32e9, 5: 64e9, 6: 128e9}
# A profile with no PCIe generation at all is assumed to be the slowest on current accelerators.
PCIE_GEN_ASSUMED = 4
HOST_CPU = "cpu"        # `hardware: cpu`: the machine the bundled engine runs on, not a datasheet profile
# A profile named by path rather than id: a YAML file name (`--gpu ./my-mac.yaml`, `hardware: {gpu: my.yaml}`).
PROFILE_SUFFIXES = (".yaml", ".yml")
# What a profile's `device.kind` may be: a discrete GPU, an Apple GPU on unified memory, or a CPU alone.
DEVICE_KINDS = ("gpu", "apple-gpu", "cpu")
# The device kinds sizer plans only llama.cpp-class engines on (llama.cpp, Ollama): Metal and CPU backends.
LLAMACPP_ONLY_DEVICES = ("apple-gpu", "cpu")


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
    gpu_working_set_fraction: float = 1.0          # memory_bytes / the whole (unified) memory
    profile_file: str = ""                         # the YAML file the profile was read from ("" for the host CPU)
    overrides: str = ""                            # the scenario's hardware overrides, as the plan states them
    # Facts other stages read, each from the profile (hardware_profiles/README.md, "Adding a GPU"); a user's profile
    # without one: the default's meaning is in the README
    kubernetes: KubernetesNames | None = None      # how clusters name and schedule it (None: no label names it)
    mig: bool = False                              # NVIDIA Multi-Instance GPU slices (`<id>/mig-3g.40gb`)
    mig_slice: str = ""                            # this is one: "3g.40gb" (a process sees one slice alone)
    scale_up_domain_gpus: int | None = None        # GPUs one NVLink / Infinity Fabric domain joins (None: assumed)
    fp8_gemm_efficiency: float | None = None       # measured share of the FP8 peak (None: efficiency.compute)
    fp8_gemm_efficiency_source: str = ""
    aiconfigurator_system: str | None = None       # aiconfigurator-core's name for it (None: no tables to import)

    def peak_flops(self, fmt: str) -> float:
        """Dense peak for a compute format, falling back to bf16 when the format has no datapath."""
        value = self.peak_flops_per_s.get(fmt)
        if value:
            return float(value)
        # a 16-bit format the part lacks (bf16 on Volta) runs at its other 16-bit rate
        return float(self.peak_flops_per_s.get("bf16") or self.peak_flops_per_s["fp16"])

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
            "gpu_working_set_fraction": float(fraction),
            "host_memory_bytes": int(host["memory_bytes"]) if "memory_bytes" in host else None,
            "host_memory_bandwidth_bytes_per_s": (float(host["memory_bandwidth_bytes_per_s"])
                                                  if "memory_bandwidth_bytes_per_s" in host else None),
            "host_source": str(host.get("source", ""))}


# A profile's keys (hardware_profiles/README.md, "Fields"; `kubernetes:` is checked by kubernetes_names) and the
# compute formats a peak may be given for
PROFILE_KEYS = ("id", "name", "aliases", "vendor", "architecture", "memory", "memory_bandwidth_bytes_per_s",
                "peak_dense_flops_per_s", "supported_formats", "efficiency", "interconnect", "pcie", "tdp_w", "price",
                "sources", "confidence", "mig", "scale_up_domain_gpus", "fp8_gemm_efficiency",
                "fp8_gemm_efficiency_source", "aiconfigurator_system", "kubernetes", "device", "host", "power")
SECTION_KEYS = {"memory": ("as_printed", "bytes", "bytes_source", "options_gb"),
                "efficiency": ("compute", "compute_source", "memory_bandwidth", "memory_bandwidth_source"),
                "interconnect": ("type", "bytes_per_s_per_direction", "note"),
                "pcie": ("gen", "bytes_per_s_per_direction"),
                "price": ("usd_per_gpu_hour", "rule", "quotes", "reserved_usd_per_gpu_hour", "reserved_rule"),
                "power": ("idle_w", "decode_w", "prefill_w", "source"),
                "device": ("kind", "unified_memory", "gpu_working_set_fraction", "gpu_working_set_source"),
                "host": ("memory_bytes", "memory_bandwidth_bytes_per_s", "source")}
FORMATS = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
# (field, least, most, unit): bounds wide enough for any accelerator or host, narrow enough that a typo is caught
# (a 1 MiB to 1 PiB memory, 0.1 GB/s to 1 PB/s, a GFLOP/s to an EFLOP/s)
PROFILE_NUMBERS = (("memory.bytes", 2**20, 2**50, "bytes"),
                   ("memory_bandwidth_bytes_per_s", 1e8, 1e15, "B/s"),
                   ("interconnect.bytes_per_s_per_direction", 1e6, 1e14, "B/s"),
                   ("pcie.bytes_per_s_per_direction", 1e6, 1e13, "B/s"),
                   ("tdp_w", 1.0, 1e5, "W"), ("power.idle_w", 0.1, 1e5, "W"), ("power.decode_w", 0.1, 1e5, "W"),
                   ("power.prefill_w", 0.1, 1e5, "W"))


def _check_profile(data, path: Path) -> None:
    """What the profile's fields must be before they are read: a mapping of PROFILE_KEYS, each section's own keys,
    every figure a finite number within its bounds (PROFILE_NUMBERS, efficiencies in (0, 1], peaks by FORMATS), the
    supported formats those with a peak; one refusal naming the field."""
    file = str(path)
    if not isinstance(data, dict):
        raise InputError(file, None, f"expected a mapping of profile fields, got {excerpt(data)}")
    for key in data:
        if key not in PROFILE_KEYS:
            raise InputError(file, str(key), f"unknown profile field; expected one of {', '.join(PROFILE_KEYS)}")
    for key in ("id", "name"):
        if not (isinstance(data.get(key), str) and data[key].strip()):
            raise InputError(file, key, f"expected a name, got {excerpt(data.get(key))}")
    for section, keys in SECTION_KEYS.items():
        value = data.get(section)
        if value is not None and not isinstance(value, dict):
            raise InputError(file, section, f"expected a mapping of {', '.join(keys)}, got {excerpt(value)}")
        for key in value or {}:
            if key not in keys:
                raise InputError(file, f"{section}.{key}", f"unknown field; expected one of {', '.join(keys)}")
    for field, least, most, unit in PROFILE_NUMBERS:
        section, _, key = field.rpartition(".")
        holder = (data.get(section) or {}) if section else data
        if key in holder and (holder[key] is not None or field in ("memory.bytes", "memory_bandwidth_bytes_per_s")):
            _number(holder[key], file, field, least, most, unit)
    if "bytes" not in (data.get("memory") or {}):
        raise InputError(file, "memory.bytes", "missing: the memory's capacity in bytes")
    if "memory_bandwidth_bytes_per_s" not in data:
        raise InputError(file, "memory_bandwidth_bytes_per_s", "missing: the peak memory bandwidth in B/s")
    efficiency = data.get("efficiency") or {}
    for key in ("compute", "memory_bandwidth"):
        value = efficiency.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
            raise InputError(file, f"efficiency.{key}", f"expected a share in (0, 1], got {excerpt(value)}")
    peaks = data.get("peak_dense_flops_per_s")
    if not isinstance(peaks, dict):
        raise InputError(file, "peak_dense_flops_per_s", f"expected a mapping of format to FLOP/s, got "
                                                         f"{excerpt(peaks)}")
    for fmt, value in peaks.items():
        if fmt not in FORMATS:
            raise InputError(file, f"peak_dense_flops_per_s.{fmt}", f"unknown format; expected one of "
                                                                    f"{', '.join(FORMATS)}")
        if value is not None:
            _number(value, file, f"peak_dense_flops_per_s.{fmt}", 1e9, 1e18, "FLOP/s")
    if not (peaks.get("bf16") or peaks.get("fp16")):     # what every 16-bit GEMM falls back to (peak_flops)
        raise InputError(file, "peak_dense_flops_per_s", f"expected a bf16 or fp16 figure (FLOP/s), got "
                                                         f"{excerpt(sorted(peaks))}")
    formats, with_peak = data.get("supported_formats"), [fmt for fmt in FORMATS if peaks.get(fmt)]
    if not (isinstance(formats, list) and all(isinstance(f, str) for f in formats)
            and sorted(formats, key=str) == sorted(with_peak)):
        raise InputError(file, "supported_formats", f"expected exactly the formats whose peak_dense_flops_per_s is a "
                                                    f"number ({', '.join(with_peak)}), got {excerpt(formats)}")
    price = (data.get("price") or {}).get("usd_per_gpu_hour")
    if price is not None:
        _number(price, file, "price.usd_per_gpu_hour", 0.0, 1e4, "USD per GPU-hour")
    reserved = (data.get("price") or {}).get("reserved_usd_per_gpu_hour")
    if isinstance(reserved, int | float) and not isinstance(reserved, bool) and price is not None and reserved >= price:
        raise InputError(file, "price.reserved_usd_per_gpu_hour", f"{reserved:g} is not below the on-demand "
                                                                  f"{price:g}; expected a committed GPU-hour's price")
    power = data.get("power") or {}
    watts = [power.get(k) for k in ("idle_w", "decode_w", "prefill_w")]
    if all(w is not None for w in watts) and not watts[0] < watts[1] <= watts[2]:
        raise InputError(file, "power", f"idle {watts[0]:g} W, decode {watts[1]:g} W, prefill {watts[2]:g} W; "
                                        "expected idle < decode <= prefill")
    gen = (data.get("pcie") or {}).get("gen")
    if gen is not None and (isinstance(gen, bool) or gen not in (1, 2, 3, 4, 5, 6, 7)):
        raise InputError(file, "pcie.gen", f"expected a PCIe generation from 1 to 7 or null, got {excerpt(gen)}")


def _number(value, file: str, field: str, least: float, most: float, unit: str) -> None:
    """A finite number from `least` to `most` (a whole number of bytes)."""
    whole = unit == "bytes"
    if isinstance(value, bool) or not isinstance(value, int if whole else int | float) or not least <= value <= most:
        bounds = f"{least:,.0f} to {most:,.0f}" if whole else f"{least:g} to {most:g}"
        raise InputError(file, field, f"expected {'a whole number' if whole else 'a number'} from {bounds} {unit}, "
                                      f"got {excerpt(value)}")


def _from_yaml(data: dict, path: Path) -> HardwareSpec:
    _check_profile(data, path)
    try:
        eff = data["efficiency"]
        link = data.get("interconnect") or {}
        pcie = data.get("pcie") or {}
        price = data.get("price") or {}
        power = _power(data, path)
        return HardwareSpec(
            id=data["id"],
            name=data["name"],
            aliases=tuple(str(a).lower() for a in data.get("aliases", [])),
            memory_as_printed=str(data["memory"].get("as_printed", "")),
            memory_source=str(data["memory"].get("bytes_source", "")),
            memory_bandwidth_bytes_per_s=float(data["memory_bandwidth_bytes_per_s"]),
            peak_flops_per_s=_peak_flops(data),
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
            reserved_usd_per_gpu_hour=_reserved_price(price, path),
            reserved_price_rule=str(price.get("reserved_rule", "")),
            power_w={k: float(v) for k, v in power.items() if k.endswith("_w")} or None,
            power_source=str(power.get("source", "")),
            profile_file=str(path),
            **_device(data, path),
            **_facts(data, path),
        )
    except InputError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(str(path), None, f"malformed hardware profile ({excerpt(exc)})") from None


def _facts(data: dict, path: Path) -> dict:
    """The per-GPU facts beside the datasheet: Kubernetes names, MIG, the scale-up domain, the measured FP8 GEMM
    efficiency and aiconfigurator's system name; each optional (a bundled profile states every one, null where the
    GPU lacks it: tests/sizer/inputs/test_profile_completeness.py)."""
    mig = data.get("mig", False)
    if not isinstance(mig, bool):
        raise InputError(str(path), "mig", f"expected true or false, not {excerpt(mig)}")
    domain = data.get("scale_up_domain_gpus")
    if domain is not None and (isinstance(domain, bool) or not isinstance(domain, int) or not 0 < domain <= 1024):
        raise InputError(str(path), "scale_up_domain_gpus", f"expected a whole number of GPUs from 1 to 1024 or "
                                                            f"null, not {excerpt(domain)}")
    fp8 = data.get("fp8_gemm_efficiency")
    if fp8 is not None and (isinstance(fp8, bool) or not isinstance(fp8, int | float) or not 0 < fp8 <= 1):
        raise InputError(str(path), "fp8_gemm_efficiency", f"expected a share in (0, 1] or null, not {excerpt(fp8)}")
    source = data.get("fp8_gemm_efficiency_source", "")
    if fp8 is not None and not (isinstance(source, str) and source.strip()):
        raise InputError(str(path), "fp8_gemm_efficiency_source", "expected where the FP8 GEMM efficiency comes from")
    system = data.get("aiconfigurator_system")
    if system is not None and not (isinstance(system, str) and system.strip()):
        raise InputError(str(path), "aiconfigurator_system", f"expected a system name or null, not {excerpt(system)}")
    return {"kubernetes": kubernetes_names(data, path), "mig": mig, "scale_up_domain_gpus": domain,
            "fp8_gemm_efficiency": None if fp8 is None else float(fp8),
            "fp8_gemm_efficiency_source": str(source) if fp8 is not None else "", "aiconfigurator_system": system}


def _peak_flops(data: dict) -> dict[str, float | None]:
    """`peak_dense_flops_per_s` by format (checked by _check_profile)."""
    return {k: (float(v) if v is not None else None) for k, v in data["peak_dense_flops_per_s"].items()}


def _reserved_price(price: dict, path: Path) -> float | None:
    """`price.reserved_usd_per_gpu_hour`: a number above 0, or None when the profile quotes none."""
    value = price.get("reserved_usd_per_gpu_hour")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e4:
        raise InputError(str(path), "price.reserved_usd_per_gpu_hour",
                         f"expected USD per GPU-hour above 0 and below 10,000, got {excerpt(value)}")
    return float(value)


def _power(data: dict, path: Path) -> dict:
    """`power:` (idle_w, decode_w, prefill_w, source): a mapping, or empty when the profile has none."""
    power = data.get("power") or {}
    if not isinstance(power, dict):
        raise InputError(str(path), "power", f"expected a mapping of idle_w, decode_w, prefill_w and source, "
                                             f"got {excerpt(power)}")
    return power


def user_dir() -> Path:
    """sizer's folder for what a user adds: `$SIZER_HOME`, else `$XDG_DATA_HOME/sizer`, else
    `~/.local/share/sizer` (calibrations go to its `calibrated/`, own hardware profiles to its `profiles/`)."""
    if os.environ.get("SIZER_HOME"):
        return Path(os.environ["SIZER_HOME"])
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "sizer"


def user_profiles_dir() -> Path:
    """The user's own hardware profiles, searched before the bundled ones (a file there named like a bundled
    profile replaces it)."""
    return user_dir() / "profiles"


def profile_paths() -> tuple[Path, ...]:
    """Every profile file, the user's first (`.yaml` and `.yml`, as a profile named by path); the user's folder is
    looked up at each call (SIZER_HOME may change). An id in both spellings is left out, both files: which of the
    two is meant is not sizer's guess (`_twins`: refused where that id is asked for, a warning line elsewhere)."""
    mine = _user_paths()
    twins = _twins(mine)
    return tuple(path for path in mine if path.stem not in twins) + _bundled_paths()


def _user_paths() -> list[Path]:
    user = user_profiles_dir()
    return sorted(p for suffix in PROFILE_SUFFIXES for p in user.glob(f"*{suffix}")) if user.is_dir() else []


def _twins(mine: list[Path]) -> dict[str, InputError]:
    """id -> the refusal of its second file, for each id of the user's folder with two files."""
    by_id: dict[str, Path] = {}
    twins: dict[str, InputError] = {}
    for path in mine:
        first = by_id.setdefault(path.stem, path)
        if first != path:
            twins[path.stem] = InputError(str(path), None, f"a second profile file for id {excerpt(path.stem)} "
                                                           f"beside {excerpt(first.name)}; keep one of the two")
    return twins


@lru_cache(maxsize=1)
def _bundled_paths() -> tuple[Path, ...]:
    return tuple(sorted(PROFILES_DIR.glob("*.yaml")) + sorted(LOCAL_DIR.glob("*.yaml")))


@lru_cache(maxsize=256)
def _read_profile(path: Path) -> HardwareSpec:
    return _from_yaml(load_yaml(path), path)


# Your profiles that did not read, file -> its refusal: left out of the lookups by name (all_profiles). Nothing
# below sizer/cli/ prints: the CLI says each in a warning line when its command ends (`skipped_profiles`).
_SKIPPED: dict[str, str] = {}


def skipped_profiles() -> list[str]:
    """The refusals of your profiles a lookup left out since the last call (each said once)."""
    said = list(_SKIPPED.values())
    _SKIPPED.clear()
    return said


def all_profiles() -> dict[str, HardwareSpec]:
    """id -> profile, the user's first, a user's id shadowing a bundled one; a user's profile that does not read is
    left out with a warning line naming its file (it fails where it is asked for by id, `profile_by_id`): what
    search's and sweep's GPUs, `sizer gpus`, check's cluster names and an alias lookup read."""
    user = user_profiles_dir().resolve()
    for stem, refusal in _twins(_user_paths()).items():
        _SKIPPED[stem] = refusal.one_line()
    profiles: dict[str, HardwareSpec] = {}
    for path in profile_paths():
        try:
            spec = _read_profile(path)
        except FieldError as err:
            if path.parent.resolve() != user:
                raise                   # a bundled profile that does not read is a bug, not input
            _SKIPPED[str(path)] = err.one_line()
            continue
        profiles.setdefault(spec.id, spec)
    return profiles


@lru_cache(maxsize=1)
def local_profiles() -> tuple[str, ...]:
    """The ids of the local device profiles (hardware_profiles/local/: workstation, Apple, edge, CPU), which
    llama.cpp and Ollama serve on; the rest are data-centre accelerators."""
    return tuple(_read_profile(path).id for path in sorted(LOCAL_DIR.glob("*.yaml")))


def profile_by_id(key: str) -> HardwareSpec | None:
    """The profile whose id is `key`, from its one file (each profile's file is named by its id; no alias
    shadows an id, tests/sizer/inputs/test_catalog_data.py): a plan need not read all of them. An id of two files
    in your folder is refused."""
    twin = _twins(_user_paths()).get(key)
    if twin is not None:
        raise twin
    for path in profile_paths():
        if path.stem == key:
            spec = _read_profile(path)
            return spec if spec.id == key else None
    return None


def is_profile_path(name: str) -> bool:
    """Is this `--gpu` / `hardware.gpu` value a profile file's path rather than an id?"""
    return str(name).lower().endswith(PROFILE_SUFFIXES)


def profile_file(path: Path, file: str | None, field_path: str) -> HardwareSpec:
    """A profile YAML named by path (the user's own device, hardware_profiles/README.md has its fields)."""
    if not path.is_file():
        raise InputError(file, field_path, f"hardware profile file {excerpt(str(path))} not found")
    return _read_profile(path.resolve())


def load_hardware(name: str, file: str | None = None, field_path: str = "hardware.gpu") -> HardwareSpec:
    """A profile by id or alias, case-insensitive (`h100`, `h100-sxm`, `H200`), the user's folder first; or by the
    path of its YAML file (relative to `file`'s folder, else the working directory); `PROFILE/mig-3g.40gb` a MIG
    slice."""
    if is_profile_path(name):
        path = Path(name)
        return profile_file(path if path.is_absolute() or file is None else Path(file).parent / path, file,
                            field_path)
    key = str(name).lower()
    parent, sep, mig = key.partition("/mig-")
    if sep:
        return mig_slice(load_hardware(parent, file, field_path), mig, file, field_path)
    profiles = preloaded.profiles()         # a sweep worker: the driver's (sizer/inputs/preloaded.py)
    if not profiles:
        named = profile_by_id(key)
        if named is not None:
            return named
        profiles = all_profiles()        # one of yours that does not read: skipped
    for spec in profiles.values():
        if key == spec.id or key in spec.aliases:
            return spec
    known = ", ".join(sorted(profiles))
    raise InputError(file, field_path, f"unknown GPU {excerpt(name)}; expected one of: {known}, a .yaml profile "
                                       f"file, or one in {user_profiles_dir()}")


def is_bundled(spec: HardwareSpec) -> bool:
    """Was the profile read from sizer's own hardware_profiles/ (not the user's folder or a file they named)?"""
    return bool(spec.profile_file) and Path(spec.profile_file).resolve().is_relative_to(PROFILES_DIR)


def profile_origin(spec: HardwareSpec) -> str:
    """Where a profile came from, for the plan: its file and which folder that is, and the scenario's overrides."""
    if not spec.profile_file:
        return f"{spec.name}: measured on this machine (no profile file)"
    path = Path(spec.profile_file)
    where = ("your profile folder" if path.parent.resolve() == user_profiles_dir().resolve() else
             "bundled with sizer" if is_bundled(spec) else "a profile file named by path")
    said = f"; the scenario overrides {spec.overrides}" if spec.overrides else ""
    return f"hardware profile {spec.id}: {path} ({where}){said}"


@dataclass(frozen=True)
class HardwareOverrides:
    """A scenario's changes to its profile's figures (`hardware.memory_gb` ...); None keeps the profile's."""
    memory_gb: float | None = None                     # the whole memory as the vendor prints it
    memory_bandwidth_gb_per_s: float | None = None     # peak, decimal GB/s
    gpu_working_set_fraction: float | None = None      # unified memory: the share the GPU may use

    def any(self) -> bool:
        return any(v is not None for v in (self.memory_gb, self.memory_bandwidth_gb_per_s,
                                           self.gpu_working_set_fraction))


def printed_gb_bytes(spec: HardwareSpec) -> tuple[float, str]:
    """Bytes per GB as the profile's vendor prints its memory: the profile's byte count over its printed GB
    (Apple's and NVIDIA's "GB" of HBM and LPDDR are GiB: 2^30), else 10^9."""
    whole = spec.unified_memory_bytes or spec.memory_bytes
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*GB\s*", spec.memory_as_printed)
    if match and float(match.group(1)) > 0:
        unit = whole / float(match.group(1))
        return unit, (f"{unit:,.0f} B per printed GB, as in the {spec.id} profile "
                      f"({spec.memory_as_printed} = {whole:,} B)")
    return 1e9, f"10^9 B per GB (the {spec.id} profile prints its memory as {excerpt(spec.memory_as_printed)})"


def with_overrides(spec: HardwareSpec, o: HardwareOverrides, file: str | None) -> HardwareSpec:
    """The profile with the scenario's figures in place of its own, each stated in `overrides`."""
    if not o.any():
        return spec
    said, changes = [], {}
    if o.gpu_working_set_fraction is not None and spec.unified_memory_bytes is None:
        raise InputError(file, "hardware.gpu_working_set_fraction", f"{spec.id} has no unified memory; the share "
                                                                    "applies to Apple and Jetson devices")
    fraction = o.gpu_working_set_fraction if o.gpu_working_set_fraction is not None else spec.gpu_working_set_fraction
    whole = spec.unified_memory_bytes or spec.memory_bytes
    if o.memory_gb is not None:
        unit, why = printed_gb_bytes(spec)
        whole = int(round(o.memory_gb * unit))
        changes.update(memory_as_printed=f"{o.memory_gb:g} GB",
                       memory_source=f"hardware.memory_gb {o.memory_gb:g} x {why}")
        said.append(f"memory_gb {o.memory_gb:g} ({whole:,} B)")
    if o.memory_gb is not None or o.gpu_working_set_fraction is not None:
        changes["memory_bytes"] = int(whole * fraction)
        if spec.unified_memory_bytes is not None:
            changes.update(unified_memory_bytes=whole, gpu_working_set_fraction=fraction)
        if o.gpu_working_set_fraction is not None:
            changes["memory_limit_source"] = f"hardware.gpu_working_set_fraction {fraction:g} (scenario)"
            said.append(f"gpu_working_set_fraction {fraction:g}")
    if o.memory_bandwidth_gb_per_s is not None:
        changes["memory_bandwidth_bytes_per_s"] = o.memory_bandwidth_gb_per_s * 1e9
        said.append(f"memory_bandwidth_gb_per_s {o.memory_bandwidth_gb_per_s:g}")
    name = f"{spec.name}, {o.memory_gb:g} GB" if o.memory_gb is not None else spec.name
    return replace(spec, name=name, overrides=", ".join(said), **changes)


# NVIDIA Multi-Instance GPU: a slice `<g>g.<m>gb` has g of the part's 7 compute slices and m GB of its memory,
# with the memory slices' share of the bandwidth; slices do not talk over NVLink (NVIDIA MIG user guide,
# "Partitioning"). Which parts have MIG: each profile's `mig`.
MIG_COMPUTE_SLICES = 7


# A slice's memory slices (of the part's 8) by its compute slices: the profiles NVIDIA lists for every MIG part
# (A100 80GB and H100: 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb; H200: 1g.18gb ... 7g.141gb; MIG user
# guide, "Supported MIG Profiles"), its GB the part's nominal memory x eighths, to the nearest GB
MIG_MEMORY_EIGHTHS = {1: (1, 2), 2: (2,), 3: (4,), 4: (4,), 7: (8,)}


def other_device(gpu: str | None, scenario_gpu: str, file: str | None = None) -> bool:
    """Whether `gpu` (a flag's, a search candidate's or a sweep point's; None: unchanged) names another device than
    `scenario_gpu`, a scenario's hardware.gpu (a profile file relative to the scenario `file`): what a scenario
    states for its own device (a price, a calibrated profile, kernel tables, hardware overrides) is not another's."""
    return gpu is not None and load_hardware(gpu).id != load_hardware(scenario_gpu, file).id


def mig_slice(parent: HardwareSpec, mig: str, file: str | None, field_path: str) -> HardwareSpec:
    """The slice `mig` ("3g.40gb") of `parent`: its compute and memory shares of the whole part; no price and no
    power figures (none is published per slice)."""
    if not parent.mig:
        parts = ", ".join(sorted(spec.id for spec in all_profiles().values() if spec.mig))
        raise InputError(file, field_path, f"no MIG slice {excerpt(mig)} of {parent.name}: it has no MIG; parts "
                                           f"with MIG: {parts}")
    nominal_gb = _nominal_gb(parent)
    slices = {f"{g}g.{math.floor(e * nominal_gb / 8 + 0.5)}gb": (g, e)
              for g, eighths in MIG_MEMORY_EIGHTHS.items() for e in eighths}
    if mig not in slices:
        raise InputError(file, field_path, f"no MIG slice {excerpt(mig)} of {parent.name}; expected one of "
                                           f"{', '.join(slices)}")
    (g, e), gb = slices[mig], mig.split(".")[1].removesuffix("gb")
    compute, memory = g / MIG_COMPUTE_SLICES, e / 8
    return replace(parent, id=f"{parent.id}/mig-{mig}", name=f"{parent.name} MIG {mig}", aliases=(),
                   memory_bytes=int(parent.memory_bytes * memory), memory_as_printed=f"{gb} GB",
                   memory_source=f"{parent.memory_source}; x {e}/8 memory slices for the MIG slice",
                   memory_bandwidth_bytes_per_s=parent.memory_bandwidth_bytes_per_s * memory,
                   peak_flops_per_s={k: v * compute if v else v for k, v in parent.peak_flops_per_s.items()},
                   interconnect_type="none", interconnect_bytes_per_s_per_direction=None,
                   price_usd_per_gpu_hour=None, price_rule="a MIG slice has no listed price",
                   reserved_usd_per_gpu_hour=None, reserved_price_rule="",
                   # NVIDIA publishes no power per slice: the board's figures are not the slice's (energy unknown)
                   tdp_w=None, power_w=None, power_source="",
                   # a slice is no whole GPU: no node label, instance, measured table or domain names it
                   kubernetes=None, mig=False, mig_slice=mig, scale_up_domain_gpus=None, fp8_gemm_efficiency=None,
                   fp8_gemm_efficiency_source="", aiconfigurator_system=None)


def _nominal_gb(spec: HardwareSpec) -> float:
    """The part's memory as the vendor prints it ("80 GB": what MIG slices are named by), else its bytes in GB."""
    printed = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*GB\s*", spec.memory_as_printed or "")
    return float(printed.group(1)) if printed else spec.memory_bytes / 1e9


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


def scenario_hardware(name: str, file: str | None, field_path: str = "hardware.gpu",
                      overrides: HardwareOverrides = HardwareOverrides()) -> HardwareSpec:
    """A scenario's `hardware.gpu`: a profile by id, alias or file, or `cpu` for the host CPU; with its overrides."""
    if str(name).lower() == HOST_CPU:
        if overrides.any():
            raise InputError(file, "hardware", "the host CPU (gpu: cpu) is measured, not described: no overrides")
        return host_cpu()
    return with_overrides(load_hardware(name, file, field_path), overrides, file)


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


# GPUs one scale-up (NVLink, Infinity Fabric) domain joins where a profile gives no `scale_up_domain_gpus`: 8, as
# on HGX and OAM boards
SCALE_UP_DOMAIN_DEFAULT = 8
# Across domains: one 400 Gb/s NIC per GPU (InfiniBand NDR or RoCE; ConnectX-7 as in DGX H100/H200 and HGX B200),
# 50 GB/s per direction
SCALE_OUT_BYTES_PER_S_PER_DIRECTION = 50e9


def alltoall_link(hw: HardwareSpec, gpus: int) -> Link:
    """The link an all-to-all across `gpus` GPUs is bound by: the scale-up link within one domain, else each GPU's
    scale-out NIC (most of its peers then sit in other domains)."""
    domain = hw.scale_up_domain_gpus or SCALE_UP_DOMAIN_DEFAULT
    if gpus <= domain:
        return scale_up_link(hw)
    return Link(SCALE_OUT_BYTES_PER_S_PER_DIRECTION, f"{gpus} GPUs span {hw.id} scale-up domains of {domain}: a "
                f"400 Gb/s NIC per GPU (InfiniBand NDR / RoCE), {SCALE_OUT_BYTES_PER_S_PER_DIRECTION / 1e9:.0f} GB/s "
                "per direction (assumption)", True)
