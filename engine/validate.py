"""`sizer validate`: one workload through the real engine and through the simulator, compared.

Both executors get the same requests (arrivals, lengths, prompt content) and the same
replica configuration (scheduler settings and block pool, as sizer resolves them); the
simulator prices steps with a calibrated profile, or with a device's kernel tables and the
engine's fitted overhead. The pool is the caller's, capped by what the device holds now (the
report says when it is).
The report is TTFT, ITL and E2E at p50/p95/p99 and output throughput: measured, predicted,
and the relative error (predicted - measured) / measured. It parts the two sources of that error: the
engine's own steps (the batches as it ran them) priced by the step model against their measured times
(the pricing's error), and every row again predicted with each step priced at the engine's measured
speed (what the scheduler model and the pricing's shape get wrong, whatever the device's speed was that minute).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from engine.config import EngineBuild, EngineConfig, ModelShape, engine_config
from engine.device import Device
from engine.kernels import select
from engine.kv_cache import PagedKVCache
from engine.model import Transformer
from engine.runner import EngineRunner, RunResult
from engine.weights import load_weights
from simulator import (
    Request,
    SimulationConfig,
    SimulationResult,
    StepBatch,
    StepTimeModel,
    simulate,
    summarise,
    weighted_percentiles,
)
from simulator.kv_cache import KVCacheManager
from validation.errors import FieldError

PERCENTILES = (50, 95, 99)
# KV cache a CPU run may take: a host's RAM is no pool size (the caller's budget from it would
# be tens of GiB, every page touched up front); 256 MiB holds 8,192 blocks of the tiny model.
CPU_KV_BYTES = 256 << 20


@dataclass(frozen=True)
class Metrics:
    """Latencies in ms at PERCENTILES, and output tokens per second over the run."""

    ttft_ms: tuple[float, ...]
    itl_ms: tuple[float, ...]
    e2e_ms: tuple[float, ...]
    output_tokens_per_s: float


def relative_error(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured if measured else float("nan")


@dataclass(frozen=True)
class Row:
    metric: str
    measured: float
    predicted: float
    at_engine_speed: float          # predicted with every step priced at the engine's measured speed (StepReplay)

    @property
    def relative_error(self) -> float:
        return relative_error(self.predicted, self.measured)

    @property
    def at_engine_speed_error(self) -> float:
        return relative_error(self.at_engine_speed, self.measured)


@dataclass(frozen=True)
class StepReplay:
    """The engine's own steps, each batch as it ran, priced by the simulator's step model: the pricing's error
    apart from the scheduler's (the latency rows hold both, and queueing magnifies the pricing's share)."""
    steps: int
    measured_s: float               # the steps' summed time on the device clock, host work between them included
    predicted_s: float              # the step model's price of the same batches

    @property
    def relative_error(self) -> float:
        return relative_error(self.predicted_s, self.measured_s)

    @property
    def engine_speed(self) -> float:
        """Measured over priced: the factor on every step's price that makes the replayed steps' sum the engine's
        (1 when nothing was priced: no step to scale)."""
        return self.measured_s / self.predicted_s if self.predicted_s else 1.0


class AtSpeed:
    """A step model's prices times `factor` (the engine's measured speed against the model's)."""

    def __init__(self, model: StepTimeModel, factor: float):
        self.name, self._model, self._factor = f"{model.name} x {factor:.3f}", model, factor

    def step_time(self, batch: StepBatch) -> float:
        return self._model.step_time(batch) * self._factor


