"""Report charts: inline SVG that cannot clash with its neighbours, deterministic; memory bars add up."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from sizer.inputs.scenario import scenario_from_dict
from sizer.outputs.report.charts import MemoryBar, RatePoint, latency_chart, memory_chart, timeline_chart
from sizer.outputs.report.data import _memory_bar
from sizer.sizing.resolve import resolve

ROOT = Path(__file__).resolve().parents[4]
GiB = 2**30


def bar(label: str, gpu_gib: float = 80) -> MemoryBar:
    return MemoryBar(label, gpu_gib * GiB, 15 * GiB, 20 * GiB, 35.3 * GiB, 0.8 * GiB, 1 * GiB, 8 * GiB)


def ids(svg: str) -> list[str]:
    return re.findall(r'\bid="([^"]+)"', svg)


def test_svg_is_inline_deterministic_and_ids_are_prefixed():
    one = memory_chart([bar("a"), bar("b", 141)], chart_id="memory")
    assert one.startswith("<svg") and one.rstrip().endswith("</svg>")
    assert "<?xml" not in one and "DOCTYPE" not in one                     # fit to inline in HTML
    assert one == memory_chart([bar("a"), bar("b", 141)], chart_id="memory")   # no dates, fixed hash salt
    assert ids(one) and all(i.startswith("memory-") for i in ids(one))
    for ref in re.findall(r"url\(#([^)]+)\)", one) + re.findall(r'href="#([^"]+)"', one):
        assert ref in ids(one)                                             # every reference resolves inside
    assert not re.search(r'(href|src)="https?:', one)                       # nothing to fetch
    assert "GiB per GPU" in one and ">a<" in one                          # text stays text (fonttype none)


def test_three_charts_on_one_page_share_no_id():
    point = RatePoint(1.0, (100, 200, 300), (20, 30, 40), (5000, 8000, 9000), 0.97, (18, 28, 60))
    svgs = [memory_chart([bar("a")]), latency_chart([point, RatePoint(2.0, (150, 300, 500), (25, 35, 45),
                                                                     (6000, 9000, 9900), 0.9, (20, 33, 70))],
                                                    {"ttft_ms": 500, "tpot_ms": 40, "e2e_ms": None}, 1.5),
            timeline_chart([0.0, 1.0, 2.0], [0.1, 0.5, 0.4], [3, 9, 7])]
    every = [i for svg in svgs for i in ids(svg)]
    assert len(every) == len(set(every))


def test_memory_bar_adds_up_to_the_gpu():
    """weights + KV (used + free) + activations + context + headroom = the GPU's memory, when it fits."""
    data = yaml.safe_load((ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml").read_text())
    r = resolve(scenario_from_dict(data, str(ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml")))
    timeline = ([0.0, 1.0, 2.0, 3.0], [0.2, 0.4, 0.6, 0.8], [1, 2, 3, 4])
    b = _memory_bar("x", r, timeline)
    parts = (b.weights_bytes + b.kv_used_bytes + b.kv_free_bytes + b.activation_bytes + b.context_bytes
             + b.reserved_bytes)
    assert abs(parts - b.gpu_memory_bytes) < 1
    # Headroom = 10% of the H100's 85,045,477,376 B (what CUDA reports) at gpu_memory_utilization 0.9; the p95 of
    # (0.2, 0.4, 0.6, 0.8) is 0.77 (linear interpolation), so 77% of the KV cache is drawn as in use.
    assert abs(b.reserved_bytes - 8_504_547_737.6) < 1
    assert abs(b.kv_used_bytes / (b.kv_used_bytes + b.kv_free_bytes) - 0.77) < 1e-9


def test_log_axes_label_their_ticks_as_plain_numbers():
    # TTFT from 40 to 400 ms and E2E from 2,000 to 20,000 ms, on log axes: STYLE leaves mathtext unparsed
    # (text.parse_math off), so matplotlib's default labels ("$\mathdefault{10^{2}}$") would print raw; the
    # decades are labelled 100 and 10,000, and within one decade the minor ticks are labelled too (4,000 is one)
    points = [RatePoint(1.0, (40, 60, 80), (20, 25, 30), (2000, 2500, 3000), 1.0, (18, 20, 25)),
              RatePoint(9.0, (200, 300, 400), (30, 40, 50), (12000, 16000, 20000), 0.5, (25, 35, 45))]
    svg = latency_chart(points, {"ttft_ms": 300, "tpot_ms": None, "e2e_ms": None}, 4.0)
    labels = re.findall(r">([^<>]+)</text>", svg)
    assert not [t for t in labels if "$" in t or "mathdefault" in t]
    assert {"100", "10,000", "4,000"} <= set(labels)
