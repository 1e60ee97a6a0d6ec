"""The report's first page and its appendix, in plain words: the answer in one sentence, what it
costs, the searched configurations on a cost-latency chart with their frontier, the top few in a
table and the rest grouped by why they were not chosen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sizer.inputs.hardware import load_hardware
from sizer.sizing.cost import HOURS_PER_MONTH
from sizer.sizing.result import Sizing, SizingStatus
from sizer.sizing.search import Outcome, SearchResult

TOP_CONFIGURATIONS = 5             # ranked configurations in the body; the rest go to the appendix

# Each SLO target in words: (scenario field, abbreviation, what it limits).
TARGETS = (("ttft_ms", "TTFT", "first token within"), ("itl_ms", "ITL", "gaps between tokens within"),
           ("tpot_ms", "TPOT", "time per output token within"), ("e2e_ms", "E2E", "whole reply within"))

# Why a configuration was not chosen, in the order the appendix lists the groups.
MORE_COSTLY = "Meet the targets, but cost more"
NO_PRICE = "Meet the targets, but the GPU has no price to rank it by"
LARGER = "Meet the targets, but on a larger machine, in a less precise format or with fewer slots"   # slot engines
NO_FIT = "Do not fit in GPU memory"
BAD_SPLIT = "The model cannot be split across that many GPUs"
BAD_SETTING = "Settings the GPU or model does not support"
MISSES = {"TTFT": "Miss the time-to-first-token target (TTFT)",
          "ITL": "Miss the inter-token latency target (ITL: gaps between tokens)",
          "TPOT": "Miss the time-per-output-token target (TPOT)",
          "E2E": "Miss the whole-reply target (E2E)",
          "load": "Too few slots for the arrival rate (busy slots, Little's law)"}
MISSES_ANY = "Miss the latency targets"
OVER_LIMIT = "Would need more than {} replicas (over the search's limit)"


@dataclass(frozen=True)
class Headline:
    """The answer in one sentence and what it costs; costs are None without a price or an answer."""
    sentence: str
    met: bool                      # the SLO is met (or there is none) by a deployment that fits
    usd_per_hour: float | None
    usd_per_month: float | None
    usd_per_million_output_tokens: float | None


@dataclass(frozen=True)
class ParetoPoint:
    """One priced configuration that meets the SLO, at its operating point (a p95 is NaN where the run has none)."""
    label: str
    usd_per_million_output_tokens: float
    ttft_p95_ms: float
    itl_p95_ms: float              # p95 of the gaps between tokens as a client receives them (slo.itl_ms)
    tpot_p95_ms: float             # p95 of each request's time per output token (what slo.tpot_ms is checked on)
    chosen: bool
    front_ttft: bool               # no other configuration is both cheaper-or-equal and faster-or-equal (TTFT)
    front_itl: bool
    front_tpot: bool


@dataclass(frozen=True)
class ParetoPanel:
    """One panel of the cost-latency chart: a p95 (`ParetoPoint`'s `<metric>_p95_ms`, its frontier
    `front_<metric>`) against cost, with the SLO's target for it (None: not a target)."""
    metric: str                    # "ttft", "itl" or "tpot"
    title: str
    target_ms: float | None


# The chart's latencies: (metric, title, SLO field). TTFT always; per token, what the SLO targets (ITL, TPOT or both;
# TPOT where it targets neither).
PARETO_LATENCIES = (("ttft", "time to first token", "ttft_ms"), ("itl", "inter-token latency (ITL)", "itl_ms"),
                    ("tpot", "time per output token (TPOT)", "tpot_ms"))


@dataclass(frozen=True)
class Group:
    """Configurations not chosen for one reason."""
    reason: str
    outcomes: tuple[Outcome, ...]


def targets_in_words(slo) -> str:
    """'first token within 2,000 ms and time per output token within 60 ms'."""
    parts = [f"{words} {getattr(slo, name):,.0f} ms" for name, _, words in TARGETS if getattr(slo, name)]
    return " and ".join(parts)


def headline(model: str, gpu: str, gpus_per_replica: int, weights: str, sizing: Sizing, slo,
             searched: bool) -> Headline:
    """One sentence a reader can act on, for the configuration the report answers with."""
    rate = f"{sizing.target_rate_per_s:,.3g} requests/s"
    cost = sizing.cost
    per_hour = cost.usd_per_hour if cost else None
    costs = (per_hour, per_hour * HOURS_PER_MONTH if per_hour is not None else None,
             cost.usd_per_million_output_tokens if cost else None)
    if sizing.status is SizingStatus.DOES_NOT_FIT:
        return Headline(f"{model} does not fit on {gpus_per_replica} x {gpu} with {weights} weights"
                        + ("; no configuration searched meets the targets." if searched else "."), False, *costs)
    if sizing.replicas is None or sizing.slo_met is False:
        lead = "No configuration searched meets" if searched else f"{gpus_per_replica} x {gpu} does not meet"
        return Headline(f"{lead} {targets_in_words(slo)} for {sizing.required_share:.0%} of requests at {rate}: "
                        f"{sizing.verdict}.", False, *costs)
    replicas = sizing.replicas
    shape = (f"{replicas} replica{'s' if replicas != 1 else ''} of {gpus_per_replica} GPU"
             f"{'s' if gpus_per_replica != 1 else ''}, {weights} weights")
    serve = f"Serve {model} on {cost.gpus} x {gpu} ({shape})"
    if sizing.slo_met is None:
        return Headline(f"{serve}: no latency targets stated; simulated at {rate}.", True, *costs)
    return Headline(f"{serve}: meets {targets_in_words(slo)} for {sizing.required_share:.0%} of requests at {rate}.",
                    True, *costs)