@dataclass(frozen=True)
class ValidationReport:
    device: str
    model: str
    profile: str
    num_requests: int
    num_blocks: int                 # the pool both runs used
    num_blocks_requested: int       # the caller's (sizer's memory budget, or --num-blocks)
    num_blocks_limit: str           # why fewer were used; "" when none were cut
    rows: list[Row]
    replay: StepReplay
    out_of_range_steps: int
    steps_predicted: int
    engine_time_s: float
    cached_prompt_tokens: int
    preemptions: int
    mixed_steps: int

    def to_dict(self) -> dict:
        return {"device": self.device, "model": self.model, "profile": self.profile,
                "num_requests": self.num_requests, "num_blocks": self.num_blocks,
                "num_blocks_requested": self.num_blocks_requested, "num_blocks_limit": self.num_blocks_limit,
                "engine_time_s": self.engine_time_s,
                "out_of_range_steps": self.out_of_range_steps, "steps_predicted": self.steps_predicted,
                "cached_prompt_tokens": self.cached_prompt_tokens, "preemptions": self.preemptions,
                "mixed_steps": self.mixed_steps,
                "replay": {"steps": self.replay.steps, "measured_s": self.replay.measured_s,
                           "predicted_s": self.replay.predicted_s, "relative_error": self.replay.relative_error},
                "rows": [{"metric": r.metric, "measured": r.measured, "predicted": r.predicted,
                          "relative_error": r.relative_error, "at_engine_speed": r.at_engine_speed,
                          "at_engine_speed_error": r.at_engine_speed_error} for r in self.rows]}


def _pct(values_ms: np.ndarray) -> tuple[float, ...]:
    """p50/p95/p99 as the simulator reads them (inverted CDF, simulator/metrics.py)."""
    return tuple(weighted_percentiles(values_ms, np.ones(len(values_ms)), tuple(float(p) for p in PERCENTILES)))


def engine_metrics(run: RunResult) -> Metrics:
    """From the engine's own per-token times; ITL is every gap between consecutive tokens."""
    done = [r for r in run.requests if r.first_token_s >= 0]
    ttft = np.array([r.first_token_s - r.arrival_s for r in done]) * 1e3
    e2e = np.array([r.finished_s - r.arrival_s for r in done]) * 1e3
    itl = np.concatenate([np.diff(run.token_times_s[r.request_id]) for r in done] or [np.empty(0)]) * 1e3
    tokens = sum(len(run.token_times_s[r.request_id]) for r in done)
    span = max(r.finished_s for r in done) - min(r.arrival_s for r in done)
    return Metrics(_pct(ttft), _pct(itl), _pct(e2e), tokens / span)


def simulator_metrics(result: SimulationResult) -> Metrics:
    """The simulator's own summary (its ITL: step lengths weighted by the sequences whose
    token they produced one step after the last, plus the longer gaps)."""
    m = summarise(result)
    return Metrics(*((lat.p50_ms, lat.p95_ms, lat.p99_ms) for lat in (m.ttft, m.itl, m.e2e)), m.output_tokens_per_s)


def compare(measured: Metrics, predicted: Metrics, at_speed: Metrics) -> list[Row]:
    rows = []
    for name in ("ttft", "itl", "e2e"):
        for p, m, q, a in zip(PERCENTILES, *(getattr(x, f"{name}_ms") for x in (measured, predicted, at_speed)),
                              strict=True):
            rows.append(Row(f"{name}_p{p}_ms", m, q, a))
    rows.append(Row("output_tokens_per_s", measured.output_tokens_per_s, predicted.output_tokens_per_s,
                    at_speed.output_tokens_per_s))
    return rows


def replay_steps(run: RunResult, step_model: StepTimeModel) -> StepReplay:
    return StepReplay(len(run.steps), sum(s.duration_s for s in run.steps),
                      sum(step_model.step_time(s.batch) for s in run.steps))


