"""A real report: rendered, opened in headless Chromium, printed to PDF and rasterised page by page.

Skips only outside CI where the binaries are missing (CI installs chromium and poppler-utils).
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[4]
SCENARIO = ROOT / "scenarios" / "llama-3.1-70b-h200.yaml"
SECTIONS = ("The question", "The answer in detail", "The cheapest configurations that meet the targets",
            "Memory per GPU", "Latency against request rate", "KV cache and batch size over simulated time",
            "The model, layer by layer", "Assumptions")

# Outside CI a missing tool skips; in CI (.ci/run installs both) it fails.
IN_CI = bool(os.environ.get("CI"))
needs_chromium = pytest.mark.skipif(not IN_CI and shutil.which("chromium") is None
                                    and shutil.which("chromium-browser") is None,
                                    reason="chromium is not installed (CI installs Debian's chromium)")
needs_poppler = pytest.mark.skipif(not IN_CI and (shutil.which("pdftoppm") is None
                                                  or shutil.which("pdftotext") is None),
                                   reason="pdftoppm/pdftotext are not installed (CI installs poppler-utils)")


def ink(png: bytes) -> float:
    """Share of pixels that are not (near) white."""
    from PIL import Image

    gray = Image.open(io.BytesIO(png)).convert("L")
    histogram = gray.histogram()
    return 1 - sum(histogram[245:]) / sum(histogram)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A report for the bundled 70B scenario with a small search (4 configurations, short simulations)."""
    from sizer.outputs.report import build_report, render_html, write_pdf
    from sizer.sizing.result import GoodputSettings
    from sizer.sizing.search import SearchSettings, SearchSpace

    out = tmp_path_factory.mktemp("report")
    space = SearchSpace(gpus=("h200", "h100-sxm"), tensor_parallel_sizes=(4, 8), weight_formats=("fp8",),
                        kv_cache_dtypes=("auto",))
    built = build_report(yaml.safe_load(SCENARIO.read_text()), str(SCENARIO), space, workers=1,
                         settings=SearchSettings(GoodputSettings(num_requests=150)))
    html = render_html(built, "2026-01-01")
    (out / "report.html").write_text(html)
    write_pdf(html, out / "report.pdf")
    return built, out / "report.html", out / "report.pdf"


def test_html_is_self_contained_and_has_every_section(report):
    built, html_path, _ = report
    html = html_path.read_text()
    assert not re.search(r"<script|<link|<img|<iframe|@import|\bsrc=|url\(\s*['\"]?https?:", html)
    # every section; the appendix only when a configuration was not chosen
    assert [h for h in re.findall(r"<h2>(.*?)</h2>", html)] == list(SECTIONS) + (
        ["Appendix: configurations not chosen"] if built.not_chosen else [])
    assert html.count("<svg") == 5            # cost-latency (TTFT and ITL panels), memory, latency, timeline
    assert built.answer.sizing.slo_met and built.search and built.search.recommended is not None
    # the answer is the search's recommendation as the sizing pipeline sized it: the same replicas and dollars
    best = built.search.recommended
    assert built.answer.sizing is best.sizing
    assert f"{best.sizing.replicas} replicas of" in html and f"${best.usd_per_hour:,.2f}/hour" in html
    assert built.answer.plan_command in re.sub(r" \\\n\s+", " ", html.replace("&#39;", "'"))  # joined back


def first_page(html: str) -> str:
    return html[html.index('<section id="summary">'):html.index("</section>")]


def test_first_page_holds_the_answer_its_cost_and_one_chart(report):
    """The answer sentence names the search's recommendation: its GPUs, replicas and targets; the costs are
    its cost per hour, x 730 hours per month, and per million output tokens; one chart (its TTFT and ITL panels)."""
    built, html_path, _ = report
    page = first_page(html_path.read_text())
    best = built.search.recommended
    sentence = built.headline.sentence
    gpu = best.candidate.gpu.upper()
    assert sentence.startswith(f"Serve llama-3.1-70b on {best.gpus} x {gpu} ({best.replicas} replicas of ")
    # the scenario's targets: ttft_ms 2000, itl_ms 60 (the gaps between tokens), required_share 0.95, 10 requests/s
    assert ("meets first token within 2,000 ms and gaps between tokens within 60 ms for 95% of requests "
            "at 10 requests/s.") in sentence
    assert sentence in page
    for money in (f"${best.usd_per_hour:,.2f}", f"${best.usd_per_hour * 730:,.0f}",
                  f"${best.usd_per_million_output_tokens:,.2f}"):
        assert money in page
    assert page.count("<svg") == 2 and page.count('class="panel"') == 2 and 'id="front-chart"' in page


def test_cost_latency_front_is_the_non_dominated_configurations(report):
    """On each panel a point is on the front exactly when no other point is at most as costly and at most as
    slow, and strictly better in one; the chosen point is the search's recommendation."""
    built, _, _ = report
    points = built.pareto_points
    assert len(points) == sum(1 for o in built.search.outcomes if o.priced)
    assert [p.label for p in points if p.chosen] == [built.search.recommended.candidate.label]
    for attr, flag in (("ttft_p95_ms", "front_ttft"), ("tpot_p95_ms", "front_tpot")):
        for p in points:
            beaten = any(q.usd_per_million_output_tokens <= p.usd_per_million_output_tokens
                         and getattr(q, attr) <= getattr(p, attr) and q is not p
                         and (q.usd_per_million_output_tokens, getattr(q, attr))
                         != (p.usd_per_million_output_tokens, getattr(p, attr)) for q in points)
            assert getattr(p, flag) is not beaten, (attr, p)
    # the cheapest point with the lowest latency among the cheapest is on both fronts
    cheapest = min(p.usd_per_million_output_tokens for p in points)
    assert any(p.front_ttft for p in points if p.usd_per_million_output_tokens == cheapest)


