"""The `simulations_once` fixture (tests/sizer/conftest.py) that several slow tests share their repeated simulations
through: a repeat is the first run's result to the bit, as a fresh run gives it; anything asked differently runs."""

import dataclasses
from pathlib import Path

import numpy as np

import simulator.run
from sizer.inputs.scenario import load_scenario
from sizer.sizing.resolve import resolve
from sizer.sizing.simulate import simulate_replica, simulation_config
from sizer.sizing.workload import workload_of
from sizer.timing.step_model import step_model_for

CHAT = Path(__file__).resolve().parents[3] / "scenarios" / "llama-3.1-8b-chat-h100.yaml"


def test_a_repeat_is_what_a_fresh_run_gives_and_a_different_input_runs(simulations_once):
    s = load_scenario(CHAT)
    r = resolve(dataclasses.replace(s, workload=dataclasses.replace(s.workload, num_requests=100)))
    first, again = simulate_replica(r, 2.0, 100), simulate_replica(r, 2.0, 100)
    assert simulations_once == {"runs": 1, "repeats": 1}
    assert again is not first                                   # a copy: a caller's change reaches no other
    fresh = simulator.run.simulate(simulation_config(r, 1), step_model_for(r), workload_of(r, 100, 2.0),
                                   r.workload.seed)             # the simulator itself, past the fixture
    for name, column in fresh.columns.items():
        np.testing.assert_array_equal(again.columns[name], column, err_msg=name)
    np.testing.assert_array_equal(again.timeline.step_s, fresh.timeline.step_s)
    simulate_replica(r, 2.5, 100)                               # another rate: simulated
    assert simulations_once == {"runs": 2, "repeats": 1}
