"""The machine's speed at the CPU engine's kind of work, sampled while a calibration and its validation run.

A calibrate-then-validate test compares a prediction priced from timings taken in one minute with an engine run
timed in the next, and on the shared 2-core machine the CPU's speed drifts by tens of percent for minutes at a
time (a profile priced the engine's own replayed steps at 0.88 and, five minutes later, 1.13 of what they
measured; 2026-12-01): a fixed bound on the relative error then fails on a slow minute, not on a wrong
calibration. So a test times a fixed probe (the same small work every time) in a thread beside the calibration
and again beside the validation, and takes the drift out: a machine uniformly k times slower while validating
than while calibrating makes every measured latency k times the predicted one, and the probe k times slower
too, so `drift_free_error` of the report's error is what it would have been at one speed. What is left is the
calibration's own error.

The probe is timed in its thread's CPU time, as the CPU engine times its steps and the calibration its ops
(engine/device.py: ThreadClock, median_time_s): being descheduled costs neither anything, but other processes'
load slows each CPU second they get (shared caches, memory bandwidth, the other hyperthread). One probe alone
moves by 20% from one second to the next under load (32 to 52 ms in 20 s at a load of 8 on the 2 cores,
2026-12-02), so it is sampled all through each window and the windows' medians compared (windows of 2 s at a
load of 10 gave medians within 8% of each other)."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

# the tiny model's shapes (sizer/inputs/catalog/models/tiny.json): hidden 256, fused QKV 384, MLP 768
BATCH, HIDDEN, QKV, MLP = 8, 256, 384, 768
CALLS = 4                    # one sample: about 2 ms of CPU on the development machine
INTERVAL_S = 0.1             # between samples: about 2% of a core


def probe() -> Callable[[], float]:
    """One sample's timer: the CPU seconds this thread takes for CALLS passes of the tiny model's linear layers and
    SiLU at 8 tokens in float32 (the engine's kind of work on a CPU; one torch thread, as `sampled` sets)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(BATCH, HIDDEN, generator=g)
    w_qkv, w_up, w_down = (torch.randn(o, i, generator=g) for o, i in ((QKV, HIDDEN), (2 * MLP, HIDDEN),
                                                                       (HIDDEN, MLP)))

    def seconds() -> float:
        start = time.thread_time()
        for _ in range(CALLS):
            torch.nn.functional.linear(x, w_qkv)
            gate, up = torch.nn.functional.linear(x, w_up).chunk(2, dim=-1)
            torch.nn.functional.linear(torch.nn.functional.silu(gate) * up, w_down)
        return time.thread_time() - start
    return seconds


@contextmanager
def sampled() -> Iterator[list[float]]:
    """Probe samples taken every INTERVAL_S in a thread while the block runs, on one torch thread (the CPU
    engine's; the block's own work sets the same): the list fills as they come."""
    samples: list[float] = []
    stop = threading.Event()

    def run() -> None:
        torch.set_num_threads(1)        # OpenMP's thread count is each thread's own
        seconds = probe()
        while not stop.wait(INTERVAL_S):
            samples.append(seconds())

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    sampler = threading.Thread(target=run, daemon=True)
    sampler.start()
    try:
        yield samples
    finally:
        stop.set()
        sampler.join()
        torch.set_num_threads(threads)


def slowdown(calibrating: list[float], validating: list[float]) -> float:
    """How much longer the same work took while validating than while calibrating (the samples' medians)."""
    return statistics.median(validating) / statistics.median(calibrating)


def drift_free_error(relative_error: float, slow: float) -> float:
    """(predicted - measured) / measured as if the validation had run at the calibration's speed: measured / slow."""
    return (1 + relative_error) * slow - 1