def visible_text(html: str) -> str:
    """What a reader reads as prose: no styles, charts, code or commands (field names and commands are verbatim)."""
    html = re.sub(r"<(style|svg|code|pre)\b.*?</\1>", " ", html, flags=re.S)
    return re.sub(r"<[^>]+>", " ", html)


def test_plain_words_and_every_source_code_explained(report):
    _, html_path, _ = report
    html = html_path.read_text()
    text = visible_text(html)
    assert not re.search(r"\bseeds?\b", text, re.I)
    for internal in ("None", "nan", "SizingStatus", "does_not_fit", "too_many_replicas", "Outcome("):
        assert not re.search(rf"(?<![\w.]){re.escape(internal)}(?![\w])", text), internal
    footnote = html[html.index('id="sources"'):]
    cited = set(re.findall(r"\[([A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*)\]", text))
    assert cited                                     # the H200/H100 profiles cite [AIC], [STAS] and [SILY]
    for code in cited:
        assert f"<dt>[{code}]</dt>" in footnote, code
    for kind in ("datasheet", "measured", "fitted", "assumed", "vllm default"):
        assert f"<b>{kind}</b>" in footnote


def test_headers_and_commands_do_not_wrap(report):
    _, html_path, _ = report
    css = html_path.read_text().split("</style>")[0]
    assert re.search(r"\bth \{[^}]*white-space: nowrap", css)
    assert re.search(r"\bpre \{[^}]*white-space: pre;", css)
    assert re.search(r"\.scroll \{[^}]*overflow-x: auto", css)           # wide tables scroll on a phone
    assert re.search(r"\.figure svg \{[^}]*max-width: 100%", css)


@needs_chromium
def test_html_renders_in_chromium_without_errors(report):
    from chromium import open_page

    _, html_path, _ = report
    url = html_path.as_uri()
    page = open_page(url)
    assert page.console == [] and page.exceptions == [] and page.log_errors == []
    assert page.requests == [url]                                       # no network, nothing else loaded
    assert ink(page.screenshot_png) > 0.03                             # text, tables and three charts


@needs_chromium
def test_chromium_check_catches_errors(tmp_path):
    """The negative control: the same check sees console errors, exceptions and failed loads."""
    from chromium import open_page

    page_path = tmp_path / "broken.html"
    page_path.write_text('<p>x</p><script>console.error("boom"); missing();</script><img src="nope.png">')
    page = open_page(page_path.as_uri())
    assert page.console == ["error: boom"]
    assert page.exceptions and "missing is not defined" in page.exceptions[0]
    assert page.log_errors and "ERR_FILE_NOT_FOUND" in page.log_errors[0]
    assert page.requests == [page_path.as_uri(), (tmp_path / "nope.png").as_uri()]


@needs_poppler
def test_pdf_has_the_same_sections_on_non_blank_pages(report, tmp_path):
    _, _, pdf_path = report
    subprocess.run(["pdftoppm", "-r", "30", "-png", str(pdf_path), str(tmp_path / "page")], check=True, timeout=120)
    pages = sorted(tmp_path.glob("page-*.png"))
    assert 3 <= len(pages) <= 20
    assert all(ink(p.read_bytes()) > 0.005 for p in pages)
    text = subprocess.run(["pdftotext", "-layout", str(pdf_path), "-"], check=True, capture_output=True,
                          text=True).stdout
    positions = [text.find(s) for s in SECTIONS]
    assert -1 not in positions and positions == sorted(positions)       # every section, in the same order


@pytest.mark.slow
@needs_poppler
def test_pdf_page_one_has_the_answer_and_cost(report, tmp_path):
    built, _, pdf_path = report
    page_one = subprocess.run(["pdftotext", "-f", "1", "-l", "1", str(pdf_path), "-"], check=True,
                              capture_output=True, text=True).stdout
    flat = " ".join(page_one.split())
    assert " ".join(built.headline.sentence.split()) in flat
    assert f"${built.headline.usd_per_hour:,.2f}" in flat and "per month" in flat
    assert "The question" not in flat                               # page 1 is the summary alone
    subprocess.run(["pdftoppm", "-f", "1", "-l", "1", "-r", "40", "-png", str(pdf_path), str(tmp_path / "one")],
                   check=True, timeout=60)
    (png,) = tmp_path.glob("one-*.png")
    assert ink(png.read_bytes()) > 0.02                               # text, cost boxes and the chart


def test_without_a_search_page_one_shows_latency_against_load(report):
    """`--no-search`: no cost-latency chart; page 1 shows the latency chart, drawn under ids of its own."""
    import dataclasses

    from sizer.outputs.report import render_html
    from sizer.outputs.report.charts import latency_chart

    built, _, _ = report
    chart = latency_chart(built.latency_points, {"ttft_ms": 2000}, 1.0, chart_id="front")
    alone = dataclasses.replace(built, search=None, pareto_points=[], top=[], not_chosen=[], front_svgs=[chart])
    html = render_html(alone, "2026-01-01")
    page = first_page(html)
    assert page.count("<svg") == 1 and "Why this one: latency of one replica as the load grows" in page
    ids = re.findall(r'\bid="([^"]+)"', re.sub(r"<style.*?</style>", "", html, flags=re.S))
    assert len(ids) == len(set(ids))                                   # no chart id clashes with another's
    assert "No search was run for this report" in html and "Appendix" not in html
