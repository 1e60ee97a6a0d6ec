"""One vocabulary (issue 27): "goodput" is only the sizing's highest rate one replica serves within the SLO,
labelled per replica; the rate of requests that met every target in a run is "requests within the SLO", given per
deployment and per replica by `simulate` and by `plan --simulate`, and the two agree on the same scenario."""

import json

from typer.testing import CliRunner

from sizer.cli import app

runner = CliRunner()
SCENARIO = "scenarios/seed-goodput.yaml"     # 4 req/s of an 8B model on one H100, TTFT 1 s and ITL 50 ms targets


def run(*argv: str) -> str:
    result = runner.invoke(app, list(argv), env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_simulate_and_plan_simulate_agree_on_the_slo_met_rate():
    simulated = json.loads(run("simulate", SCENARIO, "--json"))
    sizing = json.loads(run("plan", SCENARIO, "--simulate", "--json"))["simulation"]
    # the pipeline sizes one replica here (goodput well above 4 req/s), so its operating point is one replica
    # at the whole 4 req/s with the scenario's 1,500 requests and seed: the very run `simulate` makes
    assert sizing["replicas"] == 1 and sizing["goodput_per_replica_per_s"] > 4
    per_replica = sizing["operating_point"]["metrics"]["slo_met_requests_per_s"]
    per_deployment = simulated["slo_met_requests_per_s"]
    assert per_deployment == per_replica * sizing["replicas"]
    # nearly every request of 4 req/s meets its targets: the rate is at most the offered 4 req/s
    assert 3.5 < per_deployment <= 4.2
    assert "goodput_requests_per_s" not in simulated          # no second meaning of goodput in the JSON


def test_the_labels_say_per_replica_and_per_deployment():
    text = " ".join(run("simulate", SCENARIO).split())
    simulated = json.loads(run("simulate", SCENARIO, "--json"))
    rate = simulated["slo_met_requests_per_s"]
    assert f"requests within the SLO, req/s │ {rate:,.2f} per deployment (1 replica)" in text
    assert "goodput" not in text.replace("seed-goodput", "")      # the scenario's name aside
    plan = " ".join(run("plan", SCENARIO, "--simulate").split())
    assert f"requests within the SLO, req/s: {rate:,.2f} per replica, {rate:,.2f} per deployment of 1 replica" in plan
    assert "req/s per replica, the highest rate one replica serves within the SLO" in plan


def test_several_replicas_give_the_rate_per_replica_too():
    simulated = json.loads(run("simulate", SCENARIO, "--json", "--replicas", "2", "--num-requests", "300"))
    rate = simulated["slo_met_requests_per_s"]
    text = " ".join(run("simulate", SCENARIO, "--replicas", "2", "--num-requests", "300").split())
    # the deployment's rate over its 2 replicas
    assert f"{rate:,.2f} per deployment (2 replicas: {rate / 2:,.2f} per replica)" in text
