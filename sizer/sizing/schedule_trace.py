"""A timestamped trace as the schedule's time profile: its arrivals counted per bin, each bin's rate held for it.

    rate of bin b = arrivals in [b x bin_s, (b + 1) x bin_s) / bin_s
    period        the trace's span from its first arrival, rounded up to whole output intervals
"""

from __future__ import annotations

import math

import numpy as np

from simulator.traces import read_csv_trace, read_mooncake
from sizer.inputs.scenario import StatedWorkload, check_trace_file, scenario_dir
from sizer.inputs.schedule import Profile


def trace_profile(s: StatedWorkload) -> Profile:
    """The rate per bin of workload.schedule.trace, over a period of whole output intervals."""
    sch = s.workload.schedule
    t = sch.trace
    path = scenario_dir(s) / t.path
    check_trace_file(path, s.file, "workload.schedule.trace.path")     # checked as read; it may have gone since
    reader = read_mooncake if t.format == "mooncake" else read_csv_trace
    arrival = reader(str(path), t.max_requests).arrival_s
    arrival = arrival - arrival.min()
    span = float(arrival.max())
    period = max(1, math.ceil(span / sch.interval_s)) * sch.interval_s
    bins = max(1, math.ceil(period / t.bin_s))
    counts = np.bincount(np.minimum((arrival // t.bin_s).astype(int), bins - 1), minlength=bins)
    # the last bin ends at the period, so it may be shorter than bin_s: its rate is over its own length
    lengths = [min(t.bin_s, period - b * t.bin_s) for b in range(bins)]
    return Profile(float(period), tuple(float(b * t.bin_s) for b in range(bins)),
                   tuple(float(c) / length for c, length in zip(counts, lengths, strict=True)), linear=False)
