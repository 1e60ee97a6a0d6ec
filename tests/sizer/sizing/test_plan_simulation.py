"""`sizer plan --simulate`: goodput per replica, replicas for the rate, latency at the rate, cost."""

import dataclasses

import pytest

from simulator.metrics import summarise
from sizer.inputs.scenario import load_scenario
from sizer.inputs.variant import Variant
from sizer.sizing.goodput import probe_slo, slo_of
from sizer.sizing.pipeline import add_simulation
from sizer.sizing.plan import make_plan
from sizer.sizing.resolve import resolve
from sizer.sizing.result import GoodputSettings, SizingStatus
from sizer.sizing.simulate import simulate_replica

SETTINGS = GoodputSettings()
FASTER = Variant(rate_per_s=60, num_requests=800)


@pytest.fixture(scope="module")
def goodput_plan():
    # the seed's goodput example: TTFT < 1 s and ITL < 50 ms for 95% of requests, at 15x its rate
    r = resolve(load_scenario("scenarios/seed-goodput.yaml", FASTER))
    return r, add_simulation(make_plan(r), r)


def test_goodput_is_the_knee_of_slo_attainment(goodput_plan):
    r, plan = goodput_plan
    rate = plan.simulation.goodput_per_replica_per_s
    assert rate > 0
    slo = slo_of(r)
    # the bisection accepted `rate` and rejected a rate within 1 + tolerance above it (same request count); the
    # SLO is met when 95% of requests meet TTFT and 95% of the token gaps are within the ITL target
    at = summarise(simulate_replica(r, rate, SETTINGS.num_requests), slo)
    above = summarise(simulate_replica(r, rate * (1 + SETTINGS.rate_tolerance) ** 2, SETTINGS.num_requests), slo)
    assert at.slo_met and at.slo_share >= 0.95 and at.itl_share >= 0.95
    assert not above.slo_met and min(above.slo_share, above.itl_share) < 0.95


def test_replicas_are_the_fewest_that_meet_the_slo_and_cost_follows(goodput_plan):
    r, plan = goodput_plan
    sim = plan.simulation
    assert sim.status is SizingStatus.MET and sim.slo_met and "SLO met" in plan.verdict
    n = sim.replicas
    # the operating point: one replica at 60 / n req/s with the scenario's 800 requests, meeting the 95% share
    assert sim.operating_point.rate_per_s == pytest.approx(60 / n)
    assert sim.operating_point.metrics.num_requests == 800 and sim.operating_point.met
    # one replica fewer misses it (the pipeline searched down from ceil(60 / goodput)): the requests' share or the
    # token gaps' share within the ITL target below 95%
    fewer = probe_slo(r, 60 / (n - 1), 800)
    assert n > 1 and not fewer.met and min(fewer.share_met, fewer.metrics.itl_share) < 0.95
    assert sim.replicas_for_slo == n
    # cost = replicas x 1 GPU x the H100's price; the plan's cost section is the sizing's
    assert plan.cost is sim.cost and plan.cost.gpus == n
    assert plan.cost.usd_per_hour == pytest.approx(n * r.price_usd_per_gpu_hour) == sim.usd_per_hour_for_slo
    # $/M output tokens = $/h / (60 req/s x mean output x 3600) x 1e6; the seed's lognormal output has mean 200 tokens
    # before clipping to [4, 1500], which the plan's mean (the basis) reports
    out_per_s = 60 * plan.step_times.output_tokens_mean
    assert 190 * 60 < out_per_s < 210 * 60
    assert plan.cost.usd_per_million_output_tokens == pytest.approx(plan.cost.usd_per_hour / (out_per_s * 3600) * 1e6)


def test_stated_replicas_that_are_too_few_miss_the_slo_and_say_how_many_meet_it(goodput_plan):
    r = resolve(load_scenario("scenarios/seed-goodput.yaml", dataclasses.replace(FASTER, replicas=1)))
    plan = add_simulation(make_plan(r), r)
    sim = plan.simulation
    assert (sim.status, sim.replicas, sim.slo_met) == (SizingStatus.MISSED, 1, False)
    assert sim.operating_point.share_met < 0.95 and "SLO missed" in plan.verdict
    # the count that meets it is the one the scenario gets without stated replicas (the fixture's plan)
    auto = goodput_plan[1].simulation
    assert sim.replicas_for_slo == auto.replicas > 1
    assert f"{auto.replicas} replicas meet it" in sim.verdict
    assert sim.cost.replicas == 1 and sim.usd_per_hour_for_slo == pytest.approx(auto.cost.usd_per_hour)
