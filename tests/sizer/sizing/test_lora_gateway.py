"""The issue's scenario, scenarios/gateway-lora-50-adapters.yaml: 50 LoRA adapters on one base
model plans and simulates; per-request records carry each adapter; raising max_loras to the 50
adapters removes every hold-back."""

from pathlib import Path

import numpy as np
import pytest

from simulator.metrics import summarise
from sizer.errors import InputError
from sizer.inputs.manifests.commands import parse_vllm_args
from sizer.inputs.scenario import scenario_from_dict
from sizer.outputs.emit import serving_config, sglang_argv, vllm_argv
from sizer.sizing.resolve import resolve
from sizer.sizing.simulate import simulate_scenario
from sizer.sizing.workload import workload_of
from validation.errors import FieldError
from validation.safe_yaml import load_yaml

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
    # (SGLang sizes its LoRA buffers from the target modules: `all`, so adapters loaded later fit)
    assert " ".join(sglang_argv(c)).endswith("--enable-lora --max-loras-per-batch 8 --max-lora-rank 16 "
                                             "--lora-target-modules all")
    # and `check` reads vLLM's flags back into the scenario fields they set
    fields, _, notes = parse_vllm_args(vllm_argv(c), "manifest.yaml")
    assert (fields["enable_lora"], fields["max_loras"], fields["max_lora_rank"], fields["max_cpu_loras"]) == \
        (True, 8, 16, 50) and not notes


TRACE = "TIMESTAMP,ContextTokens,GeneratedTokens,Adapter\n0,100,10,3\n0.5,120,12,\n1.0,90,8,0\n1.5,100,10,3\n"


def trace_scenario(tmp_path, trace=TRACE, **lora):
    (tmp_path / "t.csv").write_text(trace)
    data = {"model": "llama-3.1-8b", "hardware": "h100-sxm",
            "deployment": {"max_model_len": 8192, "enable_lora": True, "max_loras": 2},
            "workload": {"trace": {"path": "t.csv", "format": "csv"}}}
    if lora:
        data["workload"]["lora"] = lora
    return scenario_from_dict(data, str(tmp_path / "s.yaml"))


def test_a_trace_column_names_each_requests_adapter(tmp_path):
    r = resolve(trace_scenario(tmp_path, adapters=4, popularity="trace"))
    res = simulate_scenario(r)
    # rows in arrival order: adapter 3, the base model (empty cell), 0, 3
    assert res.columns["adapter"].tolist() == [3, -1, 0, 3] and not res.columns["rejected"].any()


@pytest.mark.parametrize("lora, field", [({"adapters": 3, "popularity": "trace"}, "workload.lora.adapters"),
                                         ({"adapters": 4}, "workload.lora.popularity")])
def test_a_trace_column_must_match_the_workloads_lora(tmp_path, lora, field):
    # adapter 3 with 3 adapters (ids 0-2); a trace that names adapters but adapters drawn by Zipf
    with pytest.raises(InputError) as e:
        simulate_scenario(resolve(trace_scenario(tmp_path, **lora)))
    assert e.value.field == field


def test_a_bad_adapter_cell_names_its_line_and_column(tmp_path):
    with pytest.raises(FieldError) as e:
        simulate_scenario(resolve(trace_scenario(tmp_path, TRACE.replace(",3\n0.5", ",x\n0.5"), adapters=4,
                                                 popularity="trace")))
    assert e.value.field == "line 2, Adapter"
