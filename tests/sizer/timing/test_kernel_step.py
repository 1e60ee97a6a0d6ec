"""The kernel-table step model: interpolation, and a step as the sum of its looked-up operators."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.step_batch import StepBatch, attention_pairs
from sizer.analytic.parallel import ParallelConfig
from sizer.inputs.model_spec import load_model
from sizer.inputs.scenario import scenario_from_dict
from sizer.sizing.resolve import resolve
from sizer.timing import roofline
from sizer.timing.kernel_shapes import model_shapes
from sizer.timing.kernel_step import Curve, KernelTableStepTimeModel, dense_gemms, elementwise_ops, gemm_curve
from sizer.timing.kernel_tables import (
    ElementwiseCost,
    KernelTables,
    KernelTablesHeader,
    Provenance,
    bundled_tables_dir,
    load_kernel_tables,
)
from sizer.timing.roofline import STEP_OVERHEAD_S
from sizer.timing.step_model import roofline_for, step_model_for

US = 1e-6


def tiny_resolved(tp: int = 1):
    return resolve(scenario_from_dict({
        "name": "tiny", "model": "tiny", "hardware": "h100-sxm",
        "deployment": {"engine": "vllm", "quantization": "bf16", "kv_cache_dtype": "bf16", "tensor_parallel_size": tp},
        "workload": {"arrival": {"process": "poisson", "rate_per_s": 1},
                     "prompt_tokens": {"distribution": "fixed", "value": 128},
                     "output_tokens": {"distribution": "fixed", "value": 16}}}, None))


# The tiny catalog model (hidden 256, MLP width 768, 4 layers, 8 query / 2 KV heads of 32, vocab 4096) at
# TP1 runs per layer: QKV (n = 8 x 32 + 2 x 2 x 32 = 384, k = 256), o_proj (256, 256), gate_up (1536, 256),
# down (256, 768); lm_head (4096, 256). Made-up latencies (us) at m = 1 and m = 64:
GEMMS = {(384, 256): (10, 20), (256, 256): (5, 9), (1536, 256): (20, 40), (256, 768): (15, 25), (4096, 256): (30, 60)}


def synthetic_tables() -> KernelTables:
    header = KernelTablesHeader(1, "h100-sxm", "test GPU", "vllm", "0.0.1",
                                ElementwiseCost(1e12, 1.0, 1 * US), Provenance("test", "0", "none", (), "2026-01-01"))
    gemm = {("bfloat16", n, k): {1: a * US, 64: b * US} for (n, k), (a, b) in GEMMS.items()}
    key = ("bfloat16", 8, 2, 32)
    return KernelTables(Path("."), header, gemm,
                        context_attention={(*key, 1): {64: 9 * US, 128: 20 * US}},
                        generation_attention={(*key, 1): {128: 7 * US, 256: 11 * US}}, allreduce={})


def test_the_tiny_models_gemms_are_its_fused_tp_shards():
    m = load_model("tiny")
    shapes = {(s.n, s.k): s.per_stage for s in dense_gemms(m, ParallelConfig())}
    assert shapes == {(384, 256): 4, (256, 256): 4, (1536, 256): 4, (256, 768): 4}
    # TP2: columns split for QKV (4 x 32 + 2 x 1 x 32 = 192) and gate_up (768); rows split for o and down
    shapes = {(s.n, s.k) for s in dense_gemms(m, ParallelConfig(tp=2))}
    assert shapes == {(192, 256), (256, 128), (768, 256), (256, 384)}


def test_a_decode_step_is_the_sum_of_its_looked_up_operators():
    model = KernelTableStepTimeModel(synthetic_tables(), roofline_for(tiny_resolved()))
    assert model.roofline_parts == ()
    # one sequence decoding on 127 cached tokens (KV length 128), m = 1:
    #   GEMMs 4 layers x (10 + 5 + 20 + 15) = 200 us; attention 4 x 7 = 28 us; lm_head 30 us
    #   element-wise: 4 layers x (2 norms + rotary + KV write + 1 activation) x 1 us = 20 us, plus bytes per
    #     token 4 x (2 x 4 x 256 + 2 x (256 + 64) + 4 x 64 + 3 x 768) x 2 bytes = 41,984 B at 1e12 B/s
    #     = 0.041984 us (q 8 x 32 = 256 and KV 2 x 32 = 64 values: rotary reads and writes q and k, the
    #     KV write reads k and v and writes them)
    #   + the step overhead (sampler)
    expected = (200 + 28 + 30 + 20 + 0.041984) * US + STEP_OVERHEAD_S
    assert model.step_time(StepBatch.from_seqs([(1, 127)])) == pytest.approx(expected, rel=1e-9)


def test_a_prefill_chunk_on_a_prefix_pays_its_own_share_of_the_causal_pairs():
    model = KernelTableStepTimeModel(synthetic_tables(), roofline_for(tiny_resolved()))
    # 64 new tokens on 64 cached: GEMMs at m = 64: 4 x (20 + 9 + 40 + 25) = 376 us; lm_head for the
    # one sequence sampled: m = 1, 30 us. Attention: the table's 128-token causal prefill (20 us,
    # 128 x 129 / 2 = 8,256 pairs) scaled to the chunk's 64 x 64 + 64 x 65 / 2 = 6,176 pairs, 4 layers.
    attention = 4 * 20 * 6176 / 8256
    elementwise = 20 + 64 * 0.041984
    expected = (376 + 30 + attention + elementwise) * US + STEP_OVERHEAD_S
    assert model.step_time(StepBatch.from_seqs([(64, 64)])) == pytest.approx(expected, rel=1e-9)


def test_a_verification_takes_logits_at_every_draft_position_and_the_bonus_token():
    # audit finding: a step verifying drafts priced the lm_head for one row a sequence; vLLM computes logits at
    # each of a verifying sequence's gamma draft positions and its bonus token (spec_decode_metadata.logits_indices)
    model = KernelTableStepTimeModel(synthetic_tables(), roofline_for(tiny_resolved()))
    # one sequence verifying 4 drafts on 127 cached tokens: 5 rows, not 1. The lm_head curve (4096, 256) runs
    # 30 us at m = 1 and 60 us at m = 64, so 5 rows cost 30 x 4 / 63 = 1.905 us more; nothing else reads the field
    verify = StepBatch(1, 5, 127, attention_pairs(5, 127), 0, 0, 4)
    extra = model.step_time(verify) - model.step_time(verify._replace(draft_tokens=0))
    assert extra == pytest.approx(30 * 4 / 63 * US, rel=1e-9)
    # the roofline: 100 sequences verifying 4 drafts each are 500 rows of 2 x 4,096 x 256 FLOPs at the H100's
    # 989.4 TFLOP/s bf16 x 0.8 (its profile) = 1.325 us, above the 0.92 us read of the 2 MiB lm_head (3.35 TB/s
    # x 0.85 bandwidth efficiency x 0.8 weight streaming, roofline.WEIGHT_STREAM_EFFICIENCY) that 100 rows cost
    # (their FLOPs take 0.265 us)
    r = model.roofline
    batch = StepBatch(100, 500, 100 * 127, 100 * attention_pairs(5, 127), 0, 0, 400)
    assert r.cost(batch).lm_head_s == pytest.approx(2 * 4096 * 256 * 500 / (989.4e12 * 0.8), rel=1e-9)
    assert r.cost(batch._replace(draft_tokens=0)).lm_head_s == pytest.approx(4096 * 256 * 2 / (3.35e12 * 0.85 * 0.8))


def test_curves_pass_through_measured_points_and_rise_between_them():
    c = Curve({1: 2.0, 4: 5.0, 16: 9.0})
    assert [c(1), c(4), c(16)] == [2.0, 5.0, 9.0]
    xs = [1 + i * 0.25 for i in range(61)]
    values = [c(x) for x in xs]
    assert values == sorted(values)
    assert c(2.5) == pytest.approx(3.5)          # halfway from (1, 2) to (4, 5)
    assert c(0.5) == 2.0                          # below the first point: flat
    assert c(28) == pytest.approx(13.0)           # past the last: its segment extended, 9 + 12 x 4 / 12


def test_gemm_shapes_between_measured_ones_interpolate_bilinearly():
    tables = synthetic_tables()
    # a made-up grid: n in {256, 512}, k in {256, 512}; t = n + k us at m = 1 (and 2x at m = 64)
    tables.gemm.clear()
    tables.gemm.update({("bfloat16", n, k): {1: (n + k) * US, 64: 2 * (n + k) * US}
                        for n in (256, 512) for k in (256, 512)})
    exact = gemm_curve(tables, "bfloat16", 512, 256)
    assert exact(1) == pytest.approx(768 * US) and exact(64) == pytest.approx(1536 * US)
    between = gemm_curve(tables, "bfloat16", 384, 320)        # linear in n and k: 384 + 320
    assert between(1) == pytest.approx(704 * US)
    assert gemm_curve(tables, "fp8", 384, 320) is None        # a dtype not measured: the roofline prices it


def test_gemm_shapes_past_the_grid_are_never_faster_than_its_edge():
    # audit finding: a table whose latency falls as n grows (n 1: 1,000 us, n 2: 1 us, at k 4,096), extended along
    # its last segment to n 4,096, priced the GEMM at 1 - 999 x 4,094 us (a prefill of -1,502,746 ms; the
    # simulator stopped on a negative step). Past the largest n or k the curve is at least the edge's
    tables = synthetic_tables()
    tables.gemm.clear()
    tables.gemm.update({("bfloat16", 1, 4096): {1: 1000 * US, 8192: 1000 * US},
                        ("bfloat16", 2, 4096): {1: 1 * US, 8192: 1 * US}})
    curve = gemm_curve(tables, "bfloat16", 4096, 4096)
    assert [curve(m) for m in (1, 100, 8192, 1 << 20)] == [1 * US] * 4
    # in n and k at once: falling from the corner (1, 1) at 1,000 us to 3 us at the other three, extended to
    # (4,096, 14,336): along n at k 1 and along k at n 1 the extension falls below zero, but the product term
    # (bilinear: a GEMM's work grows as n x k) rises; at the edge (2, 2) the floor is 3 us, and 5 us at m 64
    tables.gemm.clear()
    tables.gemm.update({("bfloat16", n, k): {1: (1000 if (n, k) == (1, 1) else 3) * US, 64: 5 * US}
                        for n in (1, 2) for k in (1, 2)})
    for n, k in ((4096, 14336), (4096, 1), (1, 14336), (4096, 2)):
        curve = gemm_curve(tables, "bfloat16", n, k)
        assert curve(1) >= 3 * US and curve(64) >= 5 * US and curve(1 << 16) >= 5 * US
    assert gemm_curve(tables, "bfloat16", 4096, 2)(1) == pytest.approx(3 * US)
    # a table rising with n is extended along its last segment as before: 256 -> 512 adds 256 us, so 1,024 is 1,280
    tables.gemm.clear()
    tables.gemm.update({("bfloat16", n, k): {1: (n + k) * US, 64: 2 * (n + k) * US}
                        for n in (256, 512) for k in (256, 512)})
    assert gemm_curve(tables, "bfloat16", 1024, 256)(1) == pytest.approx(1280 * US)


def test_the_bundled_h200_tensorrt_llm_lm_head_of_a_128k_vocabulary_is_never_negative():
    # the bundled tables' largest n is 65,536; Llama-3's 128,256-row lm_head extends the 51,200 -> 65,536 segment
    # 4.375 times over. At m 161 the 51,200 row measured a kernel-selection spike (364.6 us against 285.0 us at
    # 65,536), and the extension priced the lm_head at 285.0 - 4.375 x 79.6 = -63.3 us; now at least 285.0 us
    tables = load_kernel_tables(bundled_tables_dir("h200", "tensorrt-llm"), whole=False)
    lm_head = gemm_curve(tables, "bfloat16", 128256, 8192)
    edge = gemm_curve(tables, "bfloat16", 65536, 8192)
    assert lm_head(161) == pytest.approx(edge(161)) and edge(161) == pytest.approx(285.0 * US)
    assert all(lm_head(m) >= edge(m) > 0 for m in range(1, 4097))
    assert lm_head(160) > edge(160)                # where the segment rises, the extension as before


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(1e-3, 1e6), min_size=8, max_size=8), st.integers(1, 1 << 20), st.integers(1, 1 << 20),
       st.integers(1, 1 << 20))
def test_any_positive_gemm_table_prices_any_shape_above_zero(latencies, n, k, m):
    tables = synthetic_tables()
    tables.gemm.clear()
    corners = [(n_, k_) for n_ in (64, 128) for k_ in (64, 128)]
    tables.gemm.update({("bfloat16", *nk): {1: latencies[2 * i] * US, 64: latencies[2 * i + 1] * US}
                        for i, nk in enumerate(corners)})
    assert gemm_curve(tables, "bfloat16", n, k)(m) >= min(latencies) * US * (1 - 1e-12)


def test_attention_past_the_largest_measured_batch_is_never_faster_than_that_batch():
    from sizer.timing.kernel_step import BatchCurves
    # batch 1 at 1,000 us, batch 2 at 1 us: extended to batch 64 the last segment ran to -62,937 us, priced as 0
    rows = BatchCurves({1: {1: 1000 * US, 100_000: 1000 * US}, 2: {1: 1 * US, 100_000: 1 * US}})
    assert rows(64, 5000) == pytest.approx(1 * US)
    rising = BatchCurves({1: {1: 1 * US, 100: 2 * US}, 2: {1: 2 * US, 100: 4 * US}})
    assert rising(4, 100) == pytest.approx(8 * US)            # the last segment extended, as before


def test_what_the_tables_lack_is_priced_by_the_roofline_and_named():
    r = tiny_resolved(tp=2)                       # the synthetic tables hold no TP2 shapes nor an all-reduce
    model = KernelTableStepTimeModel(synthetic_tables(), roofline_for(r))
    assert "all-reduce across 2 GPUs" in model.roofline_parts
    assert any(p.startswith("attention of") for p in model.roofline_parts)
    assert "roofline for" in model.name
    assert model.step_time(StepBatch.from_seqs([(1, 127)])) > STEP_OVERHEAD_S


def test_query_heads_the_tables_lack_interpolate_between_measured_ones_of_the_same_kv_heads():
    # the tiny model's 8 query / 2 KV heads of 32 removed; 4 and 16 query heads on 2 KV heads measured (made-up
    # latencies): 8 heads lie a third of the way, so decode at KV length 128 is 6 + (12 - 6) / 3 = 8 us a layer,
    # and a 64-token prefill 9 + (21 - 9) / 3 = 13 us a layer (the H100 vLLM tables' rows of one KV-head count
    # change little with the query heads: docs/fidelity.md, "Head shapes the tables lack")
    tables = synthetic_tables()
    for table in (tables.generation_attention, tables.context_attention):
        table.clear()
    for heads, decode_us, prefill_us in ((4, 6, 9), (16, 12, 21)):
        tables.generation_attention[("bfloat16", heads, 2, 32, 1)] = {128: decode_us * US, 256: 2 * decode_us * US}
        tables.context_attention[("bfloat16", heads, 2, 32, 1)] = {64: prefill_us * US, 128: 2 * prefill_us * US}
    model = KernelTableStepTimeModel(tables, roofline_for(tiny_resolved()))
    assert model.roofline_parts == ()
    assert "8 x 2 heads between the measured 4 and 16" in model.sources["attention"]
    assert model.attention_s(StepBatch.from_seqs([(1, 127)])) == pytest.approx(4 * 8 * US)
    assert model.attention_s(StepBatch.from_seqs([(64, 0)])) == pytest.approx(4 * 13 * US)
    # never extrapolated: with 16 query heads alone measured, the roofline prices the attention and says so
    for table in (tables.generation_attention, tables.context_attention):
        del table[("bfloat16", 4, 2, 32, 1)]
    model = KernelTableStepTimeModel(tables, roofline_for(tiny_resolved()))
    assert any(p.startswith("attention of") for p in model.roofline_parts)


def test_elementwise_ops_count_norms_rotary_kv_writes_and_gated_activations():
    ew = elementwise_ops(load_model("tiny"), ParallelConfig())
    # per layer: 2 norms, rotary and KV write (softmax attention), the SwiGLU activation; bytes as
    # test_a_decode_step_is_the_sum_of_its_looked_up_operators derives them
    assert ew.ops_per_stage == 20 and ew.bytes_per_token == 4 * (2 * 4 * 256 + 2 * (256 + 64) + 4 * 64 + 3 * 768) * 2
    # TP2 splits the heads: q 4 x 32 = 128, KV 1 x 32 = 32 values per GPU, the activation 384 wide
    ew2 = elementwise_ops(load_model("tiny"), ParallelConfig(tp=2))
    assert ew2.bytes_per_token == 4 * (2 * 4 * 256 + 2 * (128 + 32) + 4 * 32 + 3 * 384) * 2


def test_tensorrt_llm_runs_rotary_and_the_cache_write_in_its_attention_op_and_norms_in_its_all_reduces():
    # TensorRT-LLM's attention op applies RoPE and appends to the KV cache (its attention rows hold both), and under
    # TP its decoder layers fuse each residual add + RMSNorm into an all-reduce (AllReduceFusionOp.RESIDUAL_RMS_NORM):
    # on one GPU a tiny layer keeps its 2 norms and the activation (3 kernels, 4 x (2 x 4 x 256 + 3 x 768) x 2 bytes a
    # token), at TP 2 the activation alone (4 x 3 x 384 x 2 bytes); vLLM's count is the test above's
    m = load_model("tiny")
    one = elementwise_ops(m, ParallelConfig(), engine="tensorrt-llm")
    assert one.ops_per_stage == 4 * 3 and one.bytes_per_token == 4 * (2 * 4 * 256 + 3 * 768) * 2
    two = elementwise_ops(m, ParallelConfig(tp=2), engine="tensorrt-llm")
    assert two.ops_per_stage == 4 * 1 and two.bytes_per_token == 4 * 3 * 384 * 2
    # attention data parallelism: each rank runs its own attention, no all-reduce to fuse its norms into
    ranks = elementwise_ops(m, ParallelConfig(dp=2, expert_parallel=True), engine="tensorrt-llm")
    assert ranks.ops_per_stage == one.ops_per_stage


def test_mla_layers_count_their_latent_norms_rotary_and_cache_write_unless_a_module_table_prices_them():
    # DeepSeek-V3 (config.json: hidden 7,168, 61 layers, 128 heads, q_lora_rank 1,536, kv_lora_rank 512, rope 64): a
    # layer's fused add + norm twice (4 x 7,168 values each), and outside a module table its q and kv latents' norms
    # (2 x (1,536 + 512)), the rope parts' rotary (2 x (128 / 8 + 1) x 64 at TP 8) and the cache write of latent and
    # rope key (2 x (512 + 64)): 2 + 4 kernels a layer; the first 3 layers' dense MLP (first_k_dense_replace 3,
    # width 18,432) its activation (3 x 18,432 / 8 values). A module table (vLLM's, TensorRT-LLM's) holds the MLA
    # block whole.
    m, p = load_model("deepseek-v3"), ParallelConfig(tp=8)
    assert (m.hidden_size, m.num_layers) == (7168, 61)
    dense = 3 * (3 * 18432 // 8)
    kernel_only = elementwise_ops(m, p)
    assert kernel_only.ops_per_stage == 61 * 6 + 3
    assert kernel_only.bytes_per_token == (61 * (2 * 4 * 7168 + 2 * (1536 + 512) + 2 * 17 * 64 + 2 * 576) + dense) * 2
    modules = elementwise_ops(m, p, frozenset(range(61)))
    assert modules.ops_per_stage == 61 * 2 + 3 and modules.bytes_per_token == (61 * 2 * 4 * 7168 + dense) * 2


def test_mla_element_wise_kernels_are_counted_where_the_attention_kernel_rows_price_the_block():
    # DeepSeek-V3 on 8 H200s: vLLM's tables hold the MLA block whole (module tables), SGLang's the attention kernel
    # alone; the element-wise fixed cost counts 2 norms a layer and 3 dense activations under vLLM (125 kernels), and
    # 4 more a layer under SGLang (369), each at its folder's latency (tables.yaml)
    def step(engine):
        return step_model_for(resolve(scenario_from_dict({
            "name": "dsv3", "model": "deepseek-v3", "hardware": "h200",
            "deployment": {"engine": engine, "tensor_parallel_size": 8, "max_model_len": 8192},
            "workload": {"arrival": {"process": "poisson", "rate_per_s": 1},
                         "prompt_tokens": {"distribution": "fixed", "value": 1024},
                         "output_tokens": {"distribution": "fixed", "value": 256}}}, None)))
    vllm, sglang = step("vllm"), step("sglang")
    assert vllm.latent and not vllm.latent_kernel_only and sglang.latent_kernel_only
    for model, kernels in ((vllm, 125), (sglang, 369)):
        assert model.elementwise_fixed_s == pytest.approx(kernels * model.tables.header.elementwise.latency_s)


def test_weight_only_formats_take_their_gemms_from_the_roofline():
    """AWQ streams 4-bit weights: no bf16 GEMM of the tables prices it, so each dense GEMM shape goes to
    the roofline, named; the rest of the step still comes from the tables."""
    r = resolve(scenario_from_dict({
        "name": "tiny", "model": "tiny", "hardware": "h100-sxm",
        "deployment": {"engine": "vllm", "quantization": "awq", "kv_cache_dtype": "bf16"},
        "workload": {"arrival": {"process": "poisson", "rate_per_s": 1},
                     "prompt_tokens": {"distribution": "fixed", "value": 128},
                     "output_tokens": {"distribution": "fixed", "value": 16}}}, None))
    roofline = roofline_for(r)
    model = KernelTableStepTimeModel(synthetic_tables(), roofline)
    assert "4 of 4 dense GEMM shapes (awq weights)" in model.roofline_parts
    # the decode step of test_a_decode_step_is_the_sum_of_its_looked_up_operators, its 200 us of table GEMMs
    # replaced by the roofline's price of the same four shapes, 4 layers each
    gemms = sum(4 * roofline.gemm_s(1, n, k) for n, k in ((384, 256), (256, 256), (1536, 256), (256, 768)))
    expected = (28 + 30 + 20 + 0.041984) * US + gemms + STEP_OVERHEAD_S
    assert model.step_time(StepBatch.from_seqs([(1, 127)])) == pytest.approx(expected, rel=1e-9)


def test_a_moe_models_experts_come_from_the_moe_table():
    r = resolve(scenario_from_dict({
        "name": "moe", "model": "qwen3-30b-a3b", "hardware": "h100-sxm",
        "deployment": {"engine": "vllm", "quantization": "bf16", "max_model_len": 8192},
        "workload": {"arrival": {"process": "poisson", "rate_per_s": 1},
                     "prompt_tokens": {"distribution": "fixed", "value": 128},
                     "output_tokens": {"distribution": "fixed", "value": 16}}}, None))
    tables = load_kernel_tables(bundled_tables_dir("h100-sxm", "vllm"))
    model = KernelTableStepTimeModel(tables, roofline_for(r))
    assert model.experts_from_tables and "MoE experts" not in model.roofline_parts
    # a step's GEMM-like work at m tokens: every dense GEMM shape from the GEMM table, plus 48 MoE layers of the m
    # tokens through one layer's experts as moe_perf measured them routed by Qwen's power law (alpha 1.2:
    # moe_skewed's power_law_1.2 row, 47.8 us at one token, 359.3 us at 32; no all-reduce at TP 1). The balanced
    # row read as random routing would give 49.07 us and 49.07 + (422.3 - 49.07) x 0.873 = 375 us at 32 (128
    # experts, top 8: random routing touches 1 - (1 - 8/128)^32 = 87.3% of them, the balanced row all)
    def dense(m: int) -> float:
        return sum(s.per_stage * gemm_curve(tables, "bfloat16", s.n, s.k)(m) for s in dense_gemms(r.model, r.parallel))
    assert model.per_token(1) == pytest.approx(dense(1) + 48 * 47.8e-6, rel=1e-9)
    assert model.per_token(32) == pytest.approx(dense(32) + 48 * 359.3e-6, rel=1e-9)
    assert model.sources["MoE experts"] == "kernel tables (the tokens routed by a power law, alpha 1.2, as measured)"


def bundled_h100_model(model: str, tp: int):
    r = resolve(scenario_from_dict({
        "name": model, "model": model, "hardware": "h100-sxm",
        "deployment": {"engine": "vllm", "tensor_parallel_size": tp, "max_model_len": 8192},
        "workload": {"arrival": {"process": "poisson", "rate_per_s": 1},
                     "prompt_tokens": {"distribution": "fixed", "value": 128},
                     "output_tokens": {"distribution": "fixed", "value": 16}}}, None))
    tables = load_kernel_tables(bundled_tables_dir("h100-sxm", "vllm"))
    return r, tables, KernelTableStepTimeModel(tables, roofline_for(r))


def test_deepseek_v3s_mla_blocks_come_from_the_mla_module_tables():
    """DeepSeek-V3 (FP8 block weights, bf16 KV) at TP 8 on an H100: 61 MLA layers of 128 / 8 = 16 heads per GPU."""
    r, tables, model = bundled_h100_model("deepseek-v3", 8)
    assert not any("latent attention" in p for p in model.roofline_parts)
    assert model.roofline_groups == []
    # the module prices the block's projections: none of its self_attn matrices is left among the GEMMs
    assert len(dense_gemms(r.model, r.parallel)) - len(dense_gemms(r.model, r.parallel, frozenset(range(61)))) == 4
    key = ("fp8_block", "bfloat16", 7168, 1536, 512, 128, 64, 128, 16)
    # 24 sequences decoding at KV length 1,536: halfway between the measured batches 16 and 32 and between the
    # measured KV lengths 1,024 and 2,048 (mla_generation: batch 16 118.2 / 124.9 us, batch 32 129.0 / 143.0 us
    # at 1,024 / 2,048), so the mean of the four corners, x 61 layers
    corners = [tables.mla_generation[(*key, b)][n] for b in (16, 32) for n in (1024, 2048)]
    decode = StepBatch.from_seqs([(1, 1535)] * 24)
    assert model.attention_s(decode) == pytest.approx(61 * sum(corners) / 4, rel=1e-9)
    assert 61 * sum(corners) / 4 == pytest.approx(61 * (118.2 + 124.9 + 129.0 + 143.0) / 4 * US, rel=1e-3)
    # a 1,024-token prompt on nothing cached: the measured causal prefill, 244.0 us a layer
    assert model.attention_s(StepBatch.from_seqs([(1024, 0)])) == pytest.approx(61 * 244.0 * US, rel=1e-3)
    # a 2,048-token chunk on 6,144 cached: the last 2,048 tokens of an 8,192-token prefill, t(8192) - t(6144)
    # (1,624 - 1,122 us), more than the chunk alone on nothing (t(2048), 406.6 us)
    t = tables.mla_context[(*key, 1)]
    assert t[8192] - t[6144] > t[2048]
    assert model.attention_s(StepBatch.from_seqs([(2048, 6144)])) == pytest.approx(61 * (t[8192] - t[6144]), rel=1e-9)
    # the second 1,024-token chunk of a 2,048-token prompt: t(2048) - t(1024) (406.6 - 244.0 us) is less than the
    # first chunk cost (the block's fixed and per-token costs shrink per token as it grows): at least t(1024)
    assert t[2048] - t[1024] < t[1024]
    assert model.attention_s(StepBatch.from_seqs([(1024, 1024)])) == pytest.approx(61 * t[1024], rel=1e-9)


def test_sparse_mla_stays_on_the_roofline_and_is_named():
    """DeepSeek-V3.2's indexer and sparse attention are not the dense MLA block the tables measured."""
    _, _, model = bundled_h100_model("deepseek-v3.2", 8)
    assert model.latent == [] and any("sparse" in p for p in model.roofline_parts)


