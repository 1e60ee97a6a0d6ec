"""`sizer calibrate`: microbenchmark the engine on this device and write a calibrated profile.

The profile folder (format: engine/profile.py) holds the kernel tables, the fixed
per-step overhead and what was achieved against the device's ceilings. The overhead is
fitted, not guessed: a few waves of requests run through the real runner, and the part of
each whole step that the kernel tables do not explain (scheduling, batch layout, launches,
the host loop) is fitted as fixed + per-sequence seconds.
"""

from __future__ import annotations

import csv
import datetime as dt
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
import yaml

from engine import microbench as mb
from engine import profile as pc
from engine.config import EngineConfig
from engine.device import Device, GPUProfile, versions
from engine.kernels import Kernels
from engine.kv_cache import PagedKVCache
from engine.model import Transformer
from engine.runner import EngineRunner, StepRecord
from simulator import BARE, ReplicaConfig, Request, SchedulerConfig

ROTATE_LAYERS = 4     # weights cycled by the token-op benchmarks


@dataclass(frozen=True)
class CalibrationRequest:
    cfg: EngineConfig
    device: Device
    kernels: Kernels
    limits: pc.Limits
    device_id: str                     # 'cpu' or the hardware profile id ('h200')
    hardware: GPUProfile | None = None
    scale: float = 1.0
    seed: int = 0


def profile_dir_name(device_id: str, model: str, tp: int) -> str:
    return f"{device_id}-{model}-tp{tp}"


def _write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({k: (f"{v:.9g}" if isinstance(v, float) else v) for k, v in r.items()} for r in rows)


def calls_per_step(cfg: EngineConfig, ops: list[str]) -> dict[str, int]:
    """How many times a step calls each token op, for the layers the engine runs."""
    layers, moe = cfg.num_layers, cfg.num_moe_layers
    per_op = {"embed": 1, "rmsnorm": 2 * layers + 1, "qkv": layers, "rope_kv": layers, "o": layers,
              "gate_up": layers - moe, "act": layers - moe, "down": layers - moe, "moe": moe}
    return {op: per_op[op] for op in ops}


SWEEP_WAVES = (1, 2, 3, 4, 6, 8, 16, 64, 128)   # requests at once in the whole-step sweep (up to max_num_seqs);
# the small waves give the fit the small batches a trickle of traffic runs (Poisson arrivals)
MIN_DECODE_STEPS_FOR_FIT = 20       # decode-only steps needed for their own overhead line
SWEEP_OUTPUT_TOKENS = (8, 48)


