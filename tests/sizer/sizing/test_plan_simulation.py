"""`sizer plan --simulate`: goodput per replica, replicas for the rate, latency at the rate."""

import math

import pytest

from sizer.sizing.plan import make_plan
from sizer.sizing.pipeline import GOODPUT_REQUESTS, GOODPUT_TOLERANCE, add_simulation
from sizer.sizing.resolve import resolve
from sizer.inputs.scenario import load_scenario
from sizer.sizing.search import slo_of
from sizer.sizing.simulate import simulate_replica


@pytest.fixture(scope="module")
def goodput_plan():
    # the seed's goodput example: TTFT < 1 s and ITL < 50 ms for 95% of requests, at 4x its rate
    r = resolve(load_scenario("scenarios/seed-goodput.yaml", {"workload.arrival.rate_per_s": 60,
                                                             "workload.num_requests": 800}))
    return r, add_simulation(make_plan(r), r)


def test_goodput_is_the_knee_of_slo_attainment(goodput_plan):
    from simulator.metrics import slo_attainment
    r, plan = goodput_plan
    rate = plan.simulation["goodput_per_replica_per_s"]
    assert rate > 0
    slo = slo_of(r.scenario)
    share_at = slo_attainment(simulate_replica(r, rate, GOODPUT_REQUESTS), slo).mean()
    share_above = slo_attainment(simulate_replica(r, rate * (1 + GOODPUT_TOLERANCE) ** 2, GOODPUT_REQUESTS), slo).mean()
    assert share_at >= 0.95
    assert share_above < 0.95


def test_replicas_cover_the_rate_and_cost_follows(goodput_plan):
    r, plan = goodput_plan
    sim = plan.simulation
    # replicas = ceil(60 req/s / goodput per replica)
    assert sim["replicas"] == math.ceil(60 / sim["goodput_per_replica_per_s"])
    assert plan.cost.replicas == sim["replicas"] and plan.cost.gpus == sim["replicas"]
    assert plan.cost.usd_per_hour == pytest.approx(sim["replicas"] * r.price_usd_per_gpu_hour)
    # $/M output tokens = $/h / (output tokens/s x 3600) x 1e6
    out_per_s = sim["at_scenario_rate"]["output_tokens_per_s"]
    assert plan.cost.usd_per_million_output_tokens == pytest.approx(plan.cost.usd_per_hour / (out_per_s * 3600) * 1e6)
    # on that many replicas, the scenario's rate meets the SLO share
    assert sim["at_scenario_rate"]["slo_share"] >= 0.95
    assert "SLO met" in plan.verdict


def test_fixed_replicas_that_are_too_few_miss_the_slo():
    r = resolve(load_scenario("scenarios/seed-goodput.yaml", {"workload.arrival.rate_per_s": 60,
                                                             "workload.num_requests": 800, "deployment.replicas": 1}))
    plan = add_simulation(make_plan(r), r)
    assert plan.simulation["replicas"] == 1
    assert plan.simulation["at_scenario_rate"]["slo_share"] < 0.95
    assert "SLO missed" in plan.verdict
