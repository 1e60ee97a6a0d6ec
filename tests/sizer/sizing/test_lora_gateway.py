"""The issue's scenario, scenarios/gateway-lora-50-adapters.yaml: 50 LoRA adapters on one base
model plans and simulates; per-request records carry each adapter; raising max_loras to the 50
adapters removes every hold-back."""

from pathlib import Path

import numpy as np

from simulator.metrics import summarise
from simulator.safe_yaml import load_yaml
from sizer.inputs.manifest import parse_vllm_args
from sizer.inputs.scenario import scenario_from_dict
from sizer.outputs.emit import serving_config, sglang_argv, vllm_argv
from sizer.sizing.resolve import resolve
from sizer.sizing.simulate import simulate_scenario
from sizer.sizing.workload import workload_of

SCENARIO = Path(__file__).resolve().parents[3] / "scenarios" / "gateway-lora-50-adapters.yaml"
N = 400


def run(**deployment):
    data = load_yaml(SCENARIO)
    data["deployment"].update(deployment)
    s = scenario_from_dict(data, str(SCENARIO))
    r = resolve(s)
    return s, r, simulate_scenario(r, N)


def test_the_plan_shows_lora_memory_and_assumptions(plan_json):
    plan = plan_json(SCENARIO.name)
    # 8 slots (max_loras) x 83,886,080 B (a rank-16 Llama-3.1-8B adapter, tests/sizer/analytic/test_lora_memory.py)
    assert plan["lora"]["slots"] == 8 and plan["memory"]["lora_bytes"] == 8 * 83_886_080
    assert any(a.startswith("LoRA: 8 GPU slots") for a in plan["assumptions"])
    assert any(a.startswith("structured outputs (xgrammar)") for a in plan["assumptions"])


def test_fifty_adapters_simulate_with_records_and_hold_backs_that_max_loras_removes():
    s, r, res = run()
    c = res.columns
    assert len(c["request_id"]) == N and not c["rejected"].any()        # every request accounted for
    assert np.array_equal(c["adapter"], workload_of(s, N).adapter)      # the audit trail: each request's adapter
    assert c["adapter"].min() >= 0 and c["adapter"].max() < 50
    assert ((c["schema"] >= 0).mean() - 0.3) ** 2 < 0.05 ** 2             # ~30% ask for a schema
    held = summarise(res).lora_holdbacks
    assert held > 0                                                      # 8 slots for up to 50 adapters
    _, r50, res50 = run(max_loras=50)
    assert summarise(res50).lora_holdbacks == 0                          # a slot for every adapter
    assert r50.memory.lora_bytes == 50 * 83_886_080 and r50.memory.kv_blocks < r.memory.kv_blocks


def test_emitted_commands_carry_the_lora_settings():
    r = resolve(scenario_from_dict(load_yaml(SCENARIO), str(SCENARIO)))
    c = serving_config(r, None, "fits")
    # the scenario's max_loras 8, max_lora_rank 16, max_cpu_loras 50, in each engine's names
    assert " ".join(vllm_argv(c)).endswith("--enable-lora --max-loras 8 --max-lora-rank 16 --max-cpu-loras 50")
    assert " ".join(sglang_argv(c)).endswith("--enable-lora --max-loras-per-batch 8 --max-lora-rank 16")
    # and `check` reads vLLM's flags back into the scenario fields they set
    fields, _, notes = parse_vllm_args(vllm_argv(c), "manifest.yaml")
    assert (fields["enable_lora"], fields["max_loras"], fields["max_lora_rank"], fields["max_cpu_loras"]) == \
        (True, 8, 16, 50) and not notes
