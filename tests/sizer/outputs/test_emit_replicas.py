"""`--emit`'s replica count says where it came from: without --simulate a plan counts replicas for memory
alone (a comment in the emitted file and a line on stderr say so); with --simulate the sizing pipeline's count
is the one emitted (issue 27)."""

import json

import yaml
from typer.testing import CliRunner

from sizer.cli import app

runner = CliRunner()
SCENARIO = "scenarios/llama-3.1-70b-h200.yaml"   # 10 req/s of 70B FP8 on TP4 H200s, TTFT and ITL targets


def manifest(text: str) -> dict:
    return yaml.safe_load("\n".join(line for line in text.splitlines() if not line.startswith("#")))


def test_memory_only_replicas_are_named_in_the_file_and_on_stderr():
    result = runner.invoke(app, ["plan", SCENARIO, "--emit", "k8s"])
    assert result.exit_code == 0, result.output
    # the plan alone: Little's law puts ~22 requests in flight, which one replica's KV cache holds -> 1 replica
    assert manifest(result.stdout)["spec"]["replicas"] == 1
    assert "# replicas: 1 is memory-only" in result.stdout
    assert "note: replicas: 1 is memory-only" in result.stderr
    assert "sizer plan --simulate" in result.stderr


def test_simulated_replicas_are_emitted_without_the_note(simulations_once):
    # simulations_once (tests/sizer/conftest.py): --emit sizes with the simulations --json ran, run once
    sized = json.loads(runner.invoke(app, ["plan", SCENARIO, "--simulate", "--json"]).stdout)
    replicas = sized["simulation"]["replicas"]
    # the SLO needs more than memory does: goodput ~3.5 req/s per replica, ceil(10 / 3.5) = 3
    assert replicas > 1
    result = runner.invoke(app, ["plan", SCENARIO, "--simulate", "--emit", "k8s"])
    assert result.exit_code == 0, result.output
    assert manifest(result.stdout)["spec"]["replicas"] == replicas
    assert "memory-only" not in result.stdout and "memory-only" not in result.stderr


def test_stated_replicas_are_not_called_memory_only(tmp_path):
    data = yaml.safe_load(open(SCENARIO))
    data["deployment"]["replicas"] = 2
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["plan", str(path), "--emit", "k8s"])
    assert manifest(result.stdout)["spec"]["replicas"] == 2          # the scenario's, as stated
    assert "memory-only" not in result.stdout + result.stderr


def test_a_schedule_says_its_autoscaling_is_not_emitted():
    # the diurnal scenario's autoscaling policy has no emitted form: stderr says the file holds a fixed count
    result = runner.invoke(app, ["plan", "scenarios/diurnal-chat-h100.yaml", "--emit", "k8s"])
    assert result.exit_code == 0, result.output
    assert "note: workload.schedule and autoscaling are not emitted" in result.stderr
    plain = runner.invoke(app, ["plan", SCENARIO, "--emit", "k8s"])
    assert "autoscaling are not emitted" not in plain.stderr
