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
SECTIONS = ("The question", "The answer", "Memory per GPU", "Latency against request rate",
            "KV cache and batch size over simulated time", "Configurations searched", "The model, layer by layer",
            "Assumptions")

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
    assert [h for h in re.findall(r"<h2>(.*?)</h2>", html)] == list(SECTIONS)
    assert html.count("<svg") == 3                                      # memory, latency, timeline
    assert built.answer.sizing.slo_met and built.search and built.search.recommended is not None
    # the answer is the search's recommendation as the sizing pipeline sized it: the same replicas and dollars
    best = built.search.recommended
    assert built.answer.sizing is best.sizing
    assert f"{best.sizing.replicas} replicas of" in html and f"${best.usd_per_hour:,.2f}/hour" in html
    assert built.answer.plan_command in html.replace("&#39;", "'")


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
