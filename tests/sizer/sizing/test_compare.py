"""`sizer compare`: a vllm bench serve result file against sizer's simulation of the same workload."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.cli import app
from sizer.inputs.bench_result import read_bench_result
from sizer.inputs.scenario import load_scenario
from sizer.sizing.compare import compare

DATA = Path(__file__).resolve().parents[2] / "data" / "bench"
C16 = DATA / "vllm-bench-serve-c16.json"
DETAILED = DATA / "vllm-bench-serve-detailed-c4.json"
SCENARIO = DATA / "scenario-llama-3.1-8b-h100.yaml"


def run(*args: str):
    return CliRunner().invoke(app, ["compare", *args])


def test_reads_vllm_bench_serve_keys():
    r = read_bench_result(C16)
    assert (r.completed, r.num_prompts, r.max_concurrency, r.request_rate_per_s) == (200, 200, 16, None)
    measured = dict(r.measured)
    # the file's own numbers, every throughput and latency statistic, nothing else (std_ and max_ are not compared)
    assert measured["p99_itl_ms"] == 17.2 and measured["request_throughput"] == 6.28
    assert len(measured) == 15 and not any(k.startswith("std_") for k in measured)


def test_a_result_of_sizers_own_prediction_compares_with_no_error(tmp_path):
    # round trip: sizer's predictions written back in vllm bench serve's format are what it predicts again
    first = compare(read_bench_result(C16), load_scenario(SCENARIO))
    data = json.loads(C16.read_text())
    data.update({m.metric: m.predicted for m in first.metrics})
    echo = tmp_path / "echo.json"
    echo.write_text(json.dumps(data))
    again = compare(read_bench_result(echo), load_scenario(SCENARIO))
    assert [m.metric for m in again.metrics] == [m.metric for m in first.metrics]
    assert all(m.error == pytest.approx(0.0, abs=1e-12) for m in again.metrics)
    assert again.workload.startswith("closed loop of 16 clients") and again.num_requests == 200


def test_compare_command_prints_measured_and_predicted_side_by_side():
    out = run(str(C16), str(SCENARIO))
    assert out.exit_code == 0, out.output
    assert "p99_ttft_ms" in out.stdout and "141.20" in out.stdout and "error" in out.stdout
    data = json.loads(run(str(DETAILED), str(SCENARIO), "--json").stdout)
    assert data["lengths_from"] == "the result file (per request)"
    by = {m["metric"]: m for m in data["metrics"]}
    # tokens per request: the file's prompts (3,680 tokens in all) and 20 tokens each out of 8 requests
    per_request = by["total_token_throughput"]["predicted"] / by["request_throughput"]["predicted"]
    assert per_request == pytest.approx((3680 + 8 * 20) / 8)
    assert by["mean_ttft_ms"]["measured"] == 31.4
    assert by["mean_ttft_ms"]["error"] == pytest.approx(by["mean_ttft_ms"]["predicted"] / 31.4 - 1)


def test_an_open_loop_run_is_replayed_at_its_rate(tmp_path):
    data = json.loads(C16.read_text()) | {"request_rate": 4.0, "max_concurrency": None}
    f = tmp_path / "rate.json"
    f.write_text(json.dumps(data))
    c = compare(read_bench_result(f), load_scenario(SCENARIO))
    assert c.workload == "Poisson arrivals at 4 req/s"
    # 200 requests at 4 req/s: about 50 s, so about 4 req/s finish per second
    assert dict((m.metric, m.predicted) for m in c.metrics)["request_throughput"] == pytest.approx(4.0, rel=0.15)


@pytest.mark.parametrize("change, field", [
    ({"completed": None}, "completed"),
    ({"completed": "200"}, "completed"),
    ({"request_rate": "fast"}, "request_rate"),
    ({"request_rate": 4.0, "max_concurrency": 16}, "max_concurrency"),
    ({"mean_ttft_ms": -1}, "mean_ttft_ms"),
    ({"max_concurrency": 0}, "max_concurrency"),
])
def test_a_bad_result_file_is_one_line_naming_the_key(tmp_path, change, field):
    data = json.loads(C16.read_text()) | change
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(data))
    out = run(str(f), str(SCENARIO))
    assert out.exit_code == 2 and field in out.output and str(f) in out.output
    assert len(out.output.strip().splitlines()) == 1


def test_a_file_that_is_not_a_result_is_refused(tmp_path):
    for text in ("not json", "[1, 2]", '{"model_id": "x"}'):
        f = tmp_path / "bad.json"
        f.write_text(text)
        out = run(str(f), str(SCENARIO))
        assert out.exit_code == 2 and str(f) in out.output and len(out.output.strip().splitlines()) == 1
    lens = json.loads(DETAILED.read_text()) | {"input_lens": [300, 420]}
    f.write_text(json.dumps(lens))
    out = run(str(f), str(SCENARIO))
    assert out.exit_code == 2 and "input_lens" in out.output
