"""Goodput of one replica: the highest request rate at which the SLO's required share of requests
meets every target (DistServe's goodput), found by bisecting over short simulations.

    probe(rate)  one replica at `rate`, `GoodputSettings.num_requests` requests, scored per request
    goodput      the highest probed rate that meets the share (the bracket above it is within 1 + tolerance)
    replicas     ceil(target rate / goodput)

One replica at rate / replicas stands for a deployment of `replicas`: Poisson traffic split at
random over replicas stays Poisson.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from simulator import SLO, slo_attainment, summarise
from simulator.config import DisaggregationConfig
from sizer.analytic.energy import ridge_tokens
from sizer.inputs.scenario import Scenario
from sizer.sizing.resolve import Resolved
from sizer.sizing.result import GoodputSettings, PoolLoad, SLOProbe
from sizer.sizing.simulate import simulate_replica


@dataclass(frozen=True)
class Goodput:
    rate_per_s: float         # the highest probed rate that meets the SLO share; 0 when none does
    ceiling_per_s: float      # the lowest probed rate that misses it (the bound, when the bound meets it)
    binding: str              # the target that binds at the ceiling; "none" when the bound meets the SLO


# Besides the share of requests meeting every target, each target is also read at this latency
# percentile (MetricsSummary.slo_percentiles_met): p99, as serving benchmarks report tail latency.
SLO_PERCENTILE = 99.0


def slo_of(scenario: Scenario | Resolved) -> SLO:
    """The SLO of a scenario, or of the deployment description built from it."""
    s = scenario.slo
    return SLO(ttft_ms=s.ttft_ms, tpot_ms=s.tpot_ms, e2e_ms=s.e2e_ms, itl_ms=s.itl_ms, percentile=SLO_PERCENTILE,
               required_share=s.required_share)


def score(result, slo: SLO, rate_per_s: float) -> SLOProbe:
    """Metrics and the share meeting each target alone (simulator.metrics semantics; ITL: the share of token
    gaps within its target)."""
    alone = {"percentile": slo.percentile, "required_share": slo.required_share}
    shares = {name: float(slo_attainment(result, SLO(**{key: target}, **alone)).mean())
              for name, key, target in (("TTFT", "ttft_ms", slo.ttft_ms), ("TPOT", "tpot_ms", slo.tpot_ms),
                                        ("E2E", "e2e_ms", slo.e2e_ms)) if target is not None}
    metrics = summarise(result, slo)
    if metrics.itl_share is not None:
        shares["ITL"] = metrics.itl_share
    return SLOProbe(rate_per_s, metrics, shares)


def simulate_at(resolved: Resolved, rate_per_s: float, num_requests: int | None,
                progress: Callable[[int], None] | None = None):
    """One replica of `resolved` at `rate_per_s`, `num_requests` requests (None: the scenario's own, a trace's
    replayed ones; the scenario's seed; `progress`: told the requests done so far)."""
    return simulate_replica(resolved, rate_per_s, num_requests, progress)


def probe_slo(resolved: Resolved, rate_per_s: float, num_requests: int | None,
              progress: Callable[[int], None] | None = None) -> SLOProbe:
    """One replica at `rate_per_s` scored against the scenario's SLO, with how busy it was (`SLOProbe.load`);
    `progress`: `simulate_at`'s."""
    result = simulate_at(resolved, rate_per_s, num_requests, progress)
    probe = score(result, slo_of(resolved), rate_per_s)
    return dataclasses.replace(probe, load=pool_loads(result, ridge_tokens(resolved.hardware), probe.metrics.duration_s,
                                                      resolved.disaggregation))


def pool_loads(result, ridge: float, span_s: float, d: DisaggregationConfig | None) -> tuple[PoolLoad, ...]:
    """Per pool of one simulated replica (its one pool; disaggregated, its prefill pool, the simulator's engine
    replicas 0 to P - 1, and its decode pool after them): the pool's step time over its engine replicas x the run's
    span `span_s` (first send to the last token of a finished request: `MetricsSummary.duration_s`), and the share
    of that step time in steps of more new tokens than `ridge` (compute-bound)."""
    tl = result.timeline
    if d is None:
        return (_pool_load("replica", 1, tl.step_s, tl.new_tokens, ridge, span_s),)
    step_s, new_tokens = tl.step_s, tl.new_tokens
    prefill = tl.replica < d.num_prefill_replicas
    return (_pool_load("prefill", d.num_prefill_replicas, step_s[prefill], new_tokens[prefill], ridge, span_s),
            _pool_load("decode", d.num_decode_replicas, step_s[~prefill], new_tokens[~prefill], ridge, span_s))


def _pool_load(pool: str, engine_replicas: int, step_s, new_tokens, ridge: float, span_s: float) -> PoolLoad:
    busy = float(step_s.sum())
    bound = float(step_s[new_tokens > ridge].sum())
    return PoolLoad(pool, engine_replicas, min(1.0, busy / (engine_replicas * span_s)) if span_s > 0 else 0.0,
                    bound / busy if busy > 0 else 0.0)


def rate_bound_per_s(plan, cached_share: float = 0.0) -> float:
    """An optimistic rate one replica can sustain: 1.5 / (mean prefill of the share of the prompt not cached +
    mean output / (decode tokens/s at the largest batch the KV cache holds x E)). 1.5: chunked prefill overlaps
    prefill with decodes in a step. E: the tokens a speculative verification yields on average
    (`SpeculativeSummary.expected_tokens_per_step`; 1 without speculation), each verification taken as cheap as a
    one-token decode step and drafting as free, so the bound stays above the rate. The goodput bisection starts
    from it with nothing cached (its lowest rate tried is a share of it, so an optimistic start could skip the
    goodput); a sweep prunes by it with `cached_prefill_share`."""
    st = plan.step_times
    prefill_s = (1.0 - cached_share) * st.prefill_ms / 1e3
    per_step = plan.speculative.expected_tokens_per_step if plan.speculative else 1.0
    return 1.5 / (prefill_s + st.output_tokens_mean / (st.decode_memory_limited_tokens_per_s * per_step))


def cached_prefill_share(r: Resolved, plan) -> float:
    """The share of a mean prompt a shared prefix may serve from the prefix cache, at most: its share of requests x
    its share of the prompt, where the prefix cache is on and every prefix fits the KV cache at once (the prefill is
    near linear in its tokens, less where the new tokens attend to the cached ones, so the bound stays above the
    rate); 0 otherwise (a trace's reuse is not known before it is replayed)."""
    w, st = r.workload, plan.step_times
    sp = w.shared_prefix
    if not r.engine.enable_prefix_caching or sp is None or st.prompt_tokens_mean <= 0:
        return 0.0
    if sp.num_prefixes * sp.num_tenants * sp.tokens > plan.capacity.kv_capacity_tokens:
        return 0.0
    return sp.share * min(1.0, sp.tokens / st.prompt_tokens_mean)


def goodput_rate(resolved: Resolved, upper_per_s: float, settings: GoodputSettings,
                 floor_per_s: float = 0.0, simulated: Callable[[], None] | None = None) -> Goodput:
    """Highest rate per replica with the SLO share met, the lowest that misses, and the target that binds there.

    Bisects in log space from the top: [upper / 4, upper] first, extended down by factors of 4
    while its low end misses, to upper x low_rate_fraction (and not below `floor_per_s`); then
    halves the bracket's log-ratio until it is within 1 + rate_tolerance. Low rates are the
    slow ones to simulate (steps grow as 1 / rate), so they are tried only when needed.
    A floor inside the bracket that meets the SLO is not simulated below: the bracket stays the one a run without
    the floor bisects, its midpoints at or below the floor taken as meeting (a lower rate meets where a higher one
    does), so the floor never changes a goodput found.
    Goodput(upper, upper, "none") when the bound itself meets the SLO; rate 0 when even the lowest
    rate tried misses. `simulated` (a progress display's) is called after each simulation.
    """
    slo = slo_of(resolved)

    def meets(rate: float) -> tuple[bool, SLOProbe]:
        p = score(simulate_at(resolved, rate, settings.num_requests), slo, rate)
        if simulated:
            simulated()
        return bool(p.met), p             # the share of requests, and of token gaps with an ITL target

    ok, failing = meets(upper_per_s)
    if ok:
        return Goodput(upper_per_s, upper_per_s, "none")      # met at the bound: the goodput is at least this
    hi, lowest = upper_per_s, upper_per_s * settings.low_rate_fraction * (1 - 1e-9)
    met_below = 0.0                                # rates at or below this meet, unsimulated
    while True:
        lo = hi / 4
        if lo < max(lowest, floor_per_s):
            if not lowest <= floor_per_s < hi:
                return Goodput(0.0, hi, failing.binding)
            ok, p = meets(floor_per_s)             # the floor lies in the bracket: the last rate worth trying
            if not ok:
                return Goodput(0.0, floor_per_s, p.binding)
            met_below, lo = floor_per_s, lo if lo >= lowest else floor_per_s
            break
        ok, p = meets(lo)
        if ok:
            break
        hi, failing = lo, p
    while hi / lo > 1 + settings.rate_tolerance:
        mid = math.sqrt(lo * hi)
        if mid <= met_below:
            lo = mid
            continue
        ok, p = meets(mid)
        if ok:
            lo = mid
        else:
            hi, failing = mid, p
    return Goodput(lo, hi, failing.binding)


def replicas_for(target_per_s: float, goodput_per_s: float) -> int:
    """Replicas a target rate needs at a goodput per replica: ceil(target / goodput), at least 1
    (the epsilon keeps an exact multiple from rounding up through float error)."""
    return max(1, math.ceil(target_per_s / goodput_per_s - 1e-9))
