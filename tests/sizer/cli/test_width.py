"""Every command's terminal output fits 80 columns, the width of a pipe (COLUMNS unset: rich's default) and of
the smallest usual terminal, by design: labels wrapped or abbreviated, some columns left out, and never a number
cut ("671.…", the model catalog's 412 lines before issue 27); --wide prints the full tables."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.cli import app

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = ROOT / "scenarios"
CHAT = SCENARIOS / "llama-3.1-8b-chat-h100.yaml"
GATEWAY = SCENARIOS / "gateway-difficulty-routing.yaml"
BENCH = ROOT / "tests" / "data" / "bench"
COLUMNS = 80

# sweep: two points both pruned (a 4 ms TTFT is below either GPU's weight-streaming floor): its summary line
SWEEP = f"scenario: {CHAT}\naxes:\n  gpu: [l40s, a100-pcie-80gb]\n  ttft_ms: [4]\n"

# Every command that prints tables, on the bundled inputs that make its widest ones (gateway pools, MoE layer
# kinds, llama.cpp slot answers, a failing check's fixes), kept short: a search of two configurations, short
# simulations. (validate needs torch and a calibrated profile: tests/engine; it uses the same table helpers.)
COMMANDS = {
    "models": ["models"],
    "gpus": ["gpus"],
    "plan": ["plan", str(CHAT)],
    "plan --simulate": ["plan", str(CHAT), "--simulate"],
    "plan MoE": ["plan", str(SCENARIOS / "deepseek-v3-h200-tp8.yaml")],
    "plan hybrid": ["plan", "--model", "nemotron-3-nano-30b-a3b", "--gpu", "h100-sxm"],
    "plan a day": ["plan", str(SCENARIOS / "diurnal-chat-h100.yaml"), "--simulate"],
    "plan llama.cpp": ["plan", str(SCENARIOS / "llamacpp-laptop-m4-pro.yaml")],
    "plan gateway --simulate": ["plan", str(GATEWAY), "--simulate"],
    "simulate": ["simulate", str(CHAT), "--num-requests", "200"],
    "simulate gateway": ["simulate", str(GATEWAY), "--num-requests", "200"],
    "search": ["search", str(CHAT), "--gpus", "a100-pcie-80gb,h100-sxm", "--tp", "1", "--weights", "fp8",
               "--kv-cache-dtype", "auto", "--num-requests", "100", "--workers", "1", "--all"],
    "search llama.cpp": ["search", str(SCENARIOS / "llamacpp-rtx4090-slots.yaml"), "--weights", "q4_k_m",
                         "--slots", "1,2", "--workers", "1", "--all"],
    "check pass": ["check", str(SCENARIOS / "deploy" / "pass-llama-8b-h100.yaml")],
    "check fail": ["check", str(SCENARIOS / "deploy" / "fail-latency-llama-70b-h100.yaml")],
    "sweep": ["sweep", "sweep.yaml", "--results", "r.parquet", "--workers", "1"],
    "compare": ["compare", str(BENCH / "vllm-bench-serve-c16.json"), str(BENCH / "scenario-llama-3.1-8b-h100.yaml")],
    "compare GuideLLM": ["compare", str(BENCH / "guidellm-report-2-benchmarks.json"),
                         str(BENCH / "scenario-llama-3.1-8b-h100.yaml")],
}


def cut_numbers(text: str) -> list[str]:
    """Lines where an ellipsis sits inside or right after a number ("671.…", "163,…", "…4096")."""
    return [line for line in text.splitlines() if any(
        ch == "…" and ((i and line[i - 1] in "0123456789.,") or line[i + 1:i + 2].isdigit())
        for i, ch in enumerate(line))]


def test_the_check_finds_a_cut_number():
    assert cut_numbers("│ deepseek-v3 │ Deep… │ 671.… │ 163,… │") == ["│ deepseek-v3 │ Deep… │ 671.… │ 163,… │"]
    assert cut_numbers("MLA (128 heads…) and 3 … 4") == []


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_fits_80_columns_and_cuts_no_number(name, monkeypatch, tmp_path, simulations_once):
    # simulations_once (tests/sizer/conftest.py): "plan a day" sizes the diurnal peak, its steady rate, twice (the
    # plan's and the day's sizing); the same inputs give the same bits, so the second is the first's

    monkeypatch.setenv("COLUMNS", str(COLUMNS))
    monkeypatch.chdir(tmp_path)                     # nothing a command writes lands in the checkout
    (tmp_path / "sweep.yaml").write_text(SWEEP)
    result = CliRunner().invoke(app, COMMANDS[name])
    assert result.exit_code in (0, 1), result.output    # check fail: exit 1, its verdict
    lines = result.stdout.splitlines()
    assert len(lines) > 1
    assert [line for line in lines if len(line) > COLUMNS] == []
    assert cut_numbers(result.stdout) == []
    assert "…" not in result.stdout                 # nor a label cut: every table wraps


def test_the_model_catalog_is_one_line_a_model_at_80_columns_and_whole_with_wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", str(COLUMNS))
    narrow = CliRunner().invoke(app, ["models"]).stdout
    # deepseek-v3: 671.03 B parameters, 37.55 B active, 61 layers, 163,840 tokens of context (its config.json)
    assert "deepseek-v3" in narrow and "671.03" in narrow and "163,840" in narrow
    row = next(line for line in narrow.splitlines() if line.startswith("deepseek-v3 "))
    assert row.split() == ["deepseek-v3", "671.03", "37.55", "61", "163,840", "MLA"]
    wide = CliRunner().invoke(app, ["models", "--wide"]).stdout
    # the full table: the architecture and each mixer's shape
    assert "DeepseekV3ForCausalLM" in wide and "MLA (128 heads, latent 512 + rope 64)" in wide
    assert max(map(len, wide.splitlines())) > COLUMNS


def test_search_at_80_columns_keeps_every_column_its_caption_explains(monkeypatch):
    monkeypatch.setenv("COLUMNS", str(COLUMNS))
    out = CliRunner().invoke(app, COMMANDS["search"]).stdout
    header = next(line for line in out.splitlines() if "configuration" in line and "goodput" in line)
    # the caption explains goodput, TTFT, ITL and E2E: none of them is left out (issue 27 found E2E dropped); the
    # ITL, which an itl_ms target binds on, is shown, and TPOT is one of the columns --wide adds, as it says
    assert header.split() == ["configuration", "goodput", "rep", "GPUs", "$/hour", "$/Mtok", "TTFT", "ITL", "E2E",
                              "binds"]
    said = " ".join(out.split())
    assert "ITL (token gaps), E2E: p95 ms" in said and "--wide: rank, GPUs per replica and TPOT" in said
