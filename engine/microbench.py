"""Microbenchmarks of the operations one engine step is made of, on the engine's own code.

Each op is timed exactly as `engine/model.py` calls it, on random data (never zeros), for the
device's shard of the model: per-layer token ops by token count, lm_head and sampling by
sequence count, decode attention by (sequences, context), prefill attention by (chunk
tokens, context), and the device's copy bandwidth and matrix rate as ceilings. Weights are
rotated over a few layers so that repeated calls do not all hit a warm cache; on a CPU a
table's entries are timed interleaved, round after round (engine/device.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch
import torch.nn.functional as F

from engine.device import Device, median_time_s, median_times_s
from engine.kernels import Kernels
from engine.kv_cache import PagedKVCache
from engine.model import Transformer, moe_mlp, sample, swiglu


def _grid(points: list[int], top: int) -> list[int]:
    return sorted({p for p in points if p < top} | {top})


def token_grid(limit: int) -> list[int]:
    """1, 2, 4, 8, 16, 24, 32, 48, 64, ... up to and including `limit`."""
    points, p = [1, 2, 4, 8], 16
    while p < limit:
        points += [p, p * 3 // 2]
        p *= 2
    return _grid(points, limit)


def seq_grid(limit: int) -> list[int]:
    return _grid([2 ** i for i in range(limit.bit_length())], limit)


def context_grid(limit: int) -> list[int]:
    """0, 32, 128, 512, 2048, 8192, ... below `limit`, and `limit`."""
    return _grid([0] + [32 * 4 ** i for i in range(12)], limit)


def chunk_grid(limit: int) -> list[int]:
    return _grid([2, 8] + [16 * 2 ** i for i in range(16)], limit)


def rand(*shape: int, device: Device) -> torch.Tensor:
    """Random (never zero) data of the device's dtype."""
    return torch.randn(*shape, device=device.torch_device).to(device.dtype)


def rotating(fns: list[Callable[[], object]]) -> Callable[[], object]:
    """A callable that runs the next of `fns` each time (a different layer's weights)."""
    state = {"i": 0}

    def call():
        state["i"] = (state["i"] + 1) % len(fns)
        return fns[state["i"]]()
    return call


def _token_op_fns(model: Transformer, kv: PagedKVCache, device: Device, t: int) -> dict[str, Callable[[], object]]:
    """The per-layer ops (and the embedding) at `t` tokens, on fresh random inputs."""
    cfg, k = model.cfg, model.kernels
    x, res = rand(t, cfg.hidden_size, device=device), rand(t, cfg.hidden_size, device=device)
    ids = torch.randint(0, cfg.vocab_size, (t,), device=device.torch_device)
    pos = torch.randint(0, model.cos.shape[0], (t,), device=device.torch_device)
    slots = torch.randperm(kv.num_blocks * kv.block_size, device=device.torch_device)[:t]
    q = rand(t, cfg.num_heads, cfg.head_dim, device=device)
    kk = rand(t, cfg.num_kv_heads, cfg.head_dim, device=device)
    attn_out = rand(t, cfg.num_heads * cfg.head_dim, device=device)
    layers = list(enumerate(model.layers))

    def rope_kv(i):
        return k.rope_kv(q, kk, kk, model.cos[pos], model.sin[pos], *kv.slots(i), slots)

    ops = {
        "embed": lambda: model.embed[ids],
        "rmsnorm": rotating([lambda w=w: k.rms_norm(x, w.input_norm, cfg.rms_norm_eps, res) for _, w in layers]),
        "qkv": rotating([lambda w=w: F.linear(x, w.qkv, w.qkv_bias) for _, w in layers]),
        "rope_kv": rotating([lambda i=i: rope_kv(i) for i, _ in layers]),
        "o": rotating([lambda w=w: F.linear(attn_out, w.o) for _, w in layers]),
    }
    dense = [w for _, w in layers if w.router is None]
    moe = [w for _, w in layers if w.router is not None]
    if dense:
        gu = rand(t, 2 * cfg.intermediate_size, device=device)
        act = rand(t, cfg.intermediate_size, device=device)
        ops["gate_up"] = rotating([lambda w=w: F.linear(x, w.gate_up) for w in dense])
        ops["act"] = lambda: swiglu(gu)
        ops["down"] = rotating([lambda w=w: F.linear(act, w.down) for w in dense])
    if moe:
        ops["moe"] = rotating([lambda w=w: moe_mlp(x, w, cfg.num_experts_per_tok) for w in moe])
    return ops


def token_ops(model: Transformer, kv: PagedKVCache, device: Device, grid: list[int]) -> list[dict]:
    """Per-call seconds of each per-layer op (and the embedding) at each token count."""
    fns = {(t, name): fn for t in grid for name, fn in _token_op_fns(model, kv, device, t).items()}
    with torch.inference_mode():
        times = median_times_s(fns, device)
    return [{"tokens": t, **{f"{name}_s": s for (tt, name), s in times.items() if tt == t}} for t in grid]


