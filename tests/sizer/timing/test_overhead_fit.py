"""The overhead fit of `sizer calibrate` (sizer/timing/overhead_fit.py) on steps whose host and forward parts are
known exactly, so the fitted coefficients can be checked by hand."""

from typing import NamedTuple

import numpy as np
import pytest

from simulator.step_batch import StepBatch
from sizer.timing.overhead_fit import fit_overhead, step_error


class Step(NamedTuple):
    """A whole step as the runner times it (engine/runner.py StepRecord's fields the fit reads)."""
    batch: StepBatch
    duration_s: float
    forward_s: float


def record(seqs, host_s, forward_s):
    return Step(StepBatch(num_seqs=seqs, new_tokens=seqs), host_s + forward_s, forward_s)


def test_fit_overhead_recovers_known_coefficients_despite_outliers():
    # Steps made of a host part 1 ms + 0.2 ms per sequence and a forward pass 0.5 ms + 1.1 x
    # the tables, exactly; then two host hiccups (5 ms extra) and two slow forward passes
    # (5x) that the trimming must drop.
    rng = np.random.default_rng(0)
    records, tables = [], []
    for i in range(60):
        seqs, t = int(rng.integers(1, 32)), float(rng.uniform(1e-3, 50e-3))
        host = 1e-3 + 0.2e-3 * seqs + (5e-3 if i in (7, 30) else 0.0)
        records.append(record(seqs, host, (0.5e-3 + 1.1 * t) * (5 if i in (3, 40) else 1)))
        tables.append(t)
    fit = fit_overhead(records, tables)
    assert fit.kernel_factor == pytest.approx(1.1, rel=1e-6)
    assert fit.forward_fixed_s == pytest.approx(0.5e-3, rel=1e-6)
    assert fit.host_fixed_s == pytest.approx(1e-3, rel=1e-6)
    assert fit.per_seq_s == pytest.approx(0.2e-3, rel=1e-6)
    assert fit.fixed_s == pytest.approx(1.5e-3, rel=1e-6)
    assert fit.dropped_steps == 4


def test_fit_overhead_pins_a_negative_slope():
    # Host time that shrinks with more sequences (nonsense for overhead): the slope is pinned
    # to 0 and `host_fixed` is the median host time, 3 ms - 0.1 ms x the median of 1..21 (11)
    # = 1.9 ms. The forward passes are exactly 2 x the tables: no intercept.
    tables = [1e-3 * s for s in range(1, 22)]
    records = [record(s, 3e-3 - 0.1e-3 * s, 2 * t) for s, t in zip(range(1, 22), tables, strict=True)]
    fit = fit_overhead(records, tables)
    assert fit.per_seq_s == 0.0 and fit.host_fixed_s == pytest.approx(1.9e-3)
    assert fit.kernel_factor == pytest.approx(2.0) and fit.forward_fixed_s == pytest.approx(0.0, abs=1e-12)


def test_step_error_is_the_median_relative_error():
    # a model pricing every step at 1 ms against steps of 1, 2 and 4 ms: errors 0, 0.5, 0.75, median 0.5
    class Flat:
        name = "flat"

        def step_time(self, batch):
            return 1e-3

    steps = [record(1, 0.0, t) for t in (1e-3, 2e-3, 4e-3)]
    assert step_error(steps, Flat()) == pytest.approx(0.5)
