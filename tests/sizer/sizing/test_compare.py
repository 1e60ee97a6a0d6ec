"""`sizer compare`: a vllm bench serve result file against sizer's simulation of the same workload."""

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from sizer.cli import app
from sizer.inputs.bench_result import read_bench_result
from sizer.inputs.guidellm_report import read_guidellm_report
from sizer.inputs.scenario import load_scenario
from sizer.sizing.compare import compare, compare_guidellm

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


# GuideLLM: tests/data/bench/guidellm-report-2-benchmarks.json (README there): a concurrent benchmark of 4
# clients keeping its 8 requests, and a Poisson one at 2 req/s keeping none.
GUIDELLM = DATA / "guidellm-report-2-benchmarks.json"


def test_reads_a_guidellm_report_one_benchmark_per_strategy():
    first, second = read_guidellm_report(GUIDELLM)
    assert (first.strategy, first.clients, first.rate_per_s, first.num_successful) == ("concurrent", 4, None, 8)
    assert (second.strategy, second.clients, second.rate_per_s, second.num_requests) == ("poisson", None, 2.0, 60)
    # the first keeps every request: its lengths are the file's (4,622 prompt and 1,480 output tokens in all)
    assert sum(first.prompt_tokens) == 4622 and sum(first.output_tokens) == 1480 and second.prompt_tokens is None
    measured = dict(first.measured)
    assert measured["time_to_first_token_ms.mean"] == 31.264
    # throughput from the totals: 8 successful requests over the 6.4 s measured window
    assert measured["requests_per_second"] == pytest.approx(8 / 6.4)
    assert measured["output_tokens_per_second"] == pytest.approx(1480 / 6.4)


def test_guidellm_statistics_are_weighted_as_guidellm_weights_them():
    c = compare_guidellm(read_guidellm_report(GUIDELLM)[0], load_scenario(SCENARIO))
    assert c.workload == "closed loop of 4 clients (GuideLLM concurrent)" and c.num_requests == 8
    assert c.lengths_from == "the report (per request)"
    # recompute from a fresh simulation of the same workload: the token-weighted mean of per-request
    # (E2E - TTFT) / (n - 1) is the run's decode time over its token gaps, sum(E2E - TTFT) / sum(n - 1),
    # and the mean time per output token is sum(E2E) / sum(n)
    from sizer.sizing.compare import _lengths, _replayed, _simulate
    bench, scenario = read_guidellm_report(GUIDELLM)[0], load_scenario(SCENARIO)
    workload, _ = _lengths(_replayed(scenario, 8, None, 4)[0], bench.prompt_tokens, bench.output_tokens, "")
    cols = _simulate(scenario, workload).columns
    n = cols["output_tokens"].astype(float)
    predicted = {m.metric: m.predicted for m in c.metrics}
    assert predicted["inter_token_latency_ms.mean"] == pytest.approx(
        (cols["e2e_ms"] - cols["ttft_ms"]).sum() / (n - 1).sum())
    assert predicted["time_per_output_token_ms.mean"] == pytest.approx(cols["e2e_ms"].sum() / n.sum())
    # one value a request, unweighted: the p50 of 8 TTFTs is the 4th smallest (inverted CDF: 4/8 reaches 0.5)
    assert predicted["time_to_first_token_ms.p50"] == pytest.approx(np.sort(cols["ttft_ms"])[3])
    assert predicted["request_latency.p99"] == pytest.approx(cols["e2e_ms"].max() / 1000)


def test_a_guidellm_report_of_sizers_own_prediction_compares_with_no_error(tmp_path):
    scenario = load_scenario(SCENARIO)
    bench = read_guidellm_report(GUIDELLM)[0]
    predicted = {m.metric: m.predicted for m in compare_guidellm(bench, scenario).metrics}
    data = json.loads(GUIDELLM.read_text())
    b = data["benchmarks"][0]
    b["duration"] = 8 / predicted["requests_per_second"]
    tokens = predicted["output_tokens_per_second"] * b["duration"]
    b["metrics"]["output_token_count"]["successful"]["total_sum"] = tokens
    for key, value in predicted.items():
        if "." in key:
            metric, stat = key.split(".")
            summary = b["metrics"][metric]["successful"]
            (summary if stat == "mean" else summary["percentiles"])[stat] = value
    echo = tmp_path / "echo.json"
    echo.write_text(json.dumps(data))
    again = compare_guidellm(read_guidellm_report(echo)[0], scenario)
    assert len(again.metrics) == 2 + 4 * 5
    assert all(m.error == pytest.approx(0.0, abs=1e-12) for m in again.metrics)


