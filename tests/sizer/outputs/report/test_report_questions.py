"""The report's question table says what traffic was asked about, for every kind of workload: arrivals at a rate,
a closed loop of clients, a trace (a closed loop's or a trace's missing rate crashed `report --no-search`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sizer.inputs.scenario import scenario_from_dict
from sizer.outputs.report.data import question_rows
from sizer.sizing.resolve import resolve

ROOT = Path(__file__).resolve().parents[4]
LENGTHS = {"prompt_tokens": {"distribution": "fixed", "value": 512},
           "output_tokens": {"distribution": "fixed", "value": 128}}


@pytest.mark.parametrize("workload, expected", [
    ({"arrival": {"process": "poisson", "rate_per_s": 2.5}, **LENGTHS},
     "poisson arrivals at 2.5 requests/s; prompts 512 tokens; outputs 128 tokens"),
    ({"arrival": {"process": "closed", "concurrency": 8, "think_time_s": 1.5}, **LENGTHS},
     "a closed loop of 8 clients, 1.5 s think time (the latency charts probe rates: Poisson arrivals at each); "
     "prompts 512 tokens; outputs 128 tokens"),
    ({"trace": {"path": str(ROOT / "tests/data/traces/azure_conv_head500.csv"), "format": "csv", "time_scale": 0.5}},
     f"the csv trace {ROOT / 'tests/data/traces/azure_conv_head500.csv'} replayed (its arrivals and lengths, "
     "inter-arrival times x 0.5)"),
])
def test_the_traffic_row_names_the_workload_as_given(workload, expected):
    r = resolve(scenario_from_dict({"model": "llama-3.1-8b", "hardware": "h100", "workload": workload}, None))
    assert dict(question_rows(r))["traffic"] == expected
