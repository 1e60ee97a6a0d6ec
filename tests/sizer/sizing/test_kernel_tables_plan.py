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


def test_a_bundled_h100_plan_is_priced_by_its_tables_and_names_each_source():
    plan = plan_json(SCENARIO)
    assert plan["step_times"]["model"] == H100_TABLES
    note = next(a for a in plan["assumptions"] if H100_TABLES in a)
    assert "hardware.step_model: auto" in note
    # Llama-3.1-8B on one H100: every operator family has measured rows but the step's fixed cost beside its kernels
    # (input preparation, sampler: fitted with the tables); attention past the measured lengths is extended as the
    # plan says (the H100's 3.35e12 B/s: hardware_profiles/h100-sxm.yaml)
    assert plan["step_times"]["sources"] == {
        "dense GEMMs": "kernel tables", "lm_head": "kernel tables",
        "attention": "kernel tables (past the measured lengths: decode along the last measured segment, at least the "
                     "KV read at 3.35 TB/s; prefill at the longest measured prompt's cost per query-key pair)",
        "element-wise": "kernel tables' bandwidth model (tables.yaml)",
        "step overhead": "0.00 ms, fitted with the tables (docs/fidelity.md)"}


def test_the_tables_price_the_steps_unless_the_roofline_is_asked_for(tmp_path):
    roofline = plan_json(with_step_model(tmp_path, "roofline"))["step_times"]
    tables = plan_json(SCENARIO)["step_times"]
    assert roofline["model"].startswith("roofline on NVIDIA H100")
    assert roofline["sources"] == {"all operators": "roofline"}
    # the same step priced from measurements: the 8B's batch-1 decode, 7.31 ms on the roofline, is 6.60 ms
    # from the tables (32 layers of 4 measured GEMMs at m = 1 ~ 5 ms, the lm_head, 13.6 us attention a layer)
    assert 6.0 < tables["decode_batch1_ms"] < roofline["decode_batch1_ms"] - 0.3


def test_each_engine_is_priced_by_its_own_tables(tmp_path):
    for engine, version in (("sglang", "0.5.14"), ("tensorrt-llm", "1.3.0rc20")):
        path = tmp_path / f"{engine}.yaml"
        path.write_text(SCENARIO.read_text().replace("engine: vllm", f"engine: {engine}")
                        .replace("max_model_len: 16384", "max_model_len: 8192"))
        assert plan_json(path)["step_times"]["model"] == H100_TABLES.replace("vllm 0.24.0", f"{engine} {version}")


def test_a_gpu_without_tables_is_priced_by_the_roofline_and_says_so(tmp_path):
    plan = plan_json(with_step_model(tmp_path, "auto", gpu="mi300x"))
    assert plan["step_times"]["model"].startswith("roofline on")
    assert any("no kernel tables are bundled for mi300x in vllm" in a for a in plan["assumptions"])


def test_asking_for_tables_that_do_not_exist_is_refused_in_one_line(tmp_path):
    result = runner.invoke(app, ["plan", str(with_step_model(tmp_path, "kernel_tables", gpu="mi300x")), "--json"])
    assert result.exit_code == 2
    assert "hardware.step_model" in result.output and "none are bundled for mi300x in vllm" in result.output


def test_plans_work_without_pyarrow_or_aiconfigurator(tmp_path):
    path = with_step_model(tmp_path, "kernel_tables")
    code = ("import sys; sys.modules['pyarrow'] = None; sys.modules['aiconfigurator_core'] = None; "
            "from sizer.cli.app import main; sys.argv = ['sizer', 'plan', sys.argv[1], '--json']; main()")
    out = subprocess.run([sys.executable, "-c", code, str(path)], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["step_times"]["model"] == H100_TABLES
