"""The plan's simulated section: goodput per replica, replicas for the target rate, and the
latency users see at the scenario's rate on that many replicas.

    goodput per replica  = highest rate at which `slo.required_share` of requests meet every target
    replicas             = ceil(scenario rate / goodput per replica)   (unless the scenario fixes it)
"""

from __future__ import annotations

import dataclasses

from sizer.errors import InputError
from sizer.sizing.plan import Plan, cost_summary
from sizer.sizing.resolve import Resolved

GOODPUT_REQUESTS = 600          # requests per simulation inside the goodput search
GOODPUT_TOLERANCE = 0.05        # the search stops when its bracket is within 5%


def _summary_dict(m) -> dict:
    out = dataclasses.asdict(m)
    out.pop("slo", None)
    return out


def goodput_per_replica(r: Resolved, plan: Plan) -> tuple[float, str] | None:
    """(requests/s one replica serves within the SLO share, the target that binds above it); None without targets."""
    from sizer.sizing.search import SearchSettings, goodput_rate, rate_bound_per_s, slo_of

    if not slo_of(r.scenario).has_targets:
        return None
    settings = SearchSettings(num_requests=GOODPUT_REQUESTS, rate_tolerance=GOODPUT_TOLERANCE)
    return goodput_rate(r, rate_bound_per_s(plan), settings)


def add_simulation(plan: Plan, r: Resolved, num_requests: int | None = None) -> Plan:
    """A copy of `plan` with the simulated section filled in and replicas and cost refined."""
    from simulator.metrics import summarise
    from sizer.sizing.search import replicas_for, slo_of
    from sizer.sizing.simulate import simulate_scenario

    s = r.scenario
    rate = plan.capacity.arrival_rate_per_s
    goodput = goodput_per_replica(r, plan)
    notes = []
    if s.deployment.replicas:
        replicas, source = s.deployment.replicas, "scenario"
    elif goodput is not None and goodput[0] > 0:
        replicas = replicas_for(rate, goodput[0])
        source = f"goodput {goodput[0]:.2f} req/s per replica at the SLO (simulated)"
    elif goodput is not None:
        raise InputError(s.file, "slo", f"no request rate meets the SLO on one replica of this deployment ({goodput[1]} binds)")
    else:
        replicas, source = plan.cost.replicas, plan.cost.replicas_source
    result = simulate_scenario(r, num_requests, replicas)
    at_rate = summarise(result, slo_of(s))
    if goodput is not None:
        notes.append(f"goodput: {goodput[0]:.2f} req/s per replica meet every target for {s.slo.required_share:.0%} of "
                     f"requests (simulations of {GOODPUT_REQUESTS} requests, to {GOODPUT_TOLERANCE:.0%}); above it {goodput[1]} binds")
    notes.append(f"prefix-cache hit rate {at_rate.prefix_cache_hit_rate:.1%}, preemptions {at_rate.num_preemptions}, "
                 f"mean batch {at_rate.mean_batch_size:.1f}, mean KV use {at_rate.mean_kv_usage:.1%} (peak {at_rate.peak_kv_usage:.1%})")
    notes.append(f"step times: {plan.step_times.model}")
    simulation = {
        "requests": at_rate.num_requests,
        "replicas": replicas,
        "at_scenario_rate": _summary_dict(at_rate),
        "goodput_per_replica_per_s": goodput[0] if goodput else None,
        "goodput_binding_target": goodput[1] if goodput else None,
        "notes": notes,
    }
    cost = cost_summary(r, replicas, source, at_rate.output_tokens_per_s, "simulated output tokens/s at the scenario's rate")
    verdict = plan.verdict
    if plan.fits and at_rate.slo_met is not None:
        verdict += "; SLO met" if at_rate.slo_met else f"; SLO missed ({at_rate.slo_share:.1%} of requests meet it)"
    return dataclasses.replace(plan, simulation=simulation, cost=cost, verdict=verdict)
