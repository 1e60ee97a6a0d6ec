"""The Triton kernels against their plain-torch references, and the references against a
naive dense computation. On a CPU the Triton kernels run in Triton's interpreter
(tests/conftest.py switches it on), which is slow: shapes are kept small. Inputs are random,
never zeros; errors are ||out - ref|| / ||ref|| against a float64 reference (METHOD.md:
float32 arithmetic far under 1e-3; half-precision operands between 1e-3 and 1e-2)."""

import math

import pytest
import torch

from engine.kernels import paged_decode as dec
from engine.kernels import paged_prefill as pre
from engine.kernels import rmsnorm as rms
from engine.kernels import rope_cache as rk

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# float32 dots run in IEEE float32 on a GPU too (dot_precision; Triton's TF32 default gave 1.3e-3).
BOUND = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}
# the interpreter gets bf16 wrong
DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if DEVICE == "cuda" else [])


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    assert torch.isfinite(out).all(), "NaN or inf in the output"
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def paged(lens: list[int], block_size: int, kv_heads: int, head_dim: int, dtype, gen):
    """A KV cache with each sequence's blocks scattered at random, plus spare blocks."""
    per_seq = [-(-n // block_size) for n in lens]
    num_blocks = sum(per_seq) + 3
    k = torch.randn(num_blocks, block_size, kv_heads, head_dim, generator=gen).to(dtype)
    v = torch.randn(num_blocks, block_size, kv_heads, head_dim, generator=gen).to(dtype)
    perm = torch.randperm(num_blocks, generator=gen)
    table = torch.zeros(len(lens), max(per_seq), dtype=torch.int32)
    start = 0
    for i, n in enumerate(per_seq):
        table[i, :n] = perm[start:start + n]
        start += n
    return k.to(DEVICE), v.to(DEVICE), table.to(DEVICE)


def dense_attention(q, k, v, q_pos, scale):
    """Naive float64 attention of q [n, H, D] over contiguous k, v [L, KV, D]; query i sees keys <= q_pos[i]."""
    heads, kv_heads = q.shape[1], k.shape[1]
    k = k.double().repeat_interleave(heads // kv_heads, dim=1)
    v = v.double().repeat_interleave(heads // kv_heads, dim=1)
    scores = torch.einsum("nhd,lhd->hnl", q.double(), k) * scale
    visible = torch.arange(k.shape[0])[None, :] <= torch.tensor(q_pos)[:, None]
    probs = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
    return torch.einsum("hnl,lhd->nhd", probs, v)


def contiguous(cache, table_row, n, block_size):
    pos = torch.arange(n)
    return cache.cpu()[table_row.cpu()[pos // block_size].long(), pos % block_size]


# (heads, kv heads, head dim, block size, sequence lengths): GQA, MHA and MQA; a length of 1.
DECODE_SHAPES = [(8, 2, 32, 16, [5, 70, 33]), (4, 4, 64, 8, [100, 1]), (4, 1, 16, 16, [47])]


@pytest.mark.parametrize("heads,kv_heads,head_dim,block_size,lens", DECODE_SHAPES)
def test_decode_reference_matches_dense_attention(heads, kv_heads, head_dim, block_size, lens):
    gen = torch.Generator().manual_seed(1)
    k, v, table = paged(lens, block_size, kv_heads, head_dim, torch.float64, gen)
    q = torch.randn(len(lens), heads, head_dim, generator=gen, dtype=torch.float64).to(DEVICE)
    scale = head_dim ** -0.5
    out = dec.decode_attention_ref(q, k, v, table, torch.tensor(lens, dtype=torch.int32, device=DEVICE), scale)
    for i, n in enumerate(lens):   # the decode token is the last position: it sees all n keys
        ref = dense_attention(q[i:i + 1].cpu(), contiguous(k, table[i], n, block_size),
                              contiguous(v, table[i], n, block_size), [n - 1], scale)
        assert rel_err(out[i:i + 1].cpu(), ref) < 1e-12


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads,kv_heads,head_dim,block_size,lens", DECODE_SHAPES)
@pytest.mark.parametrize("partition", [512, 32])    # one partition (direct) and several (reduce kernel)
def test_decode_triton_matches_reference(dtype, heads, kv_heads, head_dim, block_size, lens, partition):
    gen = torch.Generator().manual_seed(2)
    k, v, table = paged(lens, block_size, kv_heads, head_dim, dtype, gen)
    q = torch.randn(len(lens), heads, head_dim, generator=gen).to(dtype).to(DEVICE)
    seq_lens = torch.tensor(lens, dtype=torch.int32, device=DEVICE)
    scale = head_dim ** -0.5
    out = dec.decode_attention(q, k, v, table, seq_lens, scale, partition_tokens=partition)
    ref = dec.decode_attention_ref(q.double(), k.double(), v.double(), table, seq_lens, scale)
    assert out.dtype == dtype and out.shape == q.shape
    assert rel_err(out, ref) < BOUND[dtype]


# (heads, kv heads, head dim, block size, [(cached tokens, chunk tokens)]): chunks on empty and
# on cached context, chunks longer than one 32-row tile, one-token chunks.
PREFILL_SHAPES = [(8, 2, 32, 16, [(0, 20), (35, 7), (16, 50)]), (4, 4, 64, 8, [(90, 40)]),
                  (4, 1, 16, 16, [(0, 1), (3, 2)])]


@pytest.mark.parametrize("heads,kv_heads,head_dim,block_size,chunks", PREFILL_SHAPES)
def test_prefill_reference_matches_dense_attention(heads, kv_heads, head_dim, block_size, chunks):
    gen = torch.Generator().manual_seed(3)
    lens = [c + n for c, n in chunks]
    k, v, table = paged(lens, block_size, kv_heads, head_dim, torch.float64, gen)
    sizes = [n for _, n in chunks]
    q = torch.randn(sum(sizes), heads, head_dim, generator=gen, dtype=torch.float64).to(DEVICE)
    cu = torch.tensor([0] + list(torch.tensor(sizes).cumsum(0)), dtype=torch.int32, device=DEVICE)
    ctx = torch.tensor([c for c, _ in chunks], dtype=torch.int32, device=DEVICE)
    out = pre.prefill_attention_ref(q, k, v, table, cu, ctx, head_dim ** -0.5)
    for i, (c, n) in enumerate(chunks):
        rows = slice(int(cu[i]), int(cu[i + 1]))
        ref = dense_attention(q[rows].cpu(), contiguous(k, table[i], c + n, block_size),
                              contiguous(v, table[i], c + n, block_size), [c + j for j in range(n)], head_dim ** -0.5)
        assert rel_err(out[rows].cpu(), ref) < 1e-12


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads,kv_heads,head_dim,block_size,chunks", PREFILL_SHAPES)
def test_prefill_triton_matches_reference(dtype, heads, kv_heads, head_dim, block_size, chunks):
    gen = torch.Generator().manual_seed(4)
    lens = [c + n for c, n in chunks]
    k, v, table = paged(lens, block_size, kv_heads, head_dim, dtype, gen)
    sizes = [n for _, n in chunks]
    q = torch.randn(sum(sizes), heads, head_dim, generator=gen).to(dtype).to(DEVICE)
    cu = torch.tensor([0] + list(torch.tensor(sizes).cumsum(0)), dtype=torch.int32, device=DEVICE)
    ctx = torch.tensor([c for c, _ in chunks], dtype=torch.int32, device=DEVICE)
    out = pre.prefill_attention(q, k, v, table, cu, ctx, head_dim ** -0.5)
    ref = pre.prefill_attention_ref(q.double(), k.double(), v.double(), table, cu, ctx, head_dim ** -0.5)
    assert rel_err(out, ref) < BOUND[dtype]


def test_decode_is_the_last_row_of_prefill():
    # A decode of token n-1 and a one-token prefill chunk on n-1 cached tokens are the same
    # attention, so the two kernels must agree on it.
    gen = torch.Generator().manual_seed(5)
    k, v, table = paged([37], 16, 2, 32, torch.float32, gen)
    q = torch.randn(1, 8, 32, generator=gen).to(DEVICE)
    one = torch.tensor([37], dtype=torch.int32, device=DEVICE)
    a = dec.decode_attention(q, k, v, table, one, 0.2)
    b = pre.prefill_attention(q, k, v, table, torch.tensor([0, 1], dtype=torch.int32, device=DEVICE),
                              torch.tensor([36], dtype=torch.int32, device=DEVICE), 0.2)
    assert rel_err(a, b) < BOUND[torch.float32]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,hidden", [(5, 256), (3, 100)])   # a power of two and a masked width
@pytest.mark.parametrize("with_residual", [True, False])
def test_rmsnorm_triton_matches_reference(dtype, rows, hidden, with_residual):
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(rows, hidden, generator=gen).to(dtype).to(DEVICE)
    res = torch.randn(rows, hidden, generator=gen).to(dtype).to(DEVICE) if with_residual else None
    w = (torch.rand(hidden, generator=gen) + 0.5).to(dtype).to(DEVICE)
    out, new_res = rms.rms_norm(x, w, 1e-5, res)
    ref, ref_res = rms.rms_norm_ref(x.double(), w.double(), 1e-5, None if res is None else res.double())
    assert rel_err(out, ref) < BOUND[dtype]
    assert rel_err(new_res, ref_res) < BOUND[dtype]


def test_rmsnorm_reference_by_hand():
    # x = [3, 4]: mean square (9 + 16) / 2 = 12.5, rms = sqrt(12.5 + eps); with weight [1, 2]
    # the output is [3, 8] / sqrt(12.5) = [0.848528, 2.262742].
    out, _ = rms.rms_norm_ref(torch.tensor([[3.0, 4.0]], dtype=torch.float64),
                              torch.tensor([1.0, 2.0], dtype=torch.float64), 0.0)
    assert out[0].tolist() == pytest.approx([3 / math.sqrt(12.5), 8 / math.sqrt(12.5)], rel=1e-12)


def rope_inputs(tokens, heads, kv_heads, head_dim, num_slots, dtype, gen):
    """q, k, v as the model passes them (views of one fused QKV output, rows strided by its width), the tokens'
    cos and sin (float32, positions at random), a cache of `num_slots` slots and the tokens' distinct slots."""
    qkv = torch.randn(tokens, (heads + 2 * kv_heads) * head_dim, generator=gen).to(dtype).to(DEVICE)
    q, k, v = qkv.split([heads * head_dim, kv_heads * head_dim, kv_heads * head_dim], dim=-1)
    angles = torch.rand(tokens, head_dim // 2, generator=gen) * 2 * math.pi
    cache = [torch.randn(num_slots, kv_heads, head_dim, generator=gen).to(dtype).to(DEVICE) for _ in range(2)]
    slots = torch.randperm(num_slots, generator=gen)[:tokens].to(DEVICE)
    return (q.view(tokens, heads, head_dim), k.view(tokens, kv_heads, head_dim), v.view(tokens, kv_heads, head_dim),
            angles.cos().to(DEVICE), angles.sin().to(DEVICE), cache, slots)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens,heads,kv_heads,head_dim", [(5, 8, 2, 32), (1, 4, 4, 64), (3, 4, 1, 24)])  # 24: masked
def test_rope_kv_triton_matches_reference(dtype, tokens, heads, kv_heads, head_dim):
    gen = torch.Generator().manual_seed(7)
    q, k, v, cos, sin, (k_cache, v_cache), slots = rope_inputs(tokens, heads, kv_heads, head_dim, 40, dtype, gen)
    ref_k, ref_v = k_cache.double(), v_cache.double()          # float64 copies, written by the reference
    ref_q = rk.rope_kv_ref(q.double(), k.double(), v.double(), cos.double(), sin.double(), ref_k, ref_v, slots)
    out = rk.rope_kv(q, k, v, cos, sin, k_cache, v_cache, slots)
    assert out.shape == q.shape and rel_err(out, ref_q) < BOUND[dtype]
    assert rel_err(k_cache, ref_k) < BOUND[dtype]
    # values are copied, not rotated: bit for bit; the slots not written keep what they held
    assert torch.equal(v_cache[slots], v) and torch.equal(v_cache.double(), ref_v.to(dtype).double())


def test_rope_kv_reference_by_hand():
    # one token, one head of dim 2 at angle 90 degrees: (x1, x2) = (1, 2) -> (x1 c - x2 s, x2 c + x1 s) = (-2, 1);
    # its key (3, 4) -> (-4, 3) lands in slot 2 of 3, its value (5, 6) as it is; slots 0 and 1 stay zero
    q, k, v = (torch.tensor([[[a, b]]], dtype=torch.float64) for a, b in ((1, 2), (3, 4), (5, 6)))
    cos, sin = torch.tensor([[0.0]], dtype=torch.float64), torch.tensor([[1.0]], dtype=torch.float64)
    k_cache, v_cache = torch.zeros(3, 1, 2, dtype=torch.float64), torch.zeros(3, 1, 2, dtype=torch.float64)
    out = rk.rope_kv_ref(q, k, v, cos, sin, k_cache, v_cache, torch.tensor([2]))
    assert out.flatten().tolist() == [-2.0, 1.0]
    assert k_cache.flatten().tolist() == [0, 0, 0, 0, -4.0, 3.0] and v_cache.flatten().tolist() == [0, 0, 0, 0, 5, 6]
