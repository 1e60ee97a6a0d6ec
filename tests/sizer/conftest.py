"""Helpers for the planner tests: run `sizer plan --json` in-process and return the dict; run the simulations a
test asks for more than once only once (`simulations_once`)."""

import copy
import hashlib
import inspect
import io
import json
import pickle
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.cli import app

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def plan_json():
    runner = CliRunner()
    cache = {}

    def run(scenario: str, *flags: str) -> dict:
        key = (scenario, flags)
        if key not in cache:
            result = runner.invoke(app, ["plan", str(REPO / "scenarios" / scenario), "--json", *flags])
            assert result.exit_code == 0, result.output
            cache[key] = json.loads(result.stdout)
        return cache[key]

    return run


def _by_value(inputs: tuple) -> bytes:
    """The inputs pickled without pickle's memo, so equal values give equal bytes whichever objects they share: a
    plan and a check of one deployment build equal step models, but with a string or tuple shared by two fields in
    one and two equal copies in the other, which the memo writes as a back-reference in one and twice in the other
    (fail-latency-llama-70b-h100: check ran plan's 17 simulations again). Inputs with a cycle, which the memo-less
    pickler refuses, are pickled whole as they are."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer)
    pickler.fast = True
    try:
        pickler.dump(inputs)
    except ValueError:                                  # "fast mode: can't pickle cyclic objects"
        return pickle.dumps(inputs)
    return buffer.getvalue()


def _run_once(monkeypatch: pytest.MonkeyPatch) -> dict:
    """Patch the sizing's `simulate` (sizer.sizing.simulate) to run each distinct simulation once while `monkeypatch`
    holds; the counts of runs and of repeats saved."""
    import simulator.run
    import sizer.sizing.simulate as sizing_simulate

    # the simulator's own signature names the inputs (`run` may be another test's wrapper of it)
    run, signature = sizing_simulate.simulate, inspect.signature(simulator.run.simulate)
    results, counts = {}, {"runs": 0, "repeats": 0}

    def once(*args, **kwargs):
        inputs = signature.bind(*args, **kwargs)
        inputs.apply_defaults()
        # run, not kept: a run that reports as it goes (progress, rows), whose callbacks must be called, and one whose
        # step model counts the steps it prices (the bundled engine's `out_of_range_steps`: a side effect a copy of
        # the result would not repeat)
        reports = inputs.arguments.get("progress") or inputs.arguments.get("rows")
        counts_steps = hasattr(inputs.arguments.get("step_model"), "out_of_range_steps")
        try:
            key = None if reports or counts_steps else hashlib.sha256(
                _by_value(tuple(inputs.arguments.items()))).digest()
        except (pickle.PicklingError, TypeError, AttributeError):     # a generator of requests: not kept
            key = None
        if key is None or key not in results:
            counts["runs"] += 1
            result = run(*args, **kwargs)
            if key is None:
                return result
            results[key] = result
        else:
            counts["repeats"] += 1
        return copy.deepcopy(results[key])

    monkeypatch.setattr(sizing_simulate, "simulate", once)
    return counts


@pytest.fixture
def simulations_once(monkeypatch):
    """Within one test, a simulation the commands ask for again with the very same inputs is not run again: its
    result is the first run's (a copy). `simulator.run.simulate` promises the same result to the bit for the same
    inputs and seed (its docstring; the simulate goldens hold it), so every number a command prints is what it
    would be without this; only the repeated work goes. The inputs are compared whole (the pickled simulation
    config, step model, workload and seed): a command that asks anything different, in any field, simulates it.
    Yields the count of runs and of repeats saved."""
    yield _run_once(monkeypatch)


@pytest.fixture(scope="module")
def module_simulations_once():
    """`simulations_once` across the tests of one module (`pytestmark = pytest.mark.usefixtures(...)`), for modules
    whose tests check the same deployment under different flags."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield _run_once(monkeypatch)
