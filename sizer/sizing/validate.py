"""`sizer validate`'s core: replay a scenario's workload through the bundled engine and the
simulator, both on the replica configuration `resolve` gives (the one `sizer simulate` runs),
and compare their latencies (see docs/engine.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from engine.profile import ProfileHeader, load_profile
from simulator.engine_loop import BARE
from simulator.errors import excerpt
from simulator.run import SimulationConfig
from sizer.errors import InputError
from sizer.inputs.scenario import Scenario, load_scenario
from sizer.sizing.resolve import Resolved, resolve
from sizer.sizing.simulate import simulation_config
from sizer.sizing.workload import workload_of

DEFAULT_MAX_REQUESTS = 200          # requests replayed unless asked for more


def validation_config(s: Scenario, profile_header: ProfileHeader,
                      num_blocks: int | None = None) -> tuple[Resolved, SimulationConfig]:
    """The resolved scenario and the one-replica configuration both executors run; the KV pool
    is resolve's (from the memory budget) unless `num_blocks` is given. InputError when the
    bundled engine cannot run the scenario or the profile was measured for something else."""
    r = resolve(s)
    f, d, measured, device = s.file, s.deployment, profile_header.model, profile_header.device
    if r.model.name != measured.name:
        raise InputError(f, "model.name",
                         f"{excerpt(r.model.name)}, but the profile was calibrated for {excerpt(measured.name)}")
    if device.id != r.hardware.id:
        raise InputError(f, "hardware.gpu",
                         f"{excerpt(r.hardware.id)}, but the profile was measured on {excerpt(device.id)}")
    if r.parallel.tp != 1 or r.parallel.pp != 1 or measured.tp != 1:
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


def run_validation(scenario_path: Path, profile_path: Path, num_requests: int | None, num_blocks: int | None,
                   weights: Path | None = None):
    """Calibrated simulator vs bundled engine on the scenario's first requests: a ValidationReport."""
    from engine.device import cpu_device, gpu_device  # the engine (torch), lazily: only validate needs it
    from engine.validate import validate

    s = load_scenario(scenario_path)
    profile = load_profile(profile_path)
    r, config = validation_config(s, profile.header, num_blocks)
    device = profile.header.device
    dev = gpu_device(r.hardware) if device.kind == "cuda" else cpu_device(device.threads or 1)
    count = num_requests or min(s.workload.num_requests, DEFAULT_MAX_REQUESTS)
    requests = list(workload_of(s, count).requests())
    return validate(r.model, profile, dev, config, requests, s.workload.seed, weights, r.memory.activation_bytes)
