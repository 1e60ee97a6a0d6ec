"""Sizing reports: `build_report` gathers the numbers, `render_html` and `write_pdf` print them."""

from sizer.outputs.report.data import Answer, Report, build_report
from sizer.outputs.report.render import render_html, write_pdf

__all__ = ["Answer", "Report", "build_report", "render_html", "write_pdf"]
