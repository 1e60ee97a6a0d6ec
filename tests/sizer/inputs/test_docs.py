"""docs/scenario.md is generated from the scenario dataclasses and must match them."""

from pathlib import Path

from sizer.inputs.scenario_docs import render


def test_scenario_reference_is_up_to_date():
    committed = (Path(__file__).resolve().parents[3] / "docs" / "scenario.md").read_text()
    assert committed == render(), "regenerate: python -m sizer.inputs.scenario_docs > docs/scenario.md"
    for field in ("deployment.tensor_parallel_size", "deployment.kv_cache_dtype", "workload.arrival.rate_per_s",
                  "slo.required_share", "deployment.speculative_config.acceptance_rate"):
        assert f"`{field}`" in committed


def test_the_acceptance_rate_is_documented_as_the_per_token_alpha_not_vllms_logged_rate():
    # audit finding: the reference called acceptance_rate "probability each proposed token is accepted", which
    # users filled with vLLM's logged "Avg Draft acceptance rate" (accepted / proposed tokens), well below alpha
    from simulator.speculative import expected_tokens_per_step
    committed = (Path(__file__).resolve().parents[3] / "docs" / "scenario.md").read_text()
    row = next(line for line in committed.splitlines()
               if line.startswith("| `deployment.speculative_config.acceptance_rate`"))
    assert "0 to 0.999" in row and "'Mean acceptance length'" in row and "Not vLLM's logged 'Avg Draft" in row
    # the row's worked numbers: L = (1 - 0.7^5) / (1 - 0.7) = 2.7731 at gamma 4; vLLM's accepted / proposed is
    # (L - 1) / gamma = 1.7731 / 4 = 44%
    assert "L 2.77 at gamma 4 is alpha 0.7" in row and "44% at alpha 0.7, gamma 4" in row
    mean_length = expected_tokens_per_step(0.7, 4)
    assert round(mean_length, 2) == 2.77 and round((mean_length - 1) / 4, 2) == 0.44
    gamma = next(line for line in committed.splitlines()
                 if line.startswith("| `deployment.speculative_config.num_speculative_tokens`"))
    assert "1 to 16" in gamma
