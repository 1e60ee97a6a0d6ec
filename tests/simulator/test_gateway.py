"""The gateway: every request ends exactly once, routing by difficulty moves load, outages and
capacity limits produce fallbacks where (and only where) they should, residency keeps data classes in."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

import pytest
from simhelp import LinearStepModel, sim_config

from simulator.gateway import (
    BUDGET,
    FALLBACK,
    GATEWAY_BUDGET,
    OUTAGE,
    OUTSTANDING,
    REJECTED,
    RESIDENCY,
    SERVED,
    ExternalSpec,
    GatewayConfig,
    PoolSpec,
    RequestClass,
    Route,
    simulate_gateway,
)
from simulator.workload import Arrivals, Lengths, SharedPrefix

REPLICA = sim_config().replica
FAST = LinearStepModel()                                     # the small model
SLOW = LinearStepModel(base_s=2e-2, per_token_s=2e-4)        # the large one: 4x the per-token cost
HOSTED = ExternalSpec("hosted", ttft_p50_ms=400.0, ttft_sigma=0.0, tpot_ms=20.0,
                      usd_per_million_input_tokens=1.0, usd_per_million_output_tokens=4.0)


def config(strong_share: float = 0.3, **kw) -> GatewayConfig:
    pools = (PoolSpec("small", REPLICA, 1, FAST, "least_outstanding", 8),
             PoolSpec("large", REPLICA, 1, SLOW, "least_outstanding", 8))
    classes = (RequestClass("chat", 0.7, Lengths("fixed", 200), Lengths("fixed", 20), "public", 2.0, 5.0),
               RequestClass("records", 0.3, Lengths("fixed", 400), Lengths("fixed", 40), "pii"))
    routes = (Route("difficulty", (), weak="small", strong="large", strong_share=strong_share,
                    fallback=("hosted",)),)
    base = GatewayConfig(pools, (HOSTED,), classes, routes, {}, Arrivals("poisson", 20.0), 400, budget_window_s=60.0)
    return replace(base, **kw)


def check_conservation(cfg: GatewayConfig, result) -> None:
    """Every request once: served on its first choice, served after falling back, or rejected with a reason."""
    ids = [r.request_id for r in result.records]
    assert ids == list(range(cfg.num_requests))
    for r in result.records:
        assert (r.outcome == REJECTED) == bool(r.reject_reason)
        assert (r.outcome == FALLBACK) == (bool(r.fallbacks) and not r.reject_reason)
        if r.outcome != REJECTED:
            assert r.target and not math.isnan(r.e2e_ms)
    # each pool's own records hold exactly the requests the gateway sent it
    for name, res in result.pools.items():
        sent = sorted(r.request_id for r in result.records if r.target == name)
        assert res.columns["request_id"].tolist() == sent


def test_every_request_ends_exactly_once():
    cfg = config()
    result = simulate_gateway(cfg, seed=3)
    check_conservation(cfg, result)
    # no limits, no outages: everyone is served on the first choice
    assert Counter(r.outcome for r in result.records) == {SERVED: 400}


def test_strong_share_sends_exactly_that_share_hardest_first():
    cfg = config(strong_share=0.25)
    result = simulate_gateway(cfg, seed=1)
    strong = [r for r in result.records if r.first_choice == "large"]
    # round(0.25 x 400) = 100 requests, and they are the hardest: every one at or above the threshold
    assert len(strong) == 100
    threshold = result.thresholds["difficulty"]
    assert min(r.difficulty for r in strong) == threshold
    assert max(r.difficulty for r in result.records if r.first_choice == "small") < threshold


def test_raising_the_strong_share_moves_load_to_the_large_pool():
    low, high = (simulate_gateway(config(strong_share=s), seed=2) for s in (0.1, 0.6))
    busy = {k: {name: float(res.timeline.step_s.sum()) for name, res in r.pools.items()} for k, r in
            (("low", low), ("high", high))}
    # more requests on the large pool: more of its busy time, less of the small pool's
    assert busy["high"]["large"] > busy["low"]["large"]
    assert busy["high"]["small"] < busy["low"]["small"]


def test_an_outage_window_produces_fallbacks_only_inside_it():
    cfg = config()
    start, end = 5.0, 10.0
    pools = (cfg.pools[0], replace(cfg.pools[1], outages_s=((start, end),)))
    result = simulate_gateway(replace(cfg, pools=pools), seed=4)
    check_conservation(cfg, result)
    fell = [r for r in result.records if r.fallbacks]
    assert fell and all(start <= r.arrival_s < end for r in fell)
    assert all(r.fallbacks == (("large", OUTAGE),) and r.target == "hosted" for r in fell)
    # and every request for the large pool inside the window fell back
    inside = [r for r in result.records if r.first_choice == "large" and start <= r.arrival_s < end]
    assert len(inside) == len(fell)


def test_capacity_limit_falls_back_and_budget_rejects():
    # one outstanding request per replica at most: arrivals at 20/s on a pool busy ~50 ms a request overflow.
    # The hosted endpoint is capped at $0.0001 an hour: a request of 200 + 20 tokens costs
    # (200 x 1 + 20 x 4) / 1e6 = $0.00028, x 3600 / 60 s window = $0.0168/h alone, over the cap.
    cfg = config(strong_share=0.0, externals=(replace(HOSTED, budget_usd_per_hour=1e-4),))
    pools = (replace(cfg.pools[0], max_outstanding_per_replica=1), cfg.pools[1])
    result = simulate_gateway(replace(cfg, pools=pools), seed=5)
    check_conservation(cfg, result)
    rejected = [r for r in result.records if r.outcome == REJECTED]
    assert rejected
    assert all(r.fallbacks == (("small", OUTSTANDING), ("hosted", BUDGET)) for r in rejected)
    assert all(r.reject_reason == BUDGET for r in rejected)


def test_the_gateway_budget_caps_every_endpoints_spend_together_in_every_rolling_hour():
    # Every class goes to the hosted endpoint, then to a second one; the gateway caps both together at $0.50
    # an hour. Unbounded, 1 request/s of 70 % x $0.00028 + 30 % x $0.00056 (test_external_latency_and_price's
    # prices) spends 3600 x $0.000364 = $1.31 an hour, so the cap binds. 4,000 requests span over an hour.
    cap = 0.5
    routes = (Route("all", (), target="hosted", fallback=("hosted-b",)),)
    cfg = config(externals=(HOSTED, replace(HOSTED, name="hosted-b")), routes=routes,
                 arrivals=Arrivals("poisson", 1.0), num_requests=4000, budget_usd_per_hour=cap)
    result = simulate_gateway(cfg, seed=8)
    check_conservation(cfg, result)
    spent = sorted((r.arrival_s, r.cost_usd) for r in result.records if r.cost_usd > 0)
    assert spent[-1][0] - spent[0][0] > 3600.0
    # the spend of every rolling hour (the busiest ends at a charged request) stays within the cap ...
    hours = [sum(u for t, u in spent if end - 3600.0 < t <= end) for end, _ in spent]
    assert max(hours) <= cap
    # ... and reaches near it: each trailing 60 s window fills to within one request ($0.00056) of
    # cap x 60 / 3600, so an hour holds at least ~60 x ($0.00833 - $0.00056) = $0.47; 0.85 x cap leaves room
    assert max(hours) >= 0.85 * cap
    # the overflow skipped both endpoints for the gateway's budget (neither has a cap of its own) and is rejected
    over = [r for r in result.records if r.outcome == REJECTED]
    assert len(over) > 1000
    assert all(r.fallbacks == (("hosted", GATEWAY_BUDGET), ("hosted-b", GATEWAY_BUDGET)) for r in over)
    assert all(r.reject_reason == GATEWAY_BUDGET for r in over)
    # without the gateway's cap the same traffic spends over it in an hour
    free = simulate_gateway(replace(cfg, budget_usd_per_hour=None), seed=8)
    assert sum(r.cost_usd for r in free.records if r.arrival_s < 3600.0) > 2 * cap


def test_residency_keeps_a_data_class_off_the_hosted_endpoint():
    cfg = config(residency={"pii": ("small", "large")})
    pools = (cfg.pools[0], replace(cfg.pools[1], outages_s=((0.0, 1e9),)))    # the large pool never up
    result = simulate_gateway(replace(cfg, pools=pools), seed=6)
    check_conservation(cfg, result)
    pii_strong = [r for r in result.records if r.data_class == "pii" and r.first_choice == "large"]
    public_strong = [r for r in result.records if r.data_class == "public" and r.first_choice == "large"]
    assert pii_strong and public_strong
    assert all(r.outcome == REJECTED and r.fallbacks == (("large", OUTAGE), ("hosted", RESIDENCY))
               for r in pii_strong)
    assert all(r.outcome == FALLBACK and r.target == "hosted" for r in public_strong)
    assert not any(r.target == "hosted" for r in result.records if r.data_class == "pii")


def test_external_latency_and_price():
    cfg = config(strong_share=1.0)
    pools = (cfg.pools[0], replace(cfg.pools[1], outages_s=((0.0, 1e9),)))
    result = simulate_gateway(replace(cfg, pools=pools), seed=7)
    r = next(r for r in result.records if r.class_name == "chat")
    # sigma 0: TTFT is the median, 400 ms; E2E = 400 + (20 - 1) x 20 ms = 780 ms;
    # price (200 x $1 + 20 x $4) / 1e6 = $0.00028
    assert (r.ttft_ms, r.tpot_ms, r.e2e_ms) == pytest.approx((400.0, 20.0, 780.0))
    assert r.cost_usd == pytest.approx(2.8e-4)


def test_replica_failures_take_replicas_out_and_same_seed_same_result():
    cfg = config()
    pools = (cfg.pools[0], replace(cfg.pools[1], failures_per_replica_hour=3600.0, repair_s=0.5))
    a, b = (simulate_gateway(replace(cfg, pools=pools), seed=8) for _ in range(2))
    check_conservation(cfg, a)
    # one failure a second, down half a second each: about a third of the time down (1 / (1 + 0.5) up)
    fell = [r for r in a.records if r.fallbacks]
    assert fell and all(r.fallbacks[0] == ("large", "replicas down") for r in fell)
    # of the 120 requests chosen for the large pool (0.3 x 400), about a third arrive while it is down
    # (binomial sd sqrt(120 x 1/3 x 2/3) / 120 = 0.043: 0.20 to 0.47 is three sd either side)
    chosen = [r for r in a.records if r.first_choice == "large"]
    assert len(chosen) == 120 and 0.20 < len(fell) / len(chosen) < 0.47
    assert [(r.target, r.e2e_ms) for r in a.records] == [(r.target, r.e2e_ms) for r in b.records]


def test_class_prefixes_reach_the_prefix_cache_and_stay_apart():
    # every chat request opens with one of 2 prefixes of 128 tokens; records share none of them
    chat = replace(config().classes[0], shared_prefix=SharedPrefix(1.0, 128, 2))
    cfg = config(strong_share=0.0, classes=(chat, config().classes[1]))
    result = simulate_gateway(cfg, seed=9)
    small = result.pools["small"].columns
    by_id = {r.request_id: r.class_name for r in result.records}
    cached = dict(zip(small["request_id"].tolist(), small["cached_prompt_tokens"].tolist(), strict=True))
    # after the first of each prefix, chat requests find their 128 tokens (8 blocks of 16) cached
    assert sum(1 for i, c in cached.items() if by_id[i] == "chat" and c >= 128) > 0.9 * sum(
        1 for i in cached if by_id[i] == "chat")
    assert all(c == 0 for i, c in cached.items() if by_id[i] == "records")


def test_fast_forward_behind_the_gateway_is_identical_to_stepping_and_keeps_every_block():
    # the gateway tells each pool when the next request may arrive; fast-forwarding up to it must change
    # nothing, and no KV block may leak (check_invariants verifies block conservation after every event)
    cfg = config(num_requests=80)
    pools = (replace(cfg.pools[0], max_queue_wait_s=0.05), replace(cfg.pools[1], max_outstanding_per_replica=4))
    fast, slow = (simulate_gateway(replace(cfg, pools=pools, fast_forward=ff, check_invariants=True), seed=10)
                  for ff in (True, False))
    assert [(r.target, r.fallbacks, r.e2e_ms) for r in fast.records] == \
        [(r.target, r.fallbacks, r.e2e_ms) for r in slow.records]
    assert any(r.fallbacks for r in fast.records)


def test_progress_counts_every_request_once_served_fallen_back_or_rejected():
    # a small pool capped at two outstanding requests and a hosted endpoint on a budget (as in
    # test_capacity_limit_falls_back_and_budget_rejects): pool requests, hosted ones and gateway
    # rejections all end, each counted once, in order, up to num_requests
    cfg = config(num_requests=200)
    pools = (replace(cfg.pools[0], max_outstanding_per_replica=2), cfg.pools[1])
    hosted = (replace(HOSTED, budget_usd_per_hour=0.05),)
    seen: list[int] = []
    result = simulate_gateway(replace(cfg, pools=pools, externals=hosted), seed=5, progress=seen.append)
    assert seen == list(range(1, 201))
    assert {r.outcome for r in result.records} == {SERVED, FALLBACK, REJECTED}


def test_records_as_columns_index_as_records():
    # GatewayRecords holds columns; r[i] and iteration give the same GatewayRecord, by request id
    result = simulate_gateway(config(num_requests=50), seed=3)
    recs = result.records
    assert len(recs) == 50 and list(recs)[17] == recs[17] and recs[17].request_id == 17
    assert [r.target for r in recs] == [recs.target_names[t] for t in recs.target.tolist()]
