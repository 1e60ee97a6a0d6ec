"""Report output: one self-contained HTML file from the Jinja2 template, and the same document as PDF.

No network anywhere: styles are inline, charts are inline SVG, there are no scripts, fonts
or images to fetch. weasyprint renders the very same HTML to PDF (its @page rules apply).
"""

from __future__ import annotations

import math
from pathlib import Path

import jinja2

from sizer.errors import InputError
from sizer.outputs.destination import write_bytes
from sizer.outputs.report.data import Report

TEMPLATES = Path(__file__).parent / "templates"


def _money(value: float | None) -> str:
    return "n/a (no price)" if value is None else f"${value:,.2f}"


def _num(value: float | None, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.{digits}f}"


def render_html(report: Report, generated: str) -> str:
    """The report as HTML; `generated` (a date) is printed in the header."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                             autoescape=jinja2.select_autoescape(["j2", "html"]),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["money"] = _money
    env.filters["num"] = _num
    env.filters["pct"] = lambda v: "-" if v is None else f"{100 * v:.1f}%"
    env.filters["gib"] = lambda v: f"{v / 2**30:,.1f}"
    return env.get_template("report.html.j2").render(r=report, generated=generated)


def write_pdf(html: str, path: str | Path, flag: str = "--pdf") -> None:
    """The same document through weasyprint (imported here: it is an optional dependency)."""
    try:
        from weasyprint import HTML
    except ImportError as exc:   # pragma: no cover - depends on the install
        raise InputError(None, "--pdf", f"weasyprint is not installed ({exc}); pip install 'sizer[pdf]'") from None
    write_bytes(path, flag, HTML(string=html, base_url=str(TEMPLATES)).write_pdf())
