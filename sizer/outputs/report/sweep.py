"""`sizer report --sweep results.parquet`: the Pareto fronts of a sweep and its cheapest configuration per SLO.

    front     per model, GPU and arrival rate, the points meeting the SLO that no other of the same model and GPU
              both cost per million output tokens and p95 latency (TTFT; ITL, the gaps between tokens)
    cheapest  per model, arrival rate and SLO (TTFT, ITL, E2E targets and required share), the point meeting
              it at the lowest cost per million output tokens

Cost per million output tokens falls as the rate a deployment is sized for grows, so points of different
arrival rates are never compared: each rate is its own question.

Rows come from `sizer.outputs.sweep_store.read_rows`; only points that meet the SLO and have a price count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jinja2

from sizer.errors import InputError
from sizer.inputs.scenario import SLOSection, targets_text
from sizer.outputs.report.charts import STYLE, _pyplot, to_svg
from sizer.outputs.report.render import TEMPLATES
from validation.errors import excerpt

LATENCIES = (("ttft_p95_ms", "p95 TTFT (ms)"), ("itl_p95_ms", "p95 ITL (ms)"))
CONFIG = ("engine", "quantization", "kv_cache_dtype", "tensor_parallel_size", "pipeline_parallel_size",
          "data_parallel_size", "max_num_seqs", "max_num_batched_tokens", "num_speculative_tokens", "rate_per_s")


@dataclass(frozen=True)
class FrontPoint:
    usd_per_million_output_tokens: float
    latency_ms: float
    label: str                                  # the configuration, in words
    point_hash: str


@dataclass(frozen=True)
class Front:
    model: str
    gpu: str
    rate_per_s: float
    latency: str                                # the SLOProbe column: ttft_p95_ms or itl_p95_ms
    points: tuple[FrontPoint, ...]              # by cost


@dataclass(frozen=True)
class Cheapest:
    model: str
    rate_per_s: float
    slo: str                                    # "TTFT 500 ms, ITL 50 ms, 95%"
    points_meeting: int
    gpu: str
    label: str
    usd_per_million_output_tokens: float
    usd_per_hour: float
    replicas: int
    ttft_p95_ms: float
    itl_p95_ms: float
    point_hash: str


@dataclass(frozen=True)
class SweepReport:
    source: str
    points: int
    by_status: dict[str, int]
    fronts: tuple[Front, ...]
    cheapest: tuple[Cheapest, ...]


def label(row: dict) -> str:
    parts = [row["engine"], f"{row['quantization']}/{row['kv_cache_dtype']} KV", f"TP{row['tensor_parallel_size']}"]
    parts += [f"PP{row['pipeline_parallel_size']}"] if (row["pipeline_parallel_size"] or 1) > 1 else []
    parts += [f"DP{row['data_parallel_size']}"] if (row["data_parallel_size"] or 1) > 1 else []
    parts += [f"seqs {row['max_num_seqs']}", f"{row['rate_per_s']:g} req/s"]
    parts += [f"spec {row['num_speculative_tokens']}"] if row["speculative"] else []
    return " ".join(str(p) for p in parts)


def pareto(rows: list[dict], latency: str) -> list[dict]:
    """Rows no other row beats on both cost per million output tokens and `latency` (one strictly)."""
    def beats(a: dict, b: dict) -> bool:
        ca, cb, la, lb = a["usd_per_million_output_tokens"], b["usd_per_million_output_tokens"], a[latency], b[latency]
        return ca <= cb and la <= lb and (ca < cb or la < lb)
    return sorted((r for r in rows if not any(beats(o, r) for o in rows)),
                  key=lambda r: (r["usd_per_million_output_tokens"], r[latency], r["point_hash"]))


def _slo(row: dict) -> str:
    slo = SLOSection(ttft_ms=row["ttft_target_ms"], itl_ms=row["itl_target_ms"], tpot_ms=row["tpot_target_ms"],
                     e2e_ms=row["e2e_target_ms"])
    return targets_text(slo, relation=" ") + f", {row['required_share']:.0%} of requests"


# what a priced row of status ok must hold for the report (`sizer sweep` writes every one of them); a file with
# nulls or non-finite numbers there was not written by it
PRICED_ROW = ("model", "gpu", "rate_per_s", "required_share", "usd_per_million_output_tokens", "usd_per_hour",
              "ttft_p95_ms", "itl_p95_ms", "replicas", "engine", "quantization", "kv_cache_dtype",
              "tensor_parallel_size", "max_num_seqs")
SLO_TARGETS = ("ttft_target_ms", "itl_target_ms", "tpot_target_ms", "e2e_target_ms")
# the numbers among them, and the least each may be (a rate, a share and a replica count are positive; a cost and a
# latency are not negative), the most (a share is at most 1)
PRICED_RANGES = {"rate_per_s": (0.0, False, None), "required_share": (0.0, False, 1.0),
                 "usd_per_million_output_tokens": (0.0, True, None), "usd_per_hour": (0.0, True, None),
                 "ttft_p95_ms": (0.0, True, None), "itl_p95_ms": (0.0, True, None), "replicas": (1, True, None),
                 "tensor_parallel_size": (1, True, None), "max_num_seqs": (1, True, None)}


def check_rows(rows: list[dict], file: str | None) -> None:
    """Every priced row of status ok holds what the report reads, numbers finite and in range; otherwise one line
    naming it."""
    for i, r in enumerate(rows):
        if r["status"] != "ok" or r["usd_per_million_output_tokens"] is None or r["ttft_p95_ms"] is None:
            continue
        for column in PRICED_ROW:
            value = r[column]
            where = f"row {i} ({r['point_hash'][:12]}) {column}"
            if value is None or (isinstance(value, float) and not math.isfinite(value)):
                raise InputError(file, where, f"{excerpt(value)} in a row of status ok; expected what `sizer sweep` "
                                              "writes")
            if column in PRICED_RANGES:
                low, inclusive, high = PRICED_RANGES[column]
                if value < low or (value == low and not inclusive) or (high is not None and value > high):
                    span = (f"{'>=' if inclusive else '>'} {low:g}" + (f" and <= {high:g}" if high is not None else ""))
                    raise InputError(file, where, f"{value:g} in a row of status ok; expected a value {span}, as "
                                                  "`sizer sweep` writes")
        targets = {t: r[t] for t in SLO_TARGETS if r[t] is not None}
        for column, value in targets.items():       # the SLO the row met, in words: each target a latency
            if not (math.isfinite(value) and value > 0):
                raise InputError(file, f"row {i} ({r['point_hash'][:12]}) {column}",
                                 f"{value:g} in a row of status ok; expected a target > 0 ms, as `sizer sweep` writes")
        if not targets:
            raise InputError(file, f"row {i} ({r['point_hash'][:12]})", f"no SLO target in a row of status ok; "
                                                                        f"expected one of {', '.join(SLO_TARGETS)} "
                                                                        "(a sweep needs one)")


def build_sweep_report(rows: list[dict], source: str, file: str | None = None) -> SweepReport:
    check_rows(rows, file)
    met = [r for r in rows if r["status"] == "ok" and r["usd_per_million_output_tokens"] is not None
           and r["ttft_p95_ms"] is not None]
    by_status: dict[str, int] = {}
    for r in rows:
        by_status[r["status"]] = by_status.get(r["status"], 0) + 1
    groups: dict[tuple[str, str, float], list[dict]] = {}
    for r in met:
        groups.setdefault((r["model"], r["gpu"], r["rate_per_s"]), []).append(r)
    fronts = tuple(Front(model, gpu, rate, latency, tuple(
        FrontPoint(r["usd_per_million_output_tokens"], r[latency], label(r), r["point_hash"])
        for r in pareto(members, latency)))
        for (model, gpu, rate), members in sorted(groups.items()) for latency, _ in LATENCIES)
    per_slo: dict[tuple[str, float, str], list[dict]] = {}
    for r in met:
        per_slo.setdefault((r["model"], r["rate_per_s"], _slo(r)), []).append(r)
    cheapest = []
    for (model, rate, slo), members in sorted(per_slo.items()):
        best = min(members, key=lambda r: (r["usd_per_million_output_tokens"], r["ttft_p95_ms"], r["point_hash"]))
        cheapest.append(Cheapest(model, rate, slo, len(members), best["gpu"], label(best),
                                 best["usd_per_million_output_tokens"], best["usd_per_hour"], best["replicas"],
                                 best["ttft_p95_ms"], best["itl_p95_ms"], best["point_hash"]))
    return SweepReport(source, len(rows), dict(sorted(by_status.items())), fronts, tuple(cheapest))


def front_chart(report: SweepReport, latency: str, title: str, chart_id: str) -> str:
    """Cost per million output tokens against p95 latency, one line per model, GPU and rate's front."""
    plt = _pyplot()
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(7.2, 3.4))
        for front in (f for f in report.fronts if f.latency == latency and f.points):
            ax.plot([p.latency_ms for p in front.points], [p.usd_per_million_output_tokens for p in front.points],
                    marker="o", markersize=3, linewidth=1,
                    label=f"{front.model} / {front.gpu} / {front.rate_per_s:g} req/s")
        ax.set_xlabel(title)
        ax.set_ylabel("$ per million output tokens")
        ax.legend(loc="upper right", frameon=False, fontsize=7)
        return to_svg(fig, chart_id)


def render_sweep_html(report: SweepReport, generated: str) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                             autoescape=jinja2.select_autoescape(["j2", "html"]),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    charts = {latency: front_chart(report, latency, title, f"front-{latency}") for latency, title in LATENCIES
              if any(f.points for f in report.fronts)}
    return env.get_template("sweep.html.j2").render(r=report, charts=charts, titles=dict(LATENCIES),
                                                    generated=generated)
