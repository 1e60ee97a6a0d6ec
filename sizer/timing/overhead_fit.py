"""What whole engine steps cost beyond the kernel tables, fitted to steps the bundled engine's runner timed
(`sizer calibrate`: a model's profile, sizer/sizing/calibrate.py; a device's tables, sizer/sizing/
device_calibration.py). The steps come from the engine (engine/calibrate.py `step_sweep`); the fit is the
profile's (`Overhead`, sizer/timing/profile_parts.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

import numpy as np

from simulator.step_batch import StepBatch, StepTimeModel
from sizer.timing.profile_parts import Overhead

MIN_DECODE_STEPS_FOR_FIT = 20       # decode-only steps needed for their own overhead line


class TimedStep(Protocol):
    """One whole step the runner timed (engine/runner.py `StepRecord` has these)."""
    batch: StepBatch
    duration_s: float               # the whole step, host work included
    forward_s: float                # its forward pass


def fit_overhead(records: Sequence[TimedStep], tables_s: list[float]) -> Overhead:
    """Split each measured step into the host's work and the forward pass, and fit both.

    Host (scheduling, batch layout, bookkeeping): `host_fixed + per_seq x sequences`.
    Forward: `forward_fixed + kernel_factor x tables`, where `kernel_factor` says how much
    slower the kernels run inside a whole step than alone (caches) and `forward_fixed` is
    the Python between them (views, splits, concatenations the tables do not time); the
    forward fit weighs relative error, so short decode steps count as much as long prefills.
    Both are least squares refitted without steps more than 3 sigma off (a shared machine's
    hiccups; sigma from the median deviation, at least 20 us for the host and 1% for the
    forward pass); a negative slope is pinned to 0 and the intercept refitted.
    The model's fixed overhead is host_fixed + forward_fixed; `step_error_p50` is left to
    the caller (step_error, with the fitted model).
    """
    seqs = np.array([r.batch.num_seqs for r in records], dtype=float)
    forward = np.array([r.forward_s for r in records])
    host = np.array([r.duration_s for r in records]) - forward
    host_fixed, per_seq, host_kept = _robust_line(seqs, host, np.ones_like(host), floor=20e-6)
    tables = np.array(tables_s)
    forward_fixed, factor, forward_kept = _robust_line(tables, forward, 1.0 / forward, floor=0.01)
    kept = host_kept & forward_kept
    fit = Overhead(fixed_s=host_fixed + forward_fixed, per_seq_s=per_seq, kernel_factor=factor,
                   host_fixed_s=host_fixed, forward_fixed_s=forward_fixed,
                   fit_steps=int(kept.sum()), dropped_steps=int((~kept).sum()))
    # Decode-only steps get their own forward line when the sweep has enough of them: their
    # kernels run on a few rows each, and the mixed steps' fit misprices them by 10-25% on a CPU.
    decode = np.array([r.batch.prefill_seqs == 0 for r in records])
    if decode.sum() >= MIN_DECODE_STEPS_FOR_FIT:
        d_fixed, d_factor, _ = _robust_line(tables[decode], forward[decode], 1.0 / forward[decode], floor=0.01)
        fit = replace(fit, decode_fixed_s=host_fixed + d_fixed, decode_kernel_factor=d_factor)
    return fit


def _robust_line(x: np.ndarray, y: np.ndarray, weight: np.ndarray, floor: float) -> tuple[float, float, np.ndarray]:
    """(intercept >= 0, slope >= 0, kept) of y ~ intercept + slope x by weighted least
    squares, refitted twice without points whose weighted residual is more than 3 sigma off
    (sigma estimated as 1.4826 x the median absolute deviation, at least `floor`)."""
    keep = np.ones(len(x), dtype=bool)
    for _ in range(3):
        w = weight[keep]
        a, b = np.linalg.lstsq(np.stack([w, x[keep] * w], axis=1), y[keep] * w, rcond=None)[0]
        if b < 0:
            a, b = float(np.median(y[keep])), 0.0
        if a < 0:
            a, b = 0.0, float(np.sum(x[keep] * y[keep] * w * w) / np.sum((x[keep] * w) ** 2))
        err = (y - (a + b * x)) * weight
        center = np.median(err[keep])
        sigma = max(1.4826 * float(np.median(np.abs(err[keep] - center))), floor)
        keep = np.abs(err - center) <= 3 * sigma
    return float(a), float(b), keep


def step_error(records: Sequence[TimedStep], model: StepTimeModel) -> float:
    """Median relative error of `model` (the fitted one) over the timed steps."""
    predicted = np.array([model.step_time(r.batch) for r in records])
    measured = np.array([r.duration_s for r in records])
    return float(np.median(np.abs(predicted - measured) / measured))
