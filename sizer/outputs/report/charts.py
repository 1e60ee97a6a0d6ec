"""Report charts: matplotlib (Agg) figures returned as inline SVG text, ids made unique per chart.

Text stays text (`svg.fonttype: none`) so it is selectable in the HTML and the PDF; output is
deterministic (fixed hash salt, no date) so a committed report only changes when its numbers do.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

GiB = 2**30
# text.parse_math off: a model, class or pool name is a label as written (`$...$` would be mathtext, and bad mathtext
# an exception), never markup
STYLE = {"svg.fonttype": "none", "svg.hashsalt": "sizer", "font.family": "DejaVu Sans", "font.size": 9,
         "axes.spines.top": False, "axes.spines.right": False, "text.parse_math": False}
COLORS = {"weights": "#4c72b0", "kv_used": "#dd8452", "kv_free": "#f3c9a8", "activations": "#55a868",
          "context": "#8172b3", "reserved": "#c8c8c8"}
PERCENTILE_STYLES = (("p50", "-", "#4c72b0"), ("p95", "--", "#dd8452"), ("p99", ":", "#c44e52"))


def _pyplot():
    """pyplot on the Agg backend, imported on first use: matplotlib would cost every `sizer`
    command about a second of start-up."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def to_svg(fig, chart_id: str) -> str:
    """The figure as an <svg> element whose ids (clip paths, glyphs) cannot clash with another chart's."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    _pyplot().close(fig)
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r'id="([^"]+)"', rf'id="{chart_id}-\1"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", rf"url(#{chart_id}-\1)", svg)
    svg = re.sub(r'href="#([^"]+)"', rf'href="#{chart_id}-\1"', svg)
    return svg


@dataclass(frozen=True)
class MemoryBar:
    """One GPU of one configuration, in bytes; the parts add up to the GPU's memory when it fits."""
    label: str
    gpu_memory_bytes: float
    weights_bytes: float
    kv_used_bytes: float          # KV the simulated workload held at its p95 (all KV when not simulated)
    kv_free_bytes: float
    activation_bytes: float
    context_bytes: float          # CUDA context, workspaces, NCCL buffers
    reserved_bytes: float         # outside gpu_memory_utilization


def memory_chart(bars: list[MemoryBar], chart_id: str = "memory") -> str:
    """Horizontal stacked bars per configuration, GiB, with each GPU's capacity marked."""
    parts = (("weights", "weights_bytes", "weights"), ("KV cache in use (p95)", "kv_used_bytes", "kv_used"),
             ("KV cache free", "kv_free_bytes", "kv_free"), ("activations", "activation_bytes", "activations"),
             ("CUDA context, buffers", "context_bytes", "context"),
             ("headroom (1 - gpu_memory_utilization)", "reserved_bytes", "reserved"))
    plt = _pyplot()
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(7.2, 0.55 * len(bars) + 1.3))
        y = range(len(bars))
        left = [0.0] * len(bars)
        for name, attr, color in parts:
            widths = [getattr(b, attr) / GiB for b in bars]
            ax.barh(list(y), widths, left=left, color=COLORS[color], label=name, height=0.6)
            left = [a + w for a, w in zip(left, widths, strict=True)]
        for i, b in enumerate(bars):
            ax.plot([b.gpu_memory_bytes / GiB] * 2, [i - 0.4, i + 0.4], color="black", linewidth=1.2)
        ax.set_yticks(list(y), [b.label for b in bars])
        ax.invert_yaxis()
        ax.set_xlabel("GiB per GPU (black tick: GPU memory)")
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.02), ncol=3, frameon=False)
        return to_svg(fig, chart_id)


@dataclass(frozen=True)
class RatePoint:
    rate_per_s: float
    ttft_ms: tuple[float, float, float]     # p50, p95, p99
    tpot_ms: tuple[float, float, float]     # per request: mean time per output token (what slo.tpot_ms is checked on)
    e2e_ms: tuple[float, float, float]
    share_met: float
    itl_ms: tuple[float, float, float]      # the gaps between tokens, pooled (what slo.itl_ms is checked on)


