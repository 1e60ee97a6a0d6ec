"""The scenario's cross-field rules (sizer/inputs/scenario.py `check_scenario`): a field that does not apply where it
is given is refused naming it, not ignored; a shared prefix fits the longest prompt a distribution draws; and the
lengths a distribution draws (`length_bounds`), which those rules and the plan read."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from sizer.inputs.scenario import Distribution, length_bounds, load_scenario, scenario_from_dict
from sizer.inputs.traffic import Traffic, with_traffic
from sizer.inputs.variant import Variant
from validation.errors import FieldError

ROOT = Path(__file__).resolve().parents[3]
TRACE = str(ROOT / "tests" / "data" / "traces" / "azure_conv_head500.csv")
BASE = {"model": "llama-3.1-8b", "hardware": "h100",
        "workload": {"arrival": {"process": "poisson", "rate_per_s": 2.0},
                     "prompt_tokens": {"distribution": "lognormal", "mean": 1200, "sigma": 0.8, "min": 16,
                                       "max": 12000},
                     "output_tokens": {"distribution": "fixed", "value": 128}}}


def with_(path: str, value) -> dict:
    """BASE with `value` at dotted `path`."""
    data = copy.deepcopy(BASE)
    *parents, key = path.split(".")
    node = data
    for p in parents:
        node = node.setdefault(p, {})
    node[key] = value
    return data


def refusal(data: dict) -> str:
    with pytest.raises(FieldError) as caught:
        scenario_from_dict(data, "s.yaml")
    return caught.value.one_line()


@pytest.mark.parametrize(("path", "value", "line"), [
    ("workload.arrival.cv", 2.0, "s.yaml: workload.arrival.cv: only for process: gamma, not poisson"),
    ("workload.prompt_tokens", {"distribution": "uniform", "min": 10, "max": 100, "mean": 50},
     "s.yaml: workload.prompt_tokens.mean: only for distribution: normal, lognormal, not uniform"),
    ("workload.prompt_tokens", {"distribution": "lognormal", "mean": 100, "sigma": 0.5, "weights": [1, 2]},
     "s.yaml: workload.prompt_tokens.weights: only for distribution: empirical, not lognormal"),
    ("workload.output_tokens", {"distribution": "fixed", "value": 100, "sigma": 2},
     "s.yaml: workload.output_tokens.sigma: only for distribution: lognormal, not fixed"),
    ("workload.output_tokens", {"distribution": "normal", "mean": 100, "std": 10, "values": [1]},
     "s.yaml: workload.output_tokens.values: only for distribution: empirical, not normal"),
    ("deployment.speculative_config", {"method": "ngram", "num_speculative_tokens": 4, "acceptance_rate": 0.7,
                                       "model": "llama-3.2-1b"},
     "s.yaml: deployment.speculative_config.model: not for method ngram, which proposes with n-grams of the prompt "
     "itself"),
    ("deployment", {"replicas": 3, "disaggregated": {"prefill_replicas": 1, "decode_replicas": 1}},
     "s.yaml: deployment.replicas: expected 1 (or none) with deployment.disaggregated, whose prefill_replicas and "
     "decode_replicas are the replicas, got 3"),
])
def test_a_field_that_does_not_apply_is_refused(path, value, line):
    assert refusal(with_(path, value)) == line


def test_what_applies_is_read():
    # a fixed length within its own min and max is read as it is; an EAGLE head is the engine's to load (plan --emit
    # names it); one replica of disaggregated pools is the pair (manifests state it so, sizer/inputs/manifest.py)
    within = with_("workload.output_tokens", {"distribution": "fixed", "value": 100, "min": 100, "max": 120})
    assert length_bounds(scenario_from_dict(within, None).workload.output_tokens) == (100, 100)
    eagle = {"method": "eagle", "num_speculative_tokens": 3, "acceptance_rate": 0.7, "model": "some/eagle-head"}
    assert scenario_from_dict(with_("deployment.speculative_config", eagle), None).deployment.speculative_config
    pair = {"replicas": 1, "disaggregated": {"prefill_replicas": 1, "decode_replicas": 2}}
    assert scenario_from_dict(with_("deployment", pair), None).deployment.replicas == 1


@pytest.mark.parametrize(("workload", "line"), [
    ({"arrival": {"process": "poisson"}},
     "s.yaml: workload.arrival.process: 'poisson' is for synthetic arrivals; a trace replays its own (expected "
     "trace, or leave it out)"),
    ({"arrival": {"process": "trace", "cv": 2}},
     "s.yaml: workload.arrival.cv: not with workload.trace, which replays its own arrivals "
     "(workload.trace.time_scale scales them)"),
    ({"arrival": {"process": "trace"}, "output_tokens": {"distribution": "fixed", "value": 5}},
     "s.yaml: workload.output_tokens: not with workload.trace, which replays its own lengths"),
    ({"shared_prefix": {"share": 0.5, "tokens": 100}},
     "s.yaml: workload.shared_prefix: not with workload.trace, which replays its own prompts"),
])
def test_a_trace_takes_no_synthetic_arrivals_or_lengths(workload, line):
    data = {"model": "llama-3.1-8b", "hardware": "h100",
            "workload": {**workload, "trace": {"path": TRACE, "format": "csv"}}}
    assert refusal(data) == line
    # `arrival: {process: trace}` alone says what the trace does, and is read
    trace_only = {**data, "workload": {"arrival": {"process": "trace"}, "trace": {"path": TRACE, "format": "csv"}}}
    assert scenario_from_dict(trace_only, None).workload.trace is not None


def test_a_flag_does_not_set_a_traces_rate_or_lengths():
    # `check --rate` on a trace workload: its own arrivals would be replayed, the rate unread
    with pytest.raises(FieldError, match="--rate: not with the workload's trace"):
        with_traffic({"trace": {"path": TRACE, "format": "csv"}}, {}, Traffic(rate_per_s=3.0))
    # --share scales the trace's arrivals: time_scale 1 / 0.5
    workload, _ = with_traffic({"trace": {"path": TRACE, "format": "csv"}}, {}, Traffic(share=0.5))
    assert workload["trace"]["time_scale"] == 2.0


def test_a_closed_loop_made_of_gamma_arrivals_drops_their_burstiness():
    # plan/simulate --concurrency on mixtral's gamma scenario (cv 2): the clients send as answers come, no gamma gaps
    s = load_scenario(ROOT / "scenarios" / "mixtral-8x7b-a100-tp2.yaml")
    assert (s.workload.arrival.process, s.workload.arrival.cv) == ("gamma", 2.0)
    closed = Variant(arrival_process="closed", concurrency=16, clear_rate=True).apply(s)
    assert (closed.workload.arrival.process, closed.workload.arrival.rate_per_s, closed.workload.arrival.cv) == \
        ("closed", None, None)


@pytest.mark.parametrize(("d", "bounds"), [
    (Distribution("fixed", value=511.5), (512, 512)),                  # rounded half to even, as np.rint
    (Distribution("fixed", value=1000, min=16, max=500), (500, 500)),  # clipped
    (Distribution("uniform", min=10.7, max=100.2), (10, 100)),         # whole bounds, as int() cuts them
    (Distribution("normal", mean=1000, std=100), (1, None)),           # any length, at least one token
    (Distribution("normal", mean=1000, std=0, max=900), (900, 900)),   # no spread: the mean, clipped
    (Distribution("lognormal", mean=1200, sigma=0.8, min=16, max=12000), (16, 12000)),
    # empirical values cut to whole tokens; a value of weight 0 is never drawn
    (Distribution("empirical", values=[50.9, 3000, 70], weights=[1, 0, 2]), (50, 70)),
])
def test_length_bounds_are_what_the_simulator_draws(d, bounds):
    assert length_bounds(d) == bounds


def test_a_shared_prefix_fits_the_longest_prompt_drawn():
    # prompts clipped at 12,000 tokens: a 100,000-token prefix is longer than any of them
    data = with_("workload.shared_prefix", {"share": 0.5, "tokens": 100_000})
    assert refusal(data) == ("s.yaml: workload.shared_prefix.tokens: expected at most the longest prompt, 12,000 "
                             "tokens (workload.prompt_tokens), got 100,000")
    fixed = {**data, "workload": {**data["workload"], "prompt_tokens": {"distribution": "fixed", "value": 512}}}
    assert refusal(fixed).endswith("expected at most the longest prompt, 512 tokens (workload.prompt_tokens), "
                                   "got 100,000")
    # unclipped lognormal prompts reach any length: no longest to exceed
    unclipped = {**data, "workload": {**data["workload"],
                                      "prompt_tokens": {"distribution": "lognormal", "mean": 1200, "sigma": 0.8}}}
    assert scenario_from_dict(unclipped, None).workload.shared_prefix.tokens == 100_000


def test_an_empty_file_is_said_to_be_empty(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing yet\n")
    with pytest.raises(FieldError, match=r"\(top level\): expected a mapping of sections, got an empty file"):
        load_scenario(path)


@pytest.mark.parametrize("model, refused", [("llama-3.1-8b", True), ("deepseek-v3", False)])
def test_mtp_drafts_only_with_the_models_own_prediction_layers(model, refused):
    # DeepSeek-V3 ships one multi-token-prediction layer (num_nextn_predict_layers 1); Llama-3.1-8B none, so vLLM's
    # mtp method has nothing to draft with
    from sizer.errors import InputError
    from sizer.sizing.resolve import resolve

    s = scenario_from_dict({"name": "mtp", "model": model, "hardware": "h200",
                            "deployment": {"tensor_parallel_size": 8, "max_model_len": 8192,
                                           "speculative_config": {"method": "mtp", "num_speculative_tokens": 1,
                                                                  "acceptance_rate": 0.8}},
                            "workload": {"arrival": {"process": "poisson", "rate_per_s": 1},
                                         "prompt_tokens": {"distribution": "fixed", "value": 512},
                                         "output_tokens": {"distribution": "fixed", "value": 128}}}, None)
    if refused:
        with pytest.raises(InputError, match=r"speculative_config.method: mtp drafts with the model's "
                                             r"multi-token-prediction layers; .* has none"):
            resolve(s)
    else:
        assert resolve(s).speculative is not None


@pytest.mark.parametrize(("weights", "expected"), [
    # 1e308 + 1e308 is inf in float64 (the largest float is 1.8e308): every chance weight / sum would be 0; the
    # refusal names the overflow, not "all zero"
    ([1e308, 1e308], "expected weights that sum to a finite number (at most 1.8e+308: each value is drawn with "
                     "chance weight / sum of weights), got a sum past it: [1e+308, 1e+308]"),
    ([0, 0], "expected weights that are not all zero (each value is drawn with chance weight / sum of weights)"),
    ([1, -2], "expected one non-negative weight per value (2), got [1.0, -2.0]"),
    ([1], "expected one non-negative weight per value (2), got [1.0]"),
])
def test_empirical_weights_are_refused_for_what_is_wrong_with_them(weights, expected):
    data = with_("workload.prompt_tokens", {"distribution": "empirical", "values": [100, 200], "weights": weights})
    assert refusal(data) == f"s.yaml: workload.prompt_tokens.weights: {expected}"


def test_tiny_weights_that_sum_above_zero_are_read():
    # 1e-320 + 1e-320 = 2e-320 > 0 (denormal, finite): each value is drawn with chance 1e-320 / 2e-320 = 1/2
    data = with_("workload.prompt_tokens", {"distribution": "empirical", "values": [100, 200],
                                            "weights": [1e-320, 1e-320]})
    assert scenario_from_dict(data, None).workload.prompt_tokens.weights == [1e-320, 1e-320]


@pytest.mark.parametrize(("d", "line"), [
    # fixed 1,000 with max 500: the simulator clips every draw to 500 while the plan's assumptions said 1,000
    ({"distribution": "fixed", "value": 1000, "max": 500},
     "workload.output_tokens.value: expected a length within min and max [1, 500], got 1,000: the clip would send "
     "500 tokens, not the length stated"),
    # 511.5 rounds half to even (np.rint) to 512, above max 511
    ({"distribution": "fixed", "value": 511.5, "max": 511},
     "workload.output_tokens.value: expected a length within min and max [1, 511], got 511.5: the clip would send "
     "511 tokens, not the length stated"),
    # every value below min 100: all would be sent as 100; the first outside is named
    ({"distribution": "empirical", "values": [10, 20, 30], "min": 100},
     "workload.output_tokens.values[0]: expected a length within min and max [100, inf], got 10: the clip would "
     "send 100 tokens, not the length stated"),
    # one value outside is enough: 30,000 would be sent as 1,000, and the mean the plan states would be
    # (100 + 200 + 1,000) / 3 = 433, not the list's
    ({"distribution": "empirical", "values": [100, 200, 30000], "max": 1000},
     "workload.output_tokens.values[2]: expected a length within min and max [1, 1,000], got 30,000: the clip "
     "would send 1,000 tokens, not the length stated"),
    # even a value never drawn (weight 0) is outside the list the user meant
    ({"distribution": "empirical", "values": [100, 5000], "weights": [1, 0], "max": 1000},
     "workload.output_tokens.values[1]: expected a length within min and max [1, 1,000], got 5,000: the clip would "
     "send 1,000 tokens, not the length stated"),
])
def test_a_fixed_or_empirical_length_outside_its_clip_is_refused(d, line):
    assert refusal(with_("workload.output_tokens", d)) == f"s.yaml: {line}"


def test_empirical_values_within_the_clip_are_read_as_stated():
    # 99.9 is cut to 99 tokens (int), within [99, 200]: the values drawn are the values stated
    d = {"distribution": "empirical", "values": [99.9, 200], "min": 99, "max": 200}
    assert length_bounds(scenario_from_dict(with_("workload.output_tokens", d), None).workload.output_tokens) == \
        (99, 200)
