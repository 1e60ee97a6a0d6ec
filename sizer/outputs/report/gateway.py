"""`sizer report gateway.yaml -o out.html`: a gateway's report, from the same `GatewayAnswer` that
`sizer plan` prints and writes as JSON.

    answer      the cheapest sizing the search found (its replicas, strong share, cost per hour and per
                million output tokens, quality) and every class's SLO verdict; without one, the stated
                configuration's verdicts
    tables      per pool and endpoint, per class, per route (fallbacks and rejections by reason), the
                searched configurations (accepted or why not)
    charts      cost per hour against the strong share, one line per replica combination (when the search
                tried strong shares); each class's requests by the target that served them
"""

from __future__ import annotations

from sizer.outputs.report.charts import STYLE, _pyplot, to_svg
from sizer.outputs.report.render import environment
from sizer.sizing.gateway import GatewayAnswer

# Colours of the targets in the routing chart, in the answer's order (pools, then endpoints); matplotlib's tab10.
TARGET_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")


def cost_chart(a: GatewayAnswer, chart_id: str = "gateway-cost") -> str | None:
    """Cost per hour against the strong share, one line per replica combination; accepted configurations
    filled, the others hollow, the cheapest ringed. None when the search tried no strong share."""
    tried = [c for c in a.search.tried if c.strong_share is not None and c.usd_per_hour is not None] \
        if a.search else []
    if not tried:
        return None
    plt = _pyplot()
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(7.2, 3.2))
        combos: dict[str, list] = {}
        for c in tried:
            combos.setdefault(", ".join(f"{k} x{v}" for k, v in c.replicas.items()), []).append(c)
        for i, (label, cs) in enumerate(combos.items()):
            cs.sort(key=lambda c: c.strong_share)
            color = TARGET_COLORS[i % len(TARGET_COLORS)]
            ax.plot([100 * c.strong_share for c in cs], [c.usd_per_hour for c in cs], color=color, linewidth=1,
                    label=label)
            for c in cs:
                ax.plot(100 * c.strong_share, c.usd_per_hour, "o", markersize=5, color=color,
                        markerfacecolor=color if c.accepted else "white")
        best = a.search.best
        if best is not None and best.strong_share is not None:
            ax.plot(100 * best.strong_share, best.usd_per_hour, "o", markersize=12, markerfacecolor="none",
                    markeredgecolor="#1b7f3b", markeredgewidth=1.5, label="cheapest meeting every SLO")
        ax.set_xlabel("strong-model share (%)")
        ax.set_ylabel("$ per hour")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, frameon=False, fontsize=8)
        return to_svg(fig, chart_id)


def routing_chart(a: GatewayAnswer, chart_id: str = "gateway-routing") -> str:
    """Each class's requests by the target that served them (and rejected), as stacked horizontal bars."""
    targets = [p.name for p in a.pools] + [e.name for e in a.externals]
    plt = _pyplot()
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(7.2, 0.5 + 0.4 * len(a.classes)))
        y = range(len(a.classes))
        left = [0.0] * len(a.classes)
        for i, t in enumerate(targets + ["rejected"]):
            shares = [100 * (c.rejected / max(c.requests, 1) if t == "rejected" else c.share_routed.get(t, 0.0))
                      for c in a.classes]
            ax.barh(list(y), shares, left=left, height=0.6, label=t,
                    color="#c8c8c8" if t == "rejected" else TARGET_COLORS[i % len(TARGET_COLORS)])
            left = [x + s for x, s in zip(left, shares, strict=True)]
        ax.set_yticks(list(y), [c.name for c in a.classes])
        ax.invert_yaxis()
        ax.set_xlim(0, 100)
        ax.set_xlabel("% of the class's requests")
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.02), ncol=len(targets) + 1, frameon=False, fontsize=8)
        return to_svg(fig, chart_id)


def render_gateway_html(a: GatewayAnswer, generated: str, scenario_file: str | None) -> str:
    """The gateway report as HTML; `generated` (a date) is printed in the header."""
    best = a.search.best if a.search else None
    tried = sorted(a.search.tried, key=lambda c: (c.usd_per_hour is None, c.usd_per_hour or 0.0)) if a.search else []
    shares = [r.strong_share for r in a.routes if r.strong_share is not None]
    return environment().get_template("gateway.html.j2").render(
        a=a, best=best, tried=tried, generated=generated, scenario_file=scenario_file,
        stated_replicas={p.name: p.replicas for p in a.pools}, stated_share=shares[0] if shares else None,
        cost_chart=cost_chart(a), routing_chart=routing_chart(a))
