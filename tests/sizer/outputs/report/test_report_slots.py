"""`sizer report` on a llama.cpp scenario: the slot answers section (memory left, tokens/s per user at 1..N
users, TTFT, largest context per slot, recommendation) holds the plan JSON's `slots` numbers, and a search
ranks by the machine's memory."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sizer.cli import app

ROOT = Path(__file__).resolve().parents[4]
SCENARIO = ROOT / "scenarios" / "llamacpp-rtx4090-slots.yaml"


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


@pytest.fixture(scope="module")
def report():
    """The scenario's own configuration searched alone (and a larger GPU beside it), short simulations."""
    from sizer.outputs.report import build_report, render_html
    from sizer.sizing.result import GoodputSettings
    from sizer.sizing.search import SearchSettings, SearchSpace

    space = SearchSpace(gpus=("rtx-4090", "rtx-5090"), tensor_parallel_sizes=(1,), weight_formats=("q4_k_m",),
                        kv_cache_dtypes=("auto",), slots=(8,))
    built = build_report(yaml.safe_load(SCENARIO.read_text()), str(SCENARIO), space,
                         settings=SearchSettings(GoodputSettings(num_requests=100)))
    return built, render_html(built, "2026-01-01")


@pytest.mark.slow
def test_slot_answers_are_the_plan_jsons(report):
    built, html = report
    plan = json.loads(CliRunner().invoke(app, ["plan", str(SCENARIO), "--json"]).stdout)["slots"]
    # the answer is the scenario's own configuration (the 24 GiB RTX 4090 ranks above the 32 GiB RTX 5090)
    assert built.search.recommended.candidate.label == "rtx-4090 q4_k_m 8 slots"
    assert built.slots.ttft_s == plan["ttft_s"] and built.slots.left_bytes == plan["left_bytes"]
    # the section prints the plan's numbers, rounded as the template does
    assert re.search(r'id="slots-ttft">([\d.]+)<', html)[1] == f"{plan['ttft_s']:.2f}"
    assert re.search(r'id="slots-left">([\d.,]+)<', html)[1] == f"{plan['left_bytes'] / 2**30:,.1f}"
    assert re.search(r'id="slots-largest">([\d,]+)<', html)[1] == f"{plan['largest_context_per_slot_tokens']:,}"
    rows = re.findall(r'<tr class="slot-speed"><td class="n">(\d+)</td><td class="n">([\d.,]+)</td>'
                      r'<td class="n">([\d.,]+)</td>', html)
    assert [(int(u), s) for u, _, s in rows] == [(p["users"], f"{p['tokens_per_s_per_user']:.1f}")
                                                  for p in plan["speeds"]]
    assert len(rows) == 8                                   # 1..8 users: the scenario's parallel 8
    assert "In short (llama.cpp): memory, slots and speed per user" in re.findall(r"<h2>(.*?)</h2>", html)
    page = text(html)
    assert plan["recommendation"].replace(">", "&gt;") in page
    assert "The smallest machines that meet the targets" in page
    # both pass; the 32 GiB RTX 5090 ranks second
    assert [o.candidate.label for o in built.top] == ["rtx-4090 q4_k_m 8 slots", "rtx-5090 q4_k_m 8 slots"]

