"""Paged decode attention: one query token per sequence against its KV blocks.

The KV cache of one layer is `[num_blocks, block_size, num_kv_heads, head_dim]`; a
sequence's tokens live in the blocks its row of `block_tables` names, in order. The
current token's K/V are written before attention, so `seq_lens` counts it.

Triton version: one program per (sequence, KV head, partition of the context). All query
heads of a GQA group share the program, so each KV byte is read once per step. Long
contexts are split into partitions that run in parallel (flash-decoding) and are merged by
a second small kernel; a single partition writes the output directly.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

PARTITION_TOKENS = 512
BLOCK_N = 32


def dot_precision(dtype: torch.dtype) -> str | None:
    """`tl.dot`'s input precision: float32 operands are multiplied in IEEE float32, not in
    TF32 (Triton's default for float32 on NVIDIA GPUs: 10-bit mantissas, errors about 1e-3),
    so a float32 run means float32 arithmetic; half-precision operands keep Triton's default."""
    return "ieee" if dtype == torch.float32 else None


@triton.jit(do_not_specialize=["num_parts"])   # one compiled variant whatever the context length
def _decode_partition_kernel(
    q_ptr, k_ptr, v_ptr, block_tables_ptr, seq_lens_ptr,
    out_ptr, part_acc_ptr, part_max_ptr, part_sum_ptr,
    scale,
    stride_qs, stride_qh,
    stride_kb, stride_kt, stride_kh,
    stride_bts,
    stride_os, stride_oh,
    num_parts,
    GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, BLOCK_N: tl.constexpr, PARTITION: tl.constexpr, DIRECT: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    part = tl.program_id(2)
    seq_len = tl.load(seq_lens_ptr + seq)
    start = part * PARTITION
    end = tl.minimum(start + PARTITION, seq_len)

    g = tl.arange(0, GROUP_PAD)
    d = tl.arange(0, HEAD_DIM)
    heads = kv_head * GROUP + g
    gmask = g < GROUP
    q = tl.load(q_ptr + seq * stride_qs + heads[:, None] * stride_qh + d[None, :], mask=gmask[:, None], other=0.0)

    m = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    l = tl.zeros([GROUP_PAD], tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], tl.float32)
    for n0 in range(start, end, BLOCK_N):
        tok = n0 + tl.arange(0, BLOCK_N)
        tmask = tok < end
        block = tl.load(block_tables_ptr + seq * stride_bts + tok // BLOCK_SIZE, mask=tmask, other=0)
        offs = block.to(tl.int64) * stride_kb + (tok % BLOCK_SIZE) * stride_kt + kv_head * stride_kh
        k = tl.load(k_ptr + offs[:, None] + d[None, :], mask=tmask[:, None], other=0.0)
        v = tl.load(v_ptr + offs[:, None] + d[None, :], mask=tmask[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * scale
        s = tl.where(tmask[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m - m_new)
        l = l * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
        m = m_new

    if DIRECT:
        out = acc / l[:, None]
        tl.store(out_ptr + seq * stride_os + heads[:, None] * stride_oh + d[None, :],
                 out.to(out_ptr.dtype.element_ty), mask=gmask[:, None])
    else:
        base = (seq * tl.num_programs(1) * GROUP + heads) * num_parts + part  # [seq, head, part]
        tl.store(part_max_ptr + base, m, mask=gmask)
        tl.store(part_sum_ptr + base, l, mask=gmask)
        tl.store(part_acc_ptr + base[:, None] * HEAD_DIM + d[None, :], acc, mask=gmask[:, None])


@triton.jit(do_not_specialize=["num_parts"])
def _decode_reduce_kernel(
    out_ptr, part_acc_ptr, part_max_ptr, part_sum_ptr,
    stride_os, stride_oh, num_heads, num_parts,
    HEAD_DIM: tl.constexpr, PARTS_PAD: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    p = tl.arange(0, PARTS_PAD)
    d = tl.arange(0, HEAD_DIM)
    pmask = p < num_parts
    base = (seq * num_heads + head) * num_parts + p
    m = tl.load(part_max_ptr + base, mask=pmask, other=float("-inf"))
    l = tl.load(part_sum_ptr + base, mask=pmask, other=0.0)
    acc = tl.load(part_acc_ptr + base[:, None] * HEAD_DIM + d[None, :], mask=pmask[:, None], other=0.0)
    m_all = tl.max(m, 0)
    w = tl.where(pmask, tl.exp(m - m_all), 0.0)
    out = tl.sum(acc * w[:, None], 0) / tl.sum(l * w, 0)
    tl.store(out_ptr + seq * stride_os + head * stride_oh + d, out.to(out_ptr.dtype.element_ty))


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     block_tables: torch.Tensor, seq_lens: torch.Tensor, scale: float,
                     max_seq_len: int | None = None, partition_tokens: int = PARTITION_TOKENS) -> torch.Tensor:
    """Triton paged decode attention. q: [seqs, heads, head_dim] -> [seqs, heads, head_dim].

    `max_seq_len` (a host int) sizes the partition grid; pass it to avoid a device sync.
    """
    num_seqs, num_heads, head_dim = q.shape
    _, block_size, num_kv_heads, _ = k_cache.shape
    group = num_heads // num_kv_heads
    if max_seq_len is None:
        max_seq_len = int(seq_lens.max()) if num_seqs else 0
    out = torch.empty_like(q)
    if num_seqs == 0:
        return out
    num_parts = triton.cdiv(max_seq_len, partition_tokens)
    direct = num_parts == 1
    if direct:
        part_acc = part_max = part_sum = out  # unused by the kernel
    else:
        part_max = torch.empty((num_seqs, num_heads, num_parts), dtype=torch.float32, device=q.device)
        part_sum = torch.empty_like(part_max)
        part_acc = torch.empty((num_seqs, num_heads, num_parts, head_dim), dtype=torch.float32, device=q.device)
    _decode_partition_kernel[(num_seqs, num_kv_heads, num_parts)](
        q, k_cache, v_cache, block_tables, seq_lens,
        out, part_acc, part_max, part_sum,
        scale,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        block_tables.stride(0),
        out.stride(0), out.stride(1),
        num_parts,
        GROUP=group, GROUP_PAD=max(16, triton.next_power_of_2(group)), HEAD_DIM=head_dim,
        BLOCK_SIZE=block_size, BLOCK_N=BLOCK_N, PARTITION=partition_tokens, DIRECT=direct,
        DOT_PRECISION=dot_precision(q.dtype),
    )
    if not direct:
        _decode_reduce_kernel[(num_seqs, num_heads)](
            out, part_acc, part_max, part_sum,
            out.stride(0), out.stride(1), num_heads, num_parts,
            HEAD_DIM=head_dim, PARTS_PAD=max(16, triton.next_power_of_2(num_parts)),
        )
    return out


def gather_kv(cache: torch.Tensor, block_tables: torch.Tensor, num_tokens: int) -> torch.Tensor:
    """The first `num_tokens` cached tokens of each sequence: [seqs, num_tokens, kv_heads, head_dim]."""
    block_size = cache.shape[1]
    pos = torch.arange(num_tokens, device=cache.device)
    slots = block_tables[:, pos // block_size].long() * block_size + pos % block_size
    return cache.reshape(-1, *cache.shape[2:])[slots]


def decode_attention_ref(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                         block_tables: torch.Tensor, seq_lens: torch.Tensor, scale: float,
                         max_seq_len: int | None = None) -> torch.Tensor:
    """Plain-torch paged decode attention, same contract, block by block.

    Only the blocks each sequence uses are gathered (whole blocks, no per-token indexing),
    so the work grows with the total context rather than sequences x the longest one; the
    softmax runs over each sequence's blocks through scatter/index-add by sequence.
    """
    num_seqs, num_heads, head_dim = q.shape
    _, block_size, num_kv_heads, _ = k_cache.shape
    group = num_heads // num_kv_heads
    if num_seqs == 0:
        return torch.empty_like(q)
    lens = seq_lens.long()
    blocks_per_seq = (lens + block_size - 1) // block_size
    seq = torch.repeat_interleave(torch.arange(num_seqs, device=q.device), blocks_per_seq)   # [NB]
    index = torch.arange(seq.numel(), device=q.device) - (torch.cumsum(blocks_per_seq, 0) - blocks_per_seq)[seq]
    blocks = block_tables[seq, index].long()
    k = k_cache.index_select(0, blocks)                                  # [NB, bs, KV, D]
    v = v_cache.index_select(0, blocks)
    acc = torch.promote_types(q.dtype, torch.float32)                    # float64 stays float64
    qb = q.view(num_seqs, num_kv_heads, group, head_dim)[seq]            # [NB, KV, G, D]
    scores = torch.matmul(qb, k.permute(0, 2, 3, 1)).to(acc) * scale     # [NB, KV, G, bs]
    pos = index[:, None] * block_size + torch.arange(block_size, device=q.device)
    scores = scores.masked_fill((pos >= lens[seq, None])[:, None, None, :], float("-inf"))
    shape = (num_seqs, num_kv_heads, group)
    m = torch.full(shape, float("-inf"), dtype=acc, device=q.device).scatter_reduce(
        0, seq[:, None, None].expand(-1, num_kv_heads, group), scores.amax(-1), "amax")
    p = torch.exp(scores - m[seq][..., None])
    denom = torch.zeros(shape, dtype=acc, device=q.device).index_add_(0, seq, p.sum(-1))
    pv = torch.matmul(p.to(v.dtype), v.permute(0, 2, 1, 3)).to(acc)     # [NB, KV, G, D]
    out = torch.zeros(*shape, head_dim, dtype=acc, device=q.device).index_add_(0, seq, pv)
    return (out / denom[..., None]).reshape(num_seqs, num_heads, head_dim).to(q.dtype)
