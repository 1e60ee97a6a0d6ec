"""Report output: one self-contained HTML file from the Jinja2 template, and the same document as PDF.

No network anywhere: styles are inline, charts are inline SVG, there are no scripts, fonts
or images to fetch. weasyprint renders the very same HTML to PDF (its @page rules apply).
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import jinja2

from sizer.errors import InputError
from sizer.outputs.destination import check_destination, write_bytes
from sizer.outputs.report.data import Report
from sizer.outputs.report.summary import HOURS_PER_MONTH

TEMPLATES = Path(__file__).parent / "templates"


def _money(value: float | None) -> str:
    return "n/a (no price)" if value is None else f"${value:,.2f}"


def _command(text: str, width: int = 72) -> str:
    """A shell command over lines of at most about `width` characters, broken before an option with a
    continuation backslash, so no PDF or narrow screen breaks it inside a word."""
    lines = [""]
    for word in text.split(" "):
        if lines[-1] and word.startswith("--") and len(lines[-1]) + 1 + len(word) > width:
            lines[-1] += " \\"
            lines.append("    ")
        lines[-1] += (" " if lines[-1].strip() else "") + word
    return "\n".join(lines)


def _num(value: float | None, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.{digits}f}"


def environment() -> jinja2.Environment:
    """The templates' Jinja2 environment, with the reports' number filters."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                             autoescape=jinja2.select_autoescape(["j2", "html"]),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["money"] = _money
    env.filters["num"] = _num
    env.filters["money0"] = lambda v: "n/a (no price)" if v is None else f"${v:,.0f}"
    env.filters["command"] = _command
    env.filters["pct"] = lambda v: "-" if v is None else f"{100 * v:.1f}%"
    env.filters["gib"] = lambda v: f"{v / 2**30:,.1f}"
    return env


def render_html(report: Report, generated: str) -> str:
    """The report as HTML; `generated` (a date) is printed in the header."""
    return environment().get_template("report.html.j2").render(r=report, generated=generated,
                                                                 hours_per_month=HOURS_PER_MONTH)


def check_pdf_renderer(flag: str = "--pdf") -> None:
    """Before any work is done for a PDF: weasyprint is installed. Only looked up (find_spec), not
    imported: importing it takes a second, and only `write_pdf` needs it."""
    if importlib.util.find_spec("weasyprint") is None:
        raise InputError(None, flag, "weasyprint is not installed; pip install 'sizer[pdf]'")


def check_report_destinations(output: Path, pdf: bool, reads: tuple[str | Path | None, ...] = ()) -> Path:
    """Before any work: the HTML file (and with --pdf the PDF beside it, under the same name) can be written, none
    of them a file the command reads (`reads`), and weasyprint is there for the PDF. Returns the PDF's path."""
    check_destination(output, "--output", reads)
    pdf_path = output.with_suffix(".pdf")
    if pdf:
        if pdf_path == output:
            raise InputError(str(output), "--output", "with --pdf the PDF is written beside the HTML under the same "
                                                      "name with .pdf; name the HTML .html")
        check_destination(pdf_path, "--pdf", reads)
        check_pdf_renderer("--pdf")
    return pdf_path


def write_pdf(html: str, path: str | Path, flag: str = "--pdf") -> None:
    """The same document through weasyprint (imported here: it is an optional dependency, found by
    `check_pdf_renderer` before the work)."""
    from weasyprint import HTML

    write_bytes(path, flag, HTML(string=html, base_url=str(TEMPLATES)).write_pdf())
