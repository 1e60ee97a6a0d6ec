"""The one place `sizer calibrate` loads the torch engine (engine/: torch and Triton): `torch_engine()`, called when a
calibration starts, after the command checked that torch and triton are installed (sizer/cli/flags.py
`check_engine`). The calibration modules (sizer/sizing/calibrate.py, device_calibration.py) reach the engine only
through what it returns, so importing them, and every other command, loads none of it."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class TorchEngine:
    """The engine's modules a calibration drives."""
    torch: ModuleType
    calibrate: ModuleType          # engine.calibrate: CalibrationRequest, calibrate, step_sweep
    collectives: ModuleType        # engine.collectives: allreduce_table
    device: ModuleType             # engine.device: cpu_device, gpu_device
    device_tables: ModuleType      # engine.device_tables: a device's operators timed by shape
    kernels: ModuleType            # engine.kernels: select
    model: ModuleType              # engine.model: Transformer


def torch_engine() -> TorchEngine:
    """The engine's modules, imported here (torch takes seconds to import)."""
    import torch

    from engine import calibrate, collectives, device, device_tables, kernels, model

    return TorchEngine(torch, calibrate, collectives, device, device_tables, kernels, model)