def test_qwen3_next_gated_delta_net_comes_from_the_gdn_tables():
    """Qwen3-Next-80B-A3B at TP 4: 36 of its 48 layers gated delta net, 16 / 4 key and 32 / 4 value heads of 128
    per GPU, a 4-wide convolution."""
    _, tables, model = bundled_h100_model("qwen3-next-80b-a3b", 4)
    assert "the recurrent state (Mamba-2, linear attention)" not in model.roofline_parts
    assert model._state_s_per_seq == 0.0
    [(layers, decode_t, _)] = model.delta_net
    assert layers == 36
    # 24 decoding sequences: halfway between the measured batches 16 and 32 (8.983 and 12.17 us)
    measured = tables.gdn_generation[(4, 128, 8, 128, 4)]
    assert decode_t(24) == pytest.approx((measured[16] + measured[32]) / 2, rel=1e-12)
    assert decode_t(24) == pytest.approx((8.983 + 12.17) / 2 * US, rel=1e-3)
    # the step's attention: the 12 full-attention layers from the attention tables plus 36 x the GDN kernels
    batch = StepBatch.from_seqs([(1, 1535)] * 24)
    softmax = sum(n * decode(24, 1536) for n, _, decode, _ in model.attention)
    assert model.attention_s(batch) == pytest.approx(softmax + 36 * decode_t(24), rel=1e-9)


