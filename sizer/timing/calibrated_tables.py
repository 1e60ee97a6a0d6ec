"""The kernel tables `sizer calibrate` writes (a device's, or a calibrated profile's own): their folder name and
their tables.yaml, in the format of sizer/timing/kernel_tables.py."""

from __future__ import annotations

from sizer import __version__ as sizer_version
from sizer.timing.kernel_tables import CALIBRATED_ENGINE, SCHEMA_VERSION


def tables_dir_name(device_id: str) -> str:
    """`<device>-sizer-engine-<sizer version>`: the kernel-table folder name of sizer/timing/kernel_tables.py."""
    return f"{device_id}-{CALIBRATED_ENGINE}-{sizer_version}"


def tables_header(gpu: str, device_name: str, kernels: str, torch_version: str, copy_bytes_per_s: float,
                  small_kernel_s: float, files: list[str], date: str) -> dict:
    """tables.yaml of tables `sizer calibrate` measured (a device's, or a profile's own): the bundled engine's
    version and kernels, the element-wise cost from the measured copy bandwidth and one small kernel's time."""
    return {"schema_version": SCHEMA_VERSION, "gpu": gpu, "device_name": device_name, "engine": CALIBRATED_ENGINE,
            "engine_version": f"{sizer_version} ({kernels} kernels, torch {torch_version})",
            "elementwise": {"memory_bandwidth_bytes_per_s": copy_bytes_per_s, "bandwidth_fraction": 1.0,
                            "latency_s": small_kernel_s},
            "provenance": {"source": "sizer calibrate", "source_version": sizer_version, "licence": "Apache-2.0",
                           "files": files, "converted": date}}
