"""`sizer search` and its goodput bisection: sweep enumeration, memory filter, bisection, SLO scoring, Pareto
front, ranking."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

import sizer.sizing.goodput as goodput_mod
from simulator.engine_loop import BARE
from simulator.metrics import SLO
from sizer.inputs.scenario import SLOSection
from sizer.sizing.cost import CostSummary
from sizer.sizing.goodput import Goodput, goodput_rate, score
from sizer.sizing.result import GoodputSettings, Sizing, SizingStatus
from sizer.sizing.search import Candidate, Outcome, SearchSettings, SearchSpace, candidates, evaluate, mark_pareto, rank
from validation.errors import FieldError

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = ROOT / "scenarios" / "llama-3.1-70b-h200.yaml"


def data():
    return yaml.safe_load(SCENARIO.read_text())


def test_candidates_are_the_full_product():
    space = SearchSpace(gpus=("h100-sxm", "h200", "a100-80gb"), tensor_parallel_sizes=(2, 4, 8),
                        weight_formats=("bf16", "fp8"), kv_cache_dtypes=("auto",), speculative=(True, False))
    got = candidates(space)
    assert len(got) == 3 * 3 * 2 * 1 * 2                      # 36
    assert len(set(got)) == 36
    assert got[0] == Candidate("h100-sxm", 2, 1, "bf16", "auto", True)


def test_stated_price_applies_only_to_the_scenario_gpu():
    from sizer.inputs.scenario import scenario_from_dict
    base_data = {**data(), "cost": {"price_usd_per_gpu_hour": 2.0}}
    base = scenario_from_dict(base_data, str(SCENARIO))
    same = Candidate("h200-sxm", 4, 1, "fp8", "auto", False).variant(base)          # an alias of h200
    other = Candidate("h100-sxm", 4, 1, "fp8", "auto", False).variant(base)
    assert other.clear_speculative and other.clear_replicas
    assert scenario_from_dict(base_data, str(SCENARIO), same).cost.price_usd_per_gpu_hour == 2.0
    moved = scenario_from_dict(base_data, str(SCENARIO), other)
    assert moved.cost.price_usd_per_gpu_hour is None
    why = f"not the scenario's $2, stated for its {base.hardware.gpu}"
    assert moved.source_of("cost.price_usd_per_gpu_hour") == why


def test_invalid_split_and_memory_are_rejected_without_simulating(monkeypatch):
    monkeypatch.setattr(goodput_mod, "simulate_at", lambda *a: pytest.fail("simulated a configuration that cannot run"))
    settings = SearchSettings()
    split = evaluate(Candidate("h200", 3, 1, "bf16", "auto", False), data(), str(SCENARIO), settings)
    assert (split.status, split.binding) == ("invalid", "split")
    assert "does not divide the 64 attention heads" in split.reason
    # 70.55e9 parameters x 2 B = 131.4 GiB of bf16 weights on one 24 GB L4 (21.6 GiB usable at 0.9).
    memory = evaluate(Candidate("l4", 1, 1, "bf16", "auto", False), data(), str(SCENARIO), settings)
    assert (memory.status, memory.binding) == ("rejected", "memory")
    assert "131.42 GiB" in memory.reason


def fake_result(ttft_ms, tpot_ms, rejected=None):
    """A SimulationResult with the per-request columns the SLO scoring reads (one step of timeline)."""
    from simulator.records import SimulationResult, Timeline
    n = len(ttft_ms)
    rejected = np.array(rejected if rejected is not None else [False] * n)
    ttft, tpot = np.array(ttft_ms, float), np.array(tpot_ms, float)
    columns = {"request_id": np.arange(n), "rejected": rejected, "arrival_s": np.zeros(n),
               "finished_s": np.where(rejected, np.nan, 1.0), "prompt_tokens": np.full(n, 100),
               "output_tokens": np.full(n, 11), "cached_prompt_tokens": np.zeros(n, int),
               "ttft_ms": ttft, "tpot_ms": tpot, "e2e_ms": ttft + 10 * tpot, "queue_ms": np.zeros(n),
               "lora_holdbacks": np.zeros(n, int)}
    one = np.ones(1)
    return SimulationResult(columns, {}, Timeline(np.zeros(1, int), one, one, one, one, one, one * 0.5, one, 1),
                            np.array([]), 1, 0, BARE)


def resolved_with(slo: SLOSection):
    return type("R", (), {"slo": slo})()        # the deployment description's SLO section, all goodput reads


def knee_at(knee: float, calls: list):
    """A fake replica whose TPOT jumps past a 50 ms target above `knee` req/s."""
    def fake(resolved, rate, n):
        calls.append(rate)
        return fake_result([100.0] * 20, [20.0] * 20 if rate <= knee else [80.0] * 20)
    return fake


@pytest.mark.parametrize("knee, probes", [
    # Bound 10: probe 10 (misses), 2.5 (meets); bracket ratio 4 halves in log space 4 -> 2 -> 1.41
    # -> 1.19 -> 1.09 <= 1.1: four more probes.
    (3.0, 2 + 4),
    # Knee below 2.5: extend down by 4 (0.625 misses, 0.156 meets), then the same four halvings.
    (0.5, 4 + 4),
])
def test_goodput_bisection_brackets_the_knee(monkeypatch, knee, probes):
    calls = []
    monkeypatch.setattr(goodput_mod, "simulate_at", knee_at(knee, calls))
    g = goodput_rate(resolved_with(SLOSection(ttft_ms=500, tpot_ms=50)), 10.0,
                     GoodputSettings(rate_tolerance=0.1, low_rate_fraction=1 / 64))
    assert knee / 1.1 <= g.rate_per_s <= knee < g.ceiling_per_s <= g.rate_per_s * 1.1
    assert g.binding == "TPOT"                        # TTFT always met; TPOT 80 ms > 50 ms above the knee
    assert len(calls) == probes and min(calls) >= 10.0 / 64


def test_goodput_at_the_bound_and_zero_below_the_floor(monkeypatch):
    calls = []
    monkeypatch.setattr(goodput_mod, "simulate_at", knee_at(100.0, calls))
    assert goodput_rate(resolved_with(SLOSection(tpot_ms=50)), 10.0, GoodputSettings()) == Goodput(10.0, 10.0, "none")
    assert calls == [10.0]                           # met at the bound: one simulation
    calls.clear()
    monkeypatch.setattr(goodput_mod, "simulate_at",
                        lambda r, rate, n: calls.append(rate) or fake_result([900.0] * 5, [10.0] * 5))
    # down to 8 / 64, then give up; the ceiling is the lowest rate tried
    assert goodput_rate(resolved_with(SLOSection(ttft_ms=500)), 8.0, GoodputSettings()) == Goodput(0.0, 0.125, "TTFT")
    assert calls == [8.0, 2.0, 0.5, 0.125]
    calls.clear()
    assert goodput_rate(resolved_with(SLOSection(ttft_ms=500)), 8.0, GoodputSettings(),
                        floor_per_s=0.3) == Goodput(0.0, 0.3, "TTFT")
    # 0.125 is below the floor (target / max_replicas): the floor itself is the last rate tried
    assert calls == [8.0, 2.0, 0.5, 0.3]


def test_goodput_between_the_floor_and_the_next_probe_is_found(monkeypatch):
    calls = []
    monkeypatch.setattr(goodput_mod, "simulate_at", knee_at(0.4, calls))
    # a knee at 0.4 req/s: 0.5 misses and the next quarter (0.125) lies below the floor 0.3, but the
    # floor meets the SLO, so the bisection runs in [0.3, 0.5] instead of giving up
    g = goodput_rate(resolved_with(SLOSection(ttft_ms=500, tpot_ms=50)), 8.0,
                     GoodputSettings(rate_tolerance=0.1), floor_per_s=0.3)
    assert 0.3 <= g.rate_per_s <= 0.4 < g.ceiling_per_s <= g.rate_per_s * 1.1 and calls[:4] == [8.0, 2.0, 0.5, 0.3]


def test_a_floor_that_meets_does_not_change_the_goodput(monkeypatch):
    # search's floor (target / max_replicas: 12 / 32 = 0.375 req/s) below a knee at 0.43, bound 7.3: without the
    # floor, 7.3, 1.825 and 0.456 miss and 0.114 meets, then [0.114, 0.456] is bisected (0.228, 0.323, 0.384,
    # 0.418 meet; 0.437 misses: 0.418 within 5%). With it, the floor is tried in 0.114's place and meets; the same
    # bracket is bisected, its midpoints 0.228 and 0.323 (at or below the floor) taken as met unsimulated, so plan
    # (no floor) and search (the floor) find the same goodput (they found 0.437 and 0.424 on
    # fail-latency-llama-70b-h100, bisecting [0.375, 0.456] from the floor)
    slo, settings = resolved_with(SLOSection(ttft_ms=500, tpot_ms=50)), GoodputSettings()
    plain, floored = [], []
    monkeypatch.setattr(goodput_mod, "simulate_at", knee_at(0.43, plain))
    without = goodput_rate(slo, 7.3, settings)
    monkeypatch.setattr(goodput_mod, "simulate_at", knee_at(0.43, floored))
    assert goodput_rate(slo, 7.3, settings, floor_per_s=0.375) == without
    assert without.rate_per_s == pytest.approx(7.3 / 4 ** 3 * 2 ** (1 + 1 / 2 + 1 / 4 + 1 / 8))   # 0.4184
    assert min(floored) == 0.375 and len(floored) == len(plain) - 2      # 0.375 for 0.114; no 0.228 or 0.323


def test_score_counts_every_target_and_rejections():
    result = fake_result([100.0, 200.0, 300.0, np.nan], [10.0, 60.0, 70.0, np.nan], [False, False, False, True])
    probe = score(result, SLO(ttft_ms=250, tpot_ms=50, percentile=99.0, required_share=0.95), 2.0)
    # TTFT <= 250: requests 0, 1 -> 2/4; TPOT <= 50: request 0 -> 1/4; the rejected one meets nothing.
    assert probe.share_by_target == {"TTFT": 0.5, "TPOT": 0.25}
    assert probe.share_met == 0.25 and probe.binding == "TPOT" and probe.met is False
    # Percentiles over the three served requests (inverted CDF): p50 of (100, 200, 300) = 200, p95 = 300.
    assert (probe.metrics.ttft.p50_ms, probe.p95_ms("ttft")) == (200.0, 300.0)


def _ok(gpu: str, usd: float | None, e2e: float) -> Outcome:
    """A passing outcome on 2 replicas x 4 GPUs whose operating point has p95 E2E `e2e` ms (one request)."""
    c = Candidate(gpu, 4, 1, "fp8", "auto", False)
    cost = CostSummary(None if usd is None else usd / 8, "test", 2, "test", 8, usd, 100.0, None, "test")
    # e2e = TTFT + 10 x TPOT = e2e
    point = score(fake_result([e2e], [0.0]), SLO(e2e_ms=1e9, percentile=99.0, required_share=0.95), 5.0)
    sizing = Sizing(SizingStatus.MET, "SLO met", True, GoodputSettings(), 10.0, 0.95, 5.0, "TPOT", 2, cost, 2, usd,
                    point, ())
    return Outcome(c, "ok", "TPOT", "", 4, 10.0, sizing)


def test_pareto_front_and_ranking():
    a, b, c = _ok("h100-sxm", 10.0, 900.0), _ok("h200", 12.0, 700.0), _ok("b200", 12.0, 800.0)
    d = _ok("mi300x", None, 100.0)                            # no price: off the front, after the priced ones
    e = Outcome(Candidate("l4", 1, 1, "bf16", "auto", False), "rejected", "memory", "too big")
    f = Outcome(Candidate("h200", 3, 1, "bf16", "auto", False), "invalid", "split", "3 heads")
    marked = mark_pareto([c, e, a, d, f, b])
    # a is cheapest; b is dearer but faster; c costs as much as b and is slower: dominated.
    assert {o.candidate.gpu for o in marked if o.pareto} == {"h100-sxm", "h200"}
    ranked = rank(marked)
    assert [o.candidate.gpu for o in ranked] == ["h100-sxm", "h200", "b200", "mi300x", "l4", "h200"]
    assert ranked[-1].status == "invalid"


# The scenario's operating points cut from its 1,500 requests to 200, the goodput probes to 100 (every assertion
# below is about the pipeline's bookkeeping: which candidates fit, rank, price and meet their own operating point,
# none about a rate's size): still two different counts, so the sizing is seen to simulate the scenario's own count
# at the operating point, not the probes'. 23.2 s -> 17.4 s (400 and 200 requests before; --durations, 2026-12-02).
GOODPUT_REQUESTS = 100
OPERATING_REQUESTS = 200


@pytest.mark.slow           # 53 s with the scenario's 1,500 operating-point requests (2026-12-01); 17 s at 200
def test_search_on_the_70b_scenario_ranks_four_gpus_and_recommends():
    from sizer.sizing.search import search
    space = SearchSpace(gpus=("h100-sxm", "h200", "a100-80gb", "b200"), tensor_parallel_sizes=(2, 4, 8),
                        weight_formats=("bf16", "fp8"), kv_cache_dtypes=("auto",))
    scenario = data()
    scenario["workload"]["num_requests"] = OPERATING_REQUESTS
    settings = SearchSettings(GoodputSettings(num_requests=GOODPUT_REQUESTS))
    result = search(scenario, str(SCENARIO), space, settings, workers=2)
    assert len(result.outcomes) == 4 * 3 * 2
    ok = [o for o in result.outcomes if o.status == "ok"]
    assert len({o.candidate.gpu for o in ok}) >= 3
    best = result.recommended
    assert best is not None and best is result.outcomes[0] and best.pareto
    assert all(o.usd_per_hour >= best.usd_per_hour for o in ok if o.priced)
    # Every passing configuration went through the sizing pipeline: its operating point (one replica at
    # 10 req/s / replicas, the scenario's own request count) meets the 95% share, and cost = replicas x GPUs x price.
    for o in ok:
        assert o.sizing.status is SizingStatus.MET and o.share_met >= 0.95
        assert o.operating_rate_per_s == pytest.approx(10.0 / o.replicas)
        assert o.sizing.operating_point.metrics.num_requests == OPERATING_REQUESTS
        assert o.gpus == o.replicas * o.gpus_per_replica
    rejected = [o for o in result.outcomes if o.status == "rejected" and o.binding != "memory"]
    assert all(o.sizing.status is not SizingStatus.MET and o.reason == o.sizing.verdict for o in rejected)


TINY = SearchSpace(gpus=("l4",), tensor_parallel_sizes=(1,), weight_formats=("bf16",), kv_cache_dtypes=("auto",))


def test_search_needs_an_slo_target():
    from sizer.sizing.search import search
    with pytest.raises(FieldError) as err:
        search({**data(), "slo": {"required_share": 0.9}}, str(SCENARIO), TINY)
    assert err.value.field == "slo"


def test_speculative_sweep_needs_the_scenarios_settings():
    from dataclasses import replace as with_

    from sizer.sizing.search import search
    with pytest.raises(FieldError) as err:
        search(data(), str(SCENARIO), with_(TINY, speculative=(True, False)))
    assert err.value.field == "deployment.speculative_config"


def test_a_workload_no_configuration_can_serve_is_the_scenarios_error():
    # Every prompt is 40,000 tokens and max_model_len 32,768: each candidate is refused for the same input, so the
    # search raises it as `sizer plan` does (exit 2), not "no configuration meets the SLO" (exit 0).
    from sizer.sizing.search import search
    prompts = {"distribution": "fixed", "value": 40000}
    too_long = {**data(), "workload": {**data()["workload"], "prompt_tokens": prompts}}
    space = SearchSpace(gpus=("h100-sxm", "h200"), tensor_parallel_sizes=(4, 8), weight_formats=("fp8",),
                        kv_cache_dtypes=("auto",))
    with pytest.raises(FieldError) as err:
        search(too_long, str(SCENARIO), space)
    assert err.value.field == "workload.prompt_tokens"
    assert "32,768" in err.value.message and "40,000 + 8" in err.value.message


def test_refusals_that_differ_by_configuration_stay_rejections():
    from sizer.sizing.search import refuse_common_input
    a = Outcome(Candidate("h200", 3, 1, "bf16", "auto", False), "invalid", "input", "x: 3", refused_field="f",
                refused_file="s.yaml")
    b = Outcome(Candidate("h200", 5, 1, "bf16", "auto", False), "invalid", "input", "x: 5", refused_field="f",
                refused_file="s.yaml")
    refuse_common_input([a, b])                                             # two different refusals: a search's
    with pytest.raises(FieldError):
        refuse_common_input([a, a])


def test_a_scheduled_workload_is_searched_at_its_steady_rate_and_says_so():
    # left by the gateway pass: search sized each configuration at rate_per_s (48 req/s, the day's peak) and did not
    # say that the schedule went unsearched
    from sizer.sizing.search import search
    path = ROOT / "scenarios" / "diurnal-chat-h100.yaml"
    space = SearchSpace(gpus=("h100-sxm",), tensor_parallel_sizes=(1,), weight_formats=("fp8",),
                        kv_cache_dtypes=("fp8",))
    result = search(yaml.safe_load(path.read_text()), str(path), space)
    assert result.target_rate_per_s == 48
    assert any(n.startswith("workload.schedule is not searched: each configuration is sized at "
                            "workload.arrival.rate_per_s (48 req/s) alone") for n in result.notes)