def device_block_limit(cfg: EngineConfig, device: Device, block_size: int, reserve_bytes: float) -> tuple[int, str]:
    """KV blocks the device holds now (call after the weights are on it), and the rule: the
    free GPU memory less `reserve_bytes` for the forward pass, or CPU_KV_BYTES on a CPU."""
    per_block = PagedKVCache.bytes_per_block(cfg.num_layers, block_size, cfg.num_kv_heads, cfg.head_dim, device.dtype)
    if device.kind == "cuda":
        free = torch.cuda.mem_get_info()[0]
        return (max(1, int((free - reserve_bytes) // per_block)),
                f"free device memory {free / 2**30:.1f} GiB less {reserve_bytes / 2**30:.1f} GiB for the forward pass")
    return CPU_KV_BYTES // per_block, f"the engine's CPU allowance of {CPU_KV_BYTES / 2**20:.0f} MiB"


def validate(spec: ModelShape, build: EngineBuild, step_model: StepTimeModel, device: Device,
             config: SimulationConfig, requests: list[Request], seed: int, weights: Path | None,
             reserve_bytes: float) -> ValidationReport:
    """Run `requests` through the engine and the simulator, both as `config` says (one replica,
    its scheduler and block pool; `scheduler.max_model_len` set); compare their latencies.

    `step_model` prices the simulator's steps (a calibrated profile's, or a device's kernel tables
    with the engine's fitted overhead) and counts `steps` and `out_of_range_steps`. The pool is
    capped by `device_block_limit` (`reserve_bytes`: what the forward pass needs beside it on a
    GPU); `weights` is a local safetensors checkpoint (random weights without).
    """
    if config.num_replicas != 1 or config.disaggregation is not None:
        raise ValueError("the bundled engine runs one replica")
    cfg = engine_config(spec, build.tp, build.scale, build.source, ("model.tp", "model.scale"))
    kernels = select(build.kernels)
    model = Transformer(cfg, device.dtype, device.torch_device, kernels, config.replica.scheduler.max_model_len, seed)
    if weights is not None:
        load_weights(model, weights)
    requested = config.replica.num_blocks
    limit, rule = device_block_limit(cfg, device, config.replica.block_size, reserve_bytes)
    replica = dataclasses.replace(config.replica, num_blocks=min(requested, limit))
    kv = KVCacheManager(1, replica.block_size, window_groups=replica.kv_windows)
    longest, need = kv.pool_to_serve((r.prompt_tokens + r.output_tokens for r in requests),
                                     replica.scheduler.max_model_len)
    if not longest:
        raise FieldError(None, "max_model_len", f"every request replayed is longer than its "
                                                f"{replica.scheduler.max_model_len:,} tokens: nothing to compare")
    if replica.num_blocks < need:        # the scheduler would refuse that request (or all of them): nothing to compare
        why = f"capped by {rule}" if limit < requested else "as requested"
        raise FieldError(None, "device", f"the pool holds {replica.num_blocks:,} KV blocks of {replica.block_size} "
                                         f"({why}); the longest request replayed ({longest:,} tokens) needs "
                                         f"{need:,}: replay shorter requests or a smaller model")
    runner = EngineRunner(model, device, replica)
    runner.warm_up()
    run = runner.run(copy.deepcopy(requests))

    config = dataclasses.replace(config, replica=replica)
    sim = simulate(config, step_model, copy.deepcopy(requests), seed)
    out_of_range, predicted = step_model.out_of_range_steps, step_model.steps     # the simulation's, not the replay's
    replay = replay_steps(run, step_model)
    at_speed = simulate(config, AtSpeed(step_model, replay.engine_speed), copy.deepcopy(requests), seed)

    return ValidationReport(
        device=device.name, model=spec.name, profile=str(Path(build.source).parent), num_requests=len(requests),
        num_blocks=replica.num_blocks, num_blocks_requested=requested,
        num_blocks_limit=f"capped by {rule}" if limit < requested else "",
        rows=compare(engine_metrics(run), simulator_metrics(sim), simulator_metrics(at_speed)), replay=replay,
        out_of_range_steps=out_of_range, steps_predicted=predicted,
        engine_time_s=run.duration_s,
        cached_prompt_tokens=sum(r.num_cached_prompt_tokens for r in run.requests),
        preemptions=sum(r.num_preemptions for r in run.requests),
        mixed_steps=sum(1 for s in run.steps if s.batch.prefill_seqs and s.batch.num_seqs > s.batch.prefill_seqs),
    )
