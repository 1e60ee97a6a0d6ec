"""A scenario's workload as the simulator takes it: a trace replay or a seeded synthetic workload."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from simulator import (
    AdapterPopularity,
    Arrivals,
    ClosedLoop,
    Lengths,
    SchemaUse,
    SharedPrefix,
    Workload,
    WorkloadSpec,
    WorkloadSummary,
    generate,
    read_csv_trace,
    read_mooncake,
    with_tags,
)
from sizer.errors import InputError
from sizer.inputs import preloaded
from sizer.inputs.scenario import Distribution, StatedWorkload, scenario_dir
from sizer.words import count
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
    """The scenario's requests: a trace replay or a seeded synthetic workload; `num_requests` of them (a goodput
    probe's; a trace's first, at most those it replays), else the scenario's own (`requests_of`). `rate_per_s`
    rescales the arrivals (a trace keeps its shape and is played faster or slower); a closed loop's
    clients are replaced by Poisson arrivals at that rate (the goodput probes size for a rate)."""
    w = s.workload
    n = num_requests or w.num_requests
    adapters, schemas = _tags(s)
    if w.trace is not None:
        trace = _trace(s, num_requests)
        if rate_per_s is not None:
            trace = trace.time_scaled(rate_per_s / _trace_rate_per_s(s, trace))
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


def _trace(s: StatedWorkload, n: int | None = None) -> Workload:
    """The requests a run replays of the scenario's trace (`replay_limit`; the first `n` of them, if given: a goodput
    probe's), time_scale applied (a sweep worker: as its driver read them, sizer/inputs/preloaded.py)."""
    t = s.workload.trace
    raw = read_trace(s, n)
    trace = raw.time_scaled(1.0 / t.time_scale)
    raw_s, span_s = float(raw.arrival_s[-1]), float(trace.arrival_s[-1])
    if raw_s > 0 and not MIN_SPAN_S <= span_s <= MAX_TIMESTAMP_S:
        raise InputError(s.file, "workload.trace.time_scale",
                         f"{t.time_scale:g} turns the trace's {raw_s:g} s into {span_s:g} s; expected a time_scale "
                         f"that keeps its span from {MIN_SPAN_S:g} s to {MAX_TIMESTAMP_S:g} s")
    return trace


def replay_cuts(s: StatedWorkload) -> list[tuple[str, int, str]]:
    """The stated limits on the requests a run replays of the scenario's trace, as (field, requests, where it was
    stated): workload.trace.max_requests, and workload.num_requests where the scenario or a flag states it (its
    default, 2,000, is a synthetic workload's size, not a cut of a trace). None stated: the whole trace replays."""
    t, w = s.workload.trace, s.workload
    cuts = [("workload.trace.max_requests", t.max_requests, "scenario")] if t.max_requests is not None else []
    source = s.source_of("workload.num_requests")
    if source != "default":
        cuts.append(("workload.num_requests", w.num_requests, source))
    return cuts


def replay_limit(s: StatedWorkload) -> int | None:
    """The requests a run replays of the scenario's trace: the first N, N the smaller stated limit (`replay_cuts`),
    None (the whole trace) when none is stated."""
    return min((n for _, n, _ in replay_cuts(s)), default=None)


def read_limit(s: StatedWorkload, n: int | None = None) -> int | None:
    """Requests read of the scenario's trace: `replay_limit`, at most `n` (a goodput probe's) if given."""
    limit = replay_limit(s)
    return limit if n is None else n if limit is None else min(n, limit)


# Traces read in this process, the last few kept: (path, requests read, the file's identity) -> Workload. A plan
# reads its trace for the share too long (resolve), its rate and lengths (plan) and each simulation; a file
# changed on disk since is read again.
_READ: dict[tuple, Workload] = {}
_READ_KEPT = 4


def read_trace(s: StatedWorkload, n: int | None = None) -> Workload:
    """The requests replayed of the scenario's trace file (`read_limit`), as read: no time_scale."""
    t = s.workload.trace
    path, limit = _trace_path(s), read_limit(s, n)
    shipped = preloaded.trace(path, limit)
    if shipped is not None:
        return shipped
    try:
        info = os.stat(path)
        key = (path, limit, t.format, info.st_ino, info.st_size, info.st_mtime_ns)
    except OSError:
        key = None                                  # the reader says why it cannot read it
    if key is not None and key in _READ:
        return _READ[key]
    reader = read_mooncake if t.format == "mooncake" else read_csv_trace
    trace = reader(path, limit)
    if key is not None:
        while len(_READ) >= _READ_KEPT:
            del _READ[next(iter(_READ))]
        _READ[key] = trace
    return trace


def replay_words(s: StatedWorkload, trace: Workload) -> str:
    """Which of the trace's requests a run replays, in words: all of them, the first N and the field that cuts it
    (the smaller, when both are stated), or all of them where a stated limit asks for more than the trace holds."""
    k, cuts = len(trace), replay_cuts(s)
    if not cuts:
        return f"all {count(k, 'request')} of it"
    field, limit, source = min(cuts, key=lambda cut: cut[1])
    if k < limit:
        asked = "; ".join(f"{f} {n:,} ({src})" for f, n, src in cuts)
        return f"all {count(k, 'request')} of it ({asked}: more than the trace holds)"
    other = [f"{f} {n:,}" for f, n, _ in cuts if f != field]
    smaller = f", the smaller of it and {other[0]}" if other else ""
    return f"the first {count(k, 'request')} of it ({field} {limit:,}, {source}{smaller})"


