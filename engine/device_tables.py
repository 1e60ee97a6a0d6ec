"""Kernel tables of a device: the engine's operators timed by shape, for any model with those shapes.

`sizer calibrate` without `--model` measures a device once: every dense GEMM shape (n, k) it is given
by token count, decode and prefill attention for every head shape it is given by (sequences, length),
the all-reduce by message size when several devices are present, and the memory-bound element-wise
cost. The rows are in the kernel-table format of `sizer/timing/kernel_tables.py` (latencies in
microseconds); the caller picks the shapes (the catalog's models at TP 1, 2, 4 and 8, or the models
named) and writes them. Each operator runs exactly as `engine/model.py` calls it (`F.linear`, the
selected attention kernels over a paged cache, the fused residual add + RMSNorm), on random data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from engine import microbench as mb
from engine.device import Device, median_times_s
from engine.kernels import Kernels

MICROSECONDS = 1e6
ROTATE_BYTES = 64 << 20      # a small GEMM cycles through copies of its weight up to this many bytes (no warm cache)
MAX_ROTATE = 4
PREFILL_BATCHES = (1, 2, 4, 8)   # sequences prefilled together (capped by max_num_seqs)


@dataclass(frozen=True)
class HeadShape:
    num_heads: int          # query heads on one device
    num_kv_heads: int       # KV heads on one device
    head_dim: int


@dataclass(frozen=True)
class TableShapes:
    gemms: tuple[tuple[int, int], ...]    # (n, k): x[m, k] @ W[n, k]^T, one device's shard
    heads: tuple[HeadShape, ...]
    hidden_size: int                      # of the element-wise cost's residual add + RMSNorm at one token


@dataclass(frozen=True)
class TableGrid:
    tokens: tuple[int, ...]               # GEMM m
    decode_seqs: tuple[int, ...]          # generation attention batch
    kv_tokens: tuple[int, ...]            # generation attention KV length per sequence
    prefill_seqs: tuple[int, ...]         # context attention batch
    prompt_tokens: tuple[int, ...]        # context attention prompt length (nothing cached)
    max_prefill_tokens: int               # batch x prompt measured at most (at least one prompt per batch)
    block_size: int


def grid(max_num_batched_tokens: int, max_num_seqs: int, max_model_len: int, block_size: int) -> TableGrid:
    """The measured points, from the largest step in tokens, sequences and context the device is asked to cover."""
    return TableGrid(
        tokens=tuple(mb.token_grid(max_num_batched_tokens)),
        decode_seqs=tuple(mb.seq_grid(max_num_seqs)),
        kv_tokens=tuple(c + 1 for c in mb.context_grid(max_model_len - 1)),
        prefill_seqs=tuple(b for b in PREFILL_BATCHES if b <= max_num_seqs) or (1,),
        prompt_tokens=tuple(mb.chunk_grid(max_model_len)),
        max_prefill_tokens=max(max_num_batched_tokens, max_model_len),
        block_size=block_size)


def table_dtype(device: Device) -> str:
    """The label of the dtype the kernels ran in, as the kernel tables name it."""
    return str(device.dtype).removeprefix("torch.")


def _weights(n: int, k: int, device: Device) -> list[torch.Tensor]:
    copies = max(1, min(MAX_ROTATE, ROTATE_BYTES // (n * k * device.dtype.itemsize)))
    return [mb.rand(n, k, device=device) for _ in range(copies)]


def gemm_rows(shapes: TableShapes, g: TableGrid, device: Device) -> list[tuple]:
    """(dtype, n, k, m, us) of `F.linear` at every shape and token count."""
    rows = []
    dtype = table_dtype(device)
    for n, k in shapes.gemms:
        weights = _weights(n, k, device)
        fns = {}
        for m in g.tokens:
            x = mb.rand(m, k, device=device)
            fns[m] = mb.rotating([lambda x=x, w=w: F.linear(x, w) for w in weights])
        with torch.inference_mode():
            times = median_times_s(fns, device)
        rows += [(dtype, n, k, m, t * MICROSECONDS) for m, t in times.items()]
        del weights, fns
    return rows


def generation_rows(shape: HeadShape, kernels: Kernels, g: TableGrid, device: Device) -> list[tuple]:
    """(kv dtype, heads, KV heads, head dim, sequences, KV length, us) of one layer's decode attention."""
    rows = mb.decode_attention(shape, kernels, device, list(g.decode_seqs), [n - 1 for n in g.kv_tokens],
                               g.block_size)
    key = (table_dtype(device), shape.num_heads, shape.num_kv_heads, shape.head_dim)
    return [(*key, r["seqs"], r["context_tokens"] + 1, r["time_s"] * MICROSECONDS) for r in rows]


