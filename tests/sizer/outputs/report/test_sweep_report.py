"""`sizer report --sweep`: Pareto fronts per model and GPU, the cheapest point per SLO, and the exports,
from hand-made rows whose answers can be read off."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from sizer.cli import app
from sizer.outputs.report.sweep import build_sweep_report, pareto
from sizer.outputs.sweep_store import ResultStore
from sizer.sizing.sweep import SweepRow

runner = CliRunner()


def row(name: str, gpu: str, cost: float, ttft: float, itl: float, ttft_target: float = 500, status: str = "ok"):
    return SweepRow(
        point_hash=name, seed=1, status=status, binding="none", reason="", scenario="s", model="llama-3.1-8b",
        gpu=gpu, engine="vllm", quantization="bf16", kv_cache_dtype="bf16", tensor_parallel_size=1,
        pipeline_parallel_size=1, data_parallel_size=1, enable_expert_parallel=False, enable_attention_dp=False,
        max_num_seqs=256,
        max_num_batched_tokens=8192, speculative=False, num_speculative_tokens=None, rate_per_s=6.0,
        ttft_target_ms=ttft_target, itl_target_ms=50.0, tpot_target_ms=None, e2e_target_ms=None, required_share=0.95,
        usd_per_million_output_tokens=cost, usd_per_hour=cost * 5.4, replicas=1, ttft_p95_ms=ttft, itl_p95_ms=itl)


ROWS = [row("a", "h100-sxm", 1.0, 300, 20), row("b", "h100-sxm", 2.0, 100, 30),
        row("c", "h100-sxm", 2.5, 200, 10),        # dominated on TTFT by b (cheaper and faster), not on ITL
        row("d", "h200", 0.8, 400, 25, ttft_target=1000),
        row("e", "h200", 0.5, 100, 10, status="rejected")]          # misses its SLO: on no front


def test_fronts_keep_only_undominated_points_per_model_and_gpu():
    report = build_sweep_report([r.__dict__ for r in ROWS], "r.parquet")
    fronts = {(f.gpu, f.latency): [p.point_hash for p in f.points] for f in report.fronts}
    assert fronts["h100-sxm", "ttft_p95_ms"] == ["a", "b"]          # c: b costs less and has lower TTFT
    assert fronts["h100-sxm", "itl_p95_ms"] == ["a", "c"]           # b: a costs less and has lower ITL
    assert fronts["h200", "ttft_p95_ms"] == ["d"]
    assert report.by_status == {"ok": 4, "rejected": 1}


def test_the_cheapest_per_slo_ignores_points_missing_it():
    cheapest = {c.slo: (c.point_hash, c.points_meeting) for c in build_sweep_report([r.__dict__ for r in ROWS],
                                                                                    "r").cheapest}
    assert cheapest == {"TTFT 500 ms, ITL 50 ms, 95% of requests": ("a", 3),
                        "TTFT 1000 ms, ITL 50 ms, 95% of requests": ("d", 1)}


def test_cost_is_never_compared_across_arrival_rates():
    # "f" is cheaper per token than "a" only because it is sized for 4x the traffic: another question, so each
    # rate gets its own cheapest point and its own front
    f = dict(row("f", "h100-sxm", 0.3, 300, 20).__dict__, rate_per_s=24.0)
    report = build_sweep_report([r.__dict__ for r in ROWS] + [f], "r")
    cheapest = {(c.rate_per_s, c.slo): c.point_hash for c in report.cheapest}
    assert cheapest[6.0, "TTFT 500 ms, ITL 50 ms, 95% of requests"] == "a"
    assert cheapest[24.0, "TTFT 500 ms, ITL 50 ms, 95% of requests"] == "f"
    fronts = {(f.gpu, f.rate_per_s, f.latency): [p.point_hash for p in f.points] for f in report.fronts}
    assert fronts["h100-sxm", 6.0, "ttft_p95_ms"] == ["a", "b"] and fronts["h100-sxm", 24.0, "ttft_p95_ms"] == ["f"]


def test_pareto_on_ties_keeps_both():
    rows = [r.__dict__ for r in (row("x", "h200", 1.0, 100, 1), row("y", "h200", 1.0, 100, 1))]
    assert [r["point_hash"] for r in pareto(rows, "ttft_p95_ms")] == ["x", "y"]


def test_report_sweep_writes_html_csv_and_json(tmp_path):
    store = ResultStore(tmp_path / "r.parquet")
    for r in ROWS:
        store.add(r)
    store.close()
    html, csv = tmp_path / "r.html", tmp_path / "r.csv"
    result = runner.invoke(app, ["report", "--sweep", str(tmp_path / "r.parquet"), "-o", str(html), "--csv", str(csv),
                                 "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["cheapest"][0]["point_hash"] == "d"       # sorted by SLO text: "TTFT 1000" first
    assert "Pareto fronts" in html.read_text() and "<svg" in html.read_text()
    assert sorted(pd.read_csv(csv).point_hash) == ["a", "b", "c", "d", "e"]


def test_report_sweep_flag_errors(tmp_path):
    cases = [(["report", "--sweep", str(tmp_path / "none.parquet"), "--json"], "--sweep"),       # not a file
             (["report", "--sweep", str(tmp_path / "r.parquet")], "--sweep"),                     # nothing to write
             (["report", "scenarios/llama-3.1-8b-chat-h100.yaml", "--csv", str(tmp_path / "x.csv"), "-o",
               str(tmp_path / "x.html")], "--csv")]
    (tmp_path / "r.parquet").write_text("not parquet")
    for args, flag in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and flag in result.stderr and result.stderr.count("\n") == 1, result.output


def test_names_are_labels_not_mathtext_nor_formulas(tmp_path):
    # `$\frac{` is bad mathtext (matplotlib raised on it); `=HYPERLINK(...)` a formula to a spreadsheet
    store = ResultStore(tmp_path / "r.parquet")
    for r in ROWS:
        store.add(SweepRow(**{**r.__dict__, "model": "$\\frac{x}{$ =1+1", "gpu": "=HYPERLINK(\"http://x\")"}))
    store.close()
    out, csv = tmp_path / "r.html", tmp_path / "r.csv"
    result = runner.invoke(app, ["report", "--sweep", str(tmp_path / "r.parquet"), "-o", str(out), "--csv", str(csv)])
    assert result.exit_code == 0, result.output
    assert "frac" in out.read_text()
    frame = pd.read_csv(csv)
    assert set(frame["gpu"]) == {"'=HYPERLINK(\"http://x\")"} and set(frame["model"]) == {"$\\frac{x}{$ =1+1"}


def test_an_ok_row_with_a_null_rate_is_one_line(tmp_path):
    store = ResultStore(tmp_path / "r.parquet")
    store.add(SweepRow(**{**ROWS[0].__dict__, "rate_per_s": None}))
    store.close()
    result = runner.invoke(app, ["report", "--sweep", str(tmp_path / "r.parquet"), "--json"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (f"error: {tmp_path / 'r.parquet'}: row 0 (a) rate_per_s: None in a row of "
                                     "status ok; expected what `sizer sweep` writes")


def test_report_sweep_pdf_is_written_beside_the_html(tmp_path):
    # --pdf with --sweep was taken and ignored: no PDF, exit 0
    pytest.importorskip("weasyprint")
    store = ResultStore(tmp_path / "r.parquet")
    for r in ROWS:
        store.add(r)
    store.close()
    result = runner.invoke(app, ["report", "--sweep", str(tmp_path / "r.parquet"), "-o", str(tmp_path / "r.html"),
                                 "--pdf"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r.pdf").read_bytes().startswith(b"%PDF")


def test_a_gateway_report_never_overwrites_its_document(tmp_path):
    doc = tmp_path / "gw.yaml"
    doc.write_text((Path(__file__).resolve().parents[4] / "scenarios" / "gateway-residency.yaml").read_text())
    before = doc.read_text()
    result = runner.invoke(app, ["report", str(doc), "--no-search", "-o", str(doc)])
    assert result.exit_code == 2 and "which this command reads" in result.stderr, result.output
    assert doc.read_text() == before
