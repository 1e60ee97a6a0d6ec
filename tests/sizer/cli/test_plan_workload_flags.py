"""`plan` reads the workload and SLO flags `check` reads (the same option objects), and says what would
meet an SLO no rate meets."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.analytic.lengths import mean_length
from sizer.cli import app
from sizer.cli.options import read_scenario_data, with_flags
from sizer.inputs.scenario import load_scenario
from sizer.inputs.traffic import Traffic

ROOT = Path(__file__).resolve().parents[3]
CHAT = ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml"     # lognormal prompts of mean 1,200, answers 250


def plan(*args: str):
    return CliRunner().invoke(app, ["plan", *(str(a) for a in args)])


def test_token_flags_replace_the_scenario_lengths():
    result = plan(CHAT, "--prompt-tokens", "4k", "--output-tokens", "500", "--json")
    assert result.exit_code == 0, result.output
    # Little's law holds each request at its end: 4k = 4,000 (decimal, as vLLM reads it) + 500 = 4,500 tokens
    assert json.loads(result.output)["capacity"]["kv_tokens_per_request"] == 4500
    unchanged = json.loads(plan(CHAT, "--json").output)["capacity"]["kv_tokens_per_request"]
    # without the flags, the scenario's means as its lengths are drawn (lognormal 1,200 clipped to [16, 12,000] and
    # 250 clipped to [4, 2,000]: sizer.analytic.lengths.mean_length), rounded to whole tokens
    s = load_scenario(CHAT)
    w = s.workload
    assert unchanged == round(mean_length(w.prompt_tokens) + mean_length(w.output_tokens))
    assert 1440 < unchanged < 1450                       # a few tokens under 1,200 + 250: the clips take the tails


def test_flags_alone_give_the_whole_workload():
    result = plan("--model", "llama-3.1-8b", "--gpu", "h100", "--prompt-tokens", "32K", "--output-tokens", "1k",
                  "--json")
    assert result.exit_code == 0, result.output
    # 32K is binary: 32 x 1,024 = 32,768, + 1,000
    assert json.loads(result.output)["capacity"]["kv_tokens_per_request"] == 32768 + 1000


@pytest.mark.parametrize("args, flag", [
    (["--prompt-tokens", "lots"], "--prompt-tokens"),
    (["--output-tokens", "0"], "--output-tokens"),
    (["--ttft-ms", "-1"], "--ttft-ms"),
    (["--itl-ms", "inf"], "--itl-ms"),
])
def test_bad_workload_flags_name_the_flag(args, flag):
    result = plan(CHAT, *args)
    assert result.exit_code == 2 and result.output.startswith(f"error: {flag}:"), result.output


def test_no_rate_meets_the_slo_prints_the_plan_the_binding_target_and_a_fix():
    # an 8B model cannot prefill a 4,000-token prompt in 5 ms on one H100 (about 8e9 x 2 x 4,000 FLOP at
    # ~790 TFLOP/s is 80 ms), at any rate: more replicas do not help
    result = plan("--model", "llama-3.1-8b", "--gpu", "h100", "--prompt-tokens", "4000", "--output-tokens", "100",
                  "--ttft-ms", "5", "--itl-ms", "50", "--simulate")
    assert result.exit_code == 0, result.output                  # a plan with a verdict, not an error
    text = " ".join(result.output.split())
    assert "Memory per GPU" in text                               # the plan is printed
    assert ("no request rate meets the SLO (TTFT <= 5 ms, ITL <= 50 ms; 95% of requests) on one replica: TTFT is "
            "missed") in text
    assert "fix: more replicas do not help: the TTFT target is missed even at low load" in text
    assert "1 GPUs" not in text and "replica(s)" not in text


def test_simulate_reads_the_same_flags():
    result = CliRunner().invoke(app, ["simulate", str(CHAT), "--rate", "2", "--prompt-tokens", "2k",
                                      "--output-tokens", "100", "--num-requests", "200", "--json"])
    assert result.exit_code == 0, result.output
    m = json.loads(result.output)
    # fixed lengths: every request has 2k = 2,000 prompt tokens and 100 output tokens
    assert m["input_tokens_per_s"] / m["request_throughput_per_s"] == pytest.approx(2000)
    assert m["output_tokens_per_s"] / m["request_throughput_per_s"] == pytest.approx(100)
    # 200 Poisson arrivals at 2 requests/s span about 100 s (the scenario's own rate is 6/s: about 33 s)
    assert 80 < m["duration_s"] < 120


def test_search_and_report_read_the_scenario_with_the_flags():
    data = read_scenario_data(CHAT, Traffic(prompt_tokens=2000, ttft_ms=300.0))
    assert data["workload"]["prompt_tokens"] == {"distribution": "fixed", "value": 2000}
    assert data["workload"]["output_tokens"]["distribution"] == "lognormal"          # not given: the file's
    assert data["workload"]["shared_prefix"] == {"share": 0.5, "tokens": 512, "num_prefixes": 4}
    assert (data["slo"]["ttft_ms"], data["slo"]["itl_ms"]) == (300.0, 50)


@pytest.mark.parametrize("workload", [
    {"arrival": {"process": "poisson", "rate_per_s": 4}, "prompt_tokens": {"distribution": "fixed", "value": 100},
     "output_tokens": {"distribution": "fixed", "value": 10}},
    {"trace": {"path": "t.csv", "format": "csv", "time_scale": 2.0}},
])
def test_the_flags_build_a_new_mapping_and_leave_the_callers_alone(workload):
    # search, report and sweep share one base mapping (read_scenario_data -> with_flags -> with_traffic): every
    # workload and SLO flag, and check's --share (which rescales a rate or a trace's time scale), lands in a new
    # mapping; the caller's, and each section and sub-section inside it, keep their values (a copy compared after)
    data = {"model": "llama-3.1-8b", "workload": workload, "slo": {"ttft_ms": 500, "itl_ms": 50}}
    before = copy.deepcopy(data)
    flags = Traffic(rate_per_s=8.0, prompt_tokens=200, output_tokens=20, ttft_ms=300.0, itl_ms=40.0, share=0.5,
                    tpot_ms=30.0)
    if "trace" in workload:         # it replays its own arrivals and lengths: --rate and the lengths are refused
        flags = Traffic(ttft_ms=300.0, itl_ms=40.0, share=0.5, tpot_ms=30.0)
    changed = with_flags(data, flags)
    assert data == before
    assert changed["slo"] == {"ttft_ms": 300.0, "itl_ms": 40.0, "tpot_ms": 30.0}
    if "trace" in workload:
        assert changed["workload"]["trace"]["time_scale"] == 4.0           # 2.0 / share 0.5
    else:
        assert changed["workload"]["arrival"]["rate_per_s"] == 4.0         # --rate 8 x share 0.5


def test_an_slo_flag_on_a_closed_loop_keeps_the_loop():
    """--ttft-ms sets slo.ttft_ms on the scenario read from the file; it asks for no rate. (Written into the
    mapping, the flags once demanded a workload of --rate and both lengths: "--rate: missing" for a closed loop.)"""
    closed = ROOT / "tests" / "data" / "bench" / "scenario-llama-3.1-8b-h100.yaml"    # 16 clients, 1,000 + 200
    result = plan(closed, "--ttft-ms", "200", "--json")
    assert result.exit_code == 0, result.output
    assumptions = json.loads(result.output)["assumptions"]
    assert "workload: a closed loop of 16 clients (scenario), think time 0 s" in assumptions
    assert "SLO: TTFT <= 200 ms (--ttft-ms); 95% of requests (default)" in assumptions


def test_a_closed_loop_sending_past_the_rate_bound_is_refused(tmp_path):
    # review finding: concurrency / (time in system + think time) is a rate like rate_per_s, whose bound (1e6 req/s)
    # a closed loop bypassed: 8 clients over a stated 1e-9 s in the system sized 8e9 req/s
    path = tmp_path / "closed.yaml"
    path.write_text("model: llama-3.1-8b\nhardware: h100\nworkload:\n"
                    "  arrival: {process: closed, concurrency: 8}\n  time_in_system_s: 1e-9\n"
                    "  prompt_tokens: {distribution: fixed, value: 512}\n"
                    "  output_tokens: {distribution: fixed, value: 128}\n")
    result = plan(path)
    assert result.exit_code == 2
    assert result.stderr.strip() == (f"error: {path}: workload.time_in_system_s: 8 clients would send 8e+09 req/s "
                                     "(concurrency / (time in system 1e-09 s + think time 0 s)); expected at most "
                                     "1e+06 req/s, as rate_per_s")


def test_concurrency_on_a_schedule_is_refused_naming_the_flag():
    # the file has no closed loop; --concurrency made one, and a schedule sets the rate
    result = plan(ROOT / "scenarios" / "diurnal-chat-h100.yaml", "--concurrency", "8")
    assert result.exit_code == 2
    assert result.stderr.strip() == ("error: --concurrency: 'closed': not with workload.schedule, which sets the rate "
                                     "(as workload.arrival.process)")


def _closed(tmp_path, concurrency: int, num_requests: int):
    path = tmp_path / "closed.yaml"
    path.write_text(f"model: llama-3.1-8b\nhardware: h100-sxm\ndeployment: {{max_model_len: 16384}}\nworkload:\n"
                    f"  arrival: {{process: closed, concurrency: {concurrency}}}\n  num_requests: {num_requests}\n"
                    "  prompt_tokens: {distribution: fixed, value: 1000}\n"
                    "  output_tokens: {distribution: fixed, value: 200}\n")
    result = plan(path, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_a_closed_loop_is_sized_for_the_clients_that_send(tmp_path):
    # 100,000 clients of a 300-request loop: the loop sends 300 requests in all (vllm bench serve --max-concurrency
    # 100000 --num-prompts 300), so at most 300 are ever in flight, as the simulation holds them; the plan sized
    # 100,000 in flight (and 329 replicas for memory)
    big = _closed(tmp_path, 100_000, 300)
    assert big["capacity"]["requests_in_flight"] == pytest.approx(300)      # Little's law: N clients, no think time
    assert big["capacity"]["replicas_for_memory"] == 1      # 300 x 1,200 tokens = 360,000 of 443,328 KV tokens
    assert ("workload: a closed loop of 100000 clients (scenario), think time 0 s; only 300 of the 100,000 clients "
            "send a request (workload.num_requests 300, scenario, is all the loop sends, as vllm bench serve "
            "--num-prompts is): sized for 300 clients") in big["assumptions"]
    # 300 clients of the same loop are the same plan, and no cut is stated
    same = _closed(tmp_path, 300, 300)
    assert same["capacity"] == big["capacity"]
    assert "workload: a closed loop of 300 clients (scenario), think time 0 s" in same["assumptions"]
