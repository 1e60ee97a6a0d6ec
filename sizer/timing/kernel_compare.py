"""Two kernel-table folders of one GPU compared point by point: a device's own calibration against the tables
imported for it (engine/gpu_check.sh), or two versions of an engine.

Every measured point of `a` is priced by `b` the way a step model would read `b` (kernel_step.py: GEMMs
bilinear in n and k, attention linear along the batch and the length), inside `b`'s measured range only
(no extrapolation); the ratio a / b is summarised per table. Points `b` cannot price (a key it lacks, a
point outside its range) are counted, not guessed.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from sizer.timing.kernel_step import BatchCurves, Curve, attention_rows, gemm_curve
from sizer.timing.kernel_tables import KernelTables


@dataclass(frozen=True)
class TableComparison:
    table: str
    points: int                     # points of `a` that `b` prices
    uncovered: int                  # points of `a` that `b` cannot price
    ratio_p10: float | None         # a / b over the priced points
    ratio_median: float | None
    ratio_p90: float | None


def _inside(curve: Curve, x: float) -> bool:
    return curve.xs[0] <= x <= curve.xs[-1]


def _summary(table: str, ratios: list[float], uncovered: int) -> TableComparison:
    if not ratios:
        return TableComparison(table, 0, uncovered, None, None, None)
    deciles = statistics.quantiles(ratios, n=10) if len(ratios) > 1 else [ratios[0]] * 9
    return TableComparison(table, len(ratios), uncovered, deciles[0], statistics.median(ratios), deciles[-1])


def _gemm(a: KernelTables, b: KernelTables) -> TableComparison:
    ratios, uncovered = [], 0
    for (dtype, n, k), points in a.gemm.items():
        curve = gemm_curve(b, dtype, n, k)
        for m, t in points.items():
            if curve is None or not _inside(curve, m):
                uncovered += 1
            else:
                ratios.append(t / curve(m))
    return _summary("gemm", ratios, uncovered)


def _attention(name: str, a_table: dict, b_table: dict) -> TableComparison:
    ratios, uncovered = [], 0
    curves: dict[tuple, BatchCurves | None] = {}
    for key, points in a_table.items():
        shape, batch = key[:-1], key[-1]
        if shape not in curves:
            curves[shape] = attention_rows(b_table, shape)
        rows = curves[shape]
        inside_batch = rows is not None and rows.batches[0] <= batch <= rows.batches[-1]
        for length, t in points.items():
            if inside_batch and _inside(rows.at_batch(batch), length) and length <= rows.longest(batch):
                ratios.append(t / rows(batch, length))
            else:
                uncovered += 1
    return _summary(name, ratios, uncovered)


def _by_key(name: str, a_table: dict, b_table: dict) -> TableComparison:
    ratios, uncovered = [], 0
    for key, points in a_table.items():
        curve = Curve(b_table[key]) if key in b_table else None
        for x, t in points.items():
            if curve is None or not _inside(curve, x):
                uncovered += 1
            else:
                ratios.append(t / curve(x))
    return _summary(name, ratios, uncovered)


def compare(a: KernelTables, b: KernelTables) -> list[TableComparison]:
    """Per table, a / b at a's measured points that b covers."""
    return [_gemm(a, b),
            _attention("context_attention", a.context_attention, b.context_attention),
            _attention("generation_attention", a.generation_attention, b.generation_attention),
            _by_key("allreduce", a.allreduce, b.allreduce),
            _by_key("moe", a.moe, b.moe)]


def elementwise_ratios(a: KernelTables, b: KernelTables) -> tuple[float, float]:
    """(effective bandwidth a / b, fixed latency a / b) of the element-wise cost."""
    ea, eb = a.header.elementwise, b.header.elementwise
    bandwidth = (ea.memory_bandwidth_bytes_per_s * ea.bandwidth_fraction
                 / (eb.memory_bandwidth_bytes_per_s * eb.bandwidth_fraction))
    return bandwidth, ea.latency_s / eb.latency_s if eb.latency_s else float("inf")
