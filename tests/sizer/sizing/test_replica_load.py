"""How busy a simulated replica was (sizer.sizing.goodput.replica_load): what `plan --simulate` prices its energy by."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from sizer.inputs.scenario import load_scenario
from sizer.sizing.goodput import probe_slo, simulate_at
from sizer.sizing.resolve import resolve

ROOT = Path(__file__).resolve().parents[3]


def test_a_rejected_request_leaves_the_busy_share_to_the_finished_ones():
    # The chat scenario with max_model_len 4,096: 3.2% of its requests are longer and refused, their E2E NaN. The
    # span the step time is shared over runs from the first send to the last token of a finished request, so a
    # refused request does not make the busy share 0 (which priced every GPU at the idle 80 W).
    s = load_scenario(ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml")
    s = dataclasses.replace(s, deployment=dataclasses.replace(s.deployment, max_model_len=4096))
    r = resolve(s)
    result = simulate_at(r, 2.0, 200)
    c = result.columns
    assert c["rejected"].any() and np.isnan(c["e2e_ms"][c["rejected"]]).all()
    done = ~c["rejected"]
    span_s = float((c["arrival_s"][done] + c["e2e_ms"][done] / 1e3).max() - c["arrival_s"].min())
    busy = float(result.timeline.step_s.sum()) / span_s
    # 2 req/s of about 1.7 s each is 3.4 requests in flight: a step runs all but the few % of the time none is
    # (98.7% when written); before, the span was NaN and the share 0
    assert 0.9 < busy < 1.0
    assert probe_slo(r, 2.0, 200).load.busy_share == pytest.approx(busy)