def context_rows(shape: HeadShape, kernels: Kernels, g: TableGrid, device: Device) -> list[tuple]:
    """(kv dtype, heads, KV heads, head dim, sequences, prompt tokens, us) of one layer's causal prefill of
    `sequences` prompts at once on an empty cache."""
    bs = g.block_size
    points = [(b, n) for b in g.prefill_seqs for n in g.prompt_tokens
              if b * n <= g.max_prefill_tokens or n == g.prompt_tokens[0]]
    per_seq = -(-max(n for _, n in points) // bs)
    seqs = max(b for b, _ in points)
    k_cache = mb.rand(seqs * per_seq, bs, shape.num_kv_heads, shape.head_dim, device=device)
    v_cache = mb.rand(seqs * per_seq, bs, shape.num_kv_heads, shape.head_dim, device=device)
    table = torch.randperm(seqs * per_seq, device=device.torch_device).view(seqs, per_seq).to(torch.int32)
    scale = shape.head_dim ** -0.5
    fns: dict[tuple[int, int], Callable[[], object]] = {}
    for b, n in points:
        q = mb.rand(b * n, shape.num_heads, shape.head_dim, device=device)
        cu = torch.arange(0, b * n + 1, n, dtype=torch.int32, device=device.torch_device)
        cached = torch.zeros(b, dtype=torch.int32, device=device.torch_device)
        bt = table[:b, : -(-n // bs)]
        fns[(b, n)] = lambda q=q, cu=cu, cached=cached, bt=bt, n=n: kernels.prefill_attention(
            q, k_cache, v_cache, bt, cu, cached, scale, n)
    with torch.inference_mode():
        times = median_times_s(fns, device)
    key = (table_dtype(device), shape.num_heads, shape.num_kv_heads, shape.head_dim)
    return [(*key, b, n, t * MICROSECONDS) for (b, n), t in times.items()]


def allreduce_rows(rows: list[dict], gpus: int) -> list[tuple]:
    """(GPUs, message bytes, us) from `engine.collectives.allreduce_table`'s rows."""
    return [(gpus, int(r["bytes"]), r["time_s"] * MICROSECONDS) for r in rows]


@dataclass(frozen=True)
class ElementwiseMeasured:
    copy_bytes_per_s: float       # bytes read + written per second by a large copy
    matmul_flops_per_s: float     # a square matrix product's rate
    norm_latency_s: float         # the fused residual add + RMSNorm of one token: the fixed cost of a small kernel


def elementwise(shapes: TableShapes, kernels: Kernels, device: Device) -> ElementwiseMeasured:
    ceilings = mb.ceilings(device)
    h = shapes.hidden_size
    x, res, w = mb.rand(1, h, device=device), mb.rand(1, h, device=device), mb.rand(h, device=device)
    with torch.inference_mode():
        norm = median_times_s({"norm": lambda: kernels.rms_norm(x, w, 1e-5, res)}, device)["norm"]
    return ElementwiseMeasured(ceilings["copy_bytes_per_s"], ceilings["matmul_flops_per_s"], norm)


def measure(shapes: TableShapes, kernels: Kernels, device: Device, g: TableGrid,
            log: Callable[[str], None] = lambda _: None) -> dict[str, list[tuple]]:
    """Rows per kernel table (gemm, context_attention, generation_attention) for `shapes` on `device`."""
    log(f"GEMMs: {len(shapes.gemms)} shapes x {len(g.tokens)} token counts")
    gemm = gemm_rows(shapes, g, device)
    generation, context = [], []
    for i, shape in enumerate(shapes.heads, 1):
        log(f"attention {i}/{len(shapes.heads)}: {shape.num_heads} heads, {shape.num_kv_heads} KV heads, "
            f"head dim {shape.head_dim}")
        generation += generation_rows(shape, kernels, g, device)
        context += context_rows(shape, kernels, g, device)
    return {"gemm": gemm, "context_attention": context, "generation_attention": generation}
