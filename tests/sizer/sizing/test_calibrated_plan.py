"""A scenario that names a calibrated profile gets its step times from the measured tables."""

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.cli import app
from sizer.timing.profile import CalibratedStepTimeModel, load_profile
from sizer.timing.roofline import decode_batch

REPO = Path(__file__).resolve().parents[3]
CALIBRATED = REPO / "hardware_profiles" / "calibrated"
H200 = CALIBRATED / "h200-llama-3.1-8b-tp1"     # measured on an H200 on 2026-12-04 (docs/fidelity-h200.md)
TINY_CPU = CALIBRATED / "cpu-tiny-tp1"
runner = CliRunner()


def plan(*flags):
    result = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpu", "h200", "--max-model-len", "8192",
                                 "--json", *flags])
    return result


def test_profile_prices_the_steps():
    roofline = json.loads(plan().stdout)
    calibrated = json.loads(plan("--profile", str(H200)).stdout)
    assert calibrated["step_times"]["model"].startswith("calibrated on NVIDIA H200")
    # decode at batch 1 on the mean context (1024 prompt + 256/2 output) is what the tables say
    model = CalibratedStepTimeModel(load_profile(H200), num_layers=32)
    assert calibrated["step_times"]["decode_batch1_ms"] == model.step_time(decode_batch(1, 1024 + 128)) * 1e3
    # the measured step (with its fixed overhead of several ms, profile.yaml) is slower than the
    # roofline's bandwidth-bound 3.35 ms + 0.5 ms, and the plan says where the numbers came from
    assert calibrated["step_times"]["decode_batch1_ms"] > roofline["step_times"]["decode_batch1_ms"]
    assert any("calibrated profile" in a for a in calibrated["assumptions"])


def test_profile_for_another_model_is_refused():
    result = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--profile", str(TINY_CPU)])
    assert result.exit_code == 2
    # the profile came from --profile, so the refusal names the flag (and the scenario field it set)
    assert "error: --profile: measured for tiny at TP1" in result.stderr
    assert "(as hardware.calibrated_profile)" in result.stderr


def test_profile_for_another_device_is_refused():
    # the H200's measurements would price an L4 (a quarter of its bandwidth) three times too fast
    result = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpu", "l4", "--profile", str(H200)])
    assert result.exit_code == 2
    assert result.stderr.strip() == ("error: --profile: measured on h200; the scenario runs on l4 "
                                     "(a profile prices only the device it was measured on) "
                                     "(as hardware.calibrated_profile)")


@pytest.mark.parametrize("file, text, expected", [
    # read by validation.safe_yaml, as a scenario is: the line, then the parser's own words in brackets, which
    # PyYAML's releases word differently (so only their start is checked)
    ("profile.yaml", "model: [unclosed\n", "profile.yaml: line 2: not valid YAML ("),
    ("decode_attention.csv", "seqs,context_tokens,time_s\n1,abc,0.001\n",
     "decode_attention.csv: line 2, column context_tokens: expected a number"),
])
def test_a_damaged_profile_is_one_line_not_a_traceback(tmp_path, file, text, expected):
    damaged = tmp_path / "h200-llama-3.1-8b-tp1"
    shutil.copytree(H200, damaged)
    (damaged / file).write_text(text)
    result = plan("--profile", str(damaged))
    assert result.exit_code == 2
    line, where = result.stderr.strip(), damaged / expected.split(":")[0]
    assert "\n" not in line and line.startswith(f"error: {where}:{expected.split(':', 1)[1]}")