def front(points: list[tuple[float, float]]) -> list[bool]:
    """For each (cost, latency) point: True when no other point is at most as costly and at most as slow,
    and better in one (lower is better on both axes)."""
    return [not any(c <= cost and t <= time and (c < cost or t < time) for c, t in points)
            for cost, time in points]


def pareto_points(search: SearchResult, chosen: Outcome | None) -> list[ParetoPoint]:
    """Every priced configuration that meets the SLO, its frontier membership on each latency."""
    passing = [o for o in search.outcomes if o.priced and o.usd_per_million_output_tokens is not None
               and o.ttft_p95_ms is not None]
    cost = [o.usd_per_million_output_tokens for o in passing]
    on = {m: front([(c, getattr(o, f"{m}_p95_ms")) for c, o in zip(cost, passing, strict=True)])
          for m, _, _ in PARETO_LATENCIES}
    return [ParetoPoint(o.candidate.label, o.usd_per_million_output_tokens, o.ttft_p95_ms, o.itl_p95_ms,
                        o.tpot_p95_ms, o is chosen, on["ttft"][i], on["itl"][i], on["tpot"][i])
            for i, o in enumerate(passing)]


def pareto_panels(points: list[ParetoPoint], slo) -> tuple[list[ParetoPanel], list[str]]:
    """The cost-latency chart's panels: TTFT, and the per-token latency the SLO targets (ITL where slo.itl_ms is
    set, TPOT where slo.tpot_ms is, both where both are; TPOT where neither is), each with its target; a panel no
    configuration has a value for is left out, and a note for the report says so."""
    per_token = [m for m, _, target in PARETO_LATENCIES[1:] if getattr(slo, target)] or ["tpot"]
    panels, notes = [], []
    for metric, title, target in PARETO_LATENCIES:
        if metric != "ttft" and metric not in per_token:
            continue
        if all(math.isnan(getattr(p, f"{metric}_p95_ms")) for p in points):
            notes.append(f"No chart of p95 {title}: no configuration's simulation has one (a reply of one token "
                         "has no gap between tokens and no time per output token).")
        else:
            panels.append(ParetoPanel(metric, title, getattr(slo, target)))
    return panels, notes


def top_and_rest(search: SearchResult) -> tuple[list[Outcome], list[Group]]:
    """The cheapest configurations that meet the SLO (search order: cost, then latency; slot engines: the smallest
    machine), and every other configuration grouped by why it was not chosen, groups in a fixed order, empty ones
    left out."""
    top = [o for o in search.outcomes if search.chosen(o)][:TOP_CONFIGURATIONS]
    by_reason: dict[str, list[Outcome]] = {}
    for o in search.outcomes:
        if o not in top:
            why = LARGER if search.chosen(o) and not o.priced else reason(o, search.settings.max_replicas)
            by_reason.setdefault(why, []).append(o)
    order = [MORE_COSTLY, LARGER, NO_PRICE, NO_FIT, BAD_SPLIT, BAD_SETTING, *MISSES.values(), MISSES_ANY,
             OVER_LIMIT.format(search.settings.max_replicas)]
    return top, [Group(r, tuple(by_reason[r])) for r in order if r in by_reason]


MEET = "Meet the targets"                 # search_counts: the configurations ranked as answers


def search_counts(search: SearchResult) -> list[tuple[str, int]]:
    """How many configurations were searched and why each was or was not an answer: one group per outcome, so
    the counts add up to the number searched (the ranked answers first, then `top_and_rest`'s reasons)."""
    counts = {MEET: 0}
    for o in search.outcomes:
        why = MEET if search.chosen(o) else reason(o, search.settings.max_replicas)
        counts[why] = counts.get(why, 0) + 1
    return [(why, n) for why, n in counts.items() if n]


def left_gpu(search: SearchResult, scenario_gpu: str, answer_gpu: str) -> str | None:
    """Why the answer is on another GPU than the scenario's, in one sentence; None when it is not."""
    own_id = load_hardware(scenario_gpu).id
    if load_hardware(answer_gpu).id == own_id:
        return None
    own = [o for o in search.outcomes if load_hardware(o.candidate.gpu).id == own_id]
    name = own_id.upper()
    if not own:
        return f"The answer is not on the scenario's GPU ({name}): it was not among the GPUs searched."
    meeting = [o for o in own if search.chosen(o)]        # ranked: the first is the cheapest
    if meeting:
        best = meeting[0]
        cost = (f"costs ${best.usd_per_hour:,.2f}/hour" if best.usd_per_hour is not None else "has no price")
        return (f"The search left the scenario's GPU ({name}): its cheapest configuration that meets the targets, "
                f"{best.candidate.label}, {cost}; the answer costs less.")
    why: dict[str, int] = {}
    for o in own:
        r = reason(o, search.settings.max_replicas)
        why[r] = why.get(r, 0) + 1
    return (f"The search left the scenario's GPU ({name}): none of its {len(own)} configurations meets the targets ("
            + "; ".join(f"{r[0].lower()}{r[1:]}: {n}" for r, n in why.items()) + ").")


def reason(o: Outcome, max_replicas: int) -> str:
    """Why `o` is not the answer, in plain words."""
    if o.status == "ok":
        return MORE_COSTLY if o.priced else NO_PRICE
    if o.status == "invalid":
        return BAD_SPLIT if o.binding == "split" else BAD_SETTING
    if o.binding == "memory":
        return NO_FIT
    if o.sizing is not None and o.sizing.status is SizingStatus.TOO_MANY_REPLICAS:
        return OVER_LIMIT.format(max_replicas)
    return MISSES.get(o.binding, MISSES_ANY)
