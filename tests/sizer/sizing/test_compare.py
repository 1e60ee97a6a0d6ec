"""`sizer compare`: a vllm bench serve result file against sizer's simulation of the same workload."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from simulator import Arrivals
from simulator.metrics import _select
from sizer.cli import app
from sizer.inputs.bench_result import read_bench_result
from sizer.inputs.guidellm_report import read_guidellm_report
from sizer.inputs.scenario import load_scenario
from sizer.sizing.compare import _replayed, compare, compare_guidellm, predictions
from sizer.sizing.resolve import resolve
from sizer.sizing.simulate import simulate_scenario
from validation.errors import FieldError

ROOT = Path(__file__).resolve().parents[3]
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
    assert c.workload == "Poisson arrivals at 4 req/s, the last sent at 200 / 4 s as vllm bench serve scales them"
    # 200 requests at 4 req/s: about 50 s, so about 4 req/s finish per second
    assert dict((m.metric, m.predicted) for m in c.metrics)["request_throughput"] == pytest.approx(4.0, rel=0.15)


def test_arrivals_are_scaled_as_vllm_bench_serve_scales_them():
    # audit finding: vLLM's get_request adds every gap, the first included (the first request goes a gap after the
    # benchmark starts), and scales them so that the last goes at num_prompts / request_rate; sizer sent the first at
    # 0 and the last wherever the draws put it (12.78 s for 20 requests at 2 req/s, not 10)
    scenario = load_scenario(SCENARIO)
    workload, clients = _replayed(scenario, 20, Arrivals("poisson", 2.0), None, scaled=True)
    at = workload.arrival_s
    assert clients == 0 and at[-1] == pytest.approx(10.0) and at[0] > 0 and (np.diff(at) > 0).all()
    # review finding: a gamma of shape 1 / 20^2 draws exactly 0 now and then; one request whose gap is 0 was scaled
    # by 0 / 0 into a NaN arrival and the simulation never ended; vLLM rescales only a total above 0 (get_request)
    for seed in range(40):
        alone, _ = _replayed(dataclasses.replace(scenario, workload=dataclasses.replace(scenario.workload, seed=seed)),
                             1, Arrivals("gamma", 1.0, 20.0), None, scaled=True)
        assert np.isfinite(alone.arrival_s).all()
    # burstiness inf: vLLM's even gaps of 1 / rate, read from json.dump's Infinity
    even, _ = _replayed(scenario, 8, Arrivals("constant", 4.0), None, scaled=True)
    assert even.arrival_s == pytest.approx([0.25 * k for k in range(1, 9)])


def test_burstiness_inf_is_read_as_even_arrivals(tmp_path):
    data = json.loads(C16.read_text()) | {"request_rate": 4.0, "max_concurrency": None, "burstiness": float("inf")}
    f = tmp_path / "even.json"
    f.write_text(json.dumps(data))                       # writes Infinity, as vLLM's json.dump does
    c = compare(read_bench_result(f), load_scenario(SCENARIO))
    assert c.workload == "even arrivals at 4 req/s (burstiness inf)"


def test_the_throughputs_run_from_the_benchmarks_start_and_the_itl_percentiles_are_numpys():
    # vllm bench serve's duration runs from its start (before the first send) to the last finish, and its ITL
    # percentiles are np.percentile's linear ones over the pooled gaps (serve.py calculate_metrics)
    sim = simulate_scenario(resolve(load_scenario(SCENARIO)))
    p = predictions(sim, ["p99_itl_ms", "median_itl_ms"])
    c = sim.columns
    done = ~c["rejected"]
    assert p["request_throughput"] == pytest.approx(done.sum() / (c["arrival_s"] + c["e2e_ms"] / 1e3)[done].max())
    # a hand sample for the linear rule: gaps 1, 1, 4 ms (weights 2 and 1) have np.percentile 50 = 1 and 75 = 2.5
    pairs = np.array([4 + 1j, 1 + 2j])
    assert _select(pairs, (50.0, 75.0), linear=True) == [1.0, pytest.approx(2.5)]
    pairs = np.array([1 + 1j, 2 + 1j, 3 + 1j, 10 + 1j, 7 + 0j])          # a zero weight holds no value
    assert _select(pairs, (50.0, 99.0), linear=True) == pytest.approx(list(np.percentile([1, 2, 3, 10], [50, 99])))


def test_lengths_other_than_the_runs_and_keys_not_compared_are_said():
    # audit finding: the file's total_input_tokens / total_output_tokens (1,000 and 200 a request here) were not read,
    # and the chat scenario's own lengths (lognormal 1,200 / 250) simulated in their place without a word; and the
    # std_ statistics, request_goodput and duration of the file dropped silently
    c = compare(read_bench_result(C16), load_scenario(ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml"))
    assert any("total_input_tokens: the run's requests averaged 1,000 tokens" in w for w in c.warnings)
    assert any("total_output_tokens: the run's requests averaged 200 tokens" in w for w in c.warnings)
    same = compare(read_bench_result(C16), load_scenario(SCENARIO))          # fixed 1,000 / 200: as the run's
    assert not any("total_" in w for w in same.warnings)
    assert any("std_ttft_ms" in n and "request_goodput" in n and "duration" in n for n in same.not_modelled)


def test_a_run_whose_outputs_total_zero_tokens_is_warned_without_a_ratio(tmp_path):
    # audit finding: total_output_tokens 0 divided the simulated mean by the run's 0 (a ZeroDivisionError)
    data = json.loads(C16.read_text())
    data["total_output_tokens"] = 0
    f = tmp_path / "zero.json"
    f.write_text(json.dumps(data))
    c = compare(read_bench_result(f), load_scenario(SCENARIO))
    assert any("total_output_tokens: the run's requests averaged 0 tokens, the scenario's simulated in their place "
               "200;" in w for w in c.warnings)


@pytest.mark.parametrize("change, field", [
    ({"completed": None}, "completed"),
    ({"completed": "200"}, "completed"),
    ({"request_rate": "fast"}, "request_rate"),
    ({"request_rate": 4.0, "max_concurrency": 16}, "max_concurrency"),
    ({"mean_ttft_ms": -1}, "mean_ttft_ms"),
    ({"max_concurrency": 0}, "max_concurrency"),
    # vllm bench serve always writes request_rate ("inf" or a number): a null was read as "inf" silently
    ({"request_rate": None}, "request_rate"),
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
    from sizer.sizing.compare import _lengths, _replayed
    bench, scenario = read_guidellm_report(GUIDELLM)[0], load_scenario(SCENARIO)
    workload, _ = _lengths(_replayed(scenario, 8, None, 4)[0], bench.prompt_tokens, bench.output_tokens, "")
    cols = simulate_scenario(resolve(scenario), workload=workload).columns
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


def test_a_benchmark_without_successes_is_refused_only_when_compared(tmp_path):
    # benchmark 0 of the report with no successful request: refused naming it when compared (every benchmark by
    # default), while --benchmark 1 compares the other; its 8 requests errored (total = successful + incomplete +
    # errored, as GuideLLM counts them: 0 of 8 with none errored is refused for its totals instead)
    data = json.loads(GUIDELLM.read_text())
    data["benchmarks"][0]["metrics"]["request_totals"].update(successful=0, errored=8)
    data["benchmarks"][0]["requests"]["successful"] = []
    f = tmp_path / "none.json"
    f.write_text(json.dumps(data))
    _refused(run(str(f), str(SCENARIO)), "benchmarks[0].metrics.request_totals.successful: 0")
    assert run(str(f), str(SCENARIO), "--benchmark", "1", "--json").exit_code == 0


@pytest.mark.parametrize("shape, ok", [(400, True), (0.0025, True), (401, False), (0.0024, False)])
def test_burstiness_within_a_scenarios_cv_bounds_at_a_finite_rate(tmp_path, shape, ok):
    # cv = 1 / sqrt(shape) from 0.05 to 20 (sizer/inputs/scenario.py MIN_CV, MAX_CV): shapes 400 and 1 / 400 are
    # the bounds themselves (1 / 0.05^2 is 399.99999999999994 in floating point: still in)
    f = _edited(tmp_path, C16, {"request_rate": 4.0, "max_concurrency": None, "burstiness": shape})
    if ok:
        assert read_bench_result(f).burstiness == shape
    else:
        with pytest.raises(FieldError, match="burstiness"):
            read_bench_result(f)
    # at an infinite rate vLLM ignores the shape: not checked
    assert read_bench_result(_edited(tmp_path, C16, {"burstiness": 1000.0})).burstiness == 1000.0


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


def _edited(tmp_path: Path, source: Path, change: dict) -> Path:
    """A copy of the result file `source` with `change`'s keys set (None: removed)."""
    data = json.loads(source.read_text()) | change
    f = tmp_path / "edited.json"
    f.write_text(json.dumps({k: v for k, v in data.items() if v is not None}))
    return f


