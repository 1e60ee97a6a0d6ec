"""One answer everywhere: `plan --simulate --json`, `check --json` and `search --json` restricted to the scenario's own
GPU, split and formats report the same replicas and the same dollars for every bundled scenario with an arrival rate
and an SLO, because all three call `size_deployment` with the same `GoodputSettings` (the defaults; search is handed
their request count with --num-requests).

A Kubernetes or Helm file in scenarios/deploy is checked as it is; plan and search read the scenario it describes
(`read_check_input(...).scenario_data`). A manifest states its replicas, which plan and check keep and search
replaces by the fewest that meet the SLO: those are the `replicas_for_slo` plan and check report.

The three commands run in one test, and a simulation one asks for with the very same inputs as another did runs once
(`simulations_once`, tests/sizer/conftest.py: the simulator gives the same result to the bit for the same inputs): check
asks for exactly the simulations plan ran, and search for the scenario's own configuration too, so each scenario's
sizing is simulated once, not three times; what any command asks differently is simulated and compared.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sizer.cli import app
from sizer.inputs.manifest import read_check_input
from sizer.inputs.scenario import load_scenario
from sizer.sizing.result import GoodputSettings

ROOT = Path(__file__).resolve().parents[3]
SETTINGS = GoodputSettings()


def sized_scenarios() -> list[Path]:
    """Bundled scenarios and deployments with an arrival rate and at least one SLO target."""
    found = []
    for path in sorted((ROOT / "scenarios").glob("*.yaml")) + sorted((ROOT / "scenarios" / "deploy").glob("*.yaml")):
        if path.name.startswith("gateway-"):         # several pools: tests/sizer/sizing/test_gateway_sizing.py
            continue
        data = read_check_input(str(path)).scenario_data
        slo, arrival = data.get("slo") or {}, (data.get("workload") or {}).get("arrival") or {}
        if arrival.get("rate_per_s") and any(slo.get(k) is not None for k in ("ttft_ms", "itl_ms", "e2e_ms")):
            found.append(path)
    return found


SCENARIOS = sized_scenarios()


def invoke(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def test_every_bundled_scenario_with_a_rate_and_an_slo_is_covered():
    # 12 scenarios/*.yaml state a rate and targets (the memory and weight seeds state no targets; issue 28 added
    # diurnal-chat-h100, whose steady rate is its schedule's peak), and 3 deployments
    names = {p.name for p in SCENARIOS}
    assert len(names) == 15 and {"llama-3.1-70b-h200.yaml", "seed-goodput.yaml", "pass-llama-8b-h100.yaml",
                                 "fail-latency-llama-70b-h100.yaml", "fail-memory-llama-70b-h100.yaml",
                                 "diurnal-chat-h100.yaml"} <= names


@pytest.mark.slow           # plan, check and search on every bundled scenario: 1-14 s each on a quiet machine
@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_plan_check_and_search_give_the_same_replicas_and_dollars(path, tmp_path, simulations_once):
    scenario_file = path
    if path.parent.name == "deploy":                 # plan and search read scenarios, check reads the manifest
        scenario_file = tmp_path / "scenario.yaml"
        scenario_file.write_text(yaml.safe_dump(read_check_input(str(path)).scenario_data))
    s = load_scenario(scenario_file)
    plan_exit, plan = invoke("plan", scenario_file, "--simulate", "--json")
    check_exit, check = invoke("check", path, "--json")
    sim, sizing = plan["simulation"], check["sizing"]
    expected = json.loads(json.dumps(vars(SETTINGS)))
    if s.deployment.engine in ("llama.cpp", "ollama"):
        # slot engines: search judges its candidates on the slot answers, without a simulation
        # (docs/reports.md, "Slot engines"), so only plan and check give the one simulated sizing
        assert sim["settings"] == sizing["settings"] == expected
        for key in ("status", "verdict", "goodput_per_replica_per_s", "binding_target", "replicas", "cost"):
            assert sim[key] == sizing[key], key
        return
    _, found = invoke("search", scenario_file, "--json", "--workers", "1", "--num-requests", SETTINGS.num_requests,
                      "--gpus", s.hardware.gpu, "--tp", s.deployment.tensor_parallel_size,
                      "--pp", s.deployment.pipeline_parallel_size, "--weights", plan["weights"]["format"],
                      "--kv-cache-dtype", s.deployment.kv_cache_dtype,
                      *(["--speculative"] if s.deployment.speculative_config else []))
    # the scenario's own configuration: a MoE model's split is also tried as attention DP + EP (DEP), and with a
    # speculative_config, search leaves it off unless --speculative (seed-speculative's ITL target binds below the
    # bound, where the two differ): the row of the scenario's own split and speculation
    [row] = [c for c in found["configurations"] if c["attention_dp"] == s.deployment.enable_attention_dp
             and c["speculative"] == (s.deployment.speculative_config is not None)]
    # the same settings object, by value, in all three
    assert sim["settings"] == sizing["settings"] == found["settings"]["goodput"] == expected
    assert plan_exit == 0                            # plan prints its verdict whatever it is
    assert check_exit == (0 if sizing["slo_met"] and check["passed"] else 1)
    if sim["status"] == "does_not_fit":
        assert sizing["status"] == "does_not_fit" and (row["status"], row["binding"]) == ("rejected", "memory")
        assert sim["replicas"] is sizing["replicas"] is row["replicas"] is None
        return
    # plan and check: one sizing of the deployment as stated, to the last digit
    for key in ("status", "verdict", "goodput_per_replica_per_s", "binding_target", "replicas", "replicas_for_slo",
                "usd_per_hour_for_slo", "cost", "operating_point"):
        assert sim[key] == sizing[key], key
    assert plan["cost"] == sim["cost"]               # the plan's cost section is the sizing's
    # search: the same goodput, and the fewest replicas that meet the SLO at the same price
    assert row["goodput_rate_per_s"] == sim["goodput_per_replica_per_s"]
    assert row["status"] == "ok" and row["sizing_status"] == "met"
    assert row["replicas"] == sim["replicas_for_slo"] and row["usd_per_hour"] == sim["usd_per_hour_for_slo"]
    if s.deployment.replicas is None:                # nothing stated: all three deploy that count, at that cost
        assert sim["replicas"] == sizing["replicas"] == row["replicas"]
        assert sim["cost"]["usd_per_hour"] == sizing["cost"]["usd_per_hour"] == row["usd_per_hour"]
        assert sim["cost"]["usd_per_million_output_tokens"] == row["usd_per_million_output_tokens"]


def test_no_rate_meeting_the_slo_is_said_the_same_way_by_every_command(tmp_path, simulations_once):
    # seed-goodput with a 1 ms TTFT target: no prefill of a ~1,000-token prompt on an H100 is that fast
    data = yaml.safe_load((ROOT / "scenarios" / "seed-goodput.yaml").read_text())
    data["slo"] = {"ttft_ms": 1, "required_share": 0.95}
    path = tmp_path / "impossible.yaml"
    path.write_text(yaml.safe_dump(data))
    plan_exit, plan = invoke("plan", path, "--simulate", "--json")
    check_exit, check = invoke("check", path, "--json")
    _, found = invoke("search", path, "--json", "--workers", "1", "--gpus", "h100-sxm", "--tp", "1",
                      "--weights", "bf16", "--kv-cache-dtype", "auto")
    sim, sizing, [row] = plan["simulation"], check["sizing"], found["configurations"]
    # plan: exit 0, the whole plan still there, the status and verdict in the simulated section and the verdict line
    assert plan_exit == 0 and plan["fits"] and plan["memory"]["kv_cache_bytes"] > 0
    assert sim["status"] == "no_rate" and sim["replicas"] is None and sim["goodput_per_replica_per_s"] == 0
    assert sim["verdict"].startswith("no request rate meets the SLO (TTFT <= 1 ms; 95% of requests) on one replica: "
                                     "TTFT is missed even at")
    assert plan["verdict"] == "fits; " + sim["verdict"]
    # check: exit 1 on the slo rule, in the same words, with the fix that more replicas do not help
    slo_rule = {r["name"]: r for r in check["rules"]}["slo"]
    assert check_exit == 1 and slo_rule["status"] == "fail" and sizing["verdict"] == sim["verdict"]
    assert slo_rule["message"].startswith(sim["verdict"])
    assert slo_rule["fixes"][0].startswith("more replicas do not help")
    # search: the configuration is rejected on TTFT with the same verdict as its reason
    assert (row["status"], row["binding"], row["reason"]) == ("rejected", "TTFT", sim["verdict"])
    assert found["recommended"] is None
