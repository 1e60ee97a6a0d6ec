"""`sizer report` on a gateway document: the answer first, then each pool, class and route, the searched
configurations and the assumptions. Every figure checked here is the one `sizer plan --simulate --json`
prints for the same document (the same seed gives the same run), so the report and the JSON cannot drift."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sizer.cli.app import app

ROOT = Path(__file__).resolve().parents[4]
DIFFICULTY = ROOT / "scenarios" / "gateway-difficulty-routing.yaml"


def money(x: float) -> str:
    return f"${x:,.2f}"            # sizer.outputs.report.render._money


@pytest.fixture(scope="module")
def doc(tmp_path_factory) -> Path:
    """A small version of the bundled difficulty-routing gateway: 200 requests (about 33 s at 6/s), the large
    pool's outage moved to 10-20 s so it falls inside, a gateway-wide cap of $1 an hour on the hosted
    endpoint, and a search over 4 configurations of 100 requests each."""
    tmp = tmp_path_factory.mktemp("gateway-report")
    data = yaml.safe_load(DIFFICULTY.read_text())
    g = data["gateway"]
    g["num_requests"] = 200
    g["pools"][1]["outages"] = [{"start_s": 10, "end_s": 20}]
    g["budget_usd_per_hour"] = 1.0
    g["search"] = {"replicas": {"small": [1], "large": [1, 2]}, "strong_shares": [0.2, 0.5], "num_requests": 100}
    path = tmp / "gw.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def run(doc, tmp_path_factory):
    path, tmp = doc, tmp_path_factory.mktemp("gateway-report-out")
    runner = CliRunner()
    planned = runner.invoke(app, ["plan", str(path), "--simulate", "--json"])
    assert planned.exit_code == 0, planned.output
    out = tmp / "gw.html"
    reported = runner.invoke(app, ["report", str(path), "-o", str(out), "--date", "2026-12-01"])
    assert reported.exit_code == 0, reported.output
    return path, json.loads(planned.stdout), html.unescape(out.read_text())


def row(text: str, row_id: str) -> str:
    """The text of one table row, tags dropped."""
    found = re.search(rf'<tr id="{re.escape(row_id)}">(.*?)</tr>', text, re.S)
    assert found, row_id
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", found.group(1)))


@pytest.mark.slow       # the module's run: plan --simulate and report, 4 configurations searched in each
def test_the_answer_comes_first_with_the_cheapest_sizing_and_every_class_verdict(run):
    _, a, text = run
    best = a["search"]["best"]
    assert best is not None and best["accepted"]
    answer = text[text.index('id="answer"'):text.index('id="pools"')]
    replicas = ", ".join(f"{k} x{v}" for k, v in best["replicas"].items())
    assert f"Cheapest sizing meeting every class's SLO: {replicas}, strong share {100 * best['strong_share']:.0f}%" \
        in answer
    assert money(best["usd_per_hour"]) in answer and money(best["usd_per_million_output_tokens"]) in answer
    assert f"Chosen from {len(a['search']['tried'])} configurations" in answer
    for c in a["classes"]:
        verdict = "met" if c["slo_met"] else "NOT met"
        assert f"{c['name']}: {100 * c['slo_share']:.1f}% within SLO (need {100 * c['required_share']:.0f}%), " \
               f"{verdict}" in re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", answer))


@pytest.mark.slow       # the module's run: plan --simulate and report, 4 configurations searched in each
def test_each_pool_class_and_route_row_holds_the_json_figures(run):
    _, a, text = run
    for p in a["pools"]:
        r = row(text, f"pool-{p['name']}")
        assert f" {p['requests']:,} " in r and money(p["usd_per_hour"]) in r
        assert f"{p['replicas']} x {p['gpus_per_replica']} x {p['gpu']}" in r
    for e in a["externals"]:
        r = row(text, f"external-{e['name']}")
        assert f" {e['requests']:,} " in r and money(e["usd_per_hour"]) in r
    for c in a["classes"]:
        r = row(text, f"class-{c['name']}")
        assert f" {c['requests']:,} " in r and f"{100 * c['fallback_rate']:.1f}%" in r
        for target, share in c["share_routed"].items():
            assert f"{target} {100 * share:.1f}%" in r
    assert money(a["usd_per_hour"]) in text and money(a["usd_per_million_output_tokens"]) in text


@pytest.mark.slow       # the module's run: plan --simulate and report, 4 configurations searched in each
def test_fallback_and_rejection_reasons_are_counted_per_route(run):
    _, a, text = run
    (route,) = a["routes"]
    # the outage (10-20 s) sends the large pool's requests to the hosted endpoint, whose gateway-wide cap of
    # $1 an hour lets ~7 of them through a minute (a code request costs ~2,400 x $0.9 / 1e6 = $0.0022, x 60)
    assert route["fallbacks"].get("large: outage", 0) > 0
    assert route["rejected"].get("over budget (gateway)", 0) > 0
    r = row(text, f"route-{route['name']}")
    for reason, n in route["fallbacks"].items():
        assert f"{reason} x{n}" in r
    for reason, n in route["rejected"].items():
        assert f"{reason} x{n}" in r


@pytest.mark.slow       # the module's run: plan --simulate and report, 4 configurations searched in each
def test_searched_configurations_and_assumptions(run):
    _, a, text = run
    tried = a["search"]["tried"]
    search = text[text.index('id="search"'):text.index('id="assumptions"')]
    assert search.count("<svg") == 1                              # cost against the strong share
    assert search.count("no: ") == sum(not c["accepted"] for c in tried)
    assert search.count("<tr") == 1 + len(tried)
    for c in tried:
        assert money(c["usd_per_hour"]) in search
    for line in a["assumptions"]:
        assert line in text


@pytest.mark.slow       # the module's run: plan --simulate and report, 4 configurations searched in each
def test_no_search_reports_the_stated_configuration(run, tmp_path):
    path, a, _ = run
    out = tmp_path / "stated.html"
    result = CliRunner().invoke(app, ["report", str(path), "-o", str(out), "--no-search"])
    assert result.exit_code == 0, result.output
    text = html.unescape(out.read_text())
    assert "The stated configuration (small x1, large x1, strong share 30%)" in text
    assert 'id="search"' not in text and money(a["usd_per_hour"]) in text     # the same stated run as the JSON's


@pytest.mark.parametrize("flags", [["--tp", "2"], ["--workers", "2"], ["--rate", "3"], ["--json"],
                                   ["--emit", "vllm"], ["--gpus", "h100"]], ids=lambda f: f[0])
def test_a_flag_that_does_not_apply_is_refused_in_one_line(doc, tmp_path, flags):
    path = doc
    result = CliRunner().invoke(app, ["report", str(path), "-o", str(tmp_path / "x.html"), *flags])
    assert result.exit_code == 2 and flags[0] in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.html").exists()


def test_no_output_is_refused_in_one_line(doc):
    result = CliRunner().invoke(app, ["report", str(doc)])
    assert result.exit_code == 2 and "--output" in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_pdf_holds_the_same_answer(doc, tmp_path):
    pytest.importorskip("weasyprint")
    out = tmp_path / "gw.html"
    result = CliRunner().invoke(app, ["report", str(doc), "-o", str(out), "--no-search", "--pdf"])
    assert result.exit_code == 0, result.output
    pdf = out.with_suffix(".pdf")
    assert pdf.read_bytes().startswith(b"%PDF")
    if shutil.which("pdftotext"):
        text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
        assert "Gateway report" in text and "Routes: fallbacks and rejections" in text
