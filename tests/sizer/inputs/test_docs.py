"""docs/scenario.md is generated from the scenario dataclasses and must match them."""

from pathlib import Path

from sizer.inputs.scenario_docs import render


def test_scenario_reference_is_up_to_date():
    committed = (Path(__file__).resolve().parents[3] / "docs" / "scenario.md").read_text()
    assert committed == render(), "regenerate: python -m sizer.inputs.scenario_docs > docs/scenario.md"
    for field in ("deployment.tensor_parallel_size", "deployment.kv_cache_dtype", "workload.arrival.rate_per_s",
                  "slo.required_share", "deployment.speculative_config.acceptance_rate"):
        assert f"`{field}`" in committed
