"""`sizer validate`: one workload through the real engine and through the simulator, compared.

Both executors get the same requests (arrivals, lengths, prompt content) and the same
scheduler settings and block pool; the simulator prices steps with the calibrated profile.
The report is TTFT, ITL and E2E at p50/p95/p99 and output throughput: measured, predicted,
and the relative error (predicted - measured) / measured.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from engine.config import EngineConfig, ModelShape, engine_config
from engine.device import Device
from engine.kernels import select
from engine.kv_cache import PagedKVCache
from engine.model import Transformer
from engine.runner import EngineRunner, RunResult
from engine.weights import load_weights
from simulator.metrics import summarise, weighted_percentiles
from simulator.records import SimulationResult
from simulator.replica import ReplicaConfig
from simulator.request import Request
from simulator.run import SimulationConfig, simulate
from simulator.scheduler import SchedulerConfig
from engine.profile import CalibratedStepTimeModel, CalibrationProfile

PERCENTILES = (50, 95, 99)
CPU_KV_BYTES = 2 << 30          # KV cache a CPU run may take
GPU_KV_SHARE = 0.5              # share of the GPU memory left free after the weights


@dataclass(frozen=True)
class Metrics:
    """Latencies in ms at PERCENTILES, and output tokens per second over the run."""

    ttft_ms: tuple[float, ...]
    itl_ms: tuple[float, ...]
    e2e_ms: tuple[float, ...]
    output_tokens_per_s: float


@dataclass(frozen=True)
class Row:
    metric: str
    measured: float
    predicted: float

    @property
    def relative_error(self) -> float:
        return (self.predicted - self.measured) / self.measured if self.measured else float("nan")


@dataclass(frozen=True)
class ValidationReport:
    device: str
    model: str
    profile: str
    num_requests: int
    num_blocks: int
    rows: list[Row]
    out_of_range_steps: int
    steps_predicted: int
    engine_time_s: float
    cached_prompt_tokens: int
    preemptions: int
    mixed_steps: int

    def to_dict(self) -> dict:
        return {"device": self.device, "model": self.model, "profile": self.profile,
                "num_requests": self.num_requests, "num_blocks": self.num_blocks, "engine_time_s": self.engine_time_s,
                "out_of_range_steps": self.out_of_range_steps, "steps_predicted": self.steps_predicted,
                "cached_prompt_tokens": self.cached_prompt_tokens, "preemptions": self.preemptions,
                "mixed_steps": self.mixed_steps,
                "rows": [{"metric": r.metric, "measured": r.measured, "predicted": r.predicted,
                          "relative_error": r.relative_error} for r in self.rows]}


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


def compare(measured: Metrics, predicted: Metrics) -> list[Row]:
    rows = []
    for name in ("ttft", "itl", "e2e"):
        for p, m, q in zip(PERCENTILES, getattr(measured, f"{name}_ms"), getattr(predicted, f"{name}_ms")):
            rows.append(Row(f"{name}_p{p}_ms", m, q))
    rows.append(Row("output_tokens_per_s", measured.output_tokens_per_s, predicted.output_tokens_per_s))
    return rows


def default_num_blocks(cfg: EngineConfig, device: Device, scheduler: SchedulerConfig, block_size: int) -> int:
    """Room for max_num_seqs sequences at max_model_len, capped by the memory at hand
    (call after the weights are on the device)."""
    per_block = PagedKVCache.bytes_per_block(cfg.num_layers, block_size, cfg.num_kv_heads, cfg.head_dim, device.dtype)
    want = scheduler.max_num_seqs * -(-(scheduler.max_model_len or 0) // block_size)
    if device.kind == "cuda":
        budget = torch.cuda.mem_get_info()[0] * GPU_KV_SHARE
    else:
        budget = CPU_KV_BYTES
    return max(1, min(want, int(budget // per_block)))


def validate(spec: ModelShape, profile: CalibrationProfile, device: Device, scheduler: SchedulerConfig,
             num_blocks: int | None, block_size: int, enable_prefix_caching: bool, requests: list[Request],
             seed: int = 0, weights: Path | None = None) -> ValidationReport:
    """Run `requests` through the engine and the simulator; compare their latencies.

    `scheduler.max_model_len` must be set; `num_blocks` None sizes the pool by
    `default_num_blocks`; `weights` is a local safetensors checkpoint (random weights without).
    """
    header = profile.header
    cfg = engine_config(spec, tp=header.model.tp, scale=header.model.scale)
    kernels = select(header.kernels)
    model = Transformer(cfg, device.dtype, device.torch_device, kernels, scheduler.max_model_len, seed)
    if weights is not None:
        load_weights(model, weights)
    num_blocks = num_blocks or default_num_blocks(cfg, device, scheduler, block_size)
    runner = EngineRunner(model, device, scheduler, num_blocks, block_size, enable_prefix_caching)
    runner.warm_up()
    run = runner.run(copy.deepcopy(requests))

    step_model = CalibratedStepTimeModel(profile)
    replica = ReplicaConfig(scheduler, num_blocks, block_size, enable_prefix_caching)
    sim = simulate(SimulationConfig(replica), step_model, copy.deepcopy(requests), seed)

    return ValidationReport(
        device=device.name, model=spec.name, profile=str(profile.path), num_requests=len(requests),
        num_blocks=num_blocks, rows=compare(engine_metrics(run), simulator_metrics(sim)),
        out_of_range_steps=step_model.out_of_range_steps, steps_predicted=step_model.steps,
        engine_time_s=run.duration_s,
        cached_prompt_tokens=sum(r.num_cached_prompt_tokens for r in run.requests),
        preemptions=sum(r.num_preemptions for r in run.requests),
        mixed_steps=sum(1 for s in run.steps if s.batch.prefill_seqs and s.batch.num_seqs > s.batch.prefill_seqs),
    )
