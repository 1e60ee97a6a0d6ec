"""workload.schedule: its rate at any time, and its bad inputs (one line naming the field, exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sizer.cli import app
from sizer.errors import InputError
from sizer.inputs.schedule import Profile, SchedulePoint, ScheduleSection, point_s, points_profile

ROOT = Path(__file__).resolve().parents[3]


def test_step_and_linear_rates_wrap_around_the_day():
    points = [SchedulePoint("06:00", 10.0), SchedulePoint("18:00", 40.0)]
    step = points_profile(ScheduleSection(points=points), None)
    assert step.times_s == (21_600.0, 64_800.0)
    assert step.rate_at(12 * 3600) == 10.0 and step.rate_at(20 * 3600) == 40.0
    assert step.rate_at(3 * 3600) == 40.0            # before the first point: the last one runs on from yesterday
    linear = points_profile(ScheduleSection(points=points, interpolation="linear"), None)
    assert linear.rate_at(12 * 3600) == pytest.approx(25.0)     # halfway from 10 at 06:00 to 40 at 18:00
    assert linear.rate_at(0) == pytest.approx(25.0)             # halfway from 40 at 18:00 to 10 at 06:00 (+24 h)
    week = points_profile(ScheduleSection(period="week", points=[SchedulePoint("Tue 09:30", 5.0)]), None)
    assert week.times_s == (86_400 + 9 * 3600 + 30 * 60,) and week.period_s == 7 * 86_400


def test_a_profile_grows_month_by_month():
    from sizer.inputs.schedule import grown
    p = grown(Profile(86_400.0, (0.0,), (10.0,), False), 0.05, 2)
    assert p.rate_at(0) == pytest.approx(11.025)            # 10 x 1.05^2


BAD = [
    ({"workload": {"schedule": {"points": [{"at": "09:00", "rate_per_s": 5}], "time_zone": "Mars/Olympus"}}},
     "workload.schedule.time_zone"),
    ({"workload": {"schedule": {"points": [{"at": "09:00", "rate_per_s": 5}, {"at": "08:00", "rate_per_s": 5}]}}},
     "workload.schedule.points[1].at"),
    ({"workload": {"schedule": {"points": [{"at": "25:00", "rate_per_s": 5}]}}}, "workload.schedule.points[0].at"),
    ({"workload": {"schedule": {}}}, "workload.schedule.points"),
    ({"workload": {"schedule": {"points": [{"at": "09:00", "rate_per_s": 5}], "interval_s": 7000}}},
     "workload.schedule.interval_s"),
    ({"autoscaling": {"min_replicas": 2}}, "autoscaling"),
    ({"workload": {"schedule": {"points": [{"at": "09:00", "rate_per_s": 5}]}},
      "slo": {"ttft_ms": None, "itl_ms": None}}, "slo"),
    ({"workload": {"schedule": {"points": [{"at": "09:00", "rate_per_s": 5}]}},
      "deployment": {"replicas": 2}}, "workload.schedule"),
    ({"workload": {"schedule": {"points": [{"at": "09:00", "rate_per_s": 5}]}},
      "autoscaling": {"min_replicas": 4, "max_replicas": 2}}, "autoscaling.min_replicas"),
    # a reserved base above the most replicas allowed: the day never runs them, yet priced them all (day.py's
    # reserved + burst policy pays base x GPUs every minute)
    ({"workload": {"schedule": {"points": [{"at": "09:00", "rate_per_s": 5}]}},
      "autoscaling": {"reserved_replicas": 5, "max_replicas": 4}}, "autoscaling.reserved_replicas"),
    ({"workload": {"schedule": {"points": [{"at": "09:00", "rate_per_s": 5}]}},
      "autoscaling": {"storage_bytes_per_s": 0}}, "autoscaling.storage_bytes_per_s"),
    ({"workload": {"schedule": {"points": [{"at": "09:00", "rate_per_s": 5}]}},
      "autoscaling": {"target_utilisation": 0.5}}, "autoscaling.target_utilisation"),
    # the day is priced minute by minute: 90 s rows (a divisor of the day) and 90 s trace bins are refused
    ({"workload": {"schedule": {"points": [{"at": "09:00", "rate_per_s": 5}], "interval_s": 90}}},
     "workload.schedule.interval_s"),
    ({"workload": {"schedule": {"trace": {"path": "t.csv", "format": "csv", "bin_s": 90}}}},
     "workload.schedule.trace.bin_s"),
]


@pytest.mark.parametrize("change,field", BAD, ids=[f for _, f in BAD])
def test_bad_schedules_are_refused_in_one_line(tmp_path, change, field):
    data = yaml.safe_load((ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml").read_text())
    for key, section in change.items():
        data[key] = {**data.get(key, {}), **section}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    out = CliRunner().invoke(app, ["plan", str(path)])
    assert out.exit_code == 2, out.output
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and field in lines[0] and "Traceback" not in out.output


def test_a_trace_as_the_time_profile(tmp_path):
    # tests/data/traces/azure_conv_head500.csv (its README gives the source): 500 requests. Binned by minute,
    # the rates x 60 s count every request once, and the period is the span rounded up to whole 5-minute rows.
    from sizer.inputs.scenario import load_scenario
    from sizer.sizing.schedule_trace import trace_profile
    trace = ROOT / "tests" / "data" / "traces" / "azure_conv_head500.csv"
    data = yaml.safe_load((ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml").read_text())
    data["workload"]["schedule"] = {"trace": {"path": str(trace), "format": "csv", "bin_s": 60}, "interval_s": 300}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    p = trace_profile(load_scenario(path))
    assert sum(r * 60 for r in p.rates_per_s) == pytest.approx(500)
    assert p.period_s % 300 == 0 and len(p.rates_per_s) == p.period_s / 60 and not p.linear


def test_a_tpot_target_alone_sizes_a_schedule(tmp_path):
    # slo.tpot_ms is a target of its own (issue 27): a schedule with only it is sized, not refused as "no targets"
    data = yaml.safe_load((ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml").read_text())
    data["workload"]["schedule"] = {"points": [{"at": "00:00", "rate_per_s": 2}]}
    data["slo"] = {"tpot_ms": 60}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    out = CliRunner().invoke(app, ["plan", str(path)])
    assert out.exit_code == 0, out.output


def test_a_trace_bin_cut_short_by_the_period_is_a_rate_over_its_own_length(tmp_path):
    # one request a second for 5,400 s, binned by the hour, in rows of 30 minutes: the period is 5,400 s, so the
    # second bin is 1,800 s long and holds 1,800 requests: 1 req/s, not 1,800 / 3,600 = 0.5
    from sizer.inputs.scenario import load_scenario
    from sizer.sizing.schedule_trace import trace_profile
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(f"{i},100,10\n" for i in range(5401)))
    data = yaml.safe_load((ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml").read_text())
    data["workload"]["schedule"] = {"trace": {"path": str(trace), "format": "csv", "bin_s": 3600}, "interval_s": 1800}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    p = trace_profile(load_scenario(path))
    assert p.period_s == 5400
    assert p.rates_per_s == pytest.approx((3600 / 3600, 1801 / 1800))


def test_a_local_server_is_not_autoscaled(tmp_path):
    # llama.cpp and Ollama plan one server (sizer.sizing.pipeline): a schedule on them is named as not modelled
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({
        "model": "llama-3.1-8b", "hardware": "h100", "deployment": {"engine": "llama.cpp"}, "slo": {"ttft_ms": 500},
        "workload": {"arrival": {"rate_per_s": 1}, "schedule": {"points": [{"at": "00:00", "rate_per_s": 1}]},
                     "prompt_tokens": {"distribution": "fixed", "value": 100},
                     "output_tokens": {"distribution": "fixed", "value": 100}}}))
    out = CliRunner().invoke(app, ["plan", str(path)])
    assert out.exit_code == 2 and "workload.schedule: not with deployment.engine llama.cpp" in out.output


@pytest.mark.parametrize("at, period, seconds", [
    ("09:30", "day", 9 * 3600 + 30 * 60), ("Tue 09:30", "week", 86_400 + 9 * 3600 + 30 * 60),
    ("tuesday 09:30", "week", 86_400 + 9 * 3600 + 30 * 60),
    ("0\u00b2:00", "day", None), ("\u0669:00", "day", None),   # a superscript two (int() raised), an Arabic-Indic nine
    ("Monxyz 09:00", "week", None), ("Tues 09:00", "week", None),      # not a day's name nor its three letters
])
def test_a_point_is_a_time_in_ascii_digits_and_a_day_by_name(at, period, seconds):
    if seconds is not None:
        assert point_s(at, period, "s.yaml", "at") == seconds
        return
    with pytest.raises(InputError) as caught:
        point_s(at, period, "s.yaml", "at")
    assert caught.value.field == "at"