def _refused(out, *words: str) -> None:
    assert out.exit_code == 2, out.output
    assert len(out.output.strip().splitlines()) == 1 and all(w in out.output for w in words), out.output


@pytest.mark.parametrize("source", [C16, DETAILED, GUIDELLM])
def test_a_scenario_replaying_a_trace_is_refused(tmp_path, source):
    # compare replays the benchmark's own arrivals and request count (and lengths): a trace's would be neither;
    # it crashed on the trace's 500 rows against the benchmark's request count before
    trace = DATA.parent / "traces" / "azure_conv_head500.csv"
    scenario = tmp_path / "traced.yaml"
    scenario.write_text(f"model: llama-3.1-8b\nhardware: h100-sxm\n"
                        f"workload:\n  trace: {{path: {trace}, format: csv}}\n")
    _refused(run(str(source), str(scenario)), f"{scenario}: workload.trace:", "expected no trace")


@pytest.mark.parametrize("key", ["p999_ttft_ms", "p150_itl_ms"])
def test_a_percentile_outside_0_to_100_is_refused_naming_the_key(tmp_path, key):
    # numpy's percentiles run from 0 to 100 (vLLM does not check --metric-percentiles): a key past them crashed
    # the prediction
    f = _edited(tmp_path, C16, {key: 200.0})
    _refused(run(str(f), str(SCENARIO)), f"{f}: {key}: expected a percentile in [0, 100]")