# Unread columns or keys a note lists by name at most; the rest are counted
UNREAD_LISTED = 10


def unread_words(s: StatedWorkload, trace: Workload) -> str | None:
    """The trace's columns (CSV) or keys (Mooncake) sizer does not model, named (None: there are none): read, and
    left out of the replay."""
    if not trace.unread:
        return None
    t = s.workload.trace
    kind_of = "column" if t.format == "csv" else "key"
    names = ", ".join(excerpt(n, quote=False) for n in trace.unread[:UNREAD_LISTED])
    more = len(trace.unread) - UNREAD_LISTED
    names += f" and {more:,} more" if more > 0 else ""
    used = ("TIMESTAMP, ContextTokens and GeneratedTokens (and Adapter, where the trace has it)" if t.format == "csv"
            else "timestamp, input_length and output_length (and hash_ids and adapter, where the trace has them)")
    return (f"trace {t.path}: {kind_of}{'s' if len(trace.unread) > 1 else ''} {names} not modelled: sizer replays "
            f"each request's {used} alone, as if the rest were absent")


def requests_of(s: StatedWorkload) -> int:
    """The requests a run of the scenario simulates: its trace's replayed ones (`replay_limit`), else
    workload.num_requests."""
    return len(read_trace(s)) if s.workload.trace is not None else s.workload.num_requests


def _trace_rate_per_s(s: StatedWorkload, trace: Workload) -> float:
    """A trace's arrival rate: (requests - 1) / (last - first arrival), the mean rate between its
    first and last arrivals. One request, or requests all at one instant, have none (0 / 0, or
    n / 0): refused, naming the trace's timestamps, since a plan sizes for a rate."""
    rate = trace.summary().rate_per_s
    if rate > 0 and math.isfinite(rate):
        return rate
    t = s.workload.trace
    field = "timestamp" if t.format == "mooncake" else "TIMESTAMP"
    k = len(trace)
    cut = min(replay_cuts(s), key=lambda c: c[1], default=None)
    replayed = f" ({cut[0]} {cut[1]:,} replays at most the first {cut[1]:,})" if cut and k == cut[1] else ""
    what = "1 request: a single arrival" if k == 1 else f"{k:,} requests, all at one timestamp: a burst"
    raise InputError(_trace_path(s), field,
                     f"{what} has no arrival rate{replayed}; a plan sizes for the trace's rate, (requests - 1) / "
                     f"(last - first arrival), so it needs at least two distinct timestamps "
                     f"(`sizer simulate` replays the trace as it is)")


def trace_summary(s: StatedWorkload) -> WorkloadSummary:
    """Requests, span, rate and mean lengths of the scenario's trace as replayed (`replay_limit`); refused when
    the trace has no arrival rate (one request, or all at one timestamp)."""
    trace = _trace(s)
    _trace_rate_per_s(s, trace)
    return trace.summary()


@dataclass(frozen=True)
class ServedTrace:
    """The replayed trace as a plan sizes for it: the requests an engine of `max_len` serves (prompt + output at
    most max_len; the longer it refuses at once, as the simulator rejects them)."""
    requests: int                     # replayed
    served: int                       # of them, within max_len
    rate_per_s: float                 # the trace's arrival rate x served / requests
    prompt_tokens_mean: float         # over the served (over all, when none is served)
    output_tokens_mean: float
    words: str                        # which requests are replayed (`replay_words`)
    unread: str | None                # the columns or keys not modelled (`unread_words`)


def _fits(trace: Workload, max_len: int) -> np.ndarray:
    """Which of the trace's requests an engine of `max_len` serves: prompt + output at most it (the simulator's
    rule for a request's rejection)."""
    return trace.prompt_tokens + trace.output_tokens <= max_len


def too_long(s: StatedWorkload, max_len: int) -> tuple[int, int, Workload]:
    """(requests replayed, of them longer than `max_len`, the replayed trace) of the scenario's trace."""
    trace = read_trace(s)
    return len(trace), len(trace) - int(np.count_nonzero(_fits(trace, max_len))), trace


def served_trace(s: StatedWorkload, max_len: int) -> ServedTrace:
    """The trace's rate and mean lengths over the requests an engine of `max_len` serves: as a distribution's
    (sizer/analytic/lengths.py `served_means`), refused without an arrival rate, or with an adapter column
    workload.lora does not replay (as `workload_of` refuses it)."""
    summary = trace_summary(s)
    trace = read_trace(s)
    _check_trace_adapters(s, trace)         # an adapter column is replayed exactly as `simulate` replays it
    fits = _fits(trace, max_len)
    served = int(np.count_nonzero(fits))
    prompt, output = (trace.prompt_tokens[fits], trace.output_tokens[fits]) if served else \
        (trace.prompt_tokens, trace.output_tokens)
    return ServedTrace(len(trace), served, summary.rate_per_s * served / len(trace), float(prompt.mean()),
                       float(output.mean()), replay_words(s, trace), unread_words(s, trace))
