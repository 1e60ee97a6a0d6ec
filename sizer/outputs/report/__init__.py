"""Sizing reports: `build_report` gathers the numbers, `render_html` and `write_pdf` print them
(`check_pdf_renderer` first, before the work)."""

from sizer.outputs.report.data import Answer, Report, build_report
from sizer.outputs.report.render import check_pdf_renderer, check_report_destinations, render_html, write_pdf

__all__ = ["Answer", "Report", "build_report", "check_pdf_renderer", "check_report_destinations", "render_html",
           "write_pdf"]
