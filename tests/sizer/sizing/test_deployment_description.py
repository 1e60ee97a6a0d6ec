"""The deployment description (`Resolved`, issue 22): built once by keyword from a scenario and its flags, each
setting's source beside it, and no way back to the raw scenario."""

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sizer.cli import app
from sizer.cli.plan import PLAN_FLAGS, build_scenario
from sizer.inputs.scenario import scenario_from_dict
from sizer.inputs.traffic import Traffic
from sizer.inputs.variant import Variant
from sizer.sizing.resolve import Resolved, replica_config, resolve

SCENARIO = {"model": "llama-3.1-8b", "hardware": "h100-sxm",
            "deployment": {"engine": "vllm", "pipeline_parallel_size": 1, "replicas": 2},
            "workload": {"arrival": {"rate_per_s": 2},
                         "prompt_tokens": {"distribution": "fixed", "value": 1000},
                         "output_tokens": {"distribution": "fixed", "value": 100}},
            "slo": {"ttft_ms": 500}}


def _file(tmp_path: Path, data: dict = SCENARIO) -> Path:
    path = tmp_path / "chat.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_description_is_built_by_keyword_and_holds_no_scenario():
    fields = dataclasses.fields(Resolved)
    assert all(f.kw_only for f in fields)
    assert "scenario" not in {f.name for f in fields}
    # one function builds it: no other sizer module constructs a Resolved (dataclasses.replace copies one by name)
    root = Path(__file__).resolve().parents[3] / "sizer"
    assert [str(p.relative_to(root)) for p in root.rglob("*.py") if "Resolved(" in p.read_text()] == [
        "sizing/resolve.py"]
    r = resolve(scenario_from_dict(SCENARIO, None))
    with pytest.raises(TypeError):          # positional construction, as `resolve` once did, is refused
        Resolved(*(getattr(r, f.name) for f in fields))
    assert dataclasses.replace(r) == r      # every field is set by name (a copy by keyword is the same)


def test_each_setting_names_its_source_flag_scenario_or_default(tmp_path):
    variant = Variant(tensor_parallel_size=2, max_model_len=4096, rate_per_s=3.0)
    # the traffic flags' scenario paths, as `sizer plan` passes them (its one flag table)
    itl_flag = {path: f.flag for f in PLAN_FLAGS if f.flag == "--itl-ms" for path in f.sources}
    r = resolve(build_scenario(_file(tmp_path), variant, Traffic(itl_ms=40.0), itl_flag))
    # a flag that set a value names itself; a stated value says "scenario"; the rest their default
    assert r.parallel.tp == 2 and r.source_of("deployment.tensor_parallel_size") == "--tp"
    assert r.source_of("deployment.max_model_len") == "--max-model-len" and r.engine.max_model_len == 4096
    assert r.source_of("workload.arrival.rate_per_s") == "--rate" and r.workload.arrival.rate_per_s == 3.0
    assert r.source_of("slo.itl_ms") == "--itl-ms" and r.source_of("slo.ttft_ms") == "scenario"
    assert r.source_of("deployment.pipeline_parallel_size") == r.source_of("deployment.replicas") == "scenario"
    assert r.source_of("deployment.data_parallel_size") == "default (1)"
    assert r.source_of("model.name") == r.source_of("hardware.gpu") == r.source_of("deployment.engine") == "scenario"
    assert r.source_of("deployment.quantization") == "default (auto: the checkpoint's format)"
    assert r.source_of("slo.required_share") == "default"
    # an engine setting nobody stated: the engine's default, as the plan prints it (engine.sources)
    assert r.source_of("deployment.block_size") == r.engine.sources["block_size"]
    assert r.source_of("deployment.block_size").startswith("vllm default (")
    # the price: the profile's, with the rule that set it
    assert r.source_of("cost.price_usd_per_gpu_hour") == r.price_source
    assert r.source_of("cost.price_usd_per_gpu_hour").startswith("hardware profile h100-sxm")


