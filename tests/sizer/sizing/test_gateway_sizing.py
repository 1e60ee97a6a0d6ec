"""Gateway scenarios sized: the bundled documents plan and simulate, every request is accounted for once,
the strong-model share moves load and cost, outages and residency act where they should, the cost
adds up, the search picks the cheapest accepted configuration, and bad documents get one line."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from simulator.gateway import FALLBACK, OUTAGE, REJECTED, RESIDENCY, SERVED
from sizer.cli.app import app
from sizer.inputs.gateway import load_gateway
from sizer.sizing.gateway import cheapest, resolve_gateway, run_gateway, with_choices
from validation.errors import FieldError

ROOT = Path(__file__).resolve().parents[3]
DIFFICULTY = ROOT / "scenarios" / "gateway-difficulty-routing.yaml"
RESIDENCY_FILE = ROOT / "scenarios" / "gateway-residency.yaml"


def resolved(path: Path):
    doc, name = load_gateway(path)
    return resolve_gateway(doc, name, str(path))


@pytest.fixture(scope="module")
def difficulty():
    return resolved(DIFFICULTY)


@pytest.fixture(scope="module")
def residency():
    return resolved(RESIDENCY_FILE)


@pytest.mark.parametrize("path", [DIFFICULTY, RESIDENCY_FILE], ids=lambda p: p.name)
def test_every_request_served_rejected_or_fallen_back_exactly_once(path):
    rg = resolved(path)
    result, a = run_gateway(rg, 300)
    assert sum(a.outcomes.values()) == 300 and set(a.outcomes) <= {SERVED, FALLBACK, REJECTED}
    assert [r.request_id for r in result.records] == list(range(300))
    # each pool ran exactly the requests the gateway sent it; the rest went to an endpoint or nowhere
    for p in a.pools:
        assert p.requests == sum(r.target == p.name for r in result.records)
    external = sum(e.requests for e in a.externals)
    nowhere = sum(r.target == "" for r in result.records)
    assert sum(p.requests for p in a.pools) + external + nowhere == 300
    for c in a.classes:
        assert c.served + c.rejected == c.requests
    # audit: a fallen-back request names every target it skipped, and was served by another
    for r in result.records:
        if r.outcome == FALLBACK:
            assert r.fallbacks and r.target not in [t for t, _ in r.fallbacks]


def test_raising_the_strong_share_moves_load_and_cost(difficulty):
    # No outage, so only the large pool's capacity limit (16 outstanding) sends requests to the hosted endpoint:
    # more strong requests, more load on the large pool, less on the small one, more overflow and more dollars.
    cfg = replace(difficulty.config, pools=tuple(replace(p, outages_s=()) for p in difficulty.config.pools))
    low, high = (run_gateway(difficulty, 300, with_choices(cfg, {}, s))[1] for s in (0.1, 0.9))
    pools = {k: {p.name: p for p in a.pools} for k, a in (("low", low), ("high", high))}
    # round(0.1 x 300) = 30 and round(0.9 x 300) = 270 requests chosen for the large pool
    assert pools["low"]["large"].requests == 30
    assert pools["high"]["small"].requests == 30
    assert pools["high"]["large"].mean_batch_size > pools["low"]["large"].mean_batch_size
    assert high.externals[0].requests > low.externals[0].requests
    assert high.usd_per_hour > low.usd_per_hour


def test_an_outage_window_produces_fallbacks_only_inside_it(difficulty):
    result, a = run_gateway(difficulty)
    outage = [r for r in result.records if (difficulty.config.pools[1].name, OUTAGE) in r.fallbacks]
    # the large pool is out from 40 s to 50 s (the scenario): every outage fallback arrived then, and every
    # request chosen for the large pool then fell back
    assert outage and all(40.0 <= r.arrival_s < 50.0 for r in outage)
    inside = [r for r in result.records if r.first_choice == "large" and 40.0 <= r.arrival_s < 50.0]
    assert len(inside) == len(outage)
    route = a.routes[0]
    assert route.fallbacks["large: outage"] == len(outage)


def test_residency_keeps_patient_records_on_premises(residency):
    result, a = run_gateway(residency)
    phi = [r for r in result.records if r.data_class == "phi"]
    assert phi and not any(r.target == "hosted" for r in phi)
    # a record the on-premises pools could not take is rejected for residency, not sent out
    rejected = [r for r in phi if r.outcome == REJECTED]
    assert all(r.reject_reason == RESIDENCY and r.fallbacks[-1] == ("hosted", RESIDENCY) for r in rejected)
    # public traffic may reach the hosted endpoint
    assert any(r.target == "hosted" for r in result.records if r.data_class == "public")


def test_cost_adds_up(residency):
    _, a = run_gateway(residency, 200)
    pools = {p.name: p for p in a.pools}
    # h100-sxm and h200 profile prices x GPUs: 1 x 1 x price, 1 x 2 x price (resolve's price per GPU-hour)
    for p in a.pools:
        r = residency.pools[p.name]
        assert p.usd_per_hour == pytest.approx(p.replicas * p.gpus_per_replica * r.price_usd_per_gpu_hour)
    assert pools["onprem-70b"].gpus_per_replica == 2
    assert a.usd_per_hour == pytest.approx(sum(p.usd_per_hour for p in a.pools) + sum(e.usd_per_hour
                                                                                     for e in a.externals))
    assert a.usd_per_million_output_tokens == pytest.approx(a.usd_per_hour / (a.output_tokens_per_s * 3600) * 1e6)


def test_search_picks_the_cheapest_accepted_configuration(residency):
    s = cheapest(residency)
    # 2 x 2 replica counts, the route's own strong share
    assert len(s.tried) == 4
    accepted = [c for c in s.tried if c.accepted]
    assert s.best is not None and s.best.usd_per_hour == min(c.usd_per_hour for c in accepted)
    # one more replica of either pool costs more per hour
    by = {tuple(c.replicas.values()): c.usd_per_hour for c in s.tried}
    assert by[(2, 1)] > by[(1, 1)] and by[(1, 2)] > by[(1, 1)]


def write(tmp_path: Path, change) -> Path:
    data = yaml.safe_load(DIFFICULTY.read_text())
    change(data["gateway"])
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("change, field, words", [
    (lambda g: g["routes"][0].update(fallback=["big"]), "gateway.routes[0].fallback[0]", "unknown pool"),
    (lambda g: g["classes"][0].update(share=0.5), "gateway.classes", "shares sum to 0.8"),
    (lambda g: g["pools"][1]["deployment"].update(tensor_parallel_size=3), "gateway.pools[1].deployment", ""),
    (lambda g: g["pools"][0].update(router="random"), "gateway.pools[0].router", "expected one of"),
    (lambda g: g.update(residency=[{"data_class": "secret", "allowed": ["small"]}]),
     "gateway.residency[0].data_class", "no class has data class"),
    (lambda g: g["routes"][0].update(classes=["chat"]), "gateway.classes[1]", "no route takes class 'code'"),
    (lambda g: g["pools"][1]["outages"][0].update(end_s=10), "gateway.pools[1].outages[0].end_s", "end_s > start_s"),
    (lambda g: g.update(budget_usd_per_hour=0), "gateway.budget_usd_per_hour", "> 0"),
    # a blank name no route can name: refused where it is given, not later as "expected one of , large, hosted"
    (lambda g: g["pools"][0].update(name=""), "gateway.pools[0].name", "expected a name, got ''"),
    (lambda g: g["external"][0].update(name="  "), "gateway.external[0].name", "expected a name, got '  '"),
])
def test_bad_documents_get_one_line_naming_the_field(tmp_path, change, field, words):
    path = write(tmp_path, change)
    with pytest.raises(FieldError) as err:
        resolved(path)
    assert err.value.field.startswith(field) and words in err.value.message
    result = CliRunner().invoke(app, ["plan", str(path)])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1


def test_cli_simulate_json_csv_and_refused_flags(tmp_path):
    runner = CliRunner()
    out = tmp_path / "requests.csv"
    result = runner.invoke(app, ["simulate", str(RESIDENCY_FILE), "--json", "--num-requests", "120",
                                 "--requests-csv", str(out)])
    assert result.exit_code == 0, result.output
    a = json.loads(result.stdout)
    assert a["kind"] == "gateway" and a["schema_version"] == 1
    assert a["num_requests"] == 120 and {p["name"] for p in a["pools"]} == {"onprem-8b", "onprem-70b"}
    header = out.read_text().splitlines()[0].split(",")
    assert {"request_id", "class_name", "route", "target", "fallbacks", "outcome", "reject_reason"} <= set(header)
    assert len(out.read_text().splitlines()) == 121
    refused = runner.invoke(app, ["plan", str(RESIDENCY_FILE), "--tp", "2"])
    assert refused.exit_code == 2 and "--tp" in refused.stderr
    refused = runner.invoke(app, ["simulate", str(RESIDENCY_FILE), "--replicas", "2"])
    assert refused.exit_code == 2 and "--replicas" in refused.stderr
    # commands that read one scenario say what a gateway document is, in one line
    refused = runner.invoke(app, ["check", str(RESIDENCY_FILE)])
    assert refused.exit_code == 2 and "gateway document" in refused.stderr and len(refused.stderr.splitlines()) == 1


def test_a_class_without_targets_is_met_by_the_share_served(tmp_path):
    def change(g):
        for c in g["classes"]:
            c["slo"] = {"required_share": 0.99}
        g["pools"][1]["limits"] = {"max_outstanding_per_replica": 1}      # the large pool overflows ...
        g["external"][0]["budget_usd_per_hour"] = 1e-6                     # ... and the hosted endpoint is shut
    _, a = run_gateway(resolved(write(tmp_path, change)), 200)
    code = next(c for c in a.classes if c.name == "code")
    # most code requests are strong (beta(5, 2) difficulty), so many are rejected: under 99% served, not met
    assert code.slo_share is None and code.rejected > 0
    assert code.slo_met == (code.served / code.requests >= 0.99) and not a.all_met


def test_the_quality_floor_decides_between_strong_shares(tmp_path):
    def change(g):
        g["search"] = {"replicas": {"small": [1], "large": [1]}, "strong_shares": [0.2, 0.3], "min_quality": 0.74,
                       "num_requests": 200}
    s = cheapest(resolved(write(tmp_path, change)))
    low, high = s.tried
    # served quality: 0.8 x 0.70 + 0.2 x 0.85 = 0.73 (the hosted fallback scores 0.85 too, as the large pool does)
    # and 0.7 x 0.70 + 0.3 x 0.85 = 0.745; every request is served, so the mix is exact
    assert low.quality == pytest.approx(0.73) and high.quality == pytest.approx(0.745)
    assert not low.accepted and low.why_not == "quality below 0.74"
    assert s.best == high and high.usd_per_hour > low.usd_per_hour


def test_requests_a_pool_refuses_for_their_length_are_stated_per_class_and_pool(tmp_path):
    # patient records: prompts of 1,000 tokens, or 5,000 in one of four, + 100 output tokens. Their route targets
    # onprem-70b, cut here to max_model_len 4,096 (5,100 > 4,096: a quarter refused there), then onprem-8b
    # (16,384: none) and the hosted endpoint (no pool, no limit); public chat (at most 8,000 + 2,000) reaches both
    # pools, 16,384 on the 8B: none, and the 70B at 4,096: a share, stated too.
    data = yaml.safe_load(RESIDENCY_FILE.read_text())
    g = data["gateway"]
    g["pools"][1]["deployment"]["max_model_len"] = 4096
    records = g["classes"][1]
    records["prompt_tokens"] = {"distribution": "empirical", "values": [1000, 5000], "weights": [3, 1]}
    records["output_tokens"] = {"distribution": "fixed", "value": 100}
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(data))
    notes = resolved(path).notes
    assert notes[-1] == ("class patient-records: 25.00% of its requests have prompt + output above pool "
                         "onprem-70b's max_model_len 4,096: the pool refuses them (vLLM answers HTTP 400), and the "
                         "run counts them rejected there")
    assert len(notes) == 2 and notes[0].startswith("class public-chat: ") and "pool onprem-70b's" in notes[0]
    # the bundled document's pools hold every request: nothing stated
    assert resolved(RESIDENCY_FILE).notes == ()


def test_a_class_the_run_drew_no_request_of_is_not_judged_met(residency):
    # one request: one of the two classes gets none; its SLO was never tried, so it is not met, and the answer says
    _, a = run_gateway(residency, 1)
    empty = next(c for c in a.classes if c.requests == 0)
    assert not empty.slo_met and not a.all_met
    assert any(line.startswith(f"class {empty.name}: none of the run's 1 requests drew it") for line in a.assumptions)
    s = cheapest(replace(residency, doc=replace(residency.doc, gateway=replace(
        residency.doc.gateway, search=replace(residency.doc.gateway.search, replicas={}, num_requests=1)))))
    assert not s.tried[0].accepted and f"{empty.name}: no requests" in s.tried[0].why_not and s.best is None


def test_a_route_counts_its_rejections_by_reason_not_by_each_request_length(tmp_path):
    # every public-chat request (fixed 20,000 + 100 tokens) is longer than both pools' max_model_len: rejected by
    # the pool's scheduler with its own length in the per-request reason, counted under one reason per pool
    data = yaml.safe_load(RESIDENCY_FILE.read_text())
    chat = data["gateway"]["classes"][0]
    chat["prompt_tokens"] = {"distribution": "uniform", "min": 20000, "max": 30000}
    chat["output_tokens"] = {"distribution": "fixed", "value": 100}
    data["gateway"]["routes"][1]["fallback"] = []
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(data))
    result, a = run_gateway(resolved(path), 200)
    public = next(r for r in a.routes if r.name == "public")
    too_long = {k: v for k, v in public.rejected.items() if k != "outage"}     # the 70B's window: no fallback
    assert set(too_long) <= {"onprem-8b: prompt + output > max_model_len 16384",
                             "onprem-70b: prompt + output > max_model_len 16384"}
    assert sum(public.rejected.values()) == public.requests and sum(too_long.values()) > 1
    assert len({result.records.reject_reasons[i] for i in result.records.reject_reasons}) > 2   # per request: each
