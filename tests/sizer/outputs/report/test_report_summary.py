"""The report's first page and appendix, on hand-made data: the cost-latency front, and the configurations
not chosen grouped by why, with their counts."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from sizer.outputs.report.charts import pareto_chart
from sizer.outputs.report.summary import (
    BAD_SPLIT,
    MEET,
    MISSES,
    MORE_COSTLY,
    NO_FIT,
    NO_PRICE,
    OVER_LIMIT,
    TOP_CONFIGURATIONS,
    ParetoPoint,
    front,
    headline,
    left_gpu,
    pareto_panels,
    search_counts,
    top_and_rest,
)
from sizer.sizing.cost import CostSummary
from sizer.sizing.result import GoodputSettings, Sizing, SizingStatus
from sizer.sizing.search import Candidate, Outcome, SearchResult, SearchSettings


def test_front_is_exactly_the_non_dominated_points():
    # (cost, latency): (1, 10) is cheapest; (2, 5) is faster; (2, 6) loses to (2, 5) on latency; (3, 5) loses to
    # (2, 5) on cost; (4, 1) is fastest; (1, 10) twice: equal points do not beat each other, both stay.
    points = [(1, 10), (2, 5), (2, 6), (3, 5), (4, 1), (1, 10)]
    assert front(points) == [True, True, False, False, True, True]
    assert front([]) == []


def sizing(status: SizingStatus, usd_per_hour: float | None = None) -> Sizing:
    cost = CostSummary(2.0, "test", 1, "test", 1, usd_per_hour, 100.0, 1.0, "test") if usd_per_hour else None
    return Sizing(status, "verdict", status is SizingStatus.MET, GoodputSettings(), 1.0, 0.95, 1.0, "TTFT",
                  1 if cost else None, cost, None, None, None, ())


def outcome(tp: int, status: str, binding: str, s: Sizing | None = None) -> Outcome:
    return Outcome(Candidate("h200", tp, 1, "fp8", "auto", False), status, binding, f"why {tp}", tp, None, s)


def test_top_five_then_every_other_configuration_grouped_by_reason():
    met = [outcome(i, "ok", "TTFT", sizing(SizingStatus.MET, 10.0 + i)) for i in range(1, 8)]   # 7 priced
    unpriced = [outcome(20, "ok", "TPOT", sizing(SizingStatus.MET))]
    memory = [outcome(30 + i, "rejected", "memory") for i in range(3)]
    split = [outcome(40, "invalid", "split")]
    ttft = [outcome(50 + i, "rejected", "TTFT", sizing(SizingStatus.NO_RATE)) for i in range(2)]
    itl = [outcome(60, "rejected", "TPOT", sizing(SizingStatus.MISSED, 99.0))]
    over = [outcome(70, "rejected", "TTFT", sizing(SizingStatus.TOO_MANY_REPLICAS))]
    # in the search's order (priced ok by cost, unpriced ok, rejected), shuffled among the rejected
    outcomes = (*met, *unpriced, *itl, *memory, *over, *ttft, *split)
    result = SearchResult("s", 1.0, 100.0, 0.95, SearchSettings(max_replicas=32), outcomes)
    top, groups = top_and_rest(result)
    assert top == met[:TOP_CONFIGURATIONS]
    # 7 priced - 5 shown = 2 cost more; the rest by kind; groups in a fixed order; the 16 outcomes all placed once
    assert [(g.reason, len(g.outcomes)) for g in groups] == [
        (MORE_COSTLY, 2), (NO_PRICE, 1), (NO_FIT, 3), (BAD_SPLIT, 1), (MISSES["TTFT"], 2), (MISSES["TPOT"], 1),
        (OVER_LIMIT.format(32), 1)]
    assert sorted(o.candidate.tensor_parallel_size for g in groups for o in g.outcomes) == sorted(
        o.candidate.tensor_parallel_size for o in outcomes if o not in top)
    assert groups[-1].reason == "Would need more than 32 replicas (over the search's limit)"


def test_headline_when_nothing_fits_or_meets_the_targets():
    slo = SimpleNamespace(ttft_ms=500.0, itl_ms=None, tpot_ms=None, e2e_ms=8000.0)
    no_fit = headline("m", "H100-SXM", 1, "bf16", sizing(SizingStatus.DOES_NOT_FIT), slo, searched=True)
    assert no_fit.sentence == ("m does not fit on 1 x H100-SXM with bf16 weights; no configuration searched meets "
                               "the targets.")
    assert not no_fit.met and no_fit.usd_per_hour is None and no_fit.usd_per_month is None
    missed = headline("m", "H200", 2, "fp8", sizing(SizingStatus.MISSED, 9.0), slo, searched=False)
    # the scenario's own configuration: 95% required (the helper's required_share), 1 request/s target
    assert missed.sentence == ("2 x H200 does not meet first token within 500 ms and whole reply within 8,000 ms "
                               "for 95% of requests at 1 requests/s: verdict.")
    assert not missed.met and missed.usd_per_month == 9.0 * 730                  # 730 hours a month


def on(gpu: str, tp: int, status: str, binding: str, s: Sizing | None = None) -> Outcome:
    return Outcome(Candidate(gpu, tp, 1, "fp8", "auto", False), status, binding, f"why {tp}", tp, None, s)


def test_the_counts_add_up_to_the_configurations_searched():
    # 3 meet with a price, 1 meets without one, 2 do not fit, 2 miss TTFT, 1 cannot be split: 9 searched
    outcomes = (*(on("b200", i, "ok", "TTFT", sizing(SizingStatus.MET, 10.0 + i)) for i in (1, 2, 3)),
                on("b200", 4, "ok", "TTFT", sizing(SizingStatus.MET)),
                *(on("h200", 10 + i, "rejected", "memory") for i in (1, 2)),
                *(on("h200", 20 + i, "rejected", "TTFT", sizing(SizingStatus.NO_RATE)) for i in (1, 2)),
                on("h200", 3, "invalid", "split"))
    result = SearchResult("s", 1.0, 100.0, 0.95, SearchSettings(max_replicas=32), outcomes)
    counts = search_counts(result)
    assert counts == [(MEET, 3), (NO_PRICE, 1), (NO_FIT, 2), (MISSES["TTFT"], 2), (BAD_SPLIT, 1)]
    assert sum(n for _, n in counts) == len(outcomes) == 9
    # the H200 scenario answered on a B200: none of the 5 H200 configurations meets the targets, and why
    assert left_gpu(result, "h200", "b200") == (
        "The search left the scenario's GPU (H200): none of its 5 configurations meets the targets (do not fit in "
        "GPU memory: 2; miss the time-to-first-token target (TTFT): 2; the model cannot be split across that many "
        "GPUs: 1).")
    assert left_gpu(result, "b200", "b200") is None                  # the answer is on the scenario's GPU


def test_left_gpu_names_the_cheapest_on_the_scenarios_gpu_when_one_meets():
    # the search ranks by cost: a B200 configuration at $11/hour before an H200 one at $15/hour
    outcomes = (on("b200", 1, "ok", "TTFT", sizing(SizingStatus.MET, 11.0)),
                on("h200", 2, "ok", "TTFT", sizing(SizingStatus.MET, 15.0)))
    result = SearchResult("s", 1.0, 100.0, 0.95, SearchSettings(), outcomes)
    assert left_gpu(result, "h200", "b200") == (
        f"The search left the scenario's GPU (H200): its cheapest configuration that meets the targets, "
        f"{outcomes[1].candidate.label}, costs $15.00/hour; the answer costs less.")
    # the scenario's GPU not searched at all
    assert left_gpu(result, "a100-80gb", "b200").endswith("it was not among the GPUs searched.")


def test_the_goodput_row_says_what_the_probes_found_and_where_the_operating_point_meets():
    # 600-request probes put one replica's goodput at 5.5 requests/s; the 2,000-request operating point of 2 replicas
    # at 12 requests/s (6 each) meets the SLO: the row says both, not "meets the SLO up to 5.5" beside an answer
    # whose replicas each run at 6
    point = SimpleNamespace(met=True, rate_per_s=6.0, metrics=SimpleNamespace(num_requests=2000))
    s = dataclasses.replace(sizing(SizingStatus.MET, 10.0), goodput_per_replica_per_s=5.5, operating_point=point)
    assert s.goodput_words == ("the goodput probes (600 requests a rate) found one replica meets the SLO up to "
                                   "5.50 requests/s; the operating point (2,000 requests) meets it at 6.00 requests/s "
                                   "per replica")
    # an operating point at or below the goodput: the probes' finding alone
    below = dataclasses.replace(s, operating_point=SimpleNamespace(met=True, rate_per_s=5.0, metrics=point.metrics))
    assert below.goodput_words == ("the goodput probes (600 requests a rate) found one replica meets the SLO up "
                                       "to 5.50 requests/s")
    # probes that found no rate, beside stated replicas whose operating point meets: not "up to 0.00 requests/s"
    none = dataclasses.replace(s, goodput_per_replica_per_s=0.0)
    assert none.goodput_words == ("the goodput probes (600 requests a rate) found no rate one replica serves within "
                                  "the SLO; the operating point (2,000 requests) meets it at 6.00 requests/s per "
                                  "replica")


def point(label: str, usd: float, ttft: float, itl: float, tpot: float) -> ParetoPoint:
    return ParetoPoint(label, usd, ttft, itl, tpot, label == "a", True, True, True)


def test_the_cost_latency_chart_plots_the_per_token_latency_the_slo_targets():
    # an ITL target (slo.itl_ms 50): the second panel is p95 ITL with its 50 ms target dashed, not TPOT without one
    points = [point("a", 1.0, 200.0, 30.0, 25.0), point("b", 2.0, 150.0, 20.0, 18.0)]
    panels, notes = pareto_panels(points, SimpleNamespace(ttft_ms=500, itl_ms=50, tpot_ms=None))
    assert [(p.metric, p.target_ms) for p in panels] == [("ttft", 500), ("itl", 50)] and notes == []
    svgs = pareto_chart(points, panels)
    assert "p95 inter-token latency (ITL)" in svgs[1] and "target" in svgs[1]
    # a TPOT target: TPOT; both targets: both; neither: TPOT, with no target line
    for slo, metrics in (((None, 40), ["ttft", "tpot"]), ((50, 40), ["ttft", "itl", "tpot"]),
                         ((None, None), ["ttft", "tpot"])):
        got, _ = pareto_panels(points, SimpleNamespace(ttft_ms=500, itl_ms=slo[0], tpot_ms=slo[1]))
        assert [p.metric for p in got] == metrics


def test_a_panel_with_no_values_is_left_out_with_a_note():
    # one-token replies: no gap between tokens and no TPOT in any configuration's run (NaN); the ITL panel would be
    # an empty axis, so there is none, and the report says why
    nan = float("nan")
    points = [point("a", 1.0, 200.0, nan, nan), point("b", 2.0, 150.0, nan, nan)]
    panels, notes = pareto_panels(points, SimpleNamespace(ttft_ms=500, itl_ms=50, tpot_ms=None))
    assert [p.metric for p in panels] == ["ttft"] and len(pareto_chart(points, panels)) == 1
    assert notes == ["No chart of p95 inter-token latency (ITL): no configuration's simulation has one (a reply of "
                     "one token has no gap between tokens and no time per output token)."]