def latency_chart(points: list[RatePoint], slo_ms: dict[str, float | None], goodput_rate_per_s: float | None,
                  chart_id: str = "latency") -> str:
    """p50/p95/p99 TTFT, ITL (the pooled token gaps), TPOT and E2E against request rate, SLO targets dashed
    (`slo_ms` keyed ttft_ms, itl_ms, tpot_ms, e2e_ms), the goodput rate marked.

    TTFT and E2E on a log scale: past the goodput rate the queue grows them by orders of magnitude."""
    panels = (("TTFT", "ttft_ms"), ("ITL", "itl_ms"), ("TPOT", "tpot_ms"), ("end-to-end", "e2e_ms"))
    rates = [p.rate_per_s for p in points]
    plt = _pyplot()
    with plt.rc_context(STYLE):
        # constrained layout: tight_layout could not fit four log-scale panels' tick labels at this width (matplotlib
        # warned "Tight layout not applied" and left them overlapping)
        fig, axes = plt.subplots(1, len(panels), figsize=(9.6, 2.9), layout="constrained")
        for ax, (title, attr) in zip(axes, panels, strict=True):
            for i, (name, line, color) in enumerate(PERCENTILE_STYLES):
                ax.plot(rates, [getattr(p, attr)[i] for p in points], line, color=color, marker="o", markersize=3,
                        label=name)
            target = slo_ms.get(attr)
            if target is not None:
                ax.axhline(target, color="black", linestyle=(0, (4, 2)), linewidth=1, label="SLO target")
            if goodput_rate_per_s:
                ax.axvline(goodput_rate_per_s, color="#2ca02c", linewidth=1, label="goodput rate")
            ax.set_title(title)
            ax.set_xlabel("requests/s per replica")
            ax.set_ylabel("ms" + (" (log scale)" if attr in ("ttft_ms", "e2e_ms") else ""))
            if attr in ("itl_ms", "tpot_ms"):
                ax.set_ylim(bottom=0)
            else:                        # queueing past the goodput rate spans orders of magnitude
                ax.set_yscale("log")
                # plain numbers: the default labels are mathtext ("$\\mathdefault{10^{2}}$"), which STYLE leaves
                # unparsed (text.parse_math off, so names with "$" print as written) and would print raw
                ax.yaxis.set_major_formatter(plain_log_labels(minor=False))
                ax.yaxis.set_minor_formatter(plain_log_labels(minor=True))
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=5, frameon=False)
        return to_svg(fig, chart_id)


def plain_log_labels(minor: bool):
    """A log axis's tick labels as plain numbers ("400", "2,000"), on the ticks matplotlib's own log formatter
    labels (every decade; the minor ticks too where the axis spans few decades). Called once pyplot is imported."""
    from matplotlib.ticker import LogFormatter

    class Plain(LogFormatter):
        def _num_to_string(self, x, vmin, vmax):      # the label of a tick LogFormatter chose (matplotlib >= 3.8)
            return f"{x:,.0f}" if x >= 1 else f"{x:g}"

    return Plain(labelOnlyBase=not minor, minor_thresholds=(2, 0.5))


def timeline_chart(time_s, kv_usage, batch_size, chart_id: str = "timeline") -> str:
    """KV cache utilisation and batch size over simulated time, one replica."""
    plt = _pyplot()
    with plt.rc_context(STYLE):
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.2, 3.2), sharex=True)
        top.plot(time_s, [100 * u for u in kv_usage], color=COLORS["kv_used"], linewidth=0.8)
        top.set_ylabel("KV blocks in use (%)")
        top.set_ylim(0, 100)
        bottom.plot(time_s, batch_size, color=COLORS["weights"], linewidth=0.8)
        bottom.set_ylabel("sequences per step")
        bottom.set_xlabel("simulated time (s)")
        bottom.set_ylim(bottom=0)
        fig.tight_layout()
        return to_svg(fig, chart_id)


def pareto_chart(points, panels, chart_id: str = "pareto") -> list[str]:
    """Cost per million output tokens against each panel's p95 latency (`summary.pareto_panels`: TTFT and the
    per-token latency the SLO targets): one SVG per panel, so a narrow screen stacks them at full width. Every
    configuration that meets the SLO (grey), the panel's frontier joined (blue), the chosen one starred and named,
    the SLO target dashed. `points` are `summary.ParetoPoint`s."""
    plt = _pyplot()
    svgs = []
    with plt.rc_context(STYLE):
        for panel in panels:
            attr, on_front = f"{panel.metric}_p95_ms", f"front_{panel.metric}"
            fig, ax = plt.subplots(figsize=(3.7, 3.3))
            others = [p for p in points if not getattr(p, on_front)]
            ax.scatter([p.usd_per_million_output_tokens for p in others], [getattr(p, attr) for p in others],
                       s=14, color="#b0b0b0", label="meets the targets", zorder=2)
            edge = sorted((p for p in points if getattr(p, on_front)),
                          key=lambda p: (p.usd_per_million_output_tokens, getattr(p, attr)))
            ax.plot([p.usd_per_million_output_tokens for p in edge], [getattr(p, attr) for p in edge], "-o",
                    color=COLORS["weights"], markersize=4, linewidth=1, label="best trade-offs (frontier)", zorder=3)
            for p in points:
                if p.chosen:
                    ax.scatter([p.usd_per_million_output_tokens], [getattr(p, attr)], marker="*", s=160,
                               color="#2ca02c", edgecolor="black", linewidth=0.5, label="recommended", zorder=4)
                    ax.annotate(p.label, (p.usd_per_million_output_tokens, getattr(p, attr)), xytext=(12, 10),
                                textcoords="offset points", fontsize=8, fontweight="bold", zorder=5,
                                bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none",
                                      "alpha": 0.85})
            if panel.target_ms:
                ax.axhline(panel.target_ms, color="black", linestyle=(0, (4, 2)), linewidth=1, label="target")
            ax.set_ylim(bottom=0)
            ax.set_title(f"p95 {panel.title}")
            ax.set_xlabel("$ per million output tokens")
            ax.set_ylabel("ms")
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False, fontsize=8)
            svgs.append(to_svg(fig, f"{chart_id}-{panel.metric}"))
    return svgs
