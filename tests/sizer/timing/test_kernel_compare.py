"""sizer/timing/kernel_compare.py: two kernel-table folders compared point by point (engine/gpu_check.sh compares
a GPU's own calibration with its imported tables). The tables: the committed CPU calibration and changed copies."""

import dataclasses

import pytest

from hardware_profiles import CALIBRATED_DIR
from sizer.timing.kernel_compare import compare, elementwise_ratios
from sizer.timing.kernel_tables import load_kernel_tables

TABLES = load_kernel_tables(CALIBRATED_DIR / "cpu-sizer-engine-0.1.0")


def by_table(a, b):
    return {c.table: c for c in compare(a, b)}


def test_tables_compared_with_themselves_are_equal_everywhere():
    result = by_table(TABLES, TABLES)
    for name, table in (("gemm", TABLES.gemm), ("context_attention", TABLES.context_attention),
                        ("generation_attention", TABLES.generation_attention)):
        c = result[name]
        assert c.points == sum(len(p) for p in table.values()) and c.uncovered == 0
        assert c.ratio_p10 == c.ratio_median == c.ratio_p90 == pytest.approx(1.0)
    assert result["allreduce"].points == 0 and result["allreduce"].ratio_median is None   # one CPU: none timed


def test_a_table_twice_as_slow_in_b_reads_half():
    slower = dataclasses.replace(TABLES, gemm={k: {m: 2 * t for m, t in v.items()} for k, v in TABLES.gemm.items()})
    result = by_table(TABLES, slower)
    assert result["gemm"].ratio_median == pytest.approx(0.5)
    assert result["generation_attention"].ratio_median == pytest.approx(1.0)


def test_a_head_shape_b_lacks_is_counted_not_guessed():
    wide = ("float32", 12, 4, 32)            # tiny-wide's heads at TP1
    missing = {k: v for k, v in TABLES.generation_attention.items() if k[:4] != wide}
    lacking = dataclasses.replace(TABLES, generation_attention=missing)
    c = by_table(TABLES, lacking)["generation_attention"]
    expected = sum(len(v) for k, v in TABLES.generation_attention.items() if k[:4] == wide)
    assert expected > 0 and c.uncovered == expected
    assert c.points == sum(len(v) for v in missing.values())


def test_element_wise_ratios():
    e = TABLES.header.elementwise
    halved = dataclasses.replace(TABLES, header=dataclasses.replace(
        TABLES.header, elementwise=dataclasses.replace(e, latency_s=e.latency_s / 2, bandwidth_fraction=0.5)))
    bandwidth, latency = elementwise_ratios(TABLES, halved)
    assert bandwidth == pytest.approx(2.0) and latency == pytest.approx(2.0)
