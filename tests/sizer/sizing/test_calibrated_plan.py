"""A scenario that names a calibrated profile gets its step times from the measured tables."""

import json
from pathlib import Path

from typer.testing import CliRunner

from engine.profile import CalibratedStepTimeModel, load_profile
from sizer.analytic.roofline import decode_batch
from sizer.cli import app

REPO = Path(__file__).resolve().parents[3]
PROFILE = REPO / "hardware_profiles" / "calibrated" / "cpu-tiny-tp1"
runner = CliRunner()


def plan(*flags):
    result = runner.invoke(app, ["plan", "--model", "tiny", "--gpu", "h100", "--max-model-len", "2048", "--json",
                                 *flags])
    return result


def test_profile_prices_the_steps():
    roofline = json.loads(plan().stdout)
    calibrated = json.loads(plan("--profile", str(PROFILE)).stdout)
    assert calibrated["step_times"]["model"].startswith("calibrated on")
    # decode at batch 1 on the mean context (1024 prompt + 256/2 output) is what the tables say
    model = CalibratedStepTimeModel(load_profile(PROFILE), num_layers=4)
    assert calibrated["step_times"]["decode_batch1_ms"] == model.step_time(decode_batch(1, 1024 + 128)) * 1e3
    # a float32 CPU is far slower than an H100's roofline, and the plan says where the numbers came from
    assert calibrated["step_times"]["decode_batch1_ms"] > 10 * roofline["step_times"]["decode_batch1_ms"]
    assert any("calibrated profile" in a for a in calibrated["assumptions"])


def test_profile_for_another_model_is_refused():
    result = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--profile", str(PROFILE)])
    assert result.exit_code == 2
    assert "hardware.calibrated_profile: measured for tiny at TP1" in result.stderr
