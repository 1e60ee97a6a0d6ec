"""A scenario's workload as the simulator takes it: a trace replay or a seeded synthetic workload."""

from __future__ import annotations

import math

from simulator import (
    AdapterPopularity,
    Arrivals,
    ClosedLoop,
    Lengths,
    SchemaUse,
    SharedPrefix,
    Workload,
    WorkloadSpec,
    generate,
    read_csv_trace,
    read_mooncake,
    with_tags,
)
from sizer.errors import InputError
from sizer.inputs import preloaded
from sizer.inputs.scenario import Distribution, StatedWorkload, scenario_dir
from validation.errors import excerpt
from validation.trace_limits import MAX_TIMESTAMP_S


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


def workload_of(s: StatedWorkload, num_requests: int | None = None, rate_per_s: float | None = None) -> Workload:
    """The scenario's requests: a trace replay or a seeded synthetic workload. `rate_per_s`
    rescales the arrivals (a trace keeps its shape and is played faster or slower); a closed loop's
    clients are replaced by Poisson arrivals at that rate (the goodput probes size for a rate)."""
    w = s.workload
    n = num_requests or w.num_requests
    adapters, schemas = _tags(s)
    if w.trace is not None:
        trace = _trace(s, n)
        if rate_per_s is not None:
            trace = trace.time_scaled(rate_per_s / _trace_rate_per_s(s, trace, n))
        _check_trace_adapters(s, trace)
        return with_tags(trace, adapters, schemas, w.seed) if adapters or schemas else trace
    sp = w.shared_prefix
    a = w.arrival
    closed = a.process == "closed" and rate_per_s is None      # a rate asked for (goodput probes): open arrivals
    arrivals = (ClosedLoop(a.concurrency, a.think_time_s or 0.0) if closed else
                Arrivals("poisson" if a.process == "closed" else a.process, rate_per_s or a.rate_per_s, a.cv))
    spec = WorkloadSpec(n, arrivals,
                        _lengths(w.prompt_tokens), _lengths(w.output_tokens),
                        SharedPrefix(sp.share, sp.tokens, sp.num_prefixes, sp.num_tenants) if sp else None,
                        adapters, schemas)
    return generate(spec, w.seed)


def _check_trace_adapters(s: StatedWorkload, trace: Workload) -> None:
    """A trace's adapter column is used exactly when workload.lora says `popularity: trace`."""
    lora, named = s.workload.lora, trace.adapter is not None
    from_trace = lora is not None and lora.popularity == "trace"
    if named and not from_trace:
        raise InputError(s.file, "workload.lora.popularity", "the trace names each request's LoRA adapter; "
                         "expected popularity: trace (with deployment.enable_lora) to replay them")
    if from_trace and not named:
        raise InputError(s.file, "workload.lora.popularity", f"'trace', but {excerpt(_trace_path(s))} names no "
                         "adapter (CSV column Adapter, Mooncake key adapter)")
    if from_trace and int(trace.adapter.max()) >= lora.adapters:
        raise InputError(s.file, "workload.lora.adapters", f"{lora.adapters}, but the trace asks for adapter "
                         f"{int(trace.adapter.max())}; expected ids from 0 to adapters - 1")


def _tags(s: StatedWorkload) -> tuple[AdapterPopularity | None, SchemaUse | None]:
    """Which adapter and schema each request asks for: Zipf (uniform: exponent 0) over the adapters,
    a share of requests over the schemas uniformly."""
    lora, so = s.workload.lora, s.workload.structured_output
    adapters = (AdapterPopularity(lora.adapters, lora.zipf_s if lora.popularity == "zipf" else 0.0)
                if lora and lora.popularity != "trace" else None)
    return adapters, SchemaUse(so.share, so.schemas) if so else None


# A time-scaled trace spans at least a nanosecond (when it spans any time at all), so that its
# rate, (requests - 1) / span, stays a finite float; at most validation.trace_limits.MAX_TIMESTAMP_S.
MIN_SPAN_S = 1e-9


def _trace_path(s: StatedWorkload) -> str:
    return str(scenario_dir(s) / s.workload.trace.path)


def _trace(s: StatedWorkload, n: int) -> Workload:
    """The first `n` requests of the scenario's trace (at most trace.max_requests), time_scale applied (a sweep
    worker: as its driver read them, sizer/inputs/preloaded.py)."""
    t = s.workload.trace
    raw = read_trace(s, n)
    trace = raw.time_scaled(1.0 / t.time_scale)
    raw_s, span_s = float(raw.arrival_s[-1]), float(trace.arrival_s[-1])
    if raw_s > 0 and not MIN_SPAN_S <= span_s <= MAX_TIMESTAMP_S:
        raise InputError(s.file, "workload.trace.time_scale",
                         f"{t.time_scale:g} turns the trace's {raw_s:g} s into {span_s:g} s; expected a time_scale "
                         f"that keeps its span from {MIN_SPAN_S:g} s to {MAX_TIMESTAMP_S:g} s")
    return trace


def trace_limit(s: StatedWorkload, n: int) -> int:
    """Requests read of the scenario's trace for `n` requests: at most trace.max_requests."""
    return min(n, s.workload.trace.max_requests or n)


def read_trace(s: StatedWorkload, n: int) -> Workload:
    """The first `n` requests of the scenario's trace file (at most trace.max_requests), as read: no time_scale."""
    t = s.workload.trace
    shipped = preloaded.trace(_trace_path(s), trace_limit(s, n))
    if shipped is not None:
        return shipped
    reader = read_mooncake if t.format == "mooncake" else read_csv_trace
    return reader(_trace_path(s), trace_limit(s, n))


def _trace_rate_per_s(s: StatedWorkload, trace: Workload, n: int) -> float:
    """A trace's arrival rate: (requests - 1) / (last - first arrival), the mean rate between its
    first and last arrivals. One request, or requests all at one instant, have none (0 / 0, or
    n / 0): refused, naming the trace's timestamps, since a plan sizes for a rate."""
    rate = trace.summary().rate_per_s
    if rate > 0 and math.isfinite(rate):
        return rate
    t = s.workload.trace
    field = "timestamp" if t.format == "mooncake" else "TIMESTAMP"
    k = len(trace)
    replayed = (f" (workload.num_requests and workload.trace.max_requests replay at most the first {k:,})"
                if k == min(n, t.max_requests or n) else "")
    what = "1 request: a single arrival" if k == 1 else f"{k:,} requests, all at one timestamp: a burst"
    raise InputError(_trace_path(s), field,
                     f"{what} has no arrival rate{replayed}; a plan sizes for the trace's rate, (requests - 1) / "
                     f"(last - first arrival), so it needs at least two distinct timestamps "
                     f"(`sizer simulate` replays the trace as it is)")


def trace_summary(s: StatedWorkload):
    """Requests, span, rate and mean lengths of the scenario's trace (as replayed); refused when
    the trace has no arrival rate (one request, or all at one timestamp)."""
    n = s.workload.num_requests
    trace = _trace(s, n)
    _trace_rate_per_s(s, trace, n)
    return trace.summary()
