"""Rotary embedding of the new tokens' queries and keys, fused with the write of their K and V into the paged
KV cache, as vLLM fuses them (its rotary_embedding and reshape_and_cache kernels, and TensorRT-LLM's attention
op, which applies RoPE and writes the cache in one).

`rope_kv(q, k, v, cos, sin, k_slots, v_slots, slots)` returns the rotated queries `[tokens, heads, head_dim]`
(a new contiguous tensor) and stores the rotated keys and the values of `[tokens, kv_heads, head_dim]` at
`slots` of one layer's cache, viewed as `[num_blocks * block_size, kv_heads, head_dim]`. cos and sin are the
tokens' `[tokens, head_dim / 2]` in float32 (rotate-half convention); the rotation is done in float32.

Why fused: unfused, the rotation is about ten element-wise torch ops per tensor and the write two index copies,
some 25 launches a layer. On the H200 (2026-12-04, docs/fidelity-h200.md) they took 383 us a layer at one token,
about 12 ms of a 20-28 ms decode step of Llama-3.1-8B: launch time, not memory traffic. Here it is one launch:
one program per (token, head) over the query heads, then the KV heads.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rope_kv_kernel(q_ptr, k_ptr, v_ptr, cos_ptr, sin_ptr, q_out_ptr, k_cache_ptr, v_cache_ptr, slots_ptr,
                    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_ct,
                    stride_ot, stride_oh, stride_cs, stride_ch,
                    NUM_HEADS: tl.constexpr, HALF: tl.constexpr, BLOCK: tl.constexpr):
    token = tl.program_id(0)
    head = tl.program_id(1)
    cols = tl.arange(0, BLOCK)
    mask = cols < HALF
    c = tl.load(cos_ptr + token * stride_ct + cols, mask=mask, other=0.0)
    s = tl.load(sin_ptr + token * stride_ct + cols, mask=mask, other=0.0)
    if head < NUM_HEADS:
        src = q_ptr + token * stride_qt + head * stride_qh
        dst = q_out_ptr + token * stride_ot + head * stride_oh
    else:
        kv_head = head - NUM_HEADS
        slot = tl.load(slots_ptr + token)
        src = k_ptr + token * stride_kt + kv_head * stride_kh
        dst = k_cache_ptr + slot * stride_cs + kv_head * stride_ch
        value = tl.load(v_ptr + token * stride_vt + kv_head * stride_vh + cols, mask=mask)
        value_hi = tl.load(v_ptr + token * stride_vt + kv_head * stride_vh + HALF + cols, mask=mask)
        v_dst = v_cache_ptr + slot * stride_cs + kv_head * stride_ch
        tl.store(v_dst + cols, value, mask=mask)
        tl.store(v_dst + HALF + cols, value_hi, mask=mask)
    x1 = tl.load(src + cols, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(src + HALF + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(dst + cols, (x1 * c - x2 * s).to(dst.dtype.element_ty), mask=mask)
    tl.store(dst + HALF + cols, (x2 * c + x1 * s).to(dst.dtype.element_ty), mask=mask)


def rope_kv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
            k_slots: torch.Tensor, v_slots: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    """Triton: rotated queries returned, rotated keys and values stored at `slots` (one launch)."""
    tokens, heads, head_dim = q.shape
    q_out = torch.empty((tokens, heads, head_dim), dtype=q.dtype, device=q.device)
    if tokens == 0:
        return q_out
    if k_slots.stride() != v_slots.stride() or k.shape[-1] != head_dim or head_dim % 2:
        raise ValueError("rope_kv: K and V caches of one layout and an even head_dim shared with the queries")
    half = head_dim // 2
    _rope_kv_kernel[(tokens, heads + k.shape[1])](
        q, k, v, cos, sin, q_out, k_slots, v_slots, slots,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), cos.stride(0),
        q_out.stride(0), q_out.stride(1), k_slots.stride(0), k_slots.stride(1),
        NUM_HEADS=heads, HALF=half, BLOCK=triton.next_power_of_2(half),
    )
    return q_out


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate [tokens, heads, head_dim] by per-token cos/sin of [tokens, head_dim / 2]."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(x.dtype)


def rope_kv_ref(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                k_slots: torch.Tensor, v_slots: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    """Plain-torch version with the same contract."""
    k_slots.index_copy_(0, slots, apply_rope(k, cos, sin))
    v_slots.index_copy_(0, slots, v)
    return apply_rope(q, cos, sin)
