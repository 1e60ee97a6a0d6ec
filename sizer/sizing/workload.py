"""A scenario's workload as the simulator takes it: a trace replay or a seeded synthetic workload."""

from __future__ import annotations

import math

from simulator.traces import read_csv_trace, read_mooncake
from simulator.workload import Arrivals, Lengths, SharedPrefix, Workload, WorkloadSpec, generate
from sizer.inputs.scenario import Distribution, Scenario, scenario_dir


def _lengths(d: Distribution) -> Lengths:
    clip = {"min_tokens": int(d.min or 1), "max_tokens": int(d.max) if d.max else None}
    if d.distribution == "fixed":
        return Lengths("fixed", mean_tokens=d.value, **clip)
    if d.distribution == "uniform":
        return Lengths("uniform", min_tokens=int(d.min), max_tokens=int(d.max))
    if d.distribution == "normal":
        return Lengths("normal", mean_tokens=d.mean, std_tokens=d.std or 0.0, **clip)
    if d.distribution == "lognormal":      # the scenario gives sigma of log length; Lengths wants the std of lengths
        return Lengths("lognormal", mean_tokens=d.mean, std_tokens=d.mean * math.sqrt(math.expm1(d.sigma ** 2)), **clip)
    return Lengths("empirical", values_tokens=tuple(int(v) for v in d.values), weights=tuple(d.weights or ()), **clip)


def workload_of(s: Scenario, num_requests: int | None = None, rate_per_s: float | None = None) -> Workload:
    """The scenario's requests: a trace replay or a seeded synthetic workload. `rate_per_s`
    rescales the arrivals (a trace keeps its shape and is played faster or slower)."""
    w = s.workload
    n = num_requests or w.num_requests
    if w.trace is not None:
        reader = read_mooncake if w.trace.format == "mooncake" else read_csv_trace
        limit = min(n, w.trace.max_requests or n)
        trace = reader(scenario_dir(s) / w.trace.path, limit).time_scaled(1.0 / w.trace.time_scale)
        if rate_per_s is not None:
            trace = trace.time_scaled(rate_per_s / trace.summary().rate_per_s)
        return trace
    sp = w.shared_prefix
    spec = WorkloadSpec(n, Arrivals(w.arrival.process, rate_per_s or w.arrival.rate_per_s, w.arrival.cv or 1.0),
                        _lengths(w.prompt_tokens), _lengths(w.output_tokens),
                        SharedPrefix(sp.share, sp.tokens, sp.num_prefixes, sp.num_tenants) if sp else None)
    return generate(spec, w.seed)


def trace_summary(s: Scenario):
    """Requests, span, rate and mean lengths of the scenario's trace (as replayed)."""
    return workload_of(s).summary()
