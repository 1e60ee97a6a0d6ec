"""The kernel-table step model: interpolation, and a step as the sum of its looked-up operators."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.step_batch import StepBatch
from sizer.analytic.kernel_step import Curve, KernelTableStepTimeModel, dense_gemms, elementwise_ops, gemm_curve
from sizer.analytic.parallel import ParallelConfig
from sizer.analytic.roofline import STEP_OVERHEAD_S
from sizer.inputs.kernel_tables import (
    ElementwiseCost,
    KernelTables,
    KernelTablesHeader,
    Provenance,
    bundled_tables_dir,
    load_kernel_tables,
)
from sizer.inputs.model_spec import load_model
from sizer.inputs.scenario import scenario_from_dict
from sizer.sizing.resolve import resolve
from sizer.sizing.step_model import roofline_for

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


def test_what_the_tables_lack_is_priced_by_the_roofline_and_named():
    r = tiny_resolved(tp=2)                       # the synthetic tables hold no TP2 shapes nor an all-reduce
    model = KernelTableStepTimeModel(synthetic_tables(), roofline_for(r))
    assert "all-reduce across 2 GPUs" in model.roofline_parts
    assert any(p.startswith("attention of") for p in model.roofline_parts)
    assert "roofline for" in model.name
    assert model.step_time(StepBatch.from_seqs([(1, 127)])) > STEP_OVERHEAD_S


def test_elementwise_ops_count_norms_rotary_kv_writes_and_gated_activations():
    ew = elementwise_ops(load_model("tiny"), ParallelConfig())
    # per layer: 2 norms, rotary and KV write (softmax attention), the SwiGLU activation; bytes as
    # test_a_decode_step_is_the_sum_of_its_looked_up_operators derives them
    assert ew.ops_per_stage == 20 and ew.bytes_per_token == 4 * (2 * 4 * 256 + 2 * (256 + 64) + 4 * 64 + 3 * 768) * 2
    # TP2 splits the heads: q 4 x 32 = 128, KV 1 x 32 = 32 values per GPU, the activation 384 wide
    ew2 = elementwise_ops(load_model("tiny"), ParallelConfig(tp=2))
    assert ew2.bytes_per_token == 4 * (2 * 4 * 256 + 2 * (128 + 32) + 4 * 32 + 3 * 384) * 2


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
    # a token's GEMM-like work at m = 1: every dense GEMM shape from the GEMM table, plus 48 MoE layers of
    # one token through one layer's experts, 49.07 us each (moe_perf; no all-reduce at TP 1)
    dense = sum(s.per_stage * gemm_curve(tables, "bfloat16", s.n, s.k)(1) for s in dense_gemms(r.model, r.parallel))
    assert model.per_token(1) == pytest.approx(dense + 48 * 49.07e-6, rel=1e-9)
