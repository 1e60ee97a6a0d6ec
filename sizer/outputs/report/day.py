"""The report's day over a schedule (`sizer.sizing.day`): traffic, replicas and SLO attainment by interval in
one chart, beside the tables the template prints (per interval, the three policies per month, energy)."""

from __future__ import annotations

from sizer.outputs.report.charts import COLORS, STYLE, _pyplot, to_svg
from sizer.sizing.day_result import DayPlan


def day_chart(day: DayPlan, chart_id: str = "day") -> str:
    """Requests per second and replicas serving (top), share of requests meeting the SLO (bottom), per interval;
    intervals with a simulated scale-up window shaded."""
    plt = _pyplot()
    xs = list(range(len(day.intervals)))
    labels = [i.start for i in day.intervals]
    edges = [*xs, len(xs)]                       # a step plot's last interval drawn to the period's end

    def held(values: list[float]) -> list[float]:
        return [*values, values[-1]]

    with plt.rc_context(STYLE):
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.2, 3.8), sharex=True, height_ratios=(2, 1))
        top.step(edges, held([i.rate_per_s for i in day.intervals]), where="post", color=COLORS["weights"],
                 linewidth=1.2, label="requests/s")
        top.set_ylabel("requests/s")
        top.set_ylim(bottom=0)
        right = top.twinx()
        right.step(edges, held([i.replicas_serving_max for i in day.intervals]), where="post", color=COLORS["kv_used"],
                   linewidth=1.2, label="replicas serving (most)")
        right.step(edges, held([i.replicas_needed for i in day.intervals]), where="post", color=COLORS["kv_used"],
                   linewidth=0.8, linestyle="--", label="replicas the rate needs")
        right.set_ylabel("replicas")
        right.set_ylim(0, max(i.replicas_serving_max for i in day.intervals) + 1)
        right.spines["right"].set_visible(True)
        lines = top.get_lines() + right.get_lines()
        top.legend(lines, [ln.get_label() for ln in lines], loc="upper left", fontsize=7, frameon=False)
        bottom.bar(xs, [100 * i.slo_share for i in day.intervals], width=0.8, align="edge",
                   color=[COLORS["kv_used"] if i.simulated else COLORS["activations"] for i in day.intervals])
        bottom.set_ylabel("SLO met (%)")
        bottom.set_ylim(0, 100)
        step = max(1, len(xs) // 12)
        bottom.set_xticks(xs[::step], labels[::step], rotation=0, fontsize=7)
        bottom.set_xlabel(f"local time ({day.time_zone}); orange bars: scale-up windows, simulated")
        fig.tight_layout()
        return to_svg(fig, chart_id)
