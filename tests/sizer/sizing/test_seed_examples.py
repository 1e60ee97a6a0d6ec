"""Every worked example of the seed documents, reproduced by `sizer plan --json`."""

import math

import pytest

GiB = 2**30


def test_kv_cache_example_16_sequences_of_8k(plan_json):
    plan = plan_json("seed-kv-cache-8b.yaml")
    # 2 x 32 layers x 8 KV heads x 128 head dim x 2 bytes = 131,072 B = 128 KiB per token
    assert plan["kv"]["bytes_per_token"] == 131_072
    assert plan["kv"]["bytes_per_token"] / 1024 == 128
    # 16 sequences x 8,192 tokens = 131,072 tokens; x 128 KiB = 16 GiB
    demand = plan["kv_demand"]
    assert demand["tokens"] == 131_072
    assert demand["bytes"] == 16 * GiB
    assert demand["gib"] == 16.0
    # weights: 8e9 parameters x 2 bytes = 16 GB (decimal)
    assert plan["weights"]["total_bytes"] == 16e9
    assert plan["weights"]["ideal_bytes"] == 16e9
    # The seed's "roughly 32 GB before headroom" adds 16 GB and 16 GiB; kept apart it is
    # 16e9 + 17,179,869,184 = 33.18 GB = 30.90 GiB.
    total = plan["weights"]["total_bytes"] + demand["bytes"]
    assert total == 16e9 + 16 * GiB
    assert round(total / 1e9, 2) == 33.18 and round(total / GiB, 2) == 30.90


def test_kv_cache_example_in_fp8_halves(plan_json):
    plan = plan_json("seed-kv-cache-8b-fp8.yaml")
    # 1-byte elements: 2 x 32 x 8 x 128 x 1 = 65,536 B per token; 131,072 tokens -> 8 GiB
    assert plan["kv"]["bytes_per_token"] == 65_536
    assert plan["kv_demand"]["bytes"] == 8 * GiB


def test_one_8k_sequence_is_1_gib_and_four_are_4_gib(plan_json):
    plan = plan_json("seed-kv-sequences-4x8k.yaml")
    # 8,192 tokens x 131,072 B = 1,073,741,824 B = 1 GiB (8,192 is a whole number of 16-token blocks)
    assert plan["kv_bytes_per_sequence_at_max_model_len"] == 1 * GiB
    assert plan["kv_demand"]["sequences"] == 4
    assert plan["kv_demand"]["bytes"] == 4 * GiB


@pytest.mark.parametrize("fmt,gb", [("bf16", 14.0), ("int8", 7.0), ("awq", 3.5)])
def test_7b_weights_at_16_8_4_bits(plan_json, fmt, gb):
    plan = plan_json(f"seed-weights-7b-{fmt}.yaml")
    # 7e9 parameters x bits / 8 = 14 / 7 / 3.5 GB, ideal (no scales, nothing unconverted)
    assert plan["weights"]["ideal_bytes"] == gb * 1e9
    if fmt != "bf16":
        # real formats carry scales and keep embeddings/lm_head in 16-bit: more than ideal
        assert plan["weights"]["total_bytes"] > plan["weights"]["ideal_bytes"]
        assert plan["weights"]["scale_bytes"] > 0


def test_single_stream_decode_is_bandwidth_bound(plan_json):
    plan = plan_json("seed-decode-bandwidth-h100.yaml")
    times = plan["step_times"]
    # 16 GB / 3,350 GB/s = 4.776 ms per token (the seed's "~4.8 ms") -> 209.4 tokens/s ("~210")
    assert times["decode_bandwidth_bound_ms"] == pytest.approx(16e9 / 3.35e12 * 1e3)
    assert round(times["decode_bandwidth_bound_ms"], 1) == 4.8
    assert times["decode_bandwidth_bound_tokens_per_s"] == pytest.approx(209.375)
    assert times["decode_bandwidth_bound_tokens_per_s"] <= 210
    # the roofline with efficiencies, KV reads and overhead is slower than the bound, never faster
    assert times["decode_batch1_ms"] > times["decode_bandwidth_bound_ms"]


def test_littles_law_24_requests_in_flight(plan_json):
    plan = plan_json("seed-littles-law.yaml")
    cap = plan["capacity"]
    # 4 req/s x 6 s = 24 requests in flight
    assert cap["requests_in_flight"] == 24
    # 24 x 8,192 tokens = 196,608 KV tokens x 131,072 B = 24 GiB
    assert cap["kv_tokens_needed"] == 196_608
    assert cap["kv_bytes_needed"] == 24 * GiB


def test_speculative_expected_tokens_per_step(plan_json):
    plan = plan_json("seed-speculative.yaml")
    # (1 - 0.7^5) / (1 - 0.7) = (1 - 0.16807) / 0.3 = 2.7731
    assert plan["speculative"]["expected_tokens_per_step"] == pytest.approx((1 - 0.7**5) / 0.3)
    assert round(plan["speculative"]["expected_tokens_per_step"], 1) == 2.8
    assert math.isclose(plan["speculative"]["expected_tokens_per_step"], 2.7731, abs_tol=1e-4)