def test_a_fractional_percentile_is_predicted_as_numpy_computes_it(tmp_path):
    # vLLM writes --metric-percentiles 99.9 as p99.9_ttft_ms: 99.9 is a percentile like 99, its prediction
    # at or above p99's (a higher share of the same sorted TTFTs)
    c = compare(read_bench_result(_edited(tmp_path, C16, {"p99.9_ttft_ms": 150.0})), load_scenario(SCENARIO))
    predicted = {m.metric: m.predicted for m in c.metrics}
    assert predicted["p99.9_ttft_ms"] >= predicted["p99_ttft_ms"]


@pytest.mark.parametrize("source, change, field, words", [
    # vllm bench serve --save-detailed writes both lists: one alone was read as neither (the scenario's lengths)
    (DETAILED, {"output_lens": None}, "output_lens", "beside input_lens"),
    # vLLM refuses an empty prompt: a 0 was raised to 1 token silently
    (DETAILED, {"input_lens": [0] * 8}, "input_lens", "[1, 10485760]"),
    # an error per request though all 8 completed (a failed request's error may be empty, a successful one's is)
    (DETAILED, {"errors": ["boom"] * 8}, "errors", "expected at most 0 non-empty"),
    (C16, {"completed": 500}, "completed", "at most num_prompts (200)"),
    # vLLM sends at most the --num-prompts asked for: 200 completed and 20 failed is more
    (C16, {"failed": 20}, "failed", "at most num_prompts (200), the requests asked for, got 200 + 20"),
    # a statistic vLLM computes is a number: a null was skipped silently
    (C16, {"median_ttft_ms": None}, "median_ttft_ms", "got null"),
    (C16, {"ramp_up_strategy": "linear", "ramp_up_start_rps": 1, "ramp_up_end_rps": 10}, "ramp_up_strategy",
     "not modelled"),
])
def test_an_inconsistent_result_is_refused_naming_the_key(tmp_path, source, change, field, words):
    data = json.loads(source.read_text()) | change
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(data))
    _refused(run(str(f), str(SCENARIO)), f"{f}: {field}:", words)


