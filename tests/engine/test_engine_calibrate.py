"""Pieces of `sizer calibrate` that need no timing: grids, call counts, the overhead fit."""

import numpy as np
import pytest

from engine.calibrate import calls_per_step, fit_overhead
from engine.config import engine_config
from engine.microbench import chunk_grid, context_grid, seq_grid, token_grid
from engine.runner import StepRecord
from simulator.step_batch import StepBatch
from sizer.inputs.model_spec import load_model


def test_grids_cover_their_limits():
    assert token_grid(256) == [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256]
    assert token_grid(100) == [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 100]
    assert seq_grid(64) == [1, 2, 4, 8, 16, 32, 64] and seq_grid(48) == [1, 2, 4, 8, 16, 32, 48]
    assert context_grid(2048) == [0, 32, 128, 512, 2048]
    assert chunk_grid(256) == [2, 8, 16, 32, 64, 128, 256]


def test_calls_per_step_count_layers():
    dense = engine_config(load_model("tiny"))
    # 4 layers: two norms each plus the final one = 9; one of each projection per layer
    assert calls_per_step(dense, ["embed", "rmsnorm", "qkv", "gate_up"]) == {"embed": 1, "rmsnorm": 9, "qkv": 4,
                                                                             "gate_up": 4}
    moe = engine_config(load_model("mixtral-8x7b"))
    assert calls_per_step(moe, ["moe", "qkv"]) == {"moe": 32, "qkv": 32}


def record(seqs, host_s, forward_s):
    return StepRecord(StepBatch(num_seqs=seqs, new_tokens=seqs), 0.0, host_s + forward_s, forward_s)


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
