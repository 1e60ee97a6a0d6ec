"""A gateway scenario: several model pools behind one gateway, request classes, routes, residency.

A distinct top-level document (`gateway:` instead of `model:`/`hardware:`). Each pool takes the
scenario's own `model`, `hardware`, `deployment` and `cost` sections, so it resolves through the
same `resolve` as any scenario; classes take the scenario's length distributions and SLO
section. docs/gateway.md explains it; its field table is generated from these dataclasses
(`python -m sizer.inputs.gateway`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sizer.errors import InputError
from sizer.inputs.scenario import (
    MAX_CV,
    MAX_RATE_PER_S,
    MAX_REPLICAS,
    MAX_REQUESTS,
    MAX_SECONDS,
    MIN_CV,
    MIN_RATE_PER_S,
    CostSection,
    DeploymentSection,
    Distribution,
    HardwareSection,
    ModelSection,
    Scenario,
    SharedPrefixSection,
    SLOSection,
    _check_distribution,
    _refuse_huge_integers,
    check_arrival_fields,
    check_prefix,
)
from validation.errors import excerpt
from validation.safe_yaml import load_yaml
from validation.schema import build, describe, field, join

# Prices per million tokens of a hosted endpoint: at most $1,000,000 (finite in every sum).
MAX_USD_PER_MILLION_TOKENS = 1e6
# Failures per replica-hour: at most 3,600 (one a second); beyond, a replica is never up.
MAX_FAILURES_PER_HOUR = 3600.0
# configurations `plan --search` simulates at most (each a whole gateway run): refused above, before any run
MAX_SEARCH_CANDIDATES = 1_000
# Beta shape parameters of difficulty: 0.01 to 1,000 (numpy's beta draws stay finite and in [0, 1]).
MIN_BETA_SHAPE, MAX_BETA_SHAPE = 0.01, 1000.0


@dataclass(frozen=True)
class LimitsSection:
    max_outstanding_per_replica: int | None = field(None, ge=1, le=10_000_000,
                                                    doc="at capacity when the least loaded up replica holds "
                                                        "this many requests (waiting or running)")
    max_queue_wait_s: float | None = field(None, gt=0, le=MAX_SECONDS,
                                           doc="at capacity when the oldest request waiting on every up replica "
                                               "has waited this long")


@dataclass(frozen=True)
class OutageSection:
    start_s: float = field(ge=0, le=MAX_SECONDS, doc="start of a scheduled outage (s from the first arrival)")
    end_s: float = field(gt=0, le=MAX_SECONDS, doc="its end; requests arriving in [start_s, end_s) fall back")


@dataclass(frozen=True)
class FailuresSection:
    per_replica_per_hour: float = field(gt=0, le=MAX_FAILURES_PER_HOUR,
                                        doc="replica failures per replica-hour (Poisson, seeded)")
    repair_s: float = field(gt=0, le=MAX_SECONDS, doc="seconds a failed replica stays down")


@dataclass(frozen=True)
class PoolSection:
    name: str = field(doc="the pool's name, used by routes, fallbacks and residency")
    model: ModelSection = field(doc="the model, as a scenario's `model` (a string is its name)")
    hardware: HardwareSection = field(doc="the accelerator, as a scenario's `hardware` (a string is its gpu)")
    deployment: DeploymentSection = field(default_factory=DeploymentSection,
                                          doc="as a scenario's; `replicas` is the pool's replica count (default 1)")
    cost: CostSection = field(default_factory=CostSection, doc="prices, as a scenario's")
    router: Literal["round_robin", "least_outstanding", "prefix_aware"] = field(
        "least_outstanding", doc="router among the pool's replicas")
    quality: float | None = field(None, ge=0, le=1, doc="a quality score of the model (0 to 1), "
                                                        "averaged over the requests it serves")
    limits: LimitsSection = field(default_factory=LimitsSection, doc="when the pool is at capacity")
    outages: list[OutageSection] = field(default_factory=list, doc="scheduled outage windows")
    failures: FailuresSection | None = field(None, doc="replica failures")


@dataclass(frozen=True)
class ExternalSection:
    name: str = field(doc="the endpoint's name, used by routes, fallbacks and residency")
    ttft_p50_ms: float = field(gt=0, le=MAX_SECONDS * 1e3, doc="median time to first token")
    tpot_ms: float = field(gt=0, le=MAX_SECONDS * 1e3, doc="time per output token after the first")
    usd_per_million_input_tokens: float = field(ge=0, le=MAX_USD_PER_MILLION_TOKENS, doc="input price")
    usd_per_million_output_tokens: float = field(ge=0, le=MAX_USD_PER_MILLION_TOKENS, doc="output price")
    ttft_sigma: float = field(0.5, ge=0, le=5, doc="sigma of log TTFT (lognormal)")
    quality: float | None = field(None, ge=0, le=1, doc="a quality score of the model behind it (0 to 1)")
    budget_usd_per_hour: float | None = field(None, gt=0, le=1e12,
                                              doc="over budget when the trailing window's spend, "
                                                  "scaled to an hour, would pass this")


@dataclass(frozen=True)
class DifficultySection:
    alpha: float = field(1.0, ge=MIN_BETA_SHAPE, le=MAX_BETA_SHAPE, doc="beta distribution's alpha")
    beta: float = field(1.0, ge=MIN_BETA_SHAPE, le=MAX_BETA_SHAPE,
                        doc="beta distribution's beta; (1, 1) is uniform on [0, 1]")


@dataclass(frozen=True)
class ClassSection:
    name: str = field(doc="the class's name")
    share: float = field(gt=0, le=1, doc="share of requests in this class (shares sum to 1)")
    prompt_tokens: Distribution = field(doc="prompt length distribution, as a scenario's")
    output_tokens: Distribution = field(doc="output length distribution, as a scenario's")
    data_class: str = field("default", doc="data class, for residency rules")
    difficulty: DifficultySection = field(default_factory=DifficultySection, doc="difficulty score in [0, 1]")
    shared_prefix: SharedPrefixSection | None = field(None, doc="the class's shared prompt prefixes, as a "
                                                                "scenario's (for prefix-aware routing and caching)")
    slo: SLOSection = field(default_factory=SLOSection, doc="the class's latency targets, as a scenario's slo")


@dataclass(frozen=True)
class ByDifficultySection:
    weak: str = field(doc="pool or endpoint for the easier requests")
    strong: str = field(doc="pool or endpoint for the hardest `strong_share` of them")
    strong_share: float = field(ge=0, le=1, doc="share of the route's requests sent to `strong` (the knob)")


@dataclass(frozen=True)
class RouteSection:
    name: str = field(doc="the route's name")
    classes: list[str] | None = field(None, doc="classes it takes (the first route that takes a class wins); "
                                                "default every class")
    target: str | None = field(None, doc="the first choice: a pool or an external endpoint")
    by_difficulty: ByDifficultySection | None = field(None, doc="or: the first choice by difficulty")
    fallback: list[str] = field(default_factory=list, doc="pools or endpoints tried next, in order")


@dataclass(frozen=True)
class ResidencySection:
    data_class: str = field(doc="a data class")
    allowed: list[str] = field(doc="the only pools or endpoints it may reach")


@dataclass(frozen=True)
class ArrivalRate:
    rate_per_s: float = field(ge=MIN_RATE_PER_S, le=MAX_RATE_PER_S, doc="requests per second at the gateway")
    process: Literal["poisson", "gamma", "constant"] = field("poisson", doc="arrival process")
    cv: float | None = field(None, ge=MIN_CV, le=MAX_CV, doc="gamma (needed there, only there): coefficient of "
                                                          "variation of inter-arrival times")


@dataclass(frozen=True)
class SearchSection:
    replicas: dict[str, list[int]] = field(default_factory=dict,
                                           doc="pool name -> replica counts to try (default: the pool's own)")
    strong_shares: list[float] = field(default_factory=list,
                                       doc="strong shares to try on every difficulty route (default: each route's)")
    min_quality: float | None = field(None, ge=0, le=1,
                                      doc="only configurations whose served quality reaches this")
    num_requests: int | None = field(None, ge=1, le=MAX_REQUESTS, doc="requests per candidate "
                                                                       "(default gateway.num_requests)")


@dataclass(frozen=True)
class GatewaySection:
    arrival: ArrivalRate = field(doc="the gateway's arrivals (all classes together)")
    pools: list[PoolSection] = field(doc="model deployments behind the gateway")
    classes: list[ClassSection] = field(doc="request classes")
    routes: list[RouteSection] = field(doc="routing rules, first match wins")
    external: list[ExternalSection] = field(default_factory=list, doc="hosted endpoints")
    residency: list[ResidencySection] = field(default_factory=list, doc="data class -> allowed targets")
    search: SearchSection = field(default_factory=SearchSection, doc="the cheapest sizing search (plan)")
    budget_usd_per_hour: float | None = field(None, gt=0, le=1e12,
                                              doc="a cap on every external endpoint's spend together: over budget "
                                                  "when the trailing window's spend, scaled to an hour, would pass "
                                                  "this (pools cost their replicas, whatever they serve)")
    num_requests: int = field(1000, ge=1, le=MAX_REQUESTS, doc="requests to simulate")
    seed: int = field(0, ge=0, le=2 ** 63 - 1, doc="random seed")


@dataclass(frozen=True)
class GatewayScenario:
    gateway: GatewaySection = field(doc="pools, classes, routes")
    name: str | None = field(None, doc="a title; default the file name")
    description: str | None = field(None, doc="free text")


def load_gateway(path: str | Path) -> tuple[GatewayScenario, str]:
    """Read and check a gateway document; returns it and its title."""
    file = str(path)
    data = load_yaml(Path(path))
    if not isinstance(data, dict):
        raise InputError(file, "(top level)", f"expected a mapping of sections, got {type(data).__name__}")
    _refuse_huge_integers(data, "", file)
    g = data.get("gateway")
    if isinstance(g, dict) and isinstance(g.get("pools"), list):    # shorthands, as a scenario's
        pools = [{**p, **{k: {inner: p[k]} for k, inner in (("model", "name"), ("hardware", "gpu"))
                          if isinstance(p.get(k), str)}} if isinstance(p, dict) else p for p in g["pools"]]
        data = {**data, "gateway": {**g, "pools": pools}}
    doc = build(GatewayScenario, data, "", file)
    check_gateway(doc.gateway, file)
    return doc, doc.name or Path(path).stem


def pool_scenario(p: PoolSection, file: str | None) -> Scenario:
    """The scenario one pool resolves as (its workload is the gateway's, not used by `resolve`)."""
    return Scenario(model=p.model, hardware=p.hardware, name=p.name, deployment=p.deployment, cost=p.cost, file=file)


def check_gateway(g: GatewaySection, f: str) -> None:
    """Cross-field rules: names unique and known, shares summing to 1, every class routed."""
    names = [p.name for p in g.pools] + [e.name for e in g.external]
    for i, name in enumerate(names):
        where = f"gateway.pools[{i}].name" if i < len(g.pools) else f"gateway.external[{i - len(g.pools)}].name"
        if not name.strip():            # routes, fallbacks and residency name it
            raise InputError(f, where, f"expected a name, got {excerpt(name)}")
        if name in names[:i]:
            raise InputError(f, where, f"{excerpt(name)} is used twice; expected unique names")
    for i, p in enumerate(g.pools):
        if p.deployment.disaggregated is not None:
            raise InputError(f, f"gateway.pools[{i}].deployment.disaggregated",
                             "not modelled behind a gateway; expected a pool of whole replicas")
        for j, o in enumerate(p.outages):
            if o.end_s <= o.start_s:
                raise InputError(f, f"gateway.pools[{i}].outages[{j}].end_s", "expected end_s > start_s")
    class_names = [c.name for c in g.classes]
    if not g.classes:
        raise InputError(f, "gateway.classes", "expected at least one request class")
    for i, c in enumerate(g.classes):
        for key in ("name", "data_class"):         # routes and residency rules name them; the answers print them
            if not getattr(c, key).strip():
                raise InputError(f, f"gateway.classes[{i}].{key}", f"expected a name, got {excerpt(getattr(c, key))}")
        if c.name in class_names[:i]:
            raise InputError(f, f"gateway.classes[{i}].name", f"{excerpt(c.name)} is used twice")
        for part in ("prompt_tokens", "output_tokens"):
            _check_distribution(getattr(c, part), f"gateway.classes[{i}].{part}", f)
        check_prefix(c.shared_prefix, c.prompt_tokens, f"gateway.classes[{i}]", f)
        if c.shared_prefix and c.shared_prefix.num_tenants != 1:
            raise InputError(f, f"gateway.classes[{i}].shared_prefix.num_tenants",
                             "tenants are not modelled behind a gateway; expected 1 (each class is its own traffic)")
        if not any(r.classes is None or c.name in r.classes for r in g.routes):
            raise InputError(f, f"gateway.classes[{i}]", f"no route takes class {excerpt(c.name)}")
    total = sum(c.share for c in g.classes)
    if not math.isclose(total, 1.0, abs_tol=1e-6):
        raise InputError(f, "gateway.classes", f"shares sum to {total:g}; expected 1")
    check_arrival_fields(g.arrival, "gateway.arrival", f)
    route_names = [r.name for r in g.routes]
    for i, r in enumerate(g.routes):
        at = f"gateway.routes[{i}]"
        if not r.name.strip():
            raise InputError(f, f"{at}.name", f"expected a name, got {excerpt(r.name)}")
        if r.name in route_names[:i]:
            raise InputError(f, f"{at}.name", f"{excerpt(r.name)} is used twice; expected unique names")
        if r.target is not None and r.target in r.fallback:
            raise InputError(f, f"{at}.fallback[{r.fallback.index(r.target)}]",
                             f"{excerpt(r.target)} is the route's own target; expected pools or endpoints tried next")
        if (r.target is None) == (r.by_difficulty is None):
            raise InputError(f, at, "expected exactly one of target and by_difficulty")
        for j, c in enumerate(r.classes or []):
            if c not in class_names:
                raise InputError(f, f"{at}.classes[{j}]", f"unknown class {excerpt(c)}")
            if c in r.classes[:j]:
                raise InputError(f, f"{at}.classes[{j}]", f"{excerpt(c)} is listed twice; expected each class once")
        if r.classes == []:
            raise InputError(f, f"{at}.classes", "takes no class; expected at least one (or leave it out: every class)")
        if not any(_first_route(g, c) is r for c in class_names):
            raise InputError(f, at, f"takes no class: an earlier route takes every class it names "
                                    f"({', '.join(c for c in (r.classes or class_names))}); expected each route to "
                                    "take one first (routes match in order)")
        if r.by_difficulty is not None and r.by_difficulty.weak == r.by_difficulty.strong:
            raise InputError(f, f"{at}.by_difficulty.strong", f"{excerpt(r.by_difficulty.strong)} is the weak target "
                                                              "too, so the strong share changes nothing; expected two "
                                                              "targets (or `target:` for one)")
        refs = ([(f"{at}.target", r.target)] if r.target is not None else
                [(f"{at}.by_difficulty.weak", r.by_difficulty.weak),
                 (f"{at}.by_difficulty.strong", r.by_difficulty.strong)])
        refs += [(f"{at}.fallback[{j}]", t) for j, t in enumerate(r.fallback)]
        for j, t in enumerate(r.fallback):
            if t in r.fallback[:j]:
                raise InputError(f, f"{at}.fallback[{j}]", f"{excerpt(t)} is listed twice; expected each pool or "
                                                           "endpoint at most once")
        for path, t in refs:
            if t not in names:
                raise InputError(f, path, f"unknown pool or endpoint {excerpt(t)}; expected one of {', '.join(names)}")
    data_classes = {c.data_class for c in g.classes}
    ruled = [rule.data_class for rule in g.residency]
    for i, rule in enumerate(g.residency):
        if rule.data_class in ruled[:i]:
            raise InputError(f, f"gateway.residency[{i}].data_class", f"{excerpt(rule.data_class)} has a rule "
                                                                      "already; expected one rule a data class")
        if rule.data_class not in data_classes:
            raise InputError(f, f"gateway.residency[{i}].data_class",
                             f"no class has data class {excerpt(rule.data_class)}")
        if not rule.allowed:
            raise InputError(f, f"gateway.residency[{i}].allowed", f"no pool or endpoint: every request of data class "
                                                                   f"{excerpt(rule.data_class)} would be rejected; "
                                                                   "expected at least one")
        for j, t in enumerate(rule.allowed):
            if t not in names:
                raise InputError(f, f"gateway.residency[{i}].allowed[{j}]", f"unknown pool or endpoint {excerpt(t)}")
        for c in g.classes:
            r = _first_route(g, c.name)
            reach = [r.target] if r.target is not None else [r.by_difficulty.weak, r.by_difficulty.strong]
            if c.data_class == rule.data_class and not set(reach + r.fallback) & set(rule.allowed):
                raise InputError(f, f"gateway.residency[{i}].allowed", f"none of them is on route {excerpt(r.name)} "
                                 f"of class {excerpt(c.name)} ({', '.join(reach + r.fallback)}): every request of "
                                 "the class would be rejected; expected a target or fallback of the route allowed")
    for name, counts in g.search.replicas.items():
        if name not in [p.name for p in g.pools]:
            raise InputError(f, join("gateway.search.replicas", name), "unknown pool")
        if not counts or any(not 1 <= n <= MAX_REPLICAS for n in counts):
            raise InputError(f, join("gateway.search.replicas", name),
                             f"expected replica counts from 1 to {MAX_REPLICAS}")
        _refuse_repeats(counts, join("gateway.search.replicas", name), "replica count", f)
    if any(not 0 <= s <= 1 for s in g.search.strong_shares):
        raise InputError(f, "gateway.search.strong_shares", "expected shares from 0 to 1")
    _refuse_repeats(g.search.strong_shares, "gateway.search.strong_shares", "share", f)
    if g.search.strong_shares and not any(r.by_difficulty for r in g.routes):
        raise InputError(f, "gateway.search.strong_shares", "no route routes by difficulty; expected a route with "
                                                            "by_difficulty for the shares to vary")
    if g.search.min_quality is not None:
        scored = [(f"gateway.pools[{i}].quality", p.quality) for i, p in enumerate(g.pools)]
        scored += [(f"gateway.external[{i}].quality", e.quality) for i, e in enumerate(g.external)]
        unscored = next((path for path, quality in scored if quality is None), None)
        if unscored:
            raise InputError(f, unscored, "missing; gateway.search.min_quality judges the mean score of every "
                                          "request served, so every pool and endpoint needs one")
    sizes = {join("replicas", p.name): len(g.search.replicas.get(p.name, [1])) for p in g.pools}
    sizes["strong_shares"] = len(g.search.strong_shares) or 1
    if math.prod(sizes.values()) > MAX_SEARCH_CANDIDATES:
        product = " x ".join(f"{k} {n:,}" for k, n in sizes.items() if n > 1)
        raise InputError(f, "gateway.search", f"expected at most {MAX_SEARCH_CANDIDATES:,} configurations to "
                                              f"simulate, got {math.prod(sizes.values()):,} ({product})")


def _first_route(g: GatewaySection, class_name: str) -> RouteSection | None:
    """The route that takes a class: the first naming it (or naming no classes)."""
    return next((r for r in g.routes if r.classes is None or class_name in r.classes), None)


def _refuse_repeats(values: list, where: str, what: str, f: str) -> None:
    """A search list names each value once (a repeat is the same configuration simulated again)."""
    for j, v in enumerate(values):
        if v in values[:j]:
            raise InputError(f, f"{where}[{j}]", f"{what} {v:g} is listed twice; expected each once")


# A pool's deployment is a scenario's (DeploymentSection), but where a scenario's default differs behind a gateway
POOL_DOCS = {"gateway.pools[].deployment.replicas": "independent replicas; default 1 (gateway.search.replicas tries "
                                                    "other counts)"}


def render_docs() -> str:
    """The field table of docs/gateway.md."""
    rows = ["| field | type | default | meaning |", "| --- | --- | --- | --- |"]
    items = [(GatewayScenario, ""), (PoolSection, "gateway.pools[]"), (ExternalSection, "gateway.external[]"),
             (ClassSection, "gateway.classes[]"), (RouteSection, "gateway.routes[]"),
             (ResidencySection, "gateway.residency[]")]
    for path, type_name, default, doc in (row for cls, prefix in items for row in describe(cls, prefix)):
        doc = POOL_DOCS.get(path, doc)
        rows.append(f"| **{path}** | section | | {doc} |" if type_name == "section"
                    else f"| `{path}` | {type_name} | {default} | {doc} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(render_docs(), end="")