def test_the_importer_keeps_the_mla_and_gdn_shapes_of_each_tp_split():
    shapes = model_shapes([load_model("deepseek-v3"), load_model("deepseek-v3.2"), load_model("qwen3-next-80b-a3b")])
    # DeepSeek-V3's 128 heads split over TP 1, 2, 4, 8; the latent (and the hidden size) are not split. V3.2 is
    # sparse MLA: not a shape of these tables
    assert shapes.mla == {(7168, 1536, 512, 128, 64, 128, 128 // tp) for tp in (1, 2, 4, 8)}
    # Qwen3-Next: 16 key and 32 value heads of 128, a 4-wide convolution, heads split by TP
    assert shapes.gdn == {(16 // tp, 128, 32 // tp, 128, 4) for tp in (1, 2, 4, 8)}


@functools.cache
def standard_a100_model() -> KernelTableStepTimeModel:
    """The standard simulated workload's model (Llama-2-7B on one A100-80GB): the bundled A100 tables hold no
    attention of its heads, so the roofline prices its one plain KV group alone."""
    from sizer.inputs.scenario import load_scenario
    from sizer.timing.step_model import step_model_for
    scenario = Path(__file__).resolve().parents[3] / "benchmarks" / "scenarios" / "llama-2-7b-a100-poisson10.yaml"
    model = step_model_for(resolve(load_scenario(scenario)))
    assert isinstance(model, KernelTableStepTimeModel)
    return model


@settings(max_examples=400, deadline=None)
@given(st.integers(1, 256), st.integers(0, 8192), st.integers(0, 1 << 22), st.integers(0, 1 << 24),
       st.integers(0, 8), st.integers(0, 4096))
def test_a_steps_time_from_its_four_sums_is_step_time_to_the_bit(seqs, tokens, context, extra_pairs, pf_seqs,
                                                                 pf_tokens):
    # sums_step_time is step_time flattened (the same operations in the same order), so the floats are equal, not
    # close; the prefill fields are not read where it applies (attention from the roofline's plain groups)
    model = standard_a100_model()
    sums = model.sums_step_time()
    assert sums is not None
    pairs = context + tokens + extra_pairs
    batch = StepBatch(seqs, tokens, context, pairs, pf_seqs, pf_tokens)
    assert sums(seqs, tokens, context, pairs) == model.step_time(batch)


def test_the_simulators_memo_prices_a_verification_with_its_logits_rows_not_by_the_four_sums():
    # the four sums leave out the drafts' logits rows: a verification of 64 sequences x 4 drafts on 1,000 cached
    # tokens each is 320 rows, which the memo must price as step_time does (the lm_head of 320 rows costs more than
    # that of 64 on the A100 tables, so the four sums alone would come out lower)
    from simulator.engine_loop import BARE
    from simulator.replica import StepTimes
    model = standard_a100_model()
    verify = StepBatch(64, 320, 64_000, 64 * attention_pairs(5, 1000), 0, 0, 256)
    assert StepTimes(model, BARE)(verify) == model.step_time(verify) > model.step_time(verify._replace(draft_tokens=0))


def test_a_step_the_tables_price_attention_of_has_no_four_sums_path():
    # the synthetic tables hold the tiny model's attention: step_time reads the batch's prefill split
    model = KernelTableStepTimeModel(synthetic_tables(), roofline_for(tiny_resolved()))
    assert model.attention and model.sums_step_time() is None


def test_lora_adapters_are_priced_by_the_roofline_on_top_of_the_tables_and_named():
    """The bundled LoRA scenario (Llama-3.1-8B on an H100 in vLLM, adapters at rank 16): no table holds the
    adapters' shrink/expand GEMMs, so a step with LoRA tokens costs the tables' step plus the roofline's `lora_s`
    (per stage; one stage here), the plan names it, and the four-sums path is off (LoRA tokens are a later field).
    Before this, the tables priced a LoRA step as a plain one (the review of 2026-12-02 found it)."""
    from sizer.inputs.scenario import load_scenario
    from sizer.timing.step_model import step_model_for
    scenario = Path(__file__).resolve().parents[3] / "scenarios" / "gateway-lora-50-adapters.yaml"
    model = step_model_for(resolve(load_scenario(scenario)))
    assert isinstance(model, KernelTableStepTimeModel) and model.roofline.lora is not None
    plain, with_lora = StepBatch(8, 8, 8000, 8008), StepBatch(8, 8, 8000, 8008, lora_tokens=8, lora_adapters=2)
    extra = model.roofline.lora_s(with_lora)
    assert extra > 0
    assert model.step_time(with_lora) == pytest.approx(model.step_time(plain) + extra, rel=1e-12)
    assert model.sources["LoRA adapters"] == "roofline" and "LoRA adapters" in model.roofline_parts
    assert model.sums_step_time() is None



def tables_model(model: str, tp: int, gpu: str, engine: str, **deployment) -> KernelTableStepTimeModel:
    """`model` at TP `tp` on `gpu` priced by the bundled tables of `engine`."""
    r = resolve(scenario_from_dict({
        "name": model, "model": model, "hardware": gpu,
        "deployment": {"engine": engine, "tensor_parallel_size": tp, "max_model_len": 8192, **deployment},
        "workload": {"arrival": {"process": "poisson", "rate_per_s": 1},
                     "prompt_tokens": {"distribution": "fixed", "value": 128},
                     "output_tokens": {"distribution": "fixed", "value": 16}}}, None))
    return KernelTableStepTimeModel(load_kernel_tables(bundled_tables_dir(gpu, engine)), roofline_for(r))


def h100_model(model: str, tp: int, **deployment) -> KernelTableStepTimeModel:
    return tables_model(model, tp, "h100-sxm", "vllm", **deployment)


# Models whose tables price attention, one for each part `decode_step_time` flattens: plain attention (Llama-3.1-70B at
# TP 4), sliding windows (gpt-oss-20b), roofline GEMMs (Llama-3.1-8B's AWQ 4-bit matrices: no table holds them), a
# chunked window (Llama 4 Scout), MLA blocks (DeepSeek-V3 at TP 8), gated delta net beside attention with the
# roofline's experts (Qwen3-Next), a recurrent state per sequence (nemotron-h-56b's Mamba-2), MoE experts in the
# per-token curve (Mixtral at TP 2) and priced apart at expert parallelism's load imbalance (Mixtral at TP 2 with EP)
DECODE_MODELS = (("llama-3.1-70b", 4, False), ("gpt-oss-20b", 1, False), ("llama-3.1-8b", 1, False, "awq"),
                 ("llama-4-scout-17b-16e", 1, False), ("deepseek-v3", 8, False), ("qwen3-next-80b-a3b", 4, False),
                 ("nemotron-h-56b", 2, False), ("mixtral-8x7b", 2, False), ("mixtral-8x7b", 2, True))


@functools.cache
def decode_model(name: str, tp: int, ep: bool, quantization: str = "auto") -> KernelTableStepTimeModel:
    return h100_model(name, tp, enable_expert_parallel=ep, quantization=quantization)


def test_the_decode_models_cover_every_part_of_a_decode_step():
    models = [decode_model(*m) for m in DECODE_MODELS]
    assert all(m.decode_step_time() is not None for m in models)
    assert any(m.roofline_gemms for m in models) and any(m.latent for m in models)
    assert any(m.delta_net for m in models) and any(m._roofline_experts for m in models)
    assert any(m._experts is not None for m in models) and any(m._state_s_per_seq for m in models)
    assert {window is None for m in models for _, window, _, _ in m.attention} == {True, False}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(DECODE_MODELS), st.integers(1, 512), st.integers(0, 1 << 22))
def test_a_decode_steps_time_from_its_seqs_and_context_is_step_time_to_the_bit(name_tp_ep, seqs, context):
    # decode_step_time is step_time of StepBatch(seqs, seqs, context, context + seqs) flattened (the same operations
    # in the same order), so the floats are equal, not close; the simulator prices its decode steps with it
    model = decode_model(*name_tp_ep)
    assert model.decode_step_time()(seqs, context) == model.step_time(StepBatch(seqs, seqs, context, context + seqs))


def test_no_decode_path_where_the_roofline_prices_attention_or_ranks_differ():
    # the roofline's attention alone (gemma-2-9b's windows, DeepSeek-V3.2's sparse MLA, Llama-2-7B on an A100, which
    # has the four-sums path) and a data-parallel model's busiest rank (another batch: rank_and_expert_tokens)
    assert h100_model("gemma-2-9b", 1).decode_step_time() is None
    assert h100_model("deepseek-v3.2", 8).decode_step_time() is None
    assert standard_a100_model().decode_step_time() is None
    dep = h100_model("deepseek-v3", 8, enable_attention_dp=True)
    assert dep.ranks == 8 and dep.decode_step_time() is None


def test_decode_past_the_measured_context_never_reads_the_kv_faster_than_the_memory():
    # the synthetic decode row made flat past 128 tokens (7 us at 128 and at 256): its last segment continued would
    # price any context at 7 us. The tiny model's KV per token and layer: K and V of 2 heads of 32 in bf16 = 256 B,
    # at the H100's 3.35e12 B/s: 256 / 3.35e12 s a token; at KV length 256 + 100,000 that is 7 us + 100,000 x 256 /
    # 3.35e12 s = 7 + 7.641791 us a layer, 4 layers
    tables = synthetic_tables()
    tables.generation_attention[("bfloat16", 8, 2, 32, 1)] = {128: 7 * US, 256: 7 * US}
    model = KernelTableStepTimeModel(tables, roofline_for(tiny_resolved()))
    expected = 4 * (7 * US + 100_000 * 256 / 3.35e12)
    assert model.attention_s(StepBatch.from_seqs([(1, 256 + 100_000 - 1)])) == pytest.approx(expected, rel=1e-12)
    assert model.attention_s(StepBatch.from_seqs([(1, 199)])) == pytest.approx(4 * 7 * US)   # measured: as before
    assert "at least the KV read at 3.35 TB/s" in model.sources["attention"]


def h200_trtllm_model(name: str, tp: int = 1, attention_dp: bool | None = None) -> KernelTableStepTimeModel:
    """`name` on H200s as the saturation rows run it (benchmarks/published/replay_saturation.py): FP8 weights and KV
    cache, TensorRT-LLM's tables, a MoE model (tp > 1) with attention DP (each GPU all the heads) unless told."""
    return tables_model(name, tp, "h200", "tensorrt-llm", quantization="fp8", kv_cache_dtype="fp8",
                        enable_attention_dp=tp > 1 if attention_dp is None else attention_dp)


def test_the_h200_tables_decode_past_their_grid_at_the_rate_the_kernel_or_the_memory_reads_the_kv():
    # hardware_profiles/kernels/h200-tensorrt-llm-1.3.0rc20/generation_attention.csv.gz, FP8 KV:
    # Llama-3.1-8B (32 x 8 heads of 128: 2 x 8 x 128 x 1 B = 2,048 B a token a layer), batch 1,024 measured to 256
    # tokens: 113.9 us at 128, 159.1 us at 256. That segment reads 1,024 x 128 x 2,048 B in 45.2 us, 5.9 TB/s, more
    # than the H200's 4.8e12 B/s, so at 1,960 tokens: 159.1 us + (1,960 - 256) x 1,024 x 2,048 / 4.8e12 s
    # = 159.1 + 744.448 us (its segment alone: 159.1 + 45.2 x 1,704 / 128 = 760.8 us)
    decode = h200_trtllm_model("llama-3.1-8b").attention[0][2]
    assert decode(1024, 1960) == pytest.approx((159.1 + 1704 * 1024 * 2048 / 4.8e12 / US) * US, rel=1e-9)
    # Qwen3-235B-A22B (64 x 4 heads: 1,024 B a token a layer), batch 32 measured to 8,192 tokens: 55.22 us at 4,096,
    # 85.74 us at 8,192, a segment reading 32 x 4,096 x 1,024 B in 30.52 us (4.4 TB/s, under the 4.8): continued
    # to 21,000 tokens, 85.74 + 30.52 x 12,808 / 4,096 = 181.17 us (the KV read at 4.8e12 B/s would add 87.4 us)
    decode = h200_trtllm_model("qwen3-235b-a22b", 8).attention[0][2]
    assert decode(32, 21000) == pytest.approx((85.74 + 30.52 * 12808 / 4096) * US, rel=1e-9)
    # the floor reads one GPU's share of the KV heads: Llama-3.1-70B's 8 KV heads of 128 at TP 2 (no attention DP)
    # are 4 a GPU, 2 x 4 x 128 x 1 B = 1,024 B a token a layer, over the H200's 4.8e12 B/s
    decode = h200_trtllm_model("llama-3.1-70b", 2, attention_dp=False).attention[0][2]
    assert decode.s_per_token == pytest.approx(1024 / 4.8e12, rel=1e-12)


def test_sglangs_mla_is_priced_by_its_attention_kernel_rows_and_its_projections_as_gemms():
    # SGLang's bundled H200 tables hold no MLA module rows, only the attention kernel (aiconfigurator-core 0.12.0,
    # SGLang 0.5.14, context_mla_perf / generation_mla_perf): DeepSeek-V3 at TP 8 (16 heads a GPU, bf16 KV) prices
    # its 61 MLA layers' attention from them, not by the roofline (the q/kv/o projections stay GEMMs: no module rows).
    # Hand-derived from hardware_profiles/kernels/h200-sglang-0.5.14: 4 sequences decoding on 2,047 cached tokens
    # read KV length 2,048, 17.73 us a layer; one fresh 1,024-token prompt 46.24 us a layer
    model = tables_model("deepseek-v3", 8, "h200", "sglang")
    assert model.latent_kernel_only and not model.roofline_groups
    assert "MLA: the attention kernel's rows, its projections as GEMMs" in model.sources["attention"]
    assert model.attention_s(StepBatch.from_seqs([(1, 2047)] * 4)) == pytest.approx(61 * 17.73e-6, rel=1e-9)
    assert model.attention_s(StepBatch.from_seqs([(1024, 0)])) == pytest.approx(61 * 46.24e-6, rel=1e-9)
    assert model.decode_step_time()(4, 4 * 2047) == model.step_time(StepBatch(4, 4, 4 * 2047, 4 * 2048))


def test_a_quantised_checkpoints_16_bit_matrices_are_priced_by_the_bfloat16_rows():
    # gpt-oss stores its experts in MXFP4 and keeps attention and the router 16-bit (its quantization_config's
    # modules_to_not_convert). No table holds MXFP4 dense GEMMs, so these used to go to the roofline, whose weight
    # streaming has no kernel floor: now each is looked up in the dtype its weights are stored in, the bfloat16 rows
    model = h100_model("gpt-oss-20b", 1)
    r = model.roofline
    shapes = dense_gemms(r.model, r.parallel, frozenset(), r.weight_format)
    assert shapes and all(s.converted == 0.0 and s.other == 0.0 for s in shapes)
    assert model.roofline_gemms == []
    assert "bfloat16 rows" in model.sources["dense GEMMs"]
    # at 16 tokens on one GPU the per-token curve is the dense GEMMs plus the experts' (no all-reduce)
    layers, experts = model._moe_curve(r.model, r.parallel)
    dense = sum(s.per_stage * gemm_curve(model.tables, "bfloat16", s.n, s.k)(16) for s in shapes)
    assert model.per_token(16) == pytest.approx(dense + layers * experts(16), rel=1e-12)
    # the router alone (2,880 -> 32 experts) is a measured GEMM of a few microseconds a layer, not the
    # roofline's ~0.1 us of weight streaming
    router = next(s for s in shapes if s.n == 32)
    assert gemm_curve(model.tables, "bfloat16", router.n, router.k)(16) > 20 * r.gemm_s(16, router.n, router.k)


def test_an_fp8_checkpoint_prices_what_it_keeps_16_bit_by_the_bfloat16_rows():
    # RedHatAI's Llama-4-Scout FP8-dynamic keeps attention and the router 16-bit (its compressed-tensors ignore
    # list, tests/data/fidelity/configs): those GEMMs come from the bfloat16 rows, the FP8 shared experts from the
    # fp8 rows, where every dense GEMM used to be looked up as FP8
    scout = Path(__file__).resolve().parents[2] / "data/fidelity/configs" \
        / "RedHatAI--Llama-4-Scout-17B-16E-Instruct-FP8-dynamic_config.json"
    model = tables_model(str(scout), 2, "h100-sxm", "vllm")
    r = model.roofline
    shapes = dense_gemms(r.model, r.parallel, frozenset(), r.weight_format)
    assert {s.converted for s in shapes} == {0.0, 1.0}
    by_storage = sum(s.per_stage * gemm_curve(model.tables, "fp8" if s.converted else "bfloat16", s.n, s.k)(16)
                     for s in shapes)
    as_fp8 = sum(s.per_stage * gemm_curve(model.tables, "fp8", s.n, s.k)(16) for s in shapes)
    # the per-token curve holds the dense GEMMs and the two all-reduces a layer; the latter are the same either way
    allreduce = model.per_token(16) - by_storage
    ar = model.tables.allreduce[(2,)]
    assert allreduce == pytest.approx(r.comm.allreduces_per_step
                                      * Curve({b / (r.model.hidden_size * 2): t for b, t in ar.items()})(16))
    assert by_storage != pytest.approx(as_fp8, rel=0.01)


def test_each_all_reduce_waits_for_the_last_gpu_of_its_group(monkeypatch):
    # Llama-3.1-70B at TP 4 on the H100's tables: 80 layers x 2 all-reduces a step, each waiting 3 us (the arrival
    # spread, roofline.COLLECTIVE_SKEW_S) x 1.0294 (the expected largest of 4 standard normals, Harter's 1961 tables)
    # beyond its measured kernel: 160 x 3.088 us = 494 us a step, whatever the batch
    batch = StepBatch.from_seqs([(1, 1000)] * 16)
    with_wait = h100_model("llama-3.1-70b", 4)
    monkeypatch.setattr(roofline, "COLLECTIVE_SKEW_S", 0.0)
    aligned = h100_model("llama-3.1-70b", 4)
    assert with_wait.step_time(batch) - aligned.step_time(batch) == pytest.approx(160 * 3 * US * 1.0294, rel=1e-4)
    assert with_wait.sources["all-reduce"] == ("kernel tables, + 3.1 us each waiting for the last of 4 GPUs "
                                               "(docs/fidelity.md)")


def test_the_expected_largest_of_n_normals_matches_its_closed_forms_and_tables():
    # E[max] of 2 and 3 standard normals: 1 / sqrt(pi) and 3 / (2 sqrt(pi)); of 4, 8 and 16: 1.02938, 1.42360,
    # 1.76599 (Harter 1961, "Expected values of normal order statistics", Biometrika 48); none for one GPU
    assert roofline.expected_max_of_normals(1) == 0.0
    assert roofline.expected_max_of_normals(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-5)
    assert roofline.expected_max_of_normals(3) == pytest.approx(1.5 / math.sqrt(math.pi), rel=1e-5)
    for n, expected in ((4, 1.02938), (8, 1.42360), (16, 1.76599)):
        assert roofline.expected_max_of_normals(n) == pytest.approx(expected, abs=2e-5)


def test_experts_sliced_by_tp_take_the_power_law_rows_and_experts_spread_over_ep_the_balanced_ones():
    # Mixtral-8x7B on two H100s: sliced by TP 2, every GPU runs every expert and the rows measured with Mixtral's
    # routing skew (alpha 1.2) price them as they are (moe_skewed); spread whole over EP 2, the balanced rows at the
    # busiest GPU's share of the tokens (EP_LOAD_IMBALANCE: 1.21 at EP 2 for alpha 1.2)
    sliced, spread = decode_model("mixtral-8x7b", 2, False), decode_model("mixtral-8x7b", 2, True)
    assert sliced.experts_skew == 1.2 and sliced.load_imbalance == 1.0
    assert sliced.sources["MoE experts"] == "kernel tables (the tokens routed by a power law, alpha 1.2, as measured)"
    assert spread.experts_skew is None and spread.load_imbalance == pytest.approx(1.21)
    assert spread.sources["MoE experts"] == "kernel tables"
    rows = sliced.tables.moe_skewed[("power_law_1.2", "bfloat16", 4096, 14336, 2, 8, 2, 1)]
    layers, curve = sliced._moe_curve(sliced.roofline.model, sliced.roofline.parallel)
    assert layers == 32 and all(curve(t) == pytest.approx(s, rel=1e-12) for t, s in rows.items())


def test_experts_sliced_over_tp_where_only_their_ep_split_was_measured_take_the_ep_rows():
    # TensorRT-LLM's B200 tables (aiconfigurator-core 0.12.0) measured gpt-oss-120b's W4A8 MXFP4 experts spread whole
    # over 1-8 GPUs (moe_tp 1) only. Sliced over TP 2, a GPU reads half of every touched expert where spread whole it
    # reads the touched half of the experts whole: the same bytes and FLOPs at the same tokens, and no imbalance. So
    # the EP 2 rows, as random routing reads the experts, price TP 2's slices: no roofline for the experts.
    model = tables_model("gpt-oss-120b", 2, "b200", "tensorrt-llm", kv_cache_dtype="fp8")
    assert "MoE experts" not in model.roofline_parts and model.load_imbalance == 1.0
    assert model.sources["MoE experts"] == ("kernel tables (sliced over 2 GPUs, priced by the rows of the experts "
                                            "spread whole over 2 (the same bytes and FLOPs a GPU, no imbalance))")
    rows = model.tables.moe[("w4a8_mxfp4_mxfp8", 2880, 2880, 4, 128, 1, 2)]
    layers, curve = model._moe_curve(model.roofline.model, model.roofline.parallel)
    # 36 MoE layers; from 1,024 tokens random routing touches every expert (all but (31/32)^1024 = 1e-14 of them),
    # as the balanced rows did
    assert layers == 36 and all(curve(t) == pytest.approx(s, rel=1e-9) for t, s in rows.items() if t >= 1024)
    # at 8 tokens random routing touches 1 - (1 - 4/128)^8 = 22.4% of the experts, the balanced row 8 x 4 / 128 = 25%
    first = min(rows)
    share = (1 - (1 - 4 / 128) ** 8) / (8 * 4 / 128)
    assert curve(8) == pytest.approx(rows[first] + (rows[8] - rows[first]) * share, rel=1e-12)
