"""The validation report's two parts of the error (engine/validate.py): the engine's own steps priced by the step
model (the replay), and a step model priced at the engine's measured speed."""

import math

import pytest
from rich.console import Console

from engine.runner import RunResult, StepRecord
from engine.validate import AtSpeed, Row, StepReplay, ValidationReport, replay_steps
from simulator import StepBatch
from sizer.cli.render import render_validation


class Linear:
    """2 ms a step plus 10 us a new token."""
    name = "linear"

    def step_time(self, batch: StepBatch) -> float:
        return 0.002 + 1e-5 * batch.new_tokens


def test_the_replay_prices_the_engines_own_batches_against_their_measured_times():
    batches = [StepBatch(num_seqs=1, new_tokens=200, prefill_seqs=1, prefill_tokens=200),
               StepBatch(num_seqs=2, new_tokens=2, context_tokens=400), StepBatch(num_seqs=2, new_tokens=2)]
    # measured: 5 ms, 3 ms and 4 ms (a step's time runs from the previous step's end, or from an arrival after an
    # idle wait as the third's does: host work included)
    run = RunResult([], {}, {}, [StepRecord(b, start, end) for b, (start, end) in
                                 zip(batches, ((0.0, 0.005), (0.005, 0.008), (0.010, 0.014)), strict=True)])
    replay = replay_steps(run, Linear())
    # priced: (2 + 2) ms + (2 + 0.02) ms + (2 + 0.02) ms = 8.04 ms against 12 ms measured
    assert replay.steps == 3
    assert replay.measured_s == pytest.approx(0.012) and replay.predicted_s == pytest.approx(0.00804)
    assert replay.relative_error == pytest.approx(0.00804 / 0.012 - 1)
    assert replay.engine_speed == pytest.approx(0.012 / 0.00804)
    # at that speed the same steps sum to what the engine measured
    at_speed = AtSpeed(Linear(), replay.engine_speed)
    assert sum(at_speed.step_time(r.batch) for r in run.steps) == pytest.approx(replay.measured_s)
    assert at_speed.name == "linear x 1.493"


def test_a_replay_with_no_step_scales_nothing():
    # no step priced (and none measured): the error is undefined, the at-speed factor 1 (no division by zero)
    replay = replay_steps(RunResult([], {}, {}, []), Linear())
    assert replay.steps == 0 and replay.engine_speed == 1.0 and math.isnan(replay.relative_error)


def test_the_terminal_report_shows_both_parts_of_the_error():
    rows = [Row("ttft_p50_ms", 50.0, 40.0, 52.0), Row("output_tokens_per_s", 250.0, 255.0, 251.0)]
    report = ValidationReport("cpu", "tiny", "profile", 64, 8192, 8192, "", rows, StepReplay(600, 8.0, 6.4),
                              0, 700, 8.9, 3168, 0, 74)
    console = Console(width=80, record=True)
    render_validation(report, console)
    text = " ".join(console.export_text().split())
    # ttft p50: 40 against 50 is -20.0%; at the engine's speed 52 is +4.0%; the replay 6.4 against 8.0 s is -20.0%
    # and prices every step 8.0 / 6.4 = 1.25 times
    assert "ttft_p50_ms │ 50.00 │ 40.00 │ -20.0% │ 52.00 │ +4.0%" in text
    assert ("The engine's own 600 steps priced at 6.40 s against 8.00 s measured (-20.0%: the step pricing's "
            "error); the last two columns price every step 1.250 times") in text
