"""Where `sizer check` takes the workload and SLO from: the `sizer:` block, a side scenario
(`--scenario`), flags; and `--share`, the part of one workload a deployment serves."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.cli import app
from sizer.inputs.manifest import read_check_input
from sizer.inputs.traffic import Traffic
from validation.errors import FieldError

ROOT = Path(__file__).resolve().parents[3]
PASS = ROOT / "scenarios" / "deploy" / "pass-llama-8b-h100.yaml"       # its block: 8 requests/s, ttft 1000 ms
CHAT = ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml"              # 6 requests/s, ttft 500 ms, shared prefix


def run(*args: str):
    return CliRunner().invoke(app, ["check", *(str(a) for a in args)])


def test_side_scenario_replaces_the_block_and_flags_replace_both():
    inp = read_check_input(str(PASS), scenario=str(CHAT))
    w = inp.scenario_data["workload"]
    assert w["arrival"] == {"process": "poisson", "rate_per_s": 6}                  # the scenario's, not the block's 8
    assert w["shared_prefix"] == {"share": 0.5, "tokens": 512, "num_prefixes": 4}
    assert inp.scenario_data["slo"] == {"ttft_ms": 500, "itl_ms": 50, "required_share": 0.95}
    # the manifest still gives the deployment: 2 replicas from spec.replicas, max_model_len 8192 from the flag
    assert inp.replicas == 2 and inp.scenario_data["deployment"]["max_model_len"] == 8192
    flagged = read_check_input(str(PASS), traffic=Traffic(ttft_ms=800.0), scenario=str(CHAT))
    assert flagged.scenario_data["slo"]["ttft_ms"] == 800.0 and flagged.scenario_data["slo"]["itl_ms"] == 50


def test_share_scales_the_arrival_rate():
    # the block's 8 requests/s, a quarter of it served here: 8 x 0.25 = 2 requests/s
    inp = read_check_input(str(PASS), traffic=Traffic(share=0.25))
    assert inp.scenario_data["workload"]["arrival"]["rate_per_s"] == 2.0
    # with --rate, the share is of the rate given: 10 x 0.5 = 5
    inp = read_check_input(str(PASS), traffic=Traffic(rate_per_s=10.0, share=0.5))
    assert inp.scenario_data["workload"]["arrival"]["rate_per_s"] == 5.0


def test_share_of_a_trace_stretches_its_arrival_times(tmp_path):
    text = PASS.read_text().replace(
        "        arrival: {process: poisson, rate_per_s: 8}\n", "").replace(
        "        prompt_tokens: {distribution: lognormal, mean: 1200, sigma: 0.8, min: 16, max: 6000}\n"
        "        output_tokens: {distribution: lognormal, mean: 250, sigma: 0.7, min: 4, max: 2000}\n",
        "        trace: {path: t.csv, format: csv, time_scale: 2.0}\n")
    (tmp_path / "d.yaml").write_text(text)
    inp = read_check_input(str(tmp_path / "d.yaml"), traffic=Traffic(share=0.5))
    # half the requests: inter-arrival times x 2 / 0.5 = x 4 (half the rate)
    assert inp.scenario_data["workload"]["trace"]["time_scale"] == 4.0


def test_share_halves_the_replicas_the_slo_needs(simulations_once):
    # simulations_once (tests/sizer/conftest.py): both checks bisect the same goodput, run once
    # scenarios/deploy/pass-llama-8b-h100.yaml: 2 replicas, each meeting the SLO up to about 18 requests/s
    # (the check's goodput note), so 80 requests/s fails; a 0.1 share of it, 8 requests/s, passes
    heavy = run(PASS, "--rate", "80")
    assert heavy.exit_code == 1 and "✗ slo" in heavy.output, heavy.output
    tenth = run(PASS, "--rate", "80", "--share", "0.1")
    assert tenth.exit_code == 0 and "✓ slo" in tenth.output, tenth.output


@pytest.mark.parametrize("args, flag", [
    (["--share", "0"], "--share"),
    (["--share", "1.5"], "--share"),
    # 1e-6 (the smallest share) of 2 requests/s is below the smallest rate a scenario takes (1e-5: the refusal names
    # the flag that made it, not the workload's rate_per_s)
    (["--rate", "2", "--share", "1e-6"], "--share"),
    (["--scenario", "nope.yaml"], "nope.yaml"),
])
def test_bad_sources_name_the_flag_or_file(args, flag):
    result = run(PASS, *args)
    assert result.exit_code == 2 and flag in result.output and len(result.output.strip().splitlines()) == 1, \
        result.output


def test_share_without_a_workload_is_refused(tmp_path):
    text = PASS.read_text()
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("  annotations:"))
    end = next(i for i, line in enumerate(lines) if line.startswith("spec:"))
    (tmp_path / "d.yaml").write_text("".join(lines[:start] + lines[end:]))
    with pytest.raises(FieldError) as err:
        read_check_input(str(tmp_path / "d.yaml"), traffic=Traffic(share=0.5))
    assert err.value.field == "--share"