def _sweep_requests(count: int, longest: int, rng: random.Random, first_id: int) -> list[Request]:
    """A wave of `count` requests at t=0: prompts of longest/16 .. longest tokens (the long
    ones chunked), short outputs, half sharing one of two prefixes so that cache hits shape
    some steps."""
    prefixes = [tuple(rng.randrange(1 << 30) for _ in range(longest // 4)) for _ in range(2)]
    return [Request(first_id + i, 0.0, rng.randint(max(1, longest // 16), longest), rng.randint(*SWEEP_OUTPUT_TOKENS),
                    prefix_segments=prefixes[i % 2] if i % 4 < 2 else ())
            for i in range(count)]


def step_sweep(model: Transformer, device: Device, limits: pc.Limits, seed: int) -> list[StepRecord]:
    """Whole steps timed by the runner, over waves of 1, 4, 16, ... requests."""
    rng = random.Random(seed)
    longest = max(8, min(limits.max_model_len // 2, 4 * limits.max_num_batched_tokens, 2048))
    # the settings the profile's steps are measured under: chunked prefill, recompute, no drafts
    config = SchedulerConfig(max_num_seqs=limits.max_num_seqs, max_num_batched_tokens=limits.max_num_batched_tokens,
                             enable_chunked_prefill=True, preemption_mode="recompute", speculative=None,
                             max_model_len=limits.max_model_len, prefill_only=False, reserve_full_kv=False)
    records: list[StepRecord] = []
    first_id = 0
    for count in sorted({min(w, limits.max_num_seqs) for w in SWEEP_WAVES}):
        blocks = count * -(-(longest + SWEEP_OUTPUT_TOKENS[1]) // limits.block_size) + 1    # no preemption
        replica = ReplicaConfig(config, blocks, limits.block_size, enable_prefix_caching=True, tenant_isolation=False,
                                swap=None, engine_loop=BARE)
        runner = EngineRunner(model, device, replica)
        runner.warm_up()
        records += runner.run(_sweep_requests(count, longest, rng, first_id)).steps[1:]   # step 1 waits on set-up
        first_id += count
    return records


def fit_overhead(records: list[StepRecord], tables_s: list[float]) -> pc.Overhead:
    """Split each measured step into the host's work and the forward pass, and fit both.

    Host (scheduling, batch layout, bookkeeping): `host_fixed + per_seq x sequences`.
    Forward: `forward_fixed + kernel_factor x tables`, where `kernel_factor` says how much
    slower the kernels run inside a whole step than alone (caches) and `forward_fixed` is
    the Python between them (views, splits, concatenations the tables do not time); the
    forward fit weighs relative error, so short decode steps count as much as long prefills.
    Both are least squares refitted without steps more than 3 sigma off (a shared machine's
    hiccups; sigma from the median deviation, at least 20 us for the host and 1% for the
    forward pass); a negative slope is pinned to 0 and the intercept refitted.
    The model's fixed overhead is host_fixed + forward_fixed; `step_error_p50` is left to
    the caller (it needs the fitted profile).
    """
    seqs = np.array([r.batch.num_seqs for r in records], dtype=float)
    forward = np.array([r.forward_s for r in records])
    host = np.array([r.duration_s for r in records]) - forward
    host_fixed, per_seq, host_kept = _robust_line(seqs, host, np.ones_like(host), floor=20e-6)
    tables = np.array(tables_s)
    forward_fixed, factor, forward_kept = _robust_line(tables, forward, 1.0 / forward, floor=0.01)
    kept = host_kept & forward_kept
    fit = pc.Overhead(fixed_s=host_fixed + forward_fixed, per_seq_s=per_seq, kernel_factor=factor,
                      host_fixed_s=host_fixed, forward_fixed_s=forward_fixed,
                      fit_steps=int(kept.sum()), dropped_steps=int((~kept).sum()))
    # Decode-only steps get their own forward line when the sweep has enough of them: their
    # kernels run on a few rows each, and the mixed steps' fit misprices them by 10-25% on a CPU.
    decode = np.array([r.batch.prefill_seqs == 0 for r in records])
    if decode.sum() >= MIN_DECODE_STEPS_FOR_FIT:
        d_fixed, d_factor, _ = _robust_line(tables[decode], forward[decode], 1.0 / forward[decode], floor=0.01)
        fit = replace(fit, decode_fixed_s=host_fixed + d_fixed, decode_kernel_factor=d_factor)
    return fit


def _robust_line(x: np.ndarray, y: np.ndarray, weight: np.ndarray, floor: float) -> tuple[float, float, np.ndarray]:
    """(intercept >= 0, slope >= 0, kept) of y ~ intercept + slope x by weighted least
    squares, refitted twice without points whose weighted residual is more than 3 sigma off
    (sigma estimated as 1.4826 x the median absolute deviation, at least `floor`)."""
    keep = np.ones(len(x), dtype=bool)
    for _ in range(3):
        w = weight[keep]
        a, b = np.linalg.lstsq(np.stack([w, x[keep] * w], axis=1), y[keep] * w, rcond=None)[0]
        if b < 0:
            a, b = float(np.median(y[keep])), 0.0
        if a < 0:
            a, b = 0.0, float(np.sum(x[keep] * y[keep] * w * w) / np.sum((x[keep] * w) ** 2))
        err = (y - (a + b * x)) * weight
        center = np.median(err[keep])
        sigma = max(1.4826 * float(np.median(np.abs(err[keep] - center))), floor)
        keep = np.abs(err - center) <= 3 * sigma
    return float(a), float(b), keep


def _achieved(cfg: EngineConfig, device: Device, tokens: list[dict], decode: list[dict], ceilings: dict,
              hardware: GPUProfile | None) -> pc.Achieved:
    """Achieved rates on the engine's own ops against the measured ceilings and the datasheet."""
    elem = device.dtype.itemsize
    h, q = cfg.hidden_size, cfg.num_heads * cfg.head_dim
    weights = h * cfg.qkv_size + q * h
    ops = ["qkv_s", "o_s"]
    if "gate_up_s" in tokens[0]:
        weights += 3 * h * cfg.intermediate_size
        ops += ["gate_up_s", "down_s"]
    first, last = tokens[0], tokens[-1]
    gemm_flops = 2 * last["tokens"] * weights / sum(last[o] for o in ops)
    stream_bytes = weights * elem / sum(first[o] for o in ops)      # first row: one token
    big = max(decode, key=lambda r: (r["seqs"] * (r["context_tokens"] + 1), r["seqs"]))
    kv_bytes = big["seqs"] * (big["context_tokens"] + 1) * cfg.num_kv_heads * cfg.head_dim * 2 * elem
    kv_rate, copy, matmul = kv_bytes / big["time_s"], ceilings["copy_bytes_per_s"], ceilings["matmul_flops_per_s"]
    out = pc.Achieved(
        gemm_flops_per_s=gemm_flops, gemm_at_tokens=last["tokens"], weight_stream_bytes_per_s=stream_bytes,
        decode_attention_bytes_per_s=kv_rate,
        decode_attention_at=pc.DecodePoint(seqs=big["seqs"], context_tokens=big["context_tokens"]),
        copy_bytes_per_s=copy, matmul_flops_per_s=matmul,
        decode_attention_fraction_of_copy=kv_rate / copy, gemm_fraction_of_measured_matmul=gemm_flops / matmul,
    )
    if hardware is not None:
        peak = hardware.peak_flops("bf16" if device.dtype == torch.bfloat16 else "fp32")
        bw = hardware.memory_bandwidth_bytes_per_s
        out = replace(out, peak_source=f"hardware_profiles/{hardware.id}.yaml", peak_flops_per_s=peak,
                      peak_bandwidth_bytes_per_s=bw, compute_fraction_of_peak=gemm_flops / peak,
                      bandwidth_fraction_of_peak=stream_bytes / bw, decode_attention_fraction_of_peak=kv_rate / bw,
                      copy_fraction_of_peak=copy / bw)
    return out


def _header(req: CalibrationRequest, tokens: list[dict], decode: list[dict], ceilings: dict) -> pc.ProfileHeader:
    """profile.yaml before the overhead fit (the tables alone)."""
    cfg, dev = req.cfg, req.device
    ops = [k[:-2] for k in tokens[0] if k.endswith("_s")]
    return pc.ProfileHeader(
        schema_version=pc.SCHEMA_VERSION,
        device=pc.DeviceInfo(kind=dev.kind, id=req.device_id, name=dev.name,
                             threads=torch.get_num_threads() if dev.kind == "cpu" else None),
        versions=versions(),
        date=dt.date.today().isoformat(),
        dtype=str(dev.dtype).removeprefix("torch."),
        dtype_bytes=dev.dtype.itemsize,
        kernels=req.kernels.name,
        model=pc.ModelInfo(name=cfg.name, tp=cfg.tp, hidden_size=cfg.hidden_size, engine_num_layers=cfg.num_layers,
                           model_num_layers=cfg.model_num_layers, scale=req.scale,
                           note=None if cfg.num_layers == cfg.model_num_layers else
                           f"measured on {cfg.num_layers} of {cfg.model_num_layers} layers (--scale {req.scale})"),
        limits=req.limits,
        calls_per_step=calls_per_step(cfg, ops),
        per_layer_ops=tuple(op for op in ops if op != "embed"),
        allreduce_calls_per_layer=2 if cfg.tp > 1 else 0,
        overhead=pc.TABLES_ONLY,
        achieved=_achieved(cfg, dev, tokens, decode, ceilings, req.hardware),
    )


def _write_header(folder: Path, header: pc.ProfileHeader) -> None:
    (folder / pc.PROFILE_FILE).write_text(yaml.safe_dump(header.to_dict(), sort_keys=False))


def calibrate(req: CalibrationRequest, out_dir: Path, log: Callable[[str], None] = lambda _: None,
              allreduce_rows: list[dict] | None = None) -> Path:
    """Measure everything, write the profile folder, and return its path."""
    cfg, dev, lim = req.cfg, req.device, req.limits
    torch.manual_seed(req.seed)
    bench_cfg = replace(cfg, num_layers=min(cfg.num_layers, ROTATE_LAYERS))
    bench_model = Transformer(bench_cfg, dev.dtype, dev.torch_device, req.kernels, lim.max_model_len, req.seed)
    kv = PagedKVCache(bench_cfg.num_layers, -(-lim.max_num_batched_tokens // lim.block_size) + 1, lim.block_size,
                      cfg.num_kv_heads, cfg.head_dim, dev.dtype, dev.torch_device)
    log("token ops (GEMMs, norms, RoPE, activation) by tokens")
    tokens = mb.token_ops(bench_model, kv, dev, mb.token_grid(lim.max_num_batched_tokens))
    log("lm_head and sampling by sequences")
    seqs = mb.seq_ops(bench_model, dev, mb.seq_grid(lim.max_num_seqs))
    log("decode attention by (sequences, context)")
    decode = mb.decode_attention(cfg, req.kernels, dev, mb.seq_grid(lim.max_num_seqs),
                                 mb.context_grid(lim.max_model_len), lim.block_size)
    log("prefill attention by (chunk, context)")
    prefill = mb.prefill_attention(cfg, req.kernels, dev, mb.chunk_grid(lim.max_num_batched_tokens),
                                   mb.context_grid(lim.max_model_len), lim.block_size)
    log("copy bandwidth and matrix rate")
    ceilings = mb.ceilings(dev)
    del bench_model, kv

    folder = out_dir / profile_dir_name(req.device_id, cfg.name, cfg.tp)
    folder.mkdir(parents=True, exist_ok=True)
    _write_csv(folder / pc.TOKEN_OPS_FILE, tokens)
    _write_csv(folder / pc.SEQ_OPS_FILE, seqs)
    _write_csv(folder / pc.DECODE_FILE, decode)
    _write_csv(folder / pc.PREFILL_FILE, prefill)
    if allreduce_rows:
        _write_csv(folder / pc.ALLREDUCE_FILE, allreduce_rows)
    header = _header(req, tokens, decode, ceilings)
    _write_header(folder, header)

    log("whole steps through the runner (fixed overhead)")
    model = Transformer(cfg, dev.dtype, dev.torch_device, req.kernels, lim.max_model_len, req.seed)
    records = step_sweep(model, dev, lim, req.seed)
    profile = pc.load_profile(folder)
    components = [pc.CalibratedStepTimeModel(profile).step_time(r.batch) for r in records]
    fit = fit_overhead(records, components)
    fitted = replace(header, overhead=fit)
    error = _step_error(records, replace(profile, header=fitted))
    header = replace(fitted, overhead=replace(fit, step_error_p50=error))
    _write_csv(folder / pc.STEPS_FILE, [{"num_seqs": r.batch.num_seqs, "new_tokens": r.batch.new_tokens,
                                         "context_tokens": r.batch.context_tokens,
                                         "attention_pairs": r.batch.attention_pairs,
                                         "prefill_seqs": r.batch.prefill_seqs, "prefill_tokens": r.batch.prefill_tokens,
                                         "measured_s": r.duration_s, "forward_s": r.forward_s, "tables_s": c}
                                        for r, c in zip(records, components, strict=True)])
    _write_header(folder, header)
    return folder


def _step_error(records: list[StepRecord], fitted: pc.CalibrationProfile) -> float:
    """Median relative error over the sweep's steps of the model the fitted profile gives."""
    model = pc.CalibratedStepTimeModel(fitted)
    pred = np.array([model.step_time(r.batch) for r in records])
    meas = np.array([r.duration_s for r in records])
    return float(np.median(np.abs(pred - meas) / meas))
