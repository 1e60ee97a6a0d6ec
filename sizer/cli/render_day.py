"""The terminal view of a day over a schedule (`Plan.day`): one row per interval, the scale-up windows
simulated, the three policies per month, energy and the months ahead. Fits 80 columns."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from sizer.cli.terminal_text import styled

if TYPE_CHECKING:      # annotations only: rendering a plan without a schedule need not import the day's code
    from sizer.sizing.day_result import DayPlan, SteadyEnergy


def _usd(x: float | None) -> str:
    return "no price" if x is None else f"${x:,.0f}"


def render_day(day: DayPlan, console: Console) -> None:
    d = day.scale_up_delay
    console.print(styled((f"Capacity over the {day.period}", "bold"), f" ({day.time_zone}): peak "
                         f"{day.peak_rate_per_s:g} req/s needs {day.peak_replicas} replicas; SLO rate "
                         f"{day.slo_rate_per_replica_per_s:.2f} req/s per replica, target "
                         f"{day.target_per_replica_per_s:.2f}"))
    console.print(f"scale-up delay {d.total_s:.0f} s = node {d.node_provisioning_s:.0f} + image "
                  f"{d.image_pull_s:.0f} + weights {d.weights_load_s:.0f} + engine {d.engine_start_s:.0f} + "
                  f"CUDA graphs {d.cuda_graph_capture_s:.0f}; "
                  + ("scaling one delay ahead of the schedule" if day.scale_ahead else "reacting to the rate now"),
                  highlight=False)
    t = Table(title="Per interval (autoscaled; * = scale-up window, simulated)", title_justify="left")
    for name in ("start", "req/s", "needed", "serving", "GPU-h", "SLO met", "kWh"):
        t.add_column(name, justify="left" if name == "start" else "right")
    for i in day.intervals:
        serving = (f"{i.replicas_serving_min}" if i.replicas_serving_min == i.replicas_serving_max
                   else f"{i.replicas_serving_min}-{i.replicas_serving_max}")
        t.add_row(i.start + ("*" if i.simulated else ""), f"{i.rate_per_s:.1f}", str(i.replicas_needed), serving,
                  f"{i.gpu_hours:.1f}", f"{i.slo_share:.1%}", f"{i.energy_kwh:.1f}")
    console.print(t)
    for w in day.windows:
        console.print(f"  window {w.start}-{w.end}: {w.replicas_before} -> {w.replicas_after} replicas, "
                      f"{w.requests:,} requests simulated, {w.slo_share:.1%} meet the SLO", highlight=False)
    for note in day.notes:
        console.print(f"  {note}", highlight=False)
    t = Table(title="Policies per month (730 hours)", title_justify="left")
    for name in ("policy", f"GPU-h/{day.period}", "per month", "SLO met", "note"):
        t.add_column(name, justify="left" if name in ("policy", "note") else "right", overflow="fold")
    for p in day.policies:
        t.add_row(p.name, f"{p.gpu_hours_per_period:.1f}", _usd(p.usd_per_month),
                  f"{p.slo_share:.1%}" + ("" if p.meets_slo else " ✗"), p.note)
    console.print(t)
    console.print(f"cheapest meeting the SLO over the {day.period}: {day.cheapest_meeting_slo or 'none'}",
                  highlight=False)
    e = day.energy
    if e is not None:
        per_m = (f"{e.kwh_per_million_output_tokens:.3f} kWh per million output tokens"
                 if e.kwh_per_million_output_tokens is not None else "no tokens")
        co2 = (f", {e.g_co2e_per_million_output_tokens:,.1f} gCO2e per million"
               if e.g_co2e_per_million_output_tokens is not None else "")
        console.print(styled(("Energy", "bold"), f": {e.kwh_per_period:,.1f} kWh/{day.period} autoscaled (static "
                             f"peak {e.static_peak_kwh_per_period:,.1f}) at PUE {e.pue:g}; {per_m}{co2}"))
        console.print(f"  power: idle {e.power.idle_w:g} W, decode-bound {e.power.decode_w:g} W, prefill-bound "
                      f"{e.power.prefill_w:g} W ({e.power.source})", highlight=False)
    if day.growth:
        t = Table(title="Months ahead (growth; from the policy, not simulated)", title_justify="left")
        for name in ("month", "peak req/s", "peak replicas", "autoscaled/month"):
            t.add_column(name, justify="right")
        for g in day.growth:
            t.add_row(str(g.month), f"{g.peak_rate_per_s:.1f}", str(g.peak_replicas), _usd(g.autoscaled_usd_per_month))
        console.print(t)
    console.print()


def render_energy(e: SteadyEnergy, console: Console) -> None:
    """A steady plan's energy at its operating point, with the power figures' source."""
    per_m = (f"{e.kwh_per_million_output_tokens:.3f} kWh per million output tokens"
             if e.kwh_per_million_output_tokens is not None else "no output tokens")
    co2 = (f", {e.g_co2e_per_million_output_tokens:,.1f} gCO2e per million"
           if e.g_co2e_per_million_output_tokens is not None else "")
    busy = "; ".join(f"{'' if p.pool == 'replica' else p.pool + ' pool '}busy {p.busy_share:.0%}, "
                     f"{p.compute_bound_share:.0%} of it compute-bound" for p in e.pools)
    console.print(styled(("Energy", "bold"), f": {e.watts_per_gpu:,.0f} W per GPU ({busy}) = {e.kwh_per_hour:,.2f} "
                         f"kWh/hour at PUE {e.pue:g}; {per_m}{co2}"))
    console.print(f"  power: idle {e.power.idle_w:g} W, decode-bound {e.power.decode_w:g} W, prefill-bound "
                  f"{e.power.prefill_w:g} W ({e.power.source})", highlight=False)