def test_an_engine_left_out_names_why_it_was_chosen():
    data = {**SCENARIO, "deployment": {}}
    r = resolve(scenario_from_dict(data, None))
    assert r.engine.engine == "vllm"
    assert r.source_of("deployment.engine") == "default: vLLM, sizer's engine for discrete GPUs"


def test_the_description_carries_what_the_scenario_stated_typed(tmp_path):
    path = _file(tmp_path)
    s = scenario_from_dict(yaml.safe_load(path.read_text()), str(path))
    r = resolve(s)
    assert (r.name, r.file, r.model_name, r.num_parameters) == ("chat", str(path), "llama-3.1-8b", None)
    assert (r.workload, r.slo, r.energy, r.autoscaling, r.deployment) == (s.workload, s.slo, s.energy,
                                                                           s.autoscaling, s.deployment)
    assert r.step_model_mode == "auto"


def test_another_rate_is_the_same_description_with_its_workload_changed():
    # resolve reads no arrival rate: the day's peak (sizer/sizing/day.py) replaces the workload, not re-resolves
    r = resolve(scenario_from_dict(SCENARIO, None))
    faster = {**SCENARIO, "workload": {**SCENARIO["workload"], "arrival": {"rate_per_s": 40}}}
    again = resolve(scenario_from_dict(faster, None))
    moved = dataclasses.replace(r, workload=dataclasses.replace(
        r.workload, arrival=dataclasses.replace(r.workload.arrival, rate_per_s=40.0)))
    assert moved.workload == again.workload and moved.replica == again.replica and moved.memory == again.memory
    # everything but the workload and where the rate came from is the same
    same = [f.name for f in dataclasses.fields(Resolved) if f.name not in ("workload", "sources")]
    assert all(getattr(moved, n) == getattr(again, n) for n in same)


def test_the_simulators_config_is_built_from_the_description_in_one_function():
    # the one builder: no other sizer module constructs a SchedulerConfig or a ReplicaConfig
    root = Path(__file__).resolve().parents[3] / "sizer"
    builders = sorted(f"{p.relative_to(root)}:{name}" for p in root.rglob("*.py")
                      for name in ("SchedulerConfig(", "ReplicaConfig(") if name in p.read_text())
    assert builders == ["sizing/resolve.py:ReplicaConfig(", "sizing/resolve.py:SchedulerConfig("]
    r = resolve(scenario_from_dict({**SCENARIO, "deployment": {"data_parallel_size": 2, "max_num_batched_tokens":
                                                               4096, "max_num_seqs": 64}}, None))
    assert r.replica is r.replica and r.replica == replica_config(r)   # built once, kept
    # a replica's two data-parallel ranks run as one engine of their combined limits: 2 x 4,096 tokens, 2 x 64 seqs
    assert (r.scheduler.max_num_batched_tokens, r.scheduler.max_num_seqs) == (8192, 128)
    assert r.replica.num_blocks == 2 * r.memory.kv_blocks


@pytest.mark.parametrize("argv, lines", [
    # the scenario states engine vllm and no kv_cache_dtype (scenarios/llama-3.1-8b-chat-h100.yaml): both come from
    # the flags, so the plan names them, as `source_of` does (not "scenario", as it printed after issue 22's merge)
    (["scenarios/llama-3.1-8b-chat-h100.yaml", "--engine", "sglang", "--kv-cache-dtype", "fp8"],
     ["engine sglang (--engine)", "KV cache type fp8 (--kv-cache-dtype)"]),
    # no scenario at all: the engine can only come from its flag
    (["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "sglang"], ["engine sglang (--engine)"]),
    # what the scenario states is still "scenario"
    (["scenarios/llama-3.1-8b-chat-h100.yaml"], ["engine vllm (scenario)"]),
])
def test_the_plan_names_the_flag_that_set_engine_and_kv_type(argv, lines):
    root = Path(__file__).resolve().parents[3]
    result = CliRunner().invoke(app, ["plan", *[str(root / a) if a.endswith(".yaml") else a for a in argv],
                                      "--json"])
    assert result.exit_code == 0, result.output
    assumptions = json.loads(result.stdout)["assumptions"]
    for line in lines:
        assert line in assumptions
