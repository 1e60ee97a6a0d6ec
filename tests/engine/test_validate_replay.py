"""The validation report's two parts of the error (engine/validate.py): the engine's own steps priced by the step
model (the replay), and a step model priced at the engine's measured speed."""

import pytest

from engine.runner import RunResult, StepRecord
from engine.validate import AtSpeed, replay_steps
from simulator import StepBatch


class Linear:
    """2 ms a step plus 10 us a new token."""
    name = "linear"

    def step_time(self, batch: StepBatch) -> float:
        return 0.002 + 1e-5 * batch.new_tokens


def test_the_replay_prices_the_engines_own_batches_against_their_measured_times():
    batches = [StepBatch(num_seqs=1, new_tokens=200, prefill_seqs=1, prefill_tokens=200),
               StepBatch(num_seqs=2, new_tokens=2, context_tokens=400), StepBatch(num_seqs=2, new_tokens=2)]
    # measured: 5 ms, 3 ms and 4 ms (a step's time runs from the previous step's end: host work included)
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