def test_counts_vllm_can_write_are_read_with_a_warning(tmp_path):
    # a successful reply without usage is counted by the tokenizer (0 for a reply of only EOS), and a dataset with
    # fewer rows than --num-prompts sends fewer: both read, each with a warning naming the key, and compared
    zero = _edited(tmp_path, DETAILED, {"output_lens": [0] * 8})
    c = compare(read_bench_result(zero), load_scenario(SCENARIO))
    assert [w for w in c.warnings if "output_lens" in w] == [
        f"{zero}: output_lens: 8 successful requests with an output of 0 tokens (a reply without usage, counted by "
        "the tokenizer); simulated as 1 token each"]
    data = json.loads(C16.read_text()) | {"completed": 180, "failed": 10}
    short = tmp_path / "short.json"
    short.write_text(json.dumps(data))
    r = read_bench_result(short)
    assert r.num_requests == 190 and r.warnings == (
        f"{short}: num_prompts: 200 asked, but completed + failed = 190 sent (a dataset with fewer rows); the "
        "requests sent are replayed",)


def test_a_result_without_a_latency_statistic_is_refused(tmp_path):
    # throughputs alone time nothing of the engine sizer simulates: refused, not compared on three rows
    data = {k: v for k, v in json.loads(C16.read_text()).items() if not k.endswith("_ms")}
    f = tmp_path / "bare.json"
    f.write_text(json.dumps(data))
    _refused(run(str(f), str(SCENARIO)), f"{f}: no latency statistic")


def test_failed_requests_are_served_as_one_token_and_said_so(tmp_path):
    # requests 2 and 5 failed (output 0, an error each): sizer serves them asking for one token each, so the
    # simulated tokens per request are the file's 3,680 prompt tokens and 6 x 20 + 2 x 1 output tokens over 8
    lens, errors = [20, 20, 0, 20, 20, 0, 20, 20], ["", "", "timeout", "", "", "timeout", "", ""]
    f = _edited(tmp_path, DETAILED, {"completed": 6, "failed": 2, "output_lens": lens, "errors": errors})
    c = compare(read_bench_result(f), load_scenario(SCENARIO))
    predicted = {m.metric: m.predicted for m in c.metrics}
    per_request = predicted["total_token_throughput"] / predicted["request_throughput"]
    assert per_request == pytest.approx((3680 + 6 * 20 + 2 * 1) / 8)
    assert c.not_modelled[0].startswith("failed: 2 of 8 requests failed in the run")
    assert "not modelled: failed: 2 of 8" in " ".join(run(str(f), str(SCENARIO)).stdout.split())


def test_requests_the_scenario_rejects_are_counted_in_a_warning_or_refused_when_all_are(tmp_path):
    # llama-3.1-8b's max_model_len is 131,072: a prompt of 140,000 tokens (+ 20 out) is rejected by the engine
    f = _edited(tmp_path, DETAILED, {"input_lens": [140_000, 420, 510, 610, 300, 420, 510, 610]})
    out = run(str(f), str(SCENARIO))
    assert out.exit_code == 0, out.output
    assert out.stderr.strip() == (f"warning: {SCENARIO}: deployment: rejects 1 of the 8 requests of {f} (request 0: "
                                  "prompt + output = 140020 tokens > max_model_len 131072); the predictions are over "
                                  "the rest")
    # every request over it: nothing is left to predict (it printed -100% throughput and exit 0 before)
    f = _edited(tmp_path, DETAILED, {"input_lens": [200_000] * 8})
    _refused(run(str(f), str(SCENARIO)), f"{SCENARIO}: deployment:", "rejects all 8", "max_model_len 131072")


