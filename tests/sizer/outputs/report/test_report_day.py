"""The report's day over a schedule: its chart (fast, on a day made by hand) and the bundled diurnal scenario's
section (slow tier)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.cli import app
from sizer.outputs.report.day import day_chart
from sizer.sizing.autoscale import ScaleUpDelay
from sizer.sizing.day_result import DayPlan, Interval

ROOT = Path(__file__).resolve().parents[4]


def hand_made_day() -> DayPlan:
    rows = (Interval("00:00", 8.0, 1, 1, 1, 1.0, 1.0, False, 0.5),
            Interval("01:00", 48.0, 3, 1, 3, 3.0, 0.8, True, 1.9),
            Interval("02:00", 24.0, 2, 2, 3, 2.1, 0.99, False, 1.2))
    return DayPlan("day", "Europe/Paris", 60.0, 3600.0, 48.0, 3, 21.7, 17.4, ScaleUpDelay(300, 120, 16, 30, 30), False,
                   (), rows, (), (), None, 1000.0, 250_000.0, None, (), ())


def test_the_day_chart_is_inline_deterministic_and_labelled():
    day = hand_made_day()
    svg = day_chart(day)
    assert svg.startswith("<svg") and svg == day_chart(day)                # inline, no dates
    assert all(i.startswith("day-") for i in re.findall(r'\bid="([^"]+)"', svg))
    for text in ("requests/s", "replicas", "SLO met (%)", "Europe/Paris", "01:00"):
        assert text in svg


@pytest.mark.slow
def test_the_bundled_diurnal_report_shows_the_day(tmp_path, simulations_once):
    # simulations_once (tests/sizer/conftest.py): the report's sections ask the sizing's and the day's simulations
    # again (13 of 23); the same inputs give the same bits, so each runs once
    out = tmp_path / "day.html"
    result = CliRunner().invoke(app, ["report", str(ROOT / "scenarios" / "diurnal-chat-h100.yaml"), "-o", str(out),
                                      "--no-search"])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    section = html[html.index('<section id="day">'):]
    section = section[:section.index("</section>")]
    for name in ("static peak", "autoscaled", "reserved base + burst", "cheapest meeting the SLO", "<svg"):
        assert name in section
    assert section.count("<tr><td>") == 3 + 24                           # three policies, 24 hours
    assert "(scale-up, simulated)" in section
