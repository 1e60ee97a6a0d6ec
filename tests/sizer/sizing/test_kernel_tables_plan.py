"""Plans and kernel tables: the plan names the bundled tables, uses them when asked, and works
without the `kernels` extra (the bundled tables are gzip CSV, read with the standard library)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from sizer.cli import app

REPO = Path(__file__).resolve().parents[3]
SCENARIO = REPO / "scenarios" / "llama-3.1-8b-chat-h100.yaml"
H100_TABLES = "kernel tables measured on NVIDIA H100 80GB HBM3 in vllm 0.24.0 (aiconfigurator-core 0.12.0)"
runner = CliRunner()


def plan_json(path: Path) -> dict:
    result = runner.invoke(app, ["plan", str(path), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def with_step_model(tmp_path: Path, step_model: str, gpu: str = "h100-sxm") -> Path:
    text = SCENARIO.read_text().replace("hardware: h100-sxm", f"hardware: {{gpu: {gpu}, step_model: {step_model}}}")
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


def test_a_bundled_h100_plan_names_the_kernel_tables_and_keeps_the_roofline(tmp_path):
    plan = plan_json(SCENARIO)
    assert plan["step_times"]["model"].startswith("roofline on NVIDIA H100")
    note = next(a for a in plan["assumptions"] if H100_TABLES in a)
    assert "hardware.step_model: kernel_tables" in note


def test_kernel_tables_price_the_steps_when_asked(tmp_path):
    roofline = plan_json(SCENARIO)["step_times"]
    tables = plan_json(with_step_model(tmp_path, "kernel_tables"))["step_times"]
    assert tables["model"] == H100_TABLES
    # the same step priced from measurements: the 8B's batch-1 decode, 7.31 ms on the roofline, is 6.81 ms
    # from the tables (32 layers of 4 measured GEMMs at m = 1 ~ 5 ms, the lm_head, 13.6 us attention a layer)
    assert 6.0 < tables["decode_batch1_ms"] < roofline["decode_batch1_ms"] - 0.3


def test_a_gpu_without_tables_says_the_roofline_priced_it(tmp_path):
    plan = plan_json(with_step_model(tmp_path, "kernel_tables", gpu="mi300x"))
    assert plan["step_times"]["model"].startswith("roofline on")
    assert any("no kernel tables are bundled for mi300x in vllm" in a for a in plan["assumptions"])


def test_plans_work_without_pyarrow_or_aiconfigurator(tmp_path):
    path = with_step_model(tmp_path, "kernel_tables")
    code = ("import sys; sys.modules['pyarrow'] = None; sys.modules['aiconfigurator_core'] = None; "
            "from sizer.cli.app import main; sys.argv = ['sizer', 'plan', sys.argv[1], '--json']; main()")
    out = subprocess.run([sys.executable, "-c", code, str(path)], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["step_times"]["model"] == H100_TABLES
