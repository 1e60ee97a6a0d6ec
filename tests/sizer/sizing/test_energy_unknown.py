"""A GPU without power figures: `plan --simulate` says why its energy is unknown, as it says a price is unknown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sizer.analytic.energy import power_by_state
from sizer.cli import app
from sizer.inputs.hardware import load_hardware

ROOT = Path(__file__).resolve().parents[3]


def test_a_mig_slice_has_no_price_and_no_power_of_its_own():
    # NVIDIA publishes neither a price nor a power figure per MIG slice: the slice keeps none of its board's (the
    # H100 SXM's 700 W TDP and 80/450/700 W by state priced a 3g.40gb slice at 453 W), rather than a g/7 share
    part, board = load_hardware("h100-sxm/mig-3g.40gb"), load_hardware("h100-sxm")
    assert board.tdp_w == 700 and board.power_w and board.reserved_usd_per_gpu_hour is not None
    assert (part.tdp_w, part.power_w, part.price_usd_per_gpu_hour, part.reserved_usd_per_gpu_hour) == (None,) * 4
    assert power_by_state(part) is None


@pytest.mark.parametrize("gpu, why", [
    ("h100-sxm/mig-3g.40gb", "NVIDIA publishes no power for a MIG slice"),
    ("tpu-v6e", "the tpu-v6e profile gives no power figures and no tdp_w"),      # tdp_w: null, Google publishes none
])
def test_the_plan_says_why_a_gpus_energy_is_unknown(tmp_path, gpu, why):
    d = yaml.safe_load((ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml").read_text())
    d["workload"]["num_requests"] = 300
    path = tmp_path / "chat.yaml"
    path.write_text(yaml.safe_dump(d))
    flags = ["plan", str(path), "--gpu", gpu, "--rate", "1", "--simulate"]
    out = CliRunner().invoke(app, [*flags, "--json"])
    assert out.exit_code == 0, out.output
    plan = json.loads(out.stdout)
    assert plan["simulation"]["replicas"] >= 1
    assert plan["energy"] is None and plan["energy_unknown"].startswith(why)
    text = CliRunner().invoke(app, [*flags, "--wide"]).output
    assert f"Energy: unknown: {why}" in " ".join(text.split())
