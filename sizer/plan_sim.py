"""The plan's simulated section: goodput per replica, replicas for the target rate, and the
latency users see at the scenario's rate on that many replicas.

    goodput per replica  = highest rate at which `slo.required_share` of requests meet every target
    replicas             = ceil(scenario rate / goodput per replica)   (unless the scenario fixes it)
"""

from __future__ import annotations

import dataclasses
import math

from sizer.errors import InputError
from sizer.plan import Plan, cost_summary
from sizer.resolve import Resolved

GOODPUT_REQUESTS = 600          # requests per simulation inside the goodput search


def slo_of(r: Resolved):
    from simulator.metrics import SLO

    s = r.scenario.slo
    return SLO(s.ttft_ms, s.itl_ms, s.e2e_ms, required_share=s.required_share)


def _summary_dict(m) -> dict:
    out = dataclasses.asdict(m)
    out.pop("slo", None)
    return out


def goodput_per_replica(r: Resolved, plan: Plan, num_requests: int = GOODPUT_REQUESTS):
    """Search rates on one replica; the upper end is what decoding at the memory-limited batch sustains."""
    from simulator.metrics import goodput_rate
    from sizer.simulate import simulate_replica

    slo = slo_of(r)
    if not slo.has_targets:
        return None
    times = plan.step_times
    max_rate = 1.5 * times.decode_memory_limited_tokens_per_s / max(1.0, times.output_tokens_mean)
    return goodput_rate(lambda rate: simulate_replica(r, rate, num_requests), slo, max_rate)


def add_simulation(plan: Plan, r: Resolved, num_requests: int | None = None) -> Plan:
    """A copy of `plan` with the simulated section filled in and replicas and cost refined."""
    from simulator.metrics import summarise
    from sizer.simulate import simulate_scenario

    s = r.scenario
    rate = plan.capacity.arrival_rate_per_s
    search = goodput_per_replica(r, plan)
    notes = []
    if s.deployment.replicas:
        replicas, source = s.deployment.replicas, "scenario"
    elif search is not None and search.rate_per_s > 0:
        replicas = max(1, math.ceil(rate / search.rate_per_s))
        source = f"goodput {search.rate_per_s:.2f} req/s per replica at the SLO (simulated)"
    elif search is not None:
        raise InputError(s.file, "slo", "no request rate meets the SLO on one replica of this deployment "
                         f"(share at the lowest rate tried: {search.share_at_rate:.1%})")
    else:
        replicas, source = plan.cost.replicas, plan.cost.replicas_source
    result = simulate_scenario(r, num_requests, replicas)
    at_rate = summarise(result, slo_of(r))
    if search is not None:
        notes.append(f"goodput: {search.rate_per_s:.2f} req/s per replica meet every target for "
                     f"{s.slo.required_share:.0%} of requests ({len(search.points)} simulations of {GOODPUT_REQUESTS} requests)")
    notes.append(f"prefix-cache hit rate {at_rate.prefix_cache_hit_rate:.1%}, preemptions {at_rate.num_preemptions}, "
                 f"mean batch {at_rate.mean_batch_size:.1f}, mean KV use {at_rate.mean_kv_usage:.1%} (peak {at_rate.peak_kv_usage:.1%})")
    notes.append(f"step times: {plan.step_times.model}")
    simulation = {
        "requests": at_rate.num_requests,
        "replicas": replicas,
        "at_scenario_rate": _summary_dict(at_rate),
        "goodput_per_replica_per_s": search.rate_per_s if search else None,
        "goodput_search_points": [list(p) for p in search.points] if search else [],
        "notes": notes,
    }
    cost = cost_summary(r, replicas, source, at_rate.output_tokens_per_s, "simulated output tokens/s at the scenario's rate")
    verdict = plan.verdict
    if plan.fits and at_rate.slo_met is not None:
        verdict += "; SLO met" if at_rate.slo_met else f"; SLO missed ({at_rate.slo_share:.1%} of requests meet it)"
    return dataclasses.replace(plan, simulation=simulation, cost=cost, verdict=verdict)
