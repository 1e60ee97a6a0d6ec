"""`sizer plan --json` on every bundled scenario: valid, versioned, internally consistent."""

from pathlib import Path

import pytest

from sizer.analytic.memory import GiB

# gateway-*.yaml are gateway documents (several pools), tested in tests/sizer/sizing/test_gateway_sizing.py
SCENARIOS = sorted(p.name for p in (Path(__file__).resolve().parents[3] / "scenarios").glob("*.yaml")
                   if not p.name.startswith("gateway-"))


def test_bundled_scenarios_exist():
    assert "llama-3.1-8b-chat-h100.yaml" in SCENARIOS
    assert len([s for s in SCENARIOS if s.startswith("seed-")]) >= 8


@pytest.mark.parametrize("name", SCENARIOS)
def test_plan_json_is_consistent(plan_json, name):
    plan = plan_json(name)
    assert plan["schema_version"] == 1
    mem = plan["memory"]
    # the budget adds up: usable = weights + a speculative proposer's + activations + CUDA context + LoRA adapter
    # slots + KV (llama.cpp and Ollama allocate only their context's KV, and the rest is left free: what the plan says
    # the OS keeps)
    parts = (mem["weights_bytes"] + mem["draft_weights_bytes"] + mem["activation_bytes"] + mem["non_torch_bytes"]
             + mem["lora_bytes"] + mem["kv_cache_bytes"])
    if plan["slots"]:
        a = plan["slots"]
        assert parts <= mem["usable_bytes"]
        # unified memory: the weights llama.cpp keeps in host memory (the token embedding) take the same memory
        parts += a["host_weights_bytes"] if a["unified_memory"] else 0.0
        assert parts == pytest.approx(a["engine_bytes"])
        assert a["left_bytes"] == pytest.approx(a["memory_bytes"] - parts)
    else:
        assert parts == pytest.approx(mem["usable_bytes"]) or not plan["fits"]
    # KV tokens are whole blocks and never exceed the KV bytes
    assert mem["kv_tokens"] == mem["kv_blocks"] * mem["block_size"]
    assert mem["kv_tokens"] * plan["kv"]["bytes_per_token_per_gpu"] <= mem["kv_cache_bytes"]
    # GB and GiB are both given and kept apart
    assert plan["gpu_memory_gib"] == pytest.approx(plan["gpu_memory_bytes"] / GiB)
    assert plan["gpu_memory_gb"] == pytest.approx(plan["gpu_memory_bytes"] / 1e9)
    # decode at batch 1 can never beat the bandwidth bound
    assert plan["step_times"]["decode_batch1_ms"] >= plan["step_times"]["decode_bandwidth_bound_ms"]
    assert plan["fits"] == (plan["verdict"].startswith("fits"))
