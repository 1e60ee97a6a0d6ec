"""`sizer calibrate`'s core, as sizer/sizing/validate.py is `sizer validate`'s: the bundled engine (torch, loaded
when a calibration starts: sizer/sizing/torch_engine.py) measures on this device, and what it measured is written
by sizer's step-time stage.

With a model: the engine times the model's ops and whole steps (engine/calibrate.py); they are written as a
calibrated profile (sizer/timing/profile.py) with the steps' overhead fitted (sizer/timing/overhead_fit.py),
and as kernel tables beside it (sizer/timing/profile_kernels.py). Without: a device's kernel tables for any
model (sizer/sizing/device_calibration.py). See docs/engine.md."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from engine.config import EngineConfig, engine_config
from sizer.errors import InputError
from sizer.inputs.hardware import HOST_CPU, HardwareSpec
from sizer.inputs.model_spec import ModelSpec
from sizer.sizing.device_calibration import DeviceCalibration, calibrate_device
from sizer.sizing.torch_engine import TorchEngine, torch_engine
from sizer.timing.aiconfigurator_import import write_tables
from sizer.timing.kernel_tables import KernelTables
from sizer.timing.overhead_fit import fit_overhead, step_error
from sizer.timing.profile import (
    ALLREDUCE_FILE,
    DECODE_FILE,
    PREFILL_FILE,
    SCHEMA_VERSION,
    SEQ_OPS_FILE,
    STEPS_FILE,
    TABLES_ONLY,
    TOKEN_OPS_FILE,
    Achieved,
    CalibratedStepTimeModel,
    DecodePoint,
    DeviceInfo,
    Limits,
    ModelInfo,
    ProfileHeader,
    Versions,
    load_profile,
    profile_dir_name,
    write_header,
    write_table,
)
from sizer.timing.profile_kernels import KERNELS_SUBDIR, kernel_tables_from_profile

# Largest step covered: (max_num_batched_tokens, max_num_seqs, max_model_len) by device kind.
DEFAULT_LIMITS = {"cuda": (2048, 256, 8192), "cpu": (256, 64, 2048)}


@dataclass(frozen=True)
class Target:
    """Where to calibrate (checked before any measurement)."""
    hardware: HardwareSpec | None       # the GPU's profile; None: the host CPU
    kernels: str                        # auto, triton or torch
    tp: int                             # devices the all-reduce is timed across

    @property
    def device_id(self) -> str:
        return self.hardware.id if self.hardware else HOST_CPU


@dataclass(frozen=True)
class StepBounds:
    """The largest step asked for; None: the device kind's default (DEFAULT_LIMITS)."""
    max_num_batched_tokens: int | None
    max_num_seqs: int | None
    max_model_len: int | None
    block_size: int

    def limits(self, kind: str, max_position: int | None) -> Limits:
        d_tokens, d_seqs, d_len = DEFAULT_LIMITS[kind]
        tokens = self.max_num_batched_tokens
        length = min(self.max_model_len or d_len, max_position or d_len)
        return Limits(tokens or d_tokens, min(self.max_num_seqs or d_seqs, tokens or d_tokens), length,
                      self.block_size)


def _device(eng: TorchEngine, target: Target) -> Any:
    """The engine's device (engine.device.Device): the GPU named, checked present, or the host CPU."""
    return eng.device.gpu_device(target.hardware) if target.hardware else eng.device.cpu_device()


def _allreduce_rows(eng: TorchEngine, target: Target, dev: Any, hidden_size: int,
                    limits: Limits) -> list[dict] | None:
    """The all-reduce timed across `--tp` devices, for messages up to the largest step's hidden state."""
    if target.tp == 1:
        return None
    gpus = eng.torch.cuda.device_count()
    if dev.kind == "cuda" and gpus < target.tp:
        raise InputError(None, "--tp", f"timing the all-reduce of TP {target.tp} needs {target.tp} GPUs; "
                                       f"{gpus} present")
    max_bytes = limits.max_num_batched_tokens * hidden_size * dev.dtype.itemsize
    return eng.collectives.allreduce_table(target.tp, dev.kind, dev.dtype, max_bytes)


def calibrate_profile(spec: ModelSpec, target: Target, scale: float, out: Path, bounds: StepBounds, seed: int,
                      log: Callable[[str], None] = lambda _: None) -> Path:
    """Measure `spec`'s shard on the target device, write its profile folder into `out` and the same
    measurements as kernel tables in its `kernels/`; the profile folder."""
    cfg = engine_config(spec, target.tp, scale, fields=("--tp", "--scale"))
    eng = torch_engine()
    dev = _device(eng, target)
    limits = bounds.limits(dev.kind, spec.max_position_embeddings)
    allreduce = _allreduce_rows(eng, target, dev, cfg.hidden_size, limits)
    req = eng.calibrate.CalibrationRequest(cfg, dev, eng.kernels.select(target.kernels), limits, target.hardware,
                                           scale, seed)
    folder = write_profile(eng.calibrate.calibrate(req, log=log, allreduce_rows=allreduce), cfg, target.device_id,
                           scale, limits, out)
    header, rows = kernel_tables_from_profile(load_profile(folder), spec)
    write_tables(folder / KERNELS_SUBDIR, header, rows)
    return folder


