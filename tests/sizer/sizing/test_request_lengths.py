"""resolve() and the workload's lengths against max_model_len: the engine refuses a request whose prompt + output
exceed it (vLLM answers HTTP 400), so a workload none of whose requests fits is refused, and where only some do the
plan states their share; and a refusal of a model override names the scenario's model.overrides key."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from sizer.cli import app
from sizer.inputs.scenario import scenario_from_dict
from sizer.sizing.plan import make_plan
from sizer.sizing.resolve import resolve
from validation.errors import FieldError

LOGNORMAL_PROMPTS = {"distribution": "lognormal", "mean": 1200, "sigma": 0.8, "min": 16, "max": 12000}
LOGNORMAL_OUTPUTS = {"distribution": "lognormal", "mean": 250, "sigma": 0.7, "min": 4, "max": 2000}


def scenario(max_model_len: int | None, prompt: dict, output: dict, file: str | None = "s.yaml", **model):
    deployment = {"max_model_len": max_model_len} if max_model_len else {}
    return scenario_from_dict({"model": {"name": "llama-3.1-8b", **model}, "hardware": "h100",
                               "deployment": deployment,
                               "workload": {"arrival": {"rate_per_s": 2}, "prompt_tokens": prompt,
                                            "output_tokens": output}}, file)


def refusal(s) -> str:
    with pytest.raises(FieldError) as caught:
        resolve(s)
    return caught.value.one_line()


def test_a_workload_that_never_fits_max_model_len_is_refused():
    # the shortest request: a 16-token prompt (the clip) + a 4-token answer = 20 tokens > 8
    assert refusal(scenario(8, LOGNORMAL_PROMPTS, LOGNORMAL_OUTPUTS)) == (
        "s.yaml: workload.prompt_tokens: expected prompt + output within deployment.max_model_len 8, got 16 + 4 = 20 "
        "tokens in the shortest request: vLLM refuses every request")
    # fixed lengths, against the model's own 131,072 tokens (Llama 3.1's max_position_embeddings)
    assert refusal(scenario(None, {"distribution": "fixed", "value": 200_000}, {"distribution": "fixed",
                                                                                 "value": 100})) == (
        "s.yaml: workload.prompt_tokens: expected prompt + output within deployment.max_model_len 131,072 (the "
        "model's max_position_embeddings), got 200,000 + 100 = 200,100 tokens in every request: vLLM refuses every "
        "request")


def test_the_plan_states_the_share_of_requests_refused():
    # uniform prompts of 1..100 tokens + 10 output tokens in a context of 100: prompts above 90, 10% of them
    r = resolve(scenario(100, {"distribution": "uniform", "min": 1, "max": 100}, {"distribution": "fixed",
                                                                                  "value": 10}))
    assert r.too_long_share == pytest.approx(0.1)
    note = ("10.00% of requests have prompt + output above max_model_len 100: the engine refuses them (vLLM answers "
            "HTTP 400), and the simulation counts them rejected")
    assert note in make_plan(r).assumptions
    # the fuzzed chat workload in 4,096 tokens: 3.22% (the simulator's own draws agree: tests/sizer/analytic/
    # test_lengths.py); at 14,000 = 12,000 + 2,000, every request fits and nothing is stated
    assert resolve(scenario(4096, LOGNORMAL_PROMPTS, LOGNORMAL_OUTPUTS)).too_long_share == pytest.approx(0.0322,
                                                                                                       abs=1e-4)
    fits = resolve(scenario(14_000, LOGNORMAL_PROMPTS, LOGNORMAL_OUTPUTS))
    assert fits.too_long_share == 0.0 and not any("max_model_len 14,000" in n for n in fits.link_notes)


def test_littles_law_sizes_the_served_requests():
    # a quarter of the prompts are 300 tokens and 300 + 50 > max_model_len 200: the engine refuses them, so the plan
    # sizes 1.5 of the 2 req/s at the served requests' 100 + 50 tokens (the means over all requests, 150 + 50 = 200,
    # would size KV for requests that hold none)
    r = resolve(scenario(200, {"distribution": "empirical", "values": [100, 300], "weights": [3, 1]},
                         {"distribution": "fixed", "value": 50}))
    capacity = make_plan(r).capacity
    assert (capacity.arrival_rate_per_s, capacity.kv_tokens_per_request) == (1.5, 150)


def test_a_flag_length_is_refused_and_a_default_workload_stated():
    # --prompt-tokens states the length: every request of 1,000,000 + 256 tokens is refused, naming the flag
    result = CliRunner().invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--prompt-tokens", "1m"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: --prompt-tokens: expected prompt + output within deployment.max_model_len 131,072 (the "
        "model's max_position_embeddings), got 1,000,000 + 256 = 1,000,256 tokens in every request: vLLM refuses "
        "every request (as workload.prompt_tokens)")
    # without a file or length flags the workload (1,024 + 256 tokens) is the plan's own default: stated, not refused
    result = CliRunner().invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "1000",
                                      "--json"])
    assert result.exit_code == 0, result.output
    assert ("100.00% of requests have prompt + output above max_model_len 1,000: the engine refuses them (vLLM "
            "answers HTTP 400), and the simulation counts them rejected") in json.loads(result.stdout)["assumptions"]


def test_a_refused_override_names_the_scenario_not_the_catalog():
    # Llama 3.1 8B's config comes from the bundled catalog; the override is the scenario's
    s = scenario(None, {"distribution": "fixed", "value": 100}, {"distribution": "fixed", "value": 10},
                 overrides={"num_key_value_heads": 3})
    assert refusal(s) == "s.yaml: model.overrides.num_key_value_heads: 3 does not divide the 32 attention heads"


def test_the_cost_per_million_tokens_is_over_the_clipped_mean_output():
    # outputs lognormal mean 800, sigma 1.2 clipped to [1, 1000] average 487.48 tokens as drawn
    # (tests/sizer/analytic/test_lengths.py derives it): at 2 req/s that is 974.97 output tokens/s, and one H100 at
    # $3.99/GPU-hour (hardware_profiles/h100-sxm.yaml) costs 3.99 / (974.97 x 3,600) x 1e6 = $1.1368 per million
    # output tokens, not 3.99 / (1,600 x 3,600) x 1e6 = $0.6927 (the mean before the clip: 64% more tokens)
    output = {"distribution": "lognormal", "mean": 800, "sigma": 1.2, "min": 1, "max": 1000}
    plan = make_plan(resolve(scenario(None, {"distribution": "fixed", "value": 500}, output)))
    assert plan.step_times.output_tokens_mean == pytest.approx(487.48, abs=0.01)
    assert plan.cost.price_usd_per_gpu_hour == 3.99 and plan.cost.gpus == 1
    assert plan.cost.usd_per_million_output_tokens == pytest.approx(3.99 / (2 * 487.4834 * 3600) * 1e6, rel=1e-5)
    assert plan.cost.usd_per_million_output_tokens == pytest.approx(1.1368, abs=1e-4)
