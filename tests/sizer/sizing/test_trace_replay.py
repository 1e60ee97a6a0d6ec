"""Which requests of a trace a run replays, and the plan sized for the same ones.

A trace replays whole unless workload.trace.max_requests or a stated workload.num_requests (the file's, or
`simulate --num-requests`) cuts it; with both, the smaller. The default num_requests (2,000, a synthetic workload's
size) cut every trace to its first 2,000 requests and overrode max_requests, silently. `plan` quotes the rate and
mean lengths of the requests `simulate` replays, and both say which those are. A request whose prompt + output
exceed max_model_len is refused by the engine: the plan states the trace's share of them and sizes for the served
ones, and a trace none of whose requests fits is refused, as a length distribution's is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.cli import app
from sizer.inputs.scenario import load_scenario
from sizer.sizing.workload import workload_of

runner = CliRunner()


def csv_trace(tmp_path: Path, rows: list[tuple[float, int, int]]) -> Path:
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(f"{t},{p},{o}\n" for t, p, o in rows))
    return trace


def scenario(tmp_path: Path, trace: Path, trace_keys: str = "", workload: str = "", max_model_len: int = 8192) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(f"model: llama-3.1-8b\nhardware: h100-sxm\ndeployment: {{max_model_len: {max_model_len}}}\n"
                    f"workload:\n  trace: {{path: {trace.name}, format: csv{trace_keys}}}\n{workload}")
    return path


def plan_json(path: Path, *flags: str) -> dict:
    result = runner.invoke(app, ["plan", str(path), "--json", *flags])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def simulate_json(path: Path, *flags: str) -> dict:
    result = runner.invoke(app, ["simulate", str(path), "--json", *flags])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def workload_line(plan: dict) -> str:
    return next(a for a in plan["assumptions"] if a.startswith("workload: trace"))


# 2,100 requests, one every 0.5 s for the first 10, then one every 0.1 s: more than the default num_requests 2,000
SLOW_THEN_FAST = [(0.5 * i if i < 10 else 4.5 + 0.1 * (i - 9), 100, 10) for i in range(2100)]


def test_a_trace_replays_whole_unless_a_field_cuts_it(tmp_path):
    trace = csv_trace(tmp_path, SLOW_THEN_FAST)
    path = scenario(tmp_path, trace)
    # num_requests left at its default (2,000): all 2,100 requests, not the first 2,000
    assert len(workload_of(load_scenario(path))) == 2100
    plan = plan_json(path)
    # rate = (requests - 1) / span: 2,099 / (4.5 + 0.1 x 2,090 = 213.5 s) = 9.83 req/s
    assert workload_line(plan) == ("workload: trace t.csv (csv, scenario), all 2,100 requests of it: 9.83 req/s, mean "
                                   "prompt 100 and output 10 tokens from them")
    assert "simulated requests (--simulate): 2,100, the trace's replayed" in plan["assumptions"]


@pytest.mark.parametrize(("trace_keys", "workload", "n", "words"), [
    # max_requests alone: the first 10 (no default num_requests overrides it)
    (", max_requests: 10", "", 10, "the first 10 requests of it (workload.trace.max_requests 10, scenario)"),
    # a stated num_requests alone cuts too
    ("", "  num_requests: 10\n", 10, "the first 10 requests of it (workload.num_requests 10, scenario)"),
    # both: the smaller, named with the other
    (", max_requests: 500", "  num_requests: 10\n", 10,
     "the first 10 requests of it (workload.num_requests 10, scenario, the smaller of it and "
     "workload.trace.max_requests 500)"),
    (", max_requests: 10", "  num_requests: 500\n", 10,
     "the first 10 requests of it (workload.trace.max_requests 10, scenario, the smaller of it and "
     "workload.num_requests 500)"),
    # more than the trace holds: all of it, and the ask named
    ("", "  num_requests: 20000\n", 2100,
     "all 2,100 requests of it (workload.num_requests 20,000 (scenario): more than the trace holds)"),
])
def test_the_cut_is_the_smaller_stated_limit_and_is_named(tmp_path, trace_keys, workload, n, words):
    path = scenario(tmp_path, csv_trace(tmp_path, SLOW_THEN_FAST), trace_keys, workload)
    assert len(workload_of(load_scenario(path))) == n
    assert workload_line(plan_json(path)).startswith(f"workload: trace t.csv (csv, scenario), {words}: ")


def test_plan_and_simulate_replay_the_same_requests_and_say_so(tmp_path):
    # the first 10 requests arrive 0.5 s apart: the plan's rate is (10 - 1) / 4.5 s = 2 req/s, that of the 10 the
    # simulation replays (the whole trace's is 9.83)
    path = scenario(tmp_path, csv_trace(tmp_path, SLOW_THEN_FAST), workload="  num_requests: 10\n")
    assert ": 2 req/s, mean prompt 100" in workload_line(plan_json(path))
    sim = simulate_json(path)
    assert sim["num_requests"] == 10
    assert sim["notes"] == ["trace t.csv: the first 10 requests of it (workload.num_requests 10, scenario) replayed"]
    # --num-requests states num_requests as the file may: the smaller of it and max_requests, the flag named
    sim = simulate_json(scenario(tmp_path, csv_trace(tmp_path, SLOW_THEN_FAST), ", max_requests: 50"),
                        "--num-requests", "7")
    assert sim["num_requests"] == 7
    assert sim["notes"] == ["trace t.csv: the first 7 requests of it (workload.num_requests 7, --num-requests, the "
                            "smaller of it and workload.trace.max_requests 50) replayed"]


# 4 requests a second apart; the third's prompt + output, 9,000 + 100 = 9,100 tokens, exceed max_model_len 8,192
ONE_TOO_LONG = [(0, 1000, 100), (1, 3000, 300), (2, 9000, 100), (3, 2000, 200)]


def test_a_traces_requests_beyond_max_model_len_are_stated_and_left_out_of_the_sizing(tmp_path):
    path = scenario(tmp_path, csv_trace(tmp_path, ONE_TOO_LONG))
    plan = plan_json(path)
    # the trace's rate, 3 / 3 s = 1 req/s, x the 3 of 4 served = 0.75 req/s; mean prompt (1,000 + 3,000 + 2,000) / 3
    # = 2,000 and output (100 + 300 + 200) / 3 = 200 of the served (the plan priced the 9,000-token prompt)
    assert plan["capacity"]["arrival_rate_per_s"] == pytest.approx(0.75)
    assert plan["capacity"]["kv_tokens_per_request"] == 2200
    assert workload_line(plan) == ("workload: trace t.csv (csv, scenario), all 4 requests of it: 0.75 req/s, mean "
                                   "prompt 2,000 and output 200 tokens from the 3 of them within max_model_len 8,192 "
                                   "(the rest refused)")
    assert ("25.00% of requests have prompt + output above max_model_len 8,192: the engine refuses them (vLLM answers "
            "HTTP 400), and the simulation counts them rejected") in plan["assumptions"]
    # the simulation rejects the same one request
    sim = simulate_json(path)
    assert (sim["num_requests"], sim["num_rejected"]) == (4, 1)


def test_a_trace_none_of_whose_requests_fits_is_refused(tmp_path):
    # every prompt + output above max_model_len 8,192, the shortest 9,000 + 100: the plan priced them (7 replicas in
    # the audit's case) where a length distribution that long is refused
    path = scenario(tmp_path, csv_trace(tmp_path, [(0, 9000, 100), (1, 20000, 10)]))
    for command in ("plan", "simulate"):
        result = runner.invoke(app, [command, str(path)])
        assert result.exit_code == 2, result.output
        assert result.stderr.strip() == (
            f"error: {path}: workload.trace.path: expected requests whose prompt + output fit deployment.max_model_len "
            "8,192; all 2 requests replayed of the trace 't.csv' exceed it, the shortest 9,000 + 100 = 9,100 tokens: "
            "vLLM refuses every request")
    # the cut decides: the first request alone is no different
    one = scenario(tmp_path, csv_trace(tmp_path, [(0, 9000, 100), (1, 100, 10)]), ", max_requests: 1")
    refused = runner.invoke(app, ["plan", str(one)])
    assert refused.exit_code == 2
    assert "the 1 request replayed of the trace 't.csv' exceeds it, the shortest 9,000 + 100" in refused.stderr


def test_trace_columns_and_keys_sizer_does_not_model_are_named(tmp_path):
    # HashIds and Priority were read past in silence: named in the plan's assumptions and simulate's notes, the
    # trace still replayed (not refused)
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens,HashIds,Priority\n0,100,10,1,high\n1,200,20,1,low\n")
    path = scenario(tmp_path, trace)
    note = ("trace t.csv: columns HashIds, Priority not modelled: sizer replays each request's TIMESTAMP, "
            "ContextTokens and GeneratedTokens (and Adapter, where the trace has it) alone, as if the rest were absent")
    assert note in plan_json(path)["assumptions"]
    sim = simulate_json(path)
    assert sim["num_finished"] == 2 and sim["notes"] == ["trace t.csv: all 2 requests of it replayed", note]
    # Mooncake keys likewise, in the order first seen
    moon = tmp_path / "m.jsonl"
    moon.write_text('{"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [1], "session_id": "a"}\n'
                    '{"timestamp": 1000, "input_length": 1000, "output_length": 10, "priority": 1, "model": "y"}\n')
    path.write_text(path.read_text().replace("{path: t.csv, format: csv}", "{path: m.jsonl, format: mooncake}"))
    assert ("trace m.jsonl: keys session_id, priority, model not modelled: sizer replays each request's timestamp, "
            "input_length and output_length (and hash_ids and adapter, where the trace has them) alone, as if the "
            "rest were absent") in simulate_json(path)["notes"]


def test_trace_columns_without_a_header_name_are_named_by_their_place(tmp_path):
    # a pandas export's index column and a trailing comma leave two header cells empty: two columns, each named by
    # its place (1st and 5th), not one column with an empty name
    trace = tmp_path / "t.csv"
    trace.write_text(",TIMESTAMP,ContextTokens,GeneratedTokens,\n0,0,100,10,\n1,1,200,20,\n")
    path = scenario(tmp_path, trace)
    assert any(a.startswith("trace t.csv: columns 1 (no name), 5 (no name) not modelled")
               for a in plan_json(path)["assumptions"])


def test_plan_refuses_an_adapter_column_simulate_would_refuse(tmp_path):
    # the trace names each request's adapter but workload.lora does not say popularity: trace: simulate refused it
    # while the plan sized the trace as if the column were absent
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens,Adapter\n0,100,10,0\n1,200,20,1\n")
    path = scenario(tmp_path, trace)
    for command in ("plan", "simulate"):
        result = runner.invoke(app, [command, str(path)])
        assert result.exit_code == 2
        assert result.stderr.strip() == (f"error: {path}: workload.lora.popularity: the trace names each request's "
                                         "LoRA adapter; expected popularity: trace (with deployment.enable_lora) to "
                                         "replay them")