def seq_ops(model: Transformer, device: Device, grid: list[int]) -> list[dict]:
    """lm_head (gathering each sequence's last hidden state) and sampling, by sequences."""
    fns = {}
    for s in grid:
        x = rand(2 * s, model.cfg.hidden_size, device=device)
        last = torch.arange(1, 2 * s, 2, device=device.torch_device)
        logits = rand(s, model.cfg.vocab_size, device=device)
        fns[(s, "lm_head")] = lambda x=x, last=last: F.linear(x[last], model.lm_head)
        fns[(s, "sampling")] = lambda logits=logits: sample(logits)
    with torch.inference_mode():
        times = median_times_s(fns, device)
    return [{"seqs": s, "lm_head_s": times[(s, "lm_head")], "sampling_s": times[(s, "sampling")]} for s in grid]


class Heads(Protocol):
    """The attention shape on one device (an EngineConfig, or engine/device_tables.py's HeadShape)."""
    num_heads: int
    num_kv_heads: int
    head_dim: int


def _cache(cfg: Heads, device: Device, num_blocks: int, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    shape = (num_blocks, block_size, cfg.num_kv_heads, cfg.head_dim)
    return rand(*shape, device=device), rand(*shape, device=device)


def decode_attention(cfg: Heads, kernels: Kernels, device: Device, seqs: list[int], contexts: list[int],
                     block_size: int) -> list[dict]:
    """One layer's decode attention: `s` sequences, each with `c` cached tokens plus the new one."""
    per_seq = -(-(max(contexts) + 1) // block_size)
    k_cache, v_cache = _cache(cfg, device, max(seqs) * per_seq, block_size)
    table = torch.randperm(max(seqs) * per_seq, device=device.torch_device).view(max(seqs), per_seq).to(torch.int32)
    scale = cfg.head_dim ** -0.5
    fns = {}
    for s in seqs:
        q = rand(s, cfg.num_heads, cfg.head_dim, device=device)
        for c in contexts:
            lens = torch.full((s,), c + 1, dtype=torch.int32, device=device.torch_device)
            bt = table[:s, : -(-(c + 1) // block_size)]
            fns[(s, c)] = lambda q=q, bt=bt, lens=lens, c=c: kernels.decode_attention(q, k_cache, v_cache, bt, lens,
                                                                                       scale, c + 1)
    times = median_times_s(fns, device)
    return [{"seqs": s, "context_tokens": c, "time_s": t} for (s, c), t in times.items()]


def prefill_attention(cfg: Heads, kernels: Kernels, device: Device, chunks: list[int], contexts: list[int],
                      block_size: int) -> list[dict]:
    """One layer's prefill attention for one sequence: a chunk of `n` tokens on `c` cached ones."""
    blocks = -(-(max(chunks) + max(contexts)) // block_size)
    k_cache, v_cache = _cache(cfg, device, blocks, block_size)
    table = torch.randperm(blocks, device=device.torch_device).view(1, blocks).to(torch.int32)
    scale = cfg.head_dim ** -0.5
    fns = {}
    for n in chunks:
        q = rand(n, cfg.num_heads, cfg.head_dim, device=device)
        cu = torch.tensor([0, n], dtype=torch.int32, device=device.torch_device)
        for c in contexts:
            ctx = torch.tensor([c], dtype=torch.int32, device=device.torch_device)
            bt = table[:, : -(-(c + n) // block_size)]
            fns[(n, c)] = lambda q=q, cu=cu, ctx=ctx, bt=bt, n=n: kernels.prefill_attention(q, k_cache, v_cache, bt, cu,
                                                                                              ctx, scale, n)
    times = median_times_s(fns, device)
    return [{"chunk_tokens": n, "context_tokens": c, "time_s": t} for (n, c), t in times.items()]


def ceilings(device: Device) -> dict[str, float]:
    """Measured copy bandwidth (bytes read + written per second) and matrix rate (FLOP/s)."""
    gpu = device.kind == "cuda"
    elems = (1 << 30 if gpu else 1 << 24) // 2
    src = rand(elems, device=device)
    dst = torch.empty_like(src)
    copy_s = median_time_s(lambda: dst.copy_(src), device)
    n = 8192 if gpu else 512
    a, b = rand(n, n, device=device), rand(n, n, device=device)
    mm_s = median_time_s(lambda: a @ b, device)
    return {"copy_bytes_per_s": 2 * src.numel() * src.element_size() / copy_s,
            "matmul_flops_per_s": 2 * n ** 3 / mm_s}
