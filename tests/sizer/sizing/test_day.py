"""Capacity over a day (sizer.sizing.day): a constant schedule is today's steady plan; the bundled diurnal
scenario's day (slow tier: the acceptance of issue 28)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sizer.cli import app
from sizer.inputs.scenario import load_scenario
from sizer.inputs.schedule import AutoscalingSection, SchedulePoint, ScheduleSection
from sizer.sizing.day import CURVE_FRACTIONS, plan_day
from sizer.sizing.pipeline import add_simulation
from sizer.sizing.plan import make_plan
from sizer.sizing.resolve import resolve
from sizer.sizing.result import GoodputSettings

ROOT = Path(__file__).resolve().parents[3]
FAST = GoodputSettings(num_requests=200)


def test_a_constant_schedule_gives_the_steady_plans_replicas(simulations_once):
    # simulations_once (tests/sizer/conftest.py): the day's peak sizing asks the steady sizing's simulations again
    # The chat scenario at 40 req/s (300 requests at its operating point), and the same rate as a schedule held
    # all day. The steady pipeline's replicas are the day's at every step: the SLO rate per replica is bisected
    # below peak / (n - 1), which misses, so ceil(40 / it) = n; nothing is ever short, so nothing is simulated.
    s = load_scenario(ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml")
    w = dataclasses.replace(s.workload, num_requests=300,
                            arrival=dataclasses.replace(s.workload.arrival, rate_per_s=40.0))
    steady_r = resolve(dataclasses.replace(s, workload=w))
    steady = add_simulation(make_plan(steady_r), steady_r, FAST).simulation.replicas
    assert steady >= 2                                       # a count the bisection has a bracket for
    sch = ScheduleSection(points=[SchedulePoint("00:00", 40.0)])
    r = resolve(dataclasses.replace(s, workload=dataclasses.replace(w, schedule=sch),
                                    autoscaling=AutoscalingSection(scale_ahead=False)))
    calls = []
    day, verdict = plan_day(r, make_plan(r), FAST, progress=lambda done, total: calls.append((done, total)))
    assert verdict.startswith("over the day the SLO holds autoscaled")
    # its simulations counted for the progress display: the peak's sizing, then each point of the curve; no
    # window to simulate, so the total stays 1 + the curve's points and the last call reaches it
    assert calls[-1] == (1 + len(CURVE_FRACTIONS), 1 + len(CURVE_FRACTIONS))
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)
    assert day.peak_replicas == steady
    assert {i.replicas_needed for i in day.intervals} == {steady}
    assert {(i.replicas_serving_min, i.replicas_serving_max) for i in day.intervals} == {(steady, steady)}
    assert day.windows == () and not any(i.simulated for i in day.intervals)
    static, auto = day.policies[:2]
    assert static.gpu_hours_per_period == auto.gpu_hours_per_period == steady * 24
    # the chat scenario's ITL target is met through the SLO rate per replica, and the day says the per-interval
    # shares do not score it (per request, a request keeps no token gaps of its own)
    assert s.slo.itl_ms is not None
    assert any(n.startswith(f"ITL target {s.slo.itl_ms:g} ms") and "not the ITL" in n for n in day.notes)


@pytest.mark.slow
def test_the_bundled_diurnal_day(tmp_path, simulations_once):
    # simulations_once (tests/sizer/conftest.py): the day's peak is the scenario's steady rate, so the day's sizing
    # asks the plan's simulations again; the same inputs give the same bits, so they run once
    # Issue 28's acceptance: replicas and SLO per hour and the three policies per month in --json; autoscaled
    # cheaper than static peak; the SLO held in every hour but those of the stated scale-up windows.
    out = CliRunner().invoke(app, ["plan", str(ROOT / "scenarios" / "diurnal-chat-h100.yaml"), "--simulate", "--json"])
    assert out.exit_code == 0, out.output
    day = json.loads(out.stdout)["day"]
    assert len(day["intervals"]) == 24
    rates = [i["rate_per_s"] for i in day["intervals"]]
    assert max(rates) / min(rates) == pytest.approx(6.0)         # 48 / 8 req/s: the scenario's 6x
    policies = {p["name"]: p for p in day["policies"]}
    assert set(policies) == {"static peak", "autoscaled", "reserved base + burst"}
    assert policies["autoscaled"]["usd_per_month"] < policies["static peak"]["usd_per_month"]
    required = yaml.safe_load((ROOT / "scenarios" / "diurnal-chat-h100.yaml").read_text())["slo"]["required_share"]
    windows = {w["start"][:2] for w in day["windows"]}
    assert windows                                              # the reactive policy lags the 09:00 and 19:00 jumps
    for i in day["intervals"]:
        assert i["simulated"] == (i["start"][:2] in windows)
        if not i["simulated"]:
            assert i["slo_share"] >= required, i
    assert day["cheapest_meeting_slo"] is not None
    assert day["energy"]["kwh_per_million_output_tokens"] > 0


def test_a_steady_plans_energy_is_its_power_over_its_tokens():
    # Plan.energy at the operating point: kWh an hour = W per GPU x GPUs x 3,600 s x PUE / 3.6e6, and per million
    # output tokens = that / (rate x mean output tokens x 3,600) x 1e6 (sizer/analytic/energy.py)
    from sizer.sizing.day import steady_energy
    s = load_scenario(ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml")
    r = resolve(dataclasses.replace(s, workload=dataclasses.replace(s.workload, num_requests=300)))
    plan = add_simulation(make_plan(r), r, FAST)
    e = steady_energy(r, plan)
    gpus = plan.simulation.replicas
    assert 80.0 <= e.watts_per_gpu <= 700.0                     # between the H100's idle and prefill-bound power
    assert e.kwh_per_hour == pytest.approx(e.watts_per_gpu * gpus * 3600 / 3.6e6)
    tokens_per_hour = 6.0 * plan.step_times.output_tokens_mean * 3600
    assert e.kwh_per_million_output_tokens == pytest.approx(e.kwh_per_hour / tokens_per_hour * 1e6)
    assert e.g_co2e_per_million_output_tokens is None           # no grid intensity stated


def test_the_reserved_base_is_priced_on_an_h200(tmp_path):
    # The bundled diurnal day on H200s: hardware_profiles/h200.yaml quotes a 1-year reserved price ($3.20) under
    # its $4.50 median on demand, so the reserved base + burst policy is priced, not "not priced".
    d = yaml.safe_load((ROOT / "scenarios" / "diurnal-chat-h100.yaml").read_text())
    d["hardware"] = "h200"
    path = tmp_path / "diurnal-chat-h200.yaml"
    path.write_text(yaml.safe_dump(d))
    r = resolve(load_scenario(path))
    day, _ = plan_day(r, make_plan(r), FAST)
    static, auto, reserved = day.policies
    assert reserved.name == "reserved base + burst" and reserved.usd_per_month is not None
    assert reserved.note.startswith("1 reserved at $3.2/GPU-h")
    # One replica (1 GPU, TP 1) is reserved all day: 24 GPU-h at $3.20, and every other paid GPU-hour of the
    # autoscaled day bursts at $4.50; min_replicas is 1, so the base never exceeds what is paid. Per month:
    # x 730 h / 24 h (sizer/sizing/cost.py HOURS_PER_MONTH).
    expected = (24 * 3.20 + (auto.gpu_hours_per_period - 24) * 4.50) * 730 / 24
    assert reserved.usd_per_month == pytest.approx(expected)
    assert reserved.usd_per_month < auto.usd_per_month < static.usd_per_month
    # the H200's own power figures, not the H100 shares of TDP
    assert day.energy is not None and day.energy.power.decode_w == 300 and "h200 profile" in day.energy.power.source


def test_one_replica_at_the_peak_takes_its_slo_rate_from_the_sizing_and_a_capped_month_is_said():
    # 2 req/s of chat on one H100 needs one replica, whose goodput is far above twice the peak: the SLO rate per
    # replica is bisected up to that goodput, not capped at 2 x 2 = 4 req/s (which sized growth months 10x too big).
    # Traffic doubling monthly for 4 months with max_replicas 1: the months whose peak passes that rate are said
    # to be capped, not shown as if one replica were enough.
    s = load_scenario(ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml")
    sch = ScheduleSection(points=[SchedulePoint("00:00", 1.5)], growth_per_month=1.0, months=4)
    w = dataclasses.replace(s.workload, num_requests=300, schedule=sch)
    r = resolve(dataclasses.replace(s, workload=w, autoscaling=AutoscalingSection(scale_ahead=False,
                                                                                    max_replicas=1)))
    day, _ = plan_day(r, make_plan(r), FAST)
    assert day.peak_replicas == 1 and day.slo_rate_per_replica_per_s > 2 * 1.5
    # the peaks are 3, 6, 12 and 24 req/s; the SLO rate per replica lies between 12 and 24 here (15.5 req/s when
    # written), so month 4 passes it
    assert 12.0 < day.target_per_replica_per_s < 24.0
    assert [m.peak_rate_per_s for m in day.growth] == [3.0, 6.0, 12.0, 24.0]
    assert {m.peak_replicas for m in day.growth} == {1}
    assert any(n.startswith("months 4 ahead") and "SLO is missed" in n for n in day.notes)
    # 300 requests against FAST's 200 a goodput probe: enough, so no note on a short run
    assert not any("queues may not build" in n for n in day.notes)
    short = dataclasses.replace(r, workload=dataclasses.replace(r.workload, num_requests=50))
    notes = plan_day(short, make_plan(short), FAST)[0].notes
    # 50 requests, fewer than the goodput search's 200: the SLO rate's run is said to be short
    assert any("over the scenario's 50 requests" in n and "queues may not build" in n for n in notes)


def test_the_reserved_base_is_paid_every_step():
    # Four one-hour steps paying 1, 1, 3 and 2 replicas of 1 GPU, 2 of them reserved at $2/GPU-h, on demand $4:
    #   GPU-hours: the base's 2 every hour, serving or not, + what is paid above it: 2 + 2 + 3 + 2 = 9 a period
    #   (the autoscaled policy pays 1 + 1 + 3 + 2 = 7); cost: 2 x 4 h x $2 + (3 - 2) x 1 h x $4 = $20 a period;
    #   per month: x 730 h / 4 h = $3,650 = 9 GPU-h of which 8 reserved ($16) and 1 on demand ($4), x 182.5
    from types import SimpleNamespace

    from sizer.inputs.scenario import SLOSection
    from sizer.sizing.autoscale import ReplicaTimeline
    from sizer.sizing.day import _policies
    r = SimpleNamespace(price_usd_per_gpu_hour=4.0, slo=SLOSection(ttft_ms=500),
                        hardware=SimpleNamespace(id="gpu", reserved_usd_per_gpu_hour=2.0))
    tl = ReplicaTimeline(3600.0, (1, 1, 3, 2), (1, 1, 3, 2), (1, 1, 3, 2))
    static, auto, reserved = _policies(r, tl, 3, 1, 1.0, 1.0, AutoscalingSection(reserved_replicas=2))
    assert (static.gpu_hours_per_period, auto.gpu_hours_per_period) == (12.0, 7.0)
    assert reserved.gpu_hours_per_period == 9.0
    assert reserved.usd_per_month == pytest.approx(20 * 730 / 4)
    assert reserved.note == "2 reserved at $2/GPU-h, the rest on demand"
