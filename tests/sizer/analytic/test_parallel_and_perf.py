"""Split validity, communication bytes, and the roofline step-time model."""

import pytest

from simulator.step_batch import StepBatch
from sizer.analytic.formats import FORMATS
from sizer.analytic.memory import kv_layout, weight_memory
from sizer.analytic.parallel import ParallelConfig, comm_per_step, validate_split
from sizer.analytic.roofline import RooflineStepTimeModel, compute_bound_batch, decode_batch, prefill_time_s
from sizer.inputs.hardware import load_hardware
from sizer.inputs.model_spec import load_model
from validation.errors import FieldError


def roofline(name="llama-3.1-8b", gpu="h100", fmt="bf16", p=ParallelConfig()):
    m, hw, f = load_model(name), load_hardware(gpu), FORMATS[fmt]
    return RooflineStepTimeModel(m, hw, f, weight_memory(m, f, p), kv_layout(m, "bf16", p), p)


def test_invalid_splits_name_the_field():
    m = load_model("llama-3.1-8b")
    with pytest.raises(FieldError, match="tensor_parallel_size"):
        validate_split(m, ParallelConfig(tp=3))
    with pytest.raises(FieldError, match="pipeline_parallel_size"):
        validate_split(m, ParallelConfig(pp=33))
    validate_split(m, ParallelConfig(tp=16))   # more ranks than 8 KV heads: replicated, allowed
    mixtral = load_model("mixtral-8x7b")
    with pytest.raises(FieldError, match="experts"):
        validate_split(mixtral, ParallelConfig(tp=4, dp=3, expert_parallel=True))  # EP 12 vs 8 experts


def test_tp_allreduce_bytes():
    m = load_model("llama-3.1-8b")
    c = comm_per_step(m, ParallelConfig(tp=4))
    # 2 all-reduces x 32 layers x 4096 x 2 bytes x ring factor 2 x 3/4 = 786,432 B per token
    assert c.tp_allreduce_bytes_per_token == 2 * 32 * 4096 * 2 * 2 * 3 / 4
    # one GPU sends nothing
    single = comm_per_step(m, ParallelConfig())
    assert (single.tp_allreduce_bytes_per_token, single.pp_send_bytes_per_token,
            single.ep_alltoall_bytes_per_token) == (0, 0, 0)


def test_decode_at_batch_1_is_weight_bandwidth_plus_overhead():
    r = roofline()
    cost = r.cost(decode_batch(1, 1000))
    # GEMMs at batch 1 read the dense weights once: bytes / (3.35e12 x 0.85 x 0.80 weight streaming)
    assert cost.gemm_s == pytest.approx(r.dense_bytes / (3.35e12 * 0.85 * 0.80))
    assert not cost.gemm_compute_bound
    # KV read: (1000 context + 2 x 1 new) tokens x 131,072 B at 0.95 of the achievable bandwidth
    assert cost.attention_s == pytest.approx(1002 * 131_072 / (3.35e12 * 0.85 * 0.95))
    # and a fixed 5 us for each of the 32 layers
    assert cost.layers_s == pytest.approx(32 * 5e-6)


def test_step_time_grows_with_batch_and_context():
    r = roofline()
    assert r.step_time(decode_batch(64, 1000)) > r.step_time(decode_batch(1, 1000))
    assert r.step_time(decode_batch(8, 8000)) > r.step_time(decode_batch(8, 1000))
    # a prefill chunk of 2,048 tokens is compute-bound: 2 x 6.98e9 dense params x 2048 / (989.4e12 x 0.8)
    cost = r.cost(StepBatch.from_seqs([(2048, 0)]))
    assert cost.gemm_compute_bound
    assert cost.gemm_s == pytest.approx(2 * r.dense_params * 2048 / (989.4e12 * 0.8))


def test_compute_bound_batch_near_the_ridge_point():
    r = roofline()
    b = compute_bound_batch(r, 1000)
    # ridge: 2 x params x B / flops = bytes / bw  ->  B = bytes x flops / (2 x params x bw); 2 bytes/param,
    # weights streamed at 3.35e12 x 0.85 x 0.80 (WEIGHT_STREAM_EFFICIENCY)
    ridge = 2 * (989.4e12 * 0.8) / (2 * 3.35e12 * 0.85 * 0.80)
    assert abs(b - ridge) <= 1


def test_fp8_on_h100_uses_fp8_peak_but_on_a100_falls_back():
    assert roofline(fmt="fp8").compute_format == "fp8"
    assert roofline(gpu="a100-80gb", fmt="fp8").compute_format == "bf16"


def test_moe_reads_only_routed_experts_at_small_batch():
    r = roofline("mixtral-8x7b", "h100", "bf16", ParallelConfig(tp=2))
    one = r.cost(decode_batch(1, 500)).gemm_s
    many = r.cost(decode_batch(256, 500)).gemm_s
    # batch 1 touches 2 of 8 experts; 256 tokens touch all of them
    assert r.experts_touched(1) == pytest.approx(2 / 8)
    assert r.experts_touched(256) > 0.999
    assert many > 2 * one


def test_chunked_prefill_sums_its_chunks():
    r = roofline()
    whole = prefill_time_s(r, 4096, None)
    chunked = prefill_time_s(r, 4096, 1024)
    # four steps each pay the overhead and re-read the weights: slower than one step
    assert chunked > whole
    assert chunked == pytest.approx(sum(r.step_time(StepBatch.from_seqs([(1024, 1024 * i)], prefill=[True]))
                                        for i in range(4)))


def test_fast_step_time_equals_the_itemised_cost():
    import random
    rng = random.Random(7)
    for name, p in (("llama-3.1-8b", ParallelConfig()), ("mixtral-8x7b", ParallelConfig(tp=2, pp=2)),
                    ("gemma-2-9b", ParallelConfig()), ("deepseek-v3", ParallelConfig(tp=8, expert_parallel=True))):
        r = roofline(name, "h200", "bf16", p)
        for _ in range(50):
            seqs = [(rng.choice([1, 1, 1, rng.randint(2, 2048)]), rng.randint(0, 8000))
                    for _ in range(rng.randint(1, 64))]
            batch = StepBatch.from_seqs(seqs)
            assert r.step_time(batch) == pytest.approx(r.cost(batch).total_s, rel=1e-12)
