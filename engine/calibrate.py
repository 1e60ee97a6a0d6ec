"""`sizer calibrate`'s measurements of one model on this device: the engine's ops timed by shape and whole
steps through the real runner, returned as plain rows (`ProfileMeasurement`).

The engine reads and writes no profile: sizer writes what is measured here as a calibrated profile
(sizer/timing/profile.py: the format; sizer/sizing/calibrate.py: the driver) and fits the whole steps'
overhead (sizer/timing/overhead_fit.py). The whole steps are what the kernel tables do not explain
(scheduling, batch layout, launches, the host loop).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from engine import microbench as mb
from engine.config import EngineConfig, StepLimits
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
    limits: StepLimits
    hardware: GPUProfile | None = None
    scale: float = 1.0
    seed: int = 0


@dataclass(frozen=True)
class ProfileMeasurement:
    """What `calibrate` measured, as plain data: the tables' rows (seconds), what the engine's own ops
    achieved, how a step calls them, where it ran, and the whole steps the runner timed."""
    token_ops: list[dict]               # tokens, <op>_s ...
    seq_ops: list[dict]                 # seqs, lm_head_s, sampling_s
    decode_attention: list[dict]        # seqs, context_tokens, time_s
    prefill_attention: list[dict]       # chunk_tokens, context_tokens, time_s
    allreduce: list[dict]               # bytes, time_s (none on one device)
    achieved: dict[str, Any]            # rates reached against the measured ceilings and the datasheet
    calls_per_step: dict[str, int]      # token op -> calls in one step of the layers the engine ran
    per_layer_ops: tuple[str, ...]      # the token ops that scale with the layer count
    allreduce_calls_per_layer: int
    device_kind: str                    # 'cpu' or 'cuda'
    device_name: str                    # as the system reports it
    threads: int | None                 # torch threads on a CPU; None on a GPU
    versions: dict[str, str | None]     # torch, triton, cuda, driver, python
    dtype: str                          # torch dtype name: 'bfloat16', 'float32'
    dtype_bytes: int
    kernels: str                        # 'triton' or 'torch'
    steps: list[StepRecord]             # whole steps through the runner


def calls_per_step(cfg: EngineConfig, ops: list[str]) -> dict[str, int]:
    """How many times a step calls each token op, for the layers the engine runs."""
    layers, moe = cfg.num_layers, cfg.num_moe_layers
    per_op = {"embed": 1, "rmsnorm": 2 * layers + 1, "qkv": layers, "rope_kv": layers, "o": layers,
              "gate_up": layers - moe, "act": layers - moe, "down": layers - moe, "moe": moe}
    return {op: per_op[op] for op in ops}


SWEEP_WAVES = (1, 2, 3, 4, 6, 8, 16, 64, 128)   # requests at once in the whole-step sweep (up to max_num_seqs);
# the small waves give the fit the small batches a trickle of traffic runs (Poisson arrivals)
SWEEP_OUTPUT_TOKENS = (8, 48)
# Output tokens a sweep request has at least, however short max_model_len: its prefill step, then a decode step,
# so that every wave has a step after its first (the first waits on set-up and is dropped)
SWEEP_MIN_OUTPUT_TOKENS = 2


def _sweep_requests(count: int, longest: int, max_model_len: int, rng: random.Random,
                    first_id: int) -> list[Request]:
    """A wave of `count` requests at t=0: prompts of longest/16 .. longest tokens (the long
    ones chunked), short outputs, half sharing one of two prefixes so that cache hits shape
    some steps."""
    prefixes = [tuple(rng.randrange(1 << 30) for _ in range(longest // 4)) for _ in range(2)]
    return [_sweep_request(first_id + i, longest, max_model_len, rng, prefixes[i % 2] if i % 4 < 2 else ())
            for i in range(count)]


def _sweep_request(request_id: int, longest: int, max_model_len: int, rng: random.Random,
                   prefix: tuple[int, ...]) -> Request:
    """One sweep request, its output cut to fit `max_model_len` (the scheduler refuses a longer one, so it would
    never run); from a max_model_len of 95 on, none is cut (prompts of at most half of it, outputs of 48)."""
    prompt = rng.randint(max(1, longest // 16), longest)
    output = min(rng.randint(*SWEEP_OUTPUT_TOKENS), max_model_len - prompt)
    return Request(request_id, 0.0, prompt, output, prefix_segments=prefix)


def _sweep_longest(limits: StepLimits) -> int:
    """The sweep's longest prompt: half of max_model_len (at most four step budgets and 2,048 tokens), at least
    8 tokens, and short enough that each request has room for SWEEP_MIN_OUTPUT_TOKENS within max_model_len (so
    max_model_len must be at least 1 + SWEEP_MIN_OUTPUT_TOKENS: sizer/cli/calibrate.py MIN_MAX_MODEL_LEN)."""
    longest = max(8, min(limits.max_model_len // 2, 4 * limits.max_num_batched_tokens, 2048))
    return min(longest, limits.max_model_len - SWEEP_MIN_OUTPUT_TOKENS)


def step_sweep(model: Transformer, device: Device, limits: StepLimits, seed: int) -> list[StepRecord]:
    """Whole steps timed by the runner, over waves of 1, 4, 16, ... requests."""
    rng = random.Random(seed)
    longest = _sweep_longest(limits)
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
        wave = _sweep_requests(count, longest, limits.max_model_len, rng, first_id)
        records += runner.run(wave).steps[1:]   # step 1 waits on set-up
        first_id += count
    return records


def _achieved(cfg: EngineConfig, device: Device, tokens: list[dict], decode: list[dict], ceilings: dict,
              hardware: GPUProfile | None) -> dict[str, Any]:
    """Achieved rates on the engine's own ops against the measured ceilings and, when a datasheet profile names
    the device, its peaks (the profile's `Achieved`, sizer/timing/profile.py)."""
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
    out = dict(
        gemm_flops_per_s=gemm_flops, gemm_at_tokens=last["tokens"], weight_stream_bytes_per_s=stream_bytes,
        decode_attention_bytes_per_s=kv_rate,
        decode_attention_at={"seqs": big["seqs"], "context_tokens": big["context_tokens"]},
        copy_bytes_per_s=copy, matmul_flops_per_s=matmul,
        decode_attention_fraction_of_copy=kv_rate / copy, gemm_fraction_of_measured_matmul=gemm_flops / matmul,
    )
    if hardware is not None:
        peak = hardware.peak_flops("bf16" if device.dtype == torch.bfloat16 else "fp32")
        bw = hardware.memory_bandwidth_bytes_per_s
        out.update(peak_source=f"hardware_profiles/{hardware.id}.yaml", peak_flops_per_s=peak,
                   peak_bandwidth_bytes_per_s=bw, compute_fraction_of_peak=gemm_flops / peak,
                   bandwidth_fraction_of_peak=stream_bytes / bw, decode_attention_fraction_of_peak=kv_rate / bw,
                   copy_fraction_of_peak=copy / bw)
    return out


def calibrate(req: CalibrationRequest, log: Callable[[str], None] = lambda _: None,
              allreduce_rows: list[dict] | None = None) -> ProfileMeasurement:
    """Measure the tables, then whole steps through the runner; `allreduce_rows`: the all-reduce timed across
    the devices (engine/collectives.py), when there are several."""
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
    achieved = _achieved(cfg, dev, tokens, decode, ceilings, req.hardware)
    info = dict(device_kind=dev.kind, device_name=dev.name,
                threads=torch.get_num_threads() if dev.kind == "cpu" else None, versions=versions(),
                dtype=str(dev.dtype).removeprefix("torch."), dtype_bytes=dev.dtype.itemsize, kernels=req.kernels.name)

    log("whole steps through the runner (fixed overhead)")
    model = Transformer(cfg, dev.dtype, dev.torch_device, req.kernels, lim.max_model_len, req.seed)
    records = step_sweep(model, dev, lim, req.seed)
    ops = [k[:-2] for k in tokens[0] if k.endswith("_s")]
    return ProfileMeasurement(tokens, seqs, decode, prefill, list(allreduce_rows or []), achieved,
                              calls_per_step(cfg, ops), tuple(op for op in ops if op != "embed"),
                              2 if cfg.tp > 1 else 0, steps=records, **info)
