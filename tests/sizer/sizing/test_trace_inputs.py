"""Bad traces through the CLI: one line on stderr and exit 2, naming the trace file and the field.

A trace with no arrival rate (one request, or all at one timestamp) cannot be planned for (a
plan sizes for the trace's rate): `plan` and `plan --simulate` refuse it naming the
timestamps; `simulate` replays it as it is.
"""

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.cli import app
from validation.errors import excerpt

CORPUS = Path(__file__).resolve().parents[2] / "bad_inputs" / "trace"
GOOD = '{"timestamp": %d, "input_length": 1000, "output_length": 20, "hash_ids": [0, 1]}\n'

runner = CliRunner()


def scenario(tmp_path: Path, trace: Path, fmt: str, slo: bool = True, **trace_keys) -> Path:
    extra = "".join(f", {k}: {v}" for k, v in trace_keys.items())
    text = (f"name: traced\nmodel: llama-3.1-8b\nhardware: h100-sxm\ndeployment:\n  max_model_len: 8192\n"
            f"workload:\n  trace: {{path: {trace}, format: {fmt}{extra}}}\n  num_requests: 50\n")
    if slo:
        text += "slo:\n  ttft_ms: 1000\n  itl_ms: 50\n  required_share: 0.95\n"
    p = tmp_path / "scenario.yaml"
    p.write_text(text)
    return p


def one_line_exit_2(result, *parts: str) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(("name", "fmt", "field"), [
    ("non-utf8.jsonl", "mooncake", ": line 2: not UTF-8"),
    ("nan-timestamp.jsonl", "mooncake", ": line 2, timestamp: "),
    ("text-in-number.csv", "csv", ": line 3, ContextTokens: "),
    ("header-only.csv", "csv", ": line 2: "),
])
def test_simulate_refuses_a_bad_trace_in_one_line(tmp_path, name, fmt, field):
    trace = CORPUS / name
    result = runner.invoke(app, ["simulate", str(scenario(tmp_path, trace, fmt))])
    one_line_exit_2(result, str(trace), field)


def test_one_request_trace_with_an_slo_is_refused_by_plan_simulate(tmp_path):
    trace = tmp_path / "one.jsonl"
    trace.write_text(GOOD % 0)
    result = runner.invoke(app, ["plan", "--simulate", str(scenario(tmp_path, trace, "mooncake"))])
    line = one_line_exit_2(result, str(trace), ": timestamp: 1 request")
    assert "no arrival rate" in line


def test_same_timestamp_trace_with_an_slo_is_refused_by_plan_simulate(tmp_path):
    trace = tmp_path / "burst.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "5.0,1000,20\n" * 4)
    result = runner.invoke(app, ["plan", "--simulate", str(scenario(tmp_path, trace, "csv"))])
    one_line_exit_2(result, str(trace), ": TIMESTAMP: 4 requests, all at one timestamp")
    plain = runner.invoke(app, ["plan", str(scenario(tmp_path, trace, "csv", slo=False))])
    one_line_exit_2(plain, str(trace), ": TIMESTAMP: ")


def test_a_slice_of_one_request_names_the_limit(tmp_path):
    trace = tmp_path / "two.jsonl"
    trace.write_text(GOOD % 0 + GOOD % 1000)
    result = runner.invoke(app, ["plan", str(scenario(tmp_path, trace, "mooncake", max_requests=1))])
    one_line_exit_2(result, str(trace), ": timestamp: 1 request", "workload.trace.max_requests")


def test_simulate_replays_a_burst_as_it_is(tmp_path):
    trace = tmp_path / "burst.jsonl"
    trace.write_text(GOOD % 7 * 3)
    result = runner.invoke(app, ["simulate", "--json", str(scenario(tmp_path, trace, "mooncake"))])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("time_scale", ["1e300", "1e-300"])
def test_a_time_scale_that_overflows_or_erases_the_span_is_refused(tmp_path, time_scale):
    trace = tmp_path / "two.jsonl"
    trace.write_text(GOOD % 0 + GOOD % 1000)
    path = scenario(tmp_path, trace, "mooncake", time_scale=time_scale)
    one_line_exit_2(runner.invoke(app, ["simulate", str(path)]), str(path), ": workload.trace.time_scale: ")


def test_a_trace_with_a_span_still_plans_and_simulates(tmp_path):
    trace = tmp_path / "ok.jsonl"
    trace.write_text("".join(GOOD % (500 * i) for i in range(20)))
    result = runner.invoke(app, ["plan", "--simulate", "--json", str(scenario(tmp_path, trace, "mooncake"))])
    assert result.exit_code == 0, result.output


def _fifo(tmp_path: Path) -> Path:
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)                     # reading it would block until a writer came
    return fifo


@pytest.mark.parametrize(("make", "what"), [
    (lambda tmp: tmp, "is a directory, not a regular file"),
    (_fifo, "is a FIFO, not a regular file"),
    (lambda tmp: Path("/dev/null"), "is a character device, not a regular file"),
    (lambda tmp: tmp / "missing.csv", "not found"),
])
@pytest.mark.parametrize("command", [["plan"], ["simulate"]])
def test_a_trace_path_that_is_not_a_file_is_named_for_what_it_is(tmp_path, make, what, command):
    # it was "trace file ... not found" for a directory, a FIFO and a device alike
    trace = make(tmp_path)
    result = runner.invoke(app, [*command, str(scenario(tmp_path, trace, "csv"))])
    one_line_exit_2(result, ": workload.trace.path: ", f"trace file {excerpt(str(trace))} {what}")


@pytest.mark.parametrize(("make", "what"), [
    (lambda tmp: tmp / "missing.csv", "not found"),
    (lambda tmp: tmp, "is a directory, not a regular file"),
])
def test_plan_checks_the_schedules_trace_too(tmp_path, make, what):
    # only plan --simulate read workload.schedule.trace, so a plain plan of a missing one said nothing
    trace = make(tmp_path)
    path = tmp_path / "s.yaml"
    path.write_text("model: llama-3.1-8b\nhardware: h100-sxm\nslo: {ttft_ms: 1000}\nworkload:\n"
                    "  arrival: {rate_per_s: 2}\n  prompt_tokens: {distribution: fixed, value: 100}\n"
                    "  output_tokens: {distribution: fixed, value: 10}\n"
                    f"  schedule: {{trace: {{path: {trace}, format: csv, bin_s: 60}}}}\n")
    one_line_exit_2(runner.invoke(app, ["plan", str(path)]), ": workload.schedule.trace.path: ",
                    f"trace file {excerpt(str(trace))} {what}")