def test_compare_command_reads_a_guidellm_report_benchmark_by_benchmark():
    out = run(str(GUIDELLM), str(SCENARIO))
    assert out.exit_code == 0, out.output
    assert "benchmark 0: concurrent, 4 clients" in out.stdout and "benchmark 1: poisson at 2 req/s" in out.stdout
    data = json.loads(run(str(GUIDELLM), str(SCENARIO), "--benchmark", "1", "--json").stdout)
    assert len(data) == 1 and data[0]["benchmark"] == "benchmark 1: poisson at 2 req/s"
    assert data[0]["workload"] == "Poisson arrivals at 2 req/s" and data[0]["lengths_from"] == "the scenario"


def test_a_ramp_and_a_warm_up_are_named_as_not_modelled(tmp_path):
    data = json.loads(GUIDELLM.read_text())
    data["benchmarks"][1]["config"]["strategy"]["rampup_duration"] = 10.0
    data["benchmarks"][1]["config"]["warmup"]["percent"] = 0.1
    f = tmp_path / "ramp.json"
    f.write_text(json.dumps(data))
    c = compare_guidellm(read_guidellm_report(f)[1], load_scenario(SCENARIO))
    assert [note.split(":")[0] for note in c.not_modelled] == ["rampup_duration 10 s", "warmup"]
    out = run(str(f), str(SCENARIO), "--benchmark", "1")
    assert "not modelled: rampup_duration 10 s" in " ".join(out.stdout.split())


@pytest.mark.parametrize("edit, field", [
    (lambda b: b["config"]["strategy"].update(type_="trace"), "benchmarks[1].config.strategy.type_"),
    (lambda b: b["config"]["strategy"].update(max_concurrency=8), "benchmarks[1].config.strategy.max_concurrency"),
    (lambda b: b["config"]["strategy"].update(rate=-1), "benchmarks[1].config.strategy.rate"),
    (lambda b: b.pop("duration"), "benchmarks[1].duration"),
    (lambda b: b["metrics"]["time_to_first_token_ms"]["successful"].update(mean="fast"),
     "benchmarks[1].metrics.time_to_first_token_ms.successful.mean"),
    (lambda b: b["metrics"].pop("request_totals"), "benchmarks[1].metrics.request_totals"),
])
def test_a_bad_guidellm_report_is_one_line_naming_the_key(tmp_path, edit, field):
    data = json.loads(GUIDELLM.read_text())
    edit(data["benchmarks"][1])
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(data))
    out = run(str(f), str(SCENARIO))
    assert out.exit_code == 2 and f"{f}: {field}:" in out.output, out.output
    assert len(out.output.strip().splitlines()) == 1


def test_benchmark_flag_is_checked():
    out = run(str(GUIDELLM), str(SCENARIO), "--benchmark", "2")
    assert out.exit_code == 2 and "--benchmark" in out.output and "0 to 1" in out.output
    out = run(str(C16), str(SCENARIO), "--benchmark", "0")
    assert out.exit_code == 2 and "--benchmark" in out.output and "vllm bench serve" in out.output


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.update(benchmarks=[]), "benchmarks"),
    (lambda d: d.update(benchmarks=[[1, 2]]), "benchmarks[0]"),
    (lambda d: d["benchmarks"][0]["requests"]["successful"][3].update(prompt_tokens=-5),
     "benchmarks[0].requests.successful[3].prompt_tokens"),
    (lambda d: d["benchmarks"][0]["requests"]["successful"].__setitem__(2, "request"),
     "benchmarks[0].requests.successful[2]"),
    (lambda d: d["benchmarks"][0]["config"]["strategy"].pop("streams"), "benchmarks[0].config.strategy.streams"),
    # the requests' section of the wrong type was read as "no requests kept": the scenario's lengths replayed
    # in place of the report's, silently
    (lambda d: d["benchmarks"][0].update(requests="all"), "benchmarks[0].requests"),
    (lambda d: d["benchmarks"][0]["requests"].update(successful=7), "benchmarks[0].requests.successful"),
])
def test_a_malformed_guidellm_report_is_one_line_naming_the_place(tmp_path, edit, field):
    data = json.loads(GUIDELLM.read_text())
    edit(data)
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(data))
    out = run(str(f), str(SCENARIO))
    assert out.exit_code == 2 and f"{f}: {field}:" in out.output, out.output
    assert len(out.output.strip().splitlines()) == 1
