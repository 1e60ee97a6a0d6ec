"""Latency percentiles, throughput, SLO attainment and goodput from a simulation result.

ITL is the time between consecutive token messages of a sequence, pooled over all sequences,
as `vllm bench serve` reports it. A sequence that decodes in consecutive steps gets one token
per step, so the ITL distribution is the step durations weighted by how many sequences
produced a token one step after their previous one, plus the few longer gaps (after a
preemption or a KV transfer) recorded on their own. TPOT is per request: (E2E - TTFT) /
(output tokens - 1). The SLO's `tpot_ms` target is checked per request against its TPOT, and
at the SLO percentile against the TPOT percentile (vLLM's `--goodput tpot:` is per request too).
The `itl_ms` target is checked against the ITL itself: the share of token gaps (pooled, as above)
within it must reach the required share, and the ITL percentile must be within it; a run's gaps
are not kept per request, so it is the one target not scored request by request.

Metrics are what a client measures unless `engine_side` is asked for (see
`SimulationResult.columns`). A client's token gaps are the gaps between the steps' arrivals
through the API server; tokens of steps the API server handled in one pass arrive in one
message and count as one gap.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass

import numpy as np

from simulator.records import SimulationResult, pairwise_sum
from simulator.scheduler import reason_kind


@dataclass(frozen=True, kw_only=True)
class SLO:
    ttft_ms: float | None = None       # targets; None: not a target
    tpot_ms: float | None = None       # per request: its TPOT; in percentiles: the TPOT percentile
    e2e_ms: float | None = None
    itl_ms: float | None = None        # the pooled token gaps: the required share within it; the ITL percentile
    percentile: float                  # the percentile each target is also read at (slo_percentiles_met)
    required_share: float              # goodput: share of requests that must meet every target

    def __post_init__(self) -> None:
        if not 0 < self.percentile <= 100 or not 0 < self.required_share <= 1:
            raise ValueError("SLO percentile must be in (0, 100] and required_share in (0, 1]")

    @property
    def has_targets(self) -> bool:
        return any(t is not None for t in (self.ttft_ms, self.tpot_ms, self.e2e_ms, self.itl_ms))


@dataclass(frozen=True)
class Latency:
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float

    def at(self, percentile: float) -> float:
        return {50.0: self.p50_ms, 95.0: self.p95_ms, 99.0: self.p99_ms}[float(percentile)]


@dataclass(frozen=True)
class MetricsSummary:
    num_requests: int
    num_finished: int
    num_rejected: int
    duration_s: float                   # first arrival to last finish
    ttft: Latency
    itl: Latency
    tpot: Latency
    e2e: Latency
    queue: Latency                      # arrival to first scheduled
    request_throughput_per_s: float
    input_tokens_per_s: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    prefix_cache_hit_rate: float        # prompt tokens served from cache / prompt tokens
    num_preemptions: int
    mean_batch_size: float              # sequences per step, averaged over time
    mean_kv_usage: float                # fraction of KV blocks in use, averaged over time
    peak_kv_usage: float
    peak_concurrent_requests: int = 0   # most requests in flight at once, send to last token (vllm bench serve's)
    lora_holdbacks: int = 0             # steps requests waited for a LoRA adapter slot, all requests
    lora_held_requests: int = 0         # requests held back at least once
    slo: SLO | None = None
    slo_share: float | None = None      # share of all requests meeting every per-request target (TTFT, TPOT, E2E)
    slo_met: bool | None = None         # slo_share (and itl_share) >= slo.required_share
    slo_percentiles_met: bool | None = None   # each metric's SLO percentile within its target
    slo_met_requests_per_s: float | None = None   # requests meeting every per-request target, per second
    itl_share: float | None = None      # share of token gaps within slo.itl_ms (None without that target)
    # the rejected requests by why, without each request's own figures (scheduler.reason_kind), most first
    rejections: tuple[tuple[str, int], ...] = ()


def weighted_percentiles(values: np.ndarray, weights: np.ndarray, qs: tuple[float, ...]) -> list[float]:
    """Smallest value whose cumulative weight reaches q% of the total (inverted CDF).

    Values of zero weight stay in place (no filtered copies of the arrays): adding 0.0 leaves the
    running sum as it was, so the first value reaching a positive target has a positive weight,
    the one the filtered arrays give."""
    pairs = np.empty(len(values), np.complex128)
    pairs.real, pairs.imag = values, weights
    return _select(pairs, qs)


def _select(pairs: np.ndarray, qs: tuple[float, ...], linear: bool = False) -> list[float]:
    """`weighted_percentiles` over (value, weight) pairs held as complex numbers (value the real part,
    weight the imaginary one), sorted and summed in place: numpy sorts complex numbers by real part,
    then imaginary, so the pairs sort by value carrying their weights, with no permutation array.
    Pairs of equal value may order differently than a stable argsort of the values, but each run of
    equal values ends at the same cumulative weight, and the first value reaching a target lies in the
    same run. Weights are whole numbers, so their running sums are exact in any order.

    `linear`: numpy's linear percentiles (np.percentile's default) of the sample the pairs stand for, each value
    repeated its weight's times: at rank h = (N - 1) q / 100 of the N values, between the values at floor(h) and
    ceil(h) (zero weights hold no value)."""
    weights = pairs.imag
    if not (weights > 0).any():
        return [math.nan] * len(qs)
    pairs.sort()
    np.cumsum(weights, out=weights)
    total, last = float(weights[-1]), len(pairs) - 1
    if not linear:
        return [float(pairs[min(bisect_left(weights, q / 100.0 * total), last)].real) for q in qs]

    def at(k: int) -> float:                # the k-th value (0-based): the first pair whose running count passes k
        return float(pairs[min(int(np.searchsorted(weights, k, side="right")), last)].real)
    out = []
    for q in qs:
        h = (total - 1) * q / 100.0
        lo, hi = at(math.floor(h)), at(math.ceil(h))
        out.append(lo + (h - math.floor(h)) * (hi - lo))
    return out


def _latency(values_ms: np.ndarray, weights: np.ndarray | None = None) -> Latency:
    v = values_ms[~np.isnan(values_ms)] if weights is None else values_ms
    w = np.ones(len(v)) if weights is None else weights
    p50, p95, p99 = weighted_percentiles(v, w, (50.0, 95.0, 99.0))
    mean = float(np.sum(v * w) / np.sum(w)) if np.sum(w) > 0 else math.nan
    return Latency(p50, p95, p99, mean)


def _messages_apart(gaps_s: np.ndarray, first: np.ndarray, itl_seqs: np.ndarray, interval: int) -> np.ndarray:
    """The gap between a sequence's messages when the server streams `interval` tokens in each: at each step, the
    client-visible time of the `interval` steps ending there, from the steps' own client gaps `gaps_s` in time order
    per replica (`first`: a replica's first step; `itl_seqs`: the steps' sequences with a token before). A stretch
    restarts at a replica's first step and after a step no running sequence was in (`itl_seqs` 0: the engine was
    idle or every sequence new, so no window reaches back past it); within a stretch's first `interval` steps the
    steps so far are scaled to `interval` of them (a sequence sends its first message after the first token
    `interval` steps on). Exact for a sequence running in every step of the window, as a decoding sequence does
    under continuous batching; a request's last message (its remainder, at most `interval` tokens) is counted as a
    whole one."""
    starts = np.flatnonzero(first | np.r_[True, itl_seqs[:-1] == 0])
    total = np.concatenate(([0.0], np.cumsum(gaps_s)))
    index = np.arange(len(gaps_s))
    group = np.searchsorted(starts, index, side="right") - 1
    begin = np.maximum(index + 1 - interval, starts[group])
    return (total[index + 1] - total[begin]) * (interval / (index + 1 - begin))


def _itl(result: SimulationResult, engine_side: bool = False,
         within_ms: float | None = None, linear: bool = False) -> tuple[Latency, float | None]:
    """The ITL percentiles and, given a target, the share of token gaps within it (by weight); `linear`: numpy's
    linear percentiles of the gaps (vllm bench serve's), else the smallest gap reaching the share."""
    tl = result.timeline
    gaps = result.itl_gaps_s
    # values and weights in one buffer each (a few steps' worth of memory, not a dozen): the steps' gaps,
    # then the longer gaps on their own
    n = len(tl)
    pairs = np.empty(n + len(gaps), np.complex128)      # (value, weight): one buffer, sorted in place (_select)
    values, weights = pairs.real, pairs.imag
    step_s = values[:n]
    interval = 1 if engine_side else result.engine_loop.stream_interval
    if engine_side or n == 0:
        step_s[:] = tl.step_s
    elif result.num_replicas == 1:
        # the gap before each step's tokens as the client sees them (one replica: its steps are in time order already)
        tl.client_gaps(step_s)
        if interval > 1:
            step_s[:] = _messages_apart(step_s, np.zeros(n, bool), tl.itl_seqs, interval)
    else:
        order = np.lexsort((tl.end_s, tl.replica))
        client, replica, step = tl.client_s[order], tl.replica[order], tl.step_s[order]
        first = np.r_[True, np.diff(replica) != 0]
        ordered = np.where(first, step, np.diff(client, prepend=client[0]))
        step_s[order] = ordered if interval == 1 else _messages_apart(ordered, first, tl.itl_seqs[order], interval)
        del client, replica, step, order, first, ordered
    values[n:] = gaps
    weights[:n] = tl.itl_seqs
    if interval == 1 and not engine_side:
        # a step handled in the same pass as the one before it merged into that message: no gap of its own
        np.copyto(weights[:n], 0.0, where=~(step_s > 0))
    values *= 1000.0
    # the server streams a sequence's tokens `interval` at a time (the first alone): a step's sequences send
    # 1 / interval of a message each on average, so each longer gap (a message of its own) weighs `interval` steps'
    weights[n:] = float(interval)
    # the mean first, in the values' own order (its summation order, as before); the weights are whole
    # numbers, so their sum is exact in any order
    total = np.sum(weights)
    mean = (float(pairwise_sum(0, len(pairs), lambda a, b: values[a:b] * weights[a:b]) / total) if total > 0
            else math.nan)         # np.sum of the products, a chunk of them at a time
    share = None
    if within_ms is not None:
        share = float(np.sum(weights, where=values <= within_ms) / total) if total > 0 else 1.0
    p50, p95, p99 = _select(pairs, (50.0, 95.0, 99.0), linear)
    return Latency(p50, p95, p99, mean), share


def itl_as_numpy(result: SimulationResult) -> Latency:
    """The client's ITL over every gap pooled, its percentiles numpy's linear ones (as vllm bench serve's
    calculate_metrics takes them: np.percentile and np.median of the pooled gaps)."""
    return _itl(result, linear=True)[0]


def peak_concurrency(start_s: np.ndarray, end_s: np.ndarray) -> int:
    """Most intervals [start, end) open at once, times to the nanosecond (a closed-loop client's next
    send and its last answer meet at one instant, computed two ways): a sweep over the sorted ends,
    an end before a start at the same instant, as vllm bench serve counts max_concurrent_requests."""
    if len(start_s) == 0:
        return 0
    start, end = np.round(start_s, 9), np.round(end_s, 9)
    times = np.concatenate([start, end])
    delta = np.concatenate([np.ones(len(start), np.int64), -np.ones(len(end), np.int64)])
    order = np.lexsort((delta, times))
    return int(np.cumsum(delta[order]).max())


def slo_attainment(result: SimulationResult, slo: SLO, engine_side: bool = False) -> np.ndarray:
    """Per request: did it meet every target? Rejected requests did not."""
    c, pre = result.columns, "engine_" if engine_side else ""
    ok = ~c["rejected"]
    with np.errstate(invalid="ignore"):
        if slo.ttft_ms is not None:
            ok &= c[pre + "ttft_ms"] <= slo.ttft_ms
        if slo.tpot_ms is not None:
            ok &= np.isnan(c[pre + "tpot_ms"]) | (c[pre + "tpot_ms"] <= slo.tpot_ms)
        if slo.e2e_ms is not None:
            ok &= c[pre + "e2e_ms"] <= slo.e2e_ms
    return ok


def summarise(result: SimulationResult, slo: SLO | None = None, engine_side: bool = False,
              itl: bool = True, start_s: float | None = None) -> MetricsSummary:
    """The run's metrics as a client measures them, or as the engine's own metrics report them.

    `itl=False` leaves the ITL out (NaN) for a caller that does not read it (a gateway's pool figures):
    its buffers, 24 bytes an engine step, are the largest the metrics take. `start_s`: when the run's span starts
    (a benchmark's own start, before its first send); None: at the first send."""
    c, tl, pre = result.columns, result.timeline, "engine_" if engine_side else ""
    done = ~c["rejected"]
    n, n_done = len(done), int(done.sum())
    # the run spans the first send (or `start_s`) to the last token as seen (by the client, or by the engine)
    finish_s = c["finished_s"] if engine_side else c["arrival_s"] + c["e2e_ms"] / 1000.0
    duration = 0.0
    if n_done:
        duration = float(finish_s[done].max() - (c["arrival_s"].min() if start_s is None else start_s))
    per_s = (lambda x: x / duration) if duration > 0 else (lambda x: 0.0)
    tokens_in = float(c["prompt_tokens"][done].sum())
    tokens_out = float(c["output_tokens"][done].sum())
    busy = float(tl.step_s.sum())
    ttft = _latency(c[pre + "ttft_ms"])
    within = slo.itl_ms if slo is not None else None
    itl, itl_share = (_itl(result, engine_side, within) if itl
                      else (Latency(math.nan, math.nan, math.nan, math.nan), None))
    e2e, tpot, queue = _latency(c[pre + "e2e_ms"]), _latency(c[pre + "tpot_ms"]), _latency(c["queue_ms"])
    out = dict(
        num_requests=n, num_finished=n_done, num_rejected=n - n_done, duration_s=duration,
        ttft=ttft, itl=itl, tpot=tpot, e2e=e2e, queue=queue,
        request_throughput_per_s=per_s(n_done), input_tokens_per_s=per_s(tokens_in),
        output_tokens_per_s=per_s(tokens_out), total_tokens_per_s=per_s(tokens_in + tokens_out),
        prefix_cache_hit_rate=float(c["cached_prompt_tokens"][done].sum() / tokens_in) if tokens_in else 0.0,
        num_preemptions=result.num_preemptions,
        mean_batch_size=tl.time_weighted_sum("num_seqs") / busy if busy else 0.0,
        mean_kv_usage=tl.time_weighted_sum("kv_usage") / busy if busy else 0.0,
        peak_kv_usage=tl.peak_kv_usage,
        peak_concurrent_requests=peak_concurrency(c["arrival_s"][done], finish_s[done]),
        lora_holdbacks=int(c["lora_holdbacks"].sum()), lora_held_requests=int((c["lora_holdbacks"] > 0).sum()),
        rejections=tuple(Counter(reason_kind(why) for why in result.reject_reasons.values()).most_common()),
    )
    if slo is not None and slo.has_targets:
        met = slo_attainment(result, slo, engine_side)
        share = float(met.mean()) if n else 0.0
        checks = [(slo.ttft_ms, ttft), (slo.tpot_ms, tpot), (slo.e2e_ms, e2e), (slo.itl_ms, itl)]
        pct = all(_at(lat, slo.percentile, target) for target, lat in checks if target is not None)
        itl_met = itl_share is None or itl_share >= slo.required_share
        out.update(slo=slo, slo_share=share, slo_met=share >= slo.required_share and itl_met,
                   slo_percentiles_met=pct, slo_met_requests_per_s=per_s(float(met.sum())), itl_share=itl_share)
    return MetricsSummary(**out)


def _at(lat: Latency, percentile: float, target_ms: float) -> bool:
    if float(percentile) in (50.0, 95.0, 99.0):
        return lat.at(percentile) <= target_ms
    raise ValueError("SLO percentile must be 50, 95 or 99")