def write_profile(m: Any, cfg: EngineConfig, device_id: str, scale: float, limits: Limits, out: Path) -> Path:
    """The profile folder of a measurement (engine.calibrate.ProfileMeasurement): its tables, the header with the
    overhead fitted to the measured whole steps, and those steps (steps.csv); its path."""
    folder = out / profile_dir_name(device_id, cfg.name, cfg.tp)
    folder.mkdir(parents=True, exist_ok=True)
    write_table(folder / TOKEN_OPS_FILE, m.token_ops)
    write_table(folder / SEQ_OPS_FILE, m.seq_ops)
    write_table(folder / DECODE_FILE, m.decode_attention)
    write_table(folder / PREFILL_FILE, m.prefill_attention)
    if m.allreduce:
        write_table(folder / ALLREDUCE_FILE, m.allreduce)
    header = _header(m, cfg, device_id, scale, limits)
    write_header(folder, header)                    # the tables alone, read back to price the steps
    profile = load_profile(folder)
    components = [CalibratedStepTimeModel(profile).step_time(r.batch) for r in m.steps]
    fit = fit_overhead(m.steps, components)
    fitted = replace(header, overhead=fit)
    error = step_error(m.steps, CalibratedStepTimeModel(replace(profile, header=fitted)))
    write_table(folder / STEPS_FILE, [{"num_seqs": r.batch.num_seqs, "new_tokens": r.batch.new_tokens,
                                       "context_tokens": r.batch.context_tokens,
                                       "attention_pairs": r.batch.attention_pairs,
                                       "prefill_seqs": r.batch.prefill_seqs, "prefill_tokens": r.batch.prefill_tokens,
                                       "measured_s": r.duration_s, "forward_s": r.forward_s, "tables_s": c}
                                      for r, c in zip(m.steps, components, strict=True)])
    write_header(folder, replace(fitted, overhead=replace(fit, step_error_p50=error)))
    return folder


def _header(m: Any, cfg: EngineConfig, device_id: str, scale: float, limits: Limits) -> ProfileHeader:
    """profile.yaml before the overhead fit (the tables alone)."""
    achieved = {**m.achieved, "decode_attention_at": DecodePoint(**m.achieved["decode_attention_at"])}
    return ProfileHeader(
        schema_version=SCHEMA_VERSION,
        device=DeviceInfo(kind=m.device_kind, id=device_id, name=m.device_name, threads=m.threads),
        versions=Versions(**m.versions),
        date=dt.date.today().isoformat(),
        dtype=m.dtype,
        dtype_bytes=m.dtype_bytes,
        kernels=m.kernels,
        model=ModelInfo(name=cfg.name, tp=cfg.tp, hidden_size=cfg.hidden_size, engine_num_layers=cfg.num_layers,
                        model_num_layers=cfg.model_num_layers, scale=scale,
                        note=None if cfg.num_layers == cfg.model_num_layers else
                        f"measured on {cfg.num_layers} of {cfg.model_num_layers} layers (--scale {scale})"),
        limits=limits,
        calls_per_step=m.calls_per_step,
        per_layer_ops=m.per_layer_ops,
        allreduce_calls_per_layer=m.allreduce_calls_per_layer,
        overhead=TABLES_ONLY,
        achieved=Achieved(**achieved),
    )


def calibrate_device_tables(models: list[ModelSpec], reference: ModelSpec, target: Target, out: Path,
                            bounds: StepBounds, seed: int, tp_sizes: tuple[int, ...],
                            log: Callable[[str], None] = lambda _: None) -> KernelTables:
    """A device's kernel tables for the shapes of `models` at the tensor-parallel sizes `tp_sizes`, the engine's
    overhead fitted on `reference`'s whole steps; the tables as written."""
    engine_config(reference, fields=("--shapes-of", "--scale"))   # the engine runs it: its steps fit the overhead
    eng = torch_engine()
    dev = _device(eng, target)
    limits = bounds.limits(dev.kind, reference.max_position_embeddings)
    allreduce = _allreduce_rows(eng, target, dev, max(m.hidden_size for m in models), limits)
    calibration = DeviceCalibration(tuple(models), reference, dev, target.device_id, target.hardware,
                                    eng.kernels.select(target.kernels), limits, tuple(allreduce or ()), target.tp, seed,
                                    tp_sizes)
    return calibrate_device(eng, calibration, out, log=log)
