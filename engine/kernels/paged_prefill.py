"""Prefill attention over paged context: a chunk of new query tokens per sequence attends,
causally, to everything that sequence has in the paged KV cache.

Queries are packed: sequence i owns rows `cu_q[i]:cu_q[i+1]` of `q [tokens, heads,
head_dim]`; its chunk starts at position `ctx_lens[i]` (tokens cached before the chunk, from
earlier chunks or a reused prefix). The chunk's own K/V are written to the cache first, so
the kernel reads all keys, old and new, through the block table: query row j sees key
positions 0 .. ctx_lens[i] + j.

Triton version: one program per (sequence, query head, tile of BLOCK_M query rows), an
online softmax over key tiles of BLOCK_N tokens gathered through the block table.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.kernels.paged_decode import dot_precision, gather_kv

BLOCK_M = 32
BLOCK_N = 32


@triton.jit
def _prefill_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr, block_tables_ptr, cu_q_ptr, ctx_lens_ptr,
    scale,
    stride_qt, stride_qh, stride_ot, stride_oh,
    stride_kb, stride_kt, stride_kh,
    stride_bts,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, DOT_PRECISION: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    tile = tl.program_id(2)
    q_start = tl.load(cu_q_ptr + seq)
    q_len = tl.load(cu_q_ptr + seq + 1) - q_start
    if tile * BLOCK_M < q_len:
        ctx = tl.load(ctx_lens_ptr + seq)
        kv_head = head // GROUP
        rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
        rmask = rows < q_len
        d = tl.arange(0, HEAD_DIM)
        q = tl.load(q_ptr + (q_start + rows)[:, None] * stride_qt + head * stride_qh + d[None, :],
                    mask=rmask[:, None], other=0.0)
        q_pos = ctx + rows
        kv_end = ctx + tl.minimum((tile + 1) * BLOCK_M, q_len)

        m = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
        for n0 in range(0, kv_end, BLOCK_N):
            tok = n0 + tl.arange(0, BLOCK_N)
            tmask = tok < kv_end
            block = tl.load(block_tables_ptr + seq * stride_bts + tok // BLOCK_SIZE, mask=tmask, other=0)
            offs = block.to(tl.int64) * stride_kb + (tok % BLOCK_SIZE) * stride_kt + kv_head * stride_kh
            k = tl.load(k_ptr + offs[:, None] + d[None, :], mask=tmask[:, None], other=0.0)
            v = tl.load(v_ptr + offs[:, None] + d[None, :], mask=tmask[:, None], other=0.0)
            s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * scale
            visible = tmask[None, :] & (tok[None, :] <= q_pos[:, None])
            s = tl.where(visible, s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, 1))
            p = tl.exp(s - m_new[:, None])
            alpha = tl.exp(m - m_new)
            l = l * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
            m = m_new
        out = acc / l[:, None]
        tl.store(out_ptr + (q_start + rows)[:, None] * stride_ot + head * stride_oh + d[None, :],
                 out.to(out_ptr.dtype.element_ty), mask=rmask[:, None])


def prefill_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                      block_tables: torch.Tensor, cu_q: torch.Tensor, ctx_lens: torch.Tensor,
                      scale: float, max_q_len: int | None = None) -> torch.Tensor:
    """Triton prefill attention over paged context. q: [tokens, heads, head_dim] -> same shape.

    `max_q_len` (a host int, the longest chunk) sizes the grid; pass it to avoid a device sync.
    """
    num_tokens, num_heads, head_dim = q.shape
    _, block_size, num_kv_heads, _ = k_cache.shape
    num_seqs = cu_q.numel() - 1
    out = torch.empty_like(q)
    if num_tokens == 0:
        return out
    if max_q_len is None:
        max_q_len = int((cu_q[1:] - cu_q[:-1]).max())
    _prefill_kernel[(num_seqs, num_heads, triton.cdiv(max_q_len, BLOCK_M))](
        q, k_cache, v_cache, out, block_tables, cu_q, ctx_lens,
        scale,
        q.stride(0), q.stride(1), out.stride(0), out.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        block_tables.stride(0),
        GROUP=num_heads // num_kv_heads, HEAD_DIM=head_dim, BLOCK_SIZE=block_size,
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, DOT_PRECISION=dot_precision(q.dtype),
    )
    return out


def prefill_attention_ref(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                          block_tables: torch.Tensor, cu_q: torch.Tensor, ctx_lens: torch.Tensor,
                          scale: float, max_q_len: int | None = None) -> torch.Tensor:
    """Plain-torch version, one sequence at a time (prefill chunks are few per step)."""
    num_tokens, num_heads, head_dim = q.shape
    num_kv_heads = k_cache.shape[2]
    group = num_heads // num_kv_heads
    out = torch.empty_like(q)
    bounds = cu_q.tolist()
    for i, ctx in enumerate(ctx_lens.tolist()):
        start, end = bounds[i], bounds[i + 1]
        n = end - start
        if n == 0:
            continue
        k = gather_kv(k_cache, block_tables[i:i + 1], ctx + n)[0]          # [L, KV, D]
        v = gather_kv(v_cache, block_tables[i:i + 1], ctx + n)[0]
        qs = q[start:end].view(n, num_kv_heads, group, head_dim)
        scores = torch.einsum("nkgd,lkd->kgnl", qs, k).to(torch.promote_types(q.dtype, torch.float32)) * scale
        visible = torch.arange(ctx + n, device=q.device)[None, :] <= (ctx + torch.arange(n, device=q.device))[:, None]
        scores = scores.masked_fill(~visible, float("-inf"))
        probs = torch.softmax(scores, dim=-1).to(v.dtype)
        out[start:end] = torch.einsum("kgnl,lkd->nkgd", probs, v).reshape(n, num_heads, head_dim).to(q.dtype)
    return out