def test_a_result_of_another_model_is_a_warning_naming_both(tmp_path):
    # the fixture's meta-llama/Llama-3.1-8B-Instruct is llama-3.1-8b (its catalog repo meta-llama/Llama-3.1-8B)
    assert run(str(C16), str(SCENARIO)).stderr == ""
    f = _edited(tmp_path, C16, {"model_id": "meta-llama/Llama-3.1-70B-Instruct"})
    out = run(str(f), str(SCENARIO))
    assert out.exit_code == 0, out.output
    assert out.stderr.strip() == (f"warning: {f}: model_id: 'meta-llama/Llama-3.1-70B-Instruct' is not the "
                                  "scenario's model, llama-3.1-8b (meta-llama/Llama-3.1-8B); compared as if the "
                                  "benchmark ran the scenario's")
    assert json.loads(run(str(f), str(SCENARIO), "--json").stdout)["warnings"] == [out.stderr.strip()[9:]]


def test_the_scenarios_shared_prefix_is_kept_with_the_files_lengths(tmp_path):
    # every request opens with one 256-token prefix (16 blocks of 16): the first computes it and later ones find
    # it in the prefix cache; the file's per-request lengths dropped the prefixes silently before
    scenario = tmp_path / "prefixed.yaml"
    scenario.write_text(SCENARIO.read_text() + "  shared_prefix: {share: 1.0, tokens: 256}\n")
    from sizer.sizing.compare import _lengths, _replayed
    bench, s = read_bench_result(DETAILED), load_scenario(scenario)
    workload, _ = _lengths(_replayed(s, 8, None, 4)[0], bench.input_lens, bench.output_lens, "")
    cached = simulate_scenario(resolve(s), workload=workload).columns["cached_prompt_tokens"]
    assert cached[0] == 0 and cached.max() == 256 and (cached == 256).sum() >= 4


@pytest.mark.parametrize("edit, field", [
    # an embedding benchmark's report has no generated tokens to compare
    (lambda d: d["benchmarks"][0].update(type_="embedding_benchmark"), "benchmarks[0].type_"),
    # a successful request had a prompt: 0 was raised to 1 token silently
    (lambda d: d["benchmarks"][0]["requests"]["successful"][1].update(prompt_tokens=0),
     "benchmarks[0].requests.successful[1].prompt_tokens"),
])
def test_a_guidellm_benchmark_sizer_cannot_replay_is_refused(tmp_path, edit, field):
    data = json.loads(GUIDELLM.read_text())
    edit(data)
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(data))
    _refused(run(str(f), str(SCENARIO)), f"{f}: {field}:")


def test_an_unpredicted_itl_percentile_is_refused_only_when_it_is_the_only_latency_statistic(tmp_path):
    # sizer predicts ITL's mean, median, p50, p95 and p99 (its pooled summary): a p37 alone timed nothing and exited
    # 0 with a "-" row; beside a statistic sizer predicts it is shown, unpredicted
    alone = tmp_path / "alone.json"
    alone.write_text(json.dumps({k: v for k, v in json.loads(C16.read_text()).items() if not k.endswith("_ms")}
                                | {"p37_itl_ms": 10.0}))
    _refused(run(str(alone), str(SCENARIO)), f"{alone}: p37_itl_ms:", "does not predict")
    beside = _edited(tmp_path, C16, {"p37_itl_ms": 10.0})
    rows = {m.metric: m for m in compare(read_bench_result(beside), load_scenario(SCENARIO)).metrics}
    assert rows["p37_itl_ms"].predicted is None and rows["p99_itl_ms"].predicted is not None


