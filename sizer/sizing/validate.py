"""`sizer validate`'s core: replay a scenario's workload through the bundled engine and the
simulator, both on the replica configuration `resolve` gives (the one `sizer simulate` runs),
and compare their latencies (see docs/engine.md)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from engine.config import EngineBuild
from simulator.config import ReplicaConfig
from simulator.engine_loop import BARE
from simulator.kv_cache import KVCacheManager
from simulator.request import Request
from simulator.run import SimulationConfig
from sizer.errors import InputError
from sizer.inputs.hardware import HOST_CPU
from sizer.inputs.scenario import Scenario, load_scenario
from sizer.sizing.resolve import Resolved, resolve
from sizer.sizing.simulate import simulation_config
from sizer.sizing.workload import workload_of
from sizer.timing.kernel_tables import HEADER_FILE, KernelTables, load_kernel_tables
from sizer.timing.profile import PROFILE_FILE, CalibratedStepTimeModel, ProfileHeader, load_profile
from sizer.timing.step_model import engine_step_model
from validation.errors import excerpt

DEFAULT_MAX_REQUESTS = 200          # requests replayed unless asked for more


@dataclass(frozen=True)
class Pricing:
    """What prices the simulator in a validation and how the engine is built to match it: a calibrated
    profile (one model) or a device's kernel tables (any model with their shapes)."""
    what: str                       # "the profile", "the kernel-table folder": as errors name it
    device_id: str                  # 'cpu' or the hardware profile id it was measured on
    device_kind: str                # 'cpu' or 'cuda'
    threads: int | None             # CPU threads it was measured with
    build: EngineBuild
    model: str | None               # the model a profile was calibrated for; None for tables


def profile_pricing(header: ProfileHeader, folder: Path) -> Pricing:
    return Pricing("the profile", header.device.id, header.device.kind, header.device.threads,
                   EngineBuild(header.kernels, header.model.tp, header.model.scale, str(folder / PROFILE_FILE)),
                   header.model.name)


def tables_pricing(tables: KernelTables) -> Pricing:
    """InputError when the tables were not measured by `sizer calibrate` (they describe another engine)."""
    engine = tables.header.bundled_engine
    if engine is None:
        raise InputError(None, "--kernel-tables", f"{excerpt(str(tables.path))} holds "
                         f"{tables.header.description}: tables of another engine, with no fit of the bundled "
                         "engine's steps; write a device's with `sizer calibrate --gpu NAME` or `--device cpu`")
    kind = "cpu" if tables.header.gpu == HOST_CPU else "cuda"
    return Pricing("the kernel-table folder", tables.header.gpu, kind, engine.threads,
                   EngineBuild(engine.kernels, 1, 1.0, str(tables.path / HEADER_FILE)), None)


def validation_config(s: Scenario, pricing: Pricing,
                      num_blocks: int | None = None) -> tuple[Resolved, SimulationConfig]:
    """The resolved scenario and the one-replica configuration both executors run; the KV pool
    is resolve's (from the memory budget) unless `num_blocks` is given. InputError when the
    bundled engine cannot run the scenario or the pricing was measured for something else."""
    r = resolve(s)
    f, d = r.file, r.deployment
    if pricing.model is not None and r.model.name != pricing.model:
        raise InputError(f, "model.name",
                         f"{excerpt(r.model.name)}, but {pricing.what} was calibrated for {excerpt(pricing.model)}")
    if pricing.device_id != r.hardware.id:
        raise InputError(f, "hardware.gpu",
                         f"{excerpt(r.hardware.id)}, but {pricing.what} was measured on {excerpt(pricing.device_id)}")
    if r.parallel.tp != 1 or r.parallel.pp != 1 or pricing.build.tp != 1:
        raise InputError(f, "deployment.tensor_parallel_size",
                         "the bundled engine validates on one device (TP 1, PP 1) only")
    if d.speculative_config is not None or d.disaggregated is not None:
        raise InputError(f, "deployment",
                         "the bundled engine runs neither speculative decoding nor disaggregated pools")
    if r.engine.preemption_mode != "recompute":
        raise InputError(f, "deployment.preemption_mode", "the bundled engine preempts by recompute only")
    # the bundled engine runs its steps back to back in one process, with no API server in front
    config = simulation_config(r, replicas=1)
    config = dataclasses.replace(config, replica=dataclasses.replace(config.replica, engine_loop=BARE))
    if num_blocks is not None:
        config = dataclasses.replace(config, replica=dataclasses.replace(config.replica, num_blocks=num_blocks))
    return r, config


def run_validation(scenario_path: Path, profile_path: Path | None, num_requests: int | None, num_blocks: int | None,
                   weights: Path | None = None, tables_path: Path | None = None):
    """The simulator, priced by a calibrated profile or by a device's kernel tables, vs the bundled engine on
    the scenario's first requests: a ValidationReport."""
    s = load_scenario(scenario_path)
    if profile_path is not None:
        profile = load_profile(profile_path)
        pricing = profile_pricing(profile.header, profile.path)
        r, config = validation_config(s, pricing, num_blocks)
        step_model = CalibratedStepTimeModel(profile)
    else:
        tables = load_kernel_tables(tables_path)
        pricing = tables_pricing(tables)
        r, config = validation_config(s, pricing, num_blocks)
        step_model = engine_step_model(r, tables)
    count = num_requests or min(s.workload.num_requests, DEFAULT_MAX_REQUESTS)
    requests = list(workload_of(s, count).requests())
    if num_blocks is not None:
        _check_num_blocks(num_blocks, config.replica, requests)
    from engine.device import cpu_device, gpu_device  # the engine (torch), lazily: only validate needs it
    from engine.validate import validate

    dev = gpu_device(r.hardware) if pricing.device_kind == "cuda" else cpu_device(pricing.threads or 1)
    return validate(r.model, pricing.build, step_model, dev, config, requests, s.workload.seed, weights,
                    r.memory.activation_bytes)


def _check_num_blocks(num_blocks: int, replica: ReplicaConfig, requests: list[Request]) -> None:
    """--num-blocks: at least the blocks the longest replayed request holds at its end, before the engine starts.
    The scheduler refuses a request that could never fit the pool (simulator/scheduler.py _too_long: its final
    blocks, the window ones too), so a smaller pool would replay a part of the workload, or none of it."""
    kv = KVCacheManager(1, replica.block_size, window_groups=replica.kv_windows)
    longest, need = kv.pool_to_serve((r.prompt_tokens + r.output_tokens for r in requests),
                                     replica.scheduler.max_model_len)
    if num_blocks < need:
        raise InputError(None, "--num-blocks", f"expected at least {need:,}: the longest of the {len(requests):,} "
                                               f"requests replayed within max_model_len has {longest:,} tokens of "
                                               f"prompt and output, {need:,} blocks of {replica.block_size}; got "
                                               f"{num_blocks:,}")
