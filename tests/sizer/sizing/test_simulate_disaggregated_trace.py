"""Issue 9: `sizer simulate` replaying the bundled Mooncake slice on a disaggregated deployment
generates exactly the requested output tokens for every request (the slice has three requests
asking for one token: they finish at the prefill replica, index 0)."""

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.cli import app

SLICE = Path(__file__).resolve().parents[2] / "data" / "traces" / "mooncake_conversation_head500.jsonl"
SPECULATIVE = "  speculative_config: {method: ngram, num_speculative_tokens: 4, acceptance_rate: 0.7}\n"


@pytest.mark.parametrize("speculative", [False, True])
def test_mooncake_slice_disaggregated_generates_the_requested_tokens(tmp_path, speculative):
    scenario = tmp_path / "mooncake-disagg.yaml"
    scenario.write_text(
        "name: mooncake-disagg\nmodel: llama-3.1-8b\nhardware: h100-sxm\n"
        "deployment:\n  disaggregated: {prefill_replicas: 1, decode_replicas: 1}\n"
        + (SPECULATIVE if speculative else "")
        + f"workload:\n  arrival: {{process: trace}}\n  trace: {{path: {json.dumps(str(SLICE))}, format: mooncake}}\n"
        "  num_requests: 500\n")
    out_csv = tmp_path / "requests.csv"
    out = CliRunner().invoke(app, ["simulate", str(scenario), "--requests-csv", str(out_csv)])
    assert out.exit_code == 0, out.output
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 500 and all(r["rejected"] == "False" for r in rows)
    assert [r["request_id"] for r in rows if r["generated_tokens"] != r["output_tokens"]] == []
    one = [r for r in rows if r["output_tokens"] == "1"]
    assert len(one) == 3 and all(r["replica"] == "0" and r["ttft_ms"] == r["e2e_ms"] for r in one)