def test_a_guidellm_report_of_another_model_is_a_warning_naming_where_it_says_so(tmp_path):
    # the fixture's config.model, meta-llama/Llama-3.1-8B-Instruct, is llama-3.1-8b: no warning
    assert run(str(GUIDELLM), str(SCENARIO)).stderr == ""
    data = json.loads(GUIDELLM.read_text())
    data["config"]["model"] = "meta-llama/Llama-3.1-70B-Instruct"
    f = tmp_path / "70b.json"
    f.write_text(json.dumps(data))
    out = run(str(f), str(SCENARIO))
    assert out.exit_code == 0, out.output
    # the report's model is both benchmarks': one line, not one per benchmark
    assert out.stderr.strip() == (f"warning: {f}: config.model: 'meta-llama/Llama-3.1-70B-Instruct' is not the "
                                  "scenario's model, llama-3.1-8b (meta-llama/Llama-3.1-8B); compared as if the "
                                  "benchmark ran the scenario's")
    # a benchmark's own backend settings say what it ran (GuideLLM writes its backend's model there), before the
    # report's; GuideLLM 0.7+ states the report's under config.spec.backend
    data["benchmarks"][1]["config"]["backend"] = {"model": "meta-llama/Llama-3.1-8B-Instruct"}
    data["config"] = {"spec": {"backend": {"model": "Qwen/Qwen3-0.6B"}}}
    f.write_text(json.dumps(data))
    first, second = read_guidellm_report(f)
    assert (first.model, first.model_key) == ("Qwen/Qwen3-0.6B", "config.spec.backend.model")
    assert (second.model, second.model_key) == ("meta-llama/Llama-3.1-8B-Instruct",
                                                 "benchmarks[1].config.backend.model")
    warnings = [w for c in json.loads(run(str(f), str(SCENARIO), "--json").stdout) for w in c["warnings"]]
    assert warnings == [f"{f}: config.spec.backend.model: 'Qwen/Qwen3-0.6B' is not the scenario's model, llama-3.1-8b "
                        "(meta-llama/Llama-3.1-8B); compared as if the benchmark ran the scenario's"]


def test_a_concurrent_benchmark_runs_at_most_max_concurrency_clients(tmp_path):
    # GuideLLM's scheduler holds a strategy's requests in flight to the cap it resolves and writes back as
    # max_concurrency (WorkerGroup.create_processes: min of the strategy's and the backend's request limits; a
    # concurrent strategy's is its streams, so a real report writes streams 4 with max_concurrency 4): 4 streams held
    # to 2 are 2 clients, not 4
    data = json.loads(GUIDELLM.read_text())
    data["benchmarks"][0]["config"]["strategy"]["max_concurrency"] = 4
    f = tmp_path / "cap.json"
    f.write_text(json.dumps(data))
    four = compare_guidellm(read_guidellm_report(f)[0], load_scenario(SCENARIO))
    assert four.workload == "closed loop of 4 clients (GuideLLM concurrent)"
    data["benchmarks"][0]["config"]["strategy"]["max_concurrency"] = 2
    f.write_text(json.dumps(data))
    bench = read_guidellm_report(f)[0]
    assert (bench.clients, bench.streams) == (2, 4)
    assert bench.label == "benchmark 0: concurrent, 4 streams held to 2 in flight"
    two = compare_guidellm(bench, load_scenario(SCENARIO))
    assert two.workload == "closed loop of 2 clients (GuideLLM concurrent, 4 streams held to max_concurrency 2)"
    # the same 8 requests through half the clients: the batch is at most 2, so fewer requests finish a second
    rps = lambda c: {m.metric: m.predicted for m in c.metrics}["requests_per_second"]     # noqa: E731
    assert rps(two) < rps(four)


@pytest.mark.parametrize("limit, ok", [(10240, True), (60, True), (59, False)])
def test_a_rate_benchmarks_max_concurrency_is_refused_only_where_it_could_hold_requests_back(tmp_path, limit, ok):
    # GuideLLM writes the cap it resolved back to every strategy: 10240 (its max_concurrency setting) for a rate with
    # no --max-concurrency, so a refusal of any cap refused every real Poisson and constant benchmark. A cap of at least
    # the benchmark's 60 requests is never reached; 59 could be (not modelled)
    data = json.loads(GUIDELLM.read_text())
    data["benchmarks"][1]["config"]["strategy"]["max_concurrency"] = limit
    f = tmp_path / "limit.json"
    f.write_text(json.dumps(data))
    out = run(str(f), str(SCENARIO), "--benchmark", "1", "--json")
    if ok:
        assert out.exit_code == 0 and json.loads(out.stdout)[0]["workload"] == "Poisson arrivals at 2 req/s"
    else:
        _refused(out, f"{f}: benchmarks[1].config.strategy.max_concurrency: 59 with a poisson rate")
