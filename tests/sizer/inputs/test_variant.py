"""A Variant changes the typed scenario: each change lands in its field, checked by that field's own declaration;
its clears bring defaults back; the engine is chosen again and the cross-field rules run on the result; a file's
own invalid value is refused even where a change would replace it; a sweep point keeps its hash and seed."""

import dataclasses

import pytest
import yaml

from sizer.inputs.scenario import SETTABLE, StatedValueError, scenario_from_dict
from sizer.inputs.sweep_file import load_sweep
from sizer.inputs.variant import PRICE, Variant
from sizer.sizing.sweep import build_sweep, tasks
from validation.errors import FieldError
from validation.safe_yaml import load_yaml

WORKLOAD = {"arrival": {"rate_per_s": 2.0}, "prompt_tokens": {"distribution": "fixed", "value": 100},
            "output_tokens": {"distribution": "fixed", "value": 10}}
BASE = {"model": "llama-3.1-8b", "hardware": "h100",
        "deployment": {"replicas": 3, "speculative_config": {"method": "ngram", "num_speculative_tokens": 4,
                                                             "acceptance_rate": 0.6}},
        "workload": WORKLOAD, "cost": {"price_usd_per_gpu_hour": 2.5}}
PLAIN = {"model": "llama-3.1-8b", "hardware": "h100", "workload": WORKLOAD}      # no engine named


def test_each_change_lands_in_its_field():
    v = Variant(model="llama-3.1-70b", gpu="h200", tensor_parallel_size=4, pipeline_parallel_size=2,
                quantization="fp8", kv_cache_dtype="fp8", max_model_len=4096, replicas=5, rate_per_s=7.5,
                num_requests=123)
    s = scenario_from_dict(BASE, None, v)
    d = s.deployment
    assert (s.model.name, s.hardware.gpu, s.workload.arrival.rate_per_s, s.workload.num_requests) == \
        ("llama-3.1-70b", "h200", 7.5, 123)
    assert (d.tensor_parallel_size, d.pipeline_parallel_size, d.quantization, d.kv_cache_dtype, d.max_model_len,
            d.replicas) == (4, 2, "fp8", "fp8", 4096, 5)
    # what the variant does not name stays the scenario's, but for the price stated for its h100: not the h200's
    assert s.cost.price_usd_per_gpu_hour is None and d.speculative_config is not None
    assert scenario_from_dict(BASE, None, Variant(gpu="h100-sxm")).cost.price_usd_per_gpu_hour == 2.5   # the same GPU
    # applied to the typed scenario read from the same mapping, the same scenario
    assert v.apply(scenario_from_dict(BASE, None)) == s


def test_every_change_has_a_field_to_land_in():
    """A Variant field without a SETTABLE path would be ignored by apply: each names one; the clears are the rest."""
    changes = {f.name for f in dataclasses.fields(Variant) if not f.name.startswith("clear_")}
    assert changes == set(SETTABLE)
    assert all(Variant(**{name: 1}).fields_set() == {name: SETTABLE[name]} for name in changes)


def test_clears_bring_the_defaults_back_and_leave_the_mapping_alone():
    base = scenario_from_dict(BASE, None)
    s = Variant(clear_replicas=True, clear_speculative=True).apply(base)
    assert s.deployment.replicas is None and s.deployment.speculative_config is None
    assert base.deployment.replicas == 3 and BASE["deployment"]["replicas"] == 3   # nothing it was given changes
    # a cleared value is a default again; a set one is stated (a flag's caller names itself: cli/plan.py)
    assert (base.source_of("deployment.replicas"), s.source_of("deployment.replicas")) == ("scenario", "default")
    assert s.source_of("deployment.speculative_config.num_speculative_tokens") == "default"
    assert Variant(max_num_seqs=64).apply(base).source_of("deployment.max_num_seqs") == "scenario"


@pytest.mark.parametrize("change, field, value", [
    (Variant(tensor_parallel_size=0), "deployment.tensor_parallel_size", 0),       # ge=1
    (Variant(rate_per_s=1e9), "workload.arrival.rate_per_s", 1e9),                  # le=MAX_RATE_PER_S (1e6)
    (Variant(engine="vllm2"), "deployment.engine", "vllm2"),                        # not one of the Engine literals
    (Variant(seed=2 ** 70), "workload.seed", 2 ** 70),                              # past +-2^63
])
def test_a_value_is_checked_by_the_declaration_of_the_field_it_sets(change, field, value):
    """The same one line the same value in the file gets: one declaration checks both."""
    keys = field.split(".")
    in_file = {**PLAIN, keys[0]: {**PLAIN.get(keys[0], {})}}
    node = in_file
    for key in keys[:-1]:
        node[key] = {**node.get(key, {})}
        node = node[key]
    node[keys[-1]] = value
    with pytest.raises(FieldError) as from_file:
        scenario_from_dict(in_file, "s.yaml")
    with pytest.raises(FieldError) as from_change:
        change.apply(scenario_from_dict(PLAIN, "s.yaml"))
    assert from_change.value.one_line() == from_file.value.one_line()
    assert from_change.value.field == field and not isinstance(from_change.value, StatedValueError)


def test_a_section_a_change_needs_is_built_from_its_declaration():
    # speculative_config needs a method and an acceptance rate besides the tokens: refused as a mapping without them
    with pytest.raises(FieldError) as error:
        Variant(num_speculative_tokens=3).apply(scenario_from_dict(PLAIN, None))
    assert error.value.field == "deployment.speculative_config.method"
    with pytest.raises(FieldError) as error:
        Variant(trace_time_scale=0.5).apply(scenario_from_dict(PLAIN, None))
    assert error.value.field == "workload.trace.path"
    # present, the section keeps its other fields
    spec = Variant(num_speculative_tokens=2).apply(scenario_from_dict(BASE, None)).deployment.speculative_config
    assert (spec.method, spec.num_speculative_tokens, spec.acceptance_rate) == ("ngram", 2, 0.6)


def test_the_engine_is_chosen_again_and_the_cross_field_rules_run_on_the_result():
    s = scenario_from_dict(PLAIN, None)
    assert (s.deployment.engine, s.engine_source) == ("vllm", "default: vLLM, sizer's engine for discrete GPUs")
    # on an Apple GPU no engine named means llama.cpp (scenario.default_engine), chosen again for the changed GPU
    mac = Variant(gpu="m3-max").apply(s)
    assert mac.deployment.engine == "llama.cpp" and mac.engine_source.startswith("default on ")
    assert Variant(engine="sglang").apply(s).engine_source == "scenario"
    # a closed loop needs its clients: check_scenario refuses the result, as it refuses such a file
    with pytest.raises(FieldError) as error:
        Variant(arrival_process="closed", clear_rate=True).apply(s)
    assert error.value.field == "workload.arrival.concurrency"
    # max_num_seqs is a setting of the batching engines, not of llama.cpp
    with pytest.raises(FieldError) as error:
        Variant(engine="llama.cpp").apply(Variant(max_num_seqs=8).apply(s))
    assert error.value.field == "deployment.max_num_seqs"


def test_a_files_invalid_value_is_refused_even_where_a_change_would_replace_it():
    bad = {**PLAIN, "deployment": {"tensor_parallel_size": 0}}
    with pytest.raises(StatedValueError) as error:
        scenario_from_dict(bad, "s.yaml", Variant(tensor_parallel_size=1))
    assert error.value.one_line() == "s.yaml: deployment.tensor_parallel_size: expected a value >= 1, got 0"


def test_model_and_gpu_make_a_scenario_from_flags_alone():
    s = scenario_from_dict({"workload": WORKLOAD}, None, Variant(model="llama-3.1-8b", gpu="h200"))
    assert (s.model.name, s.hardware.gpu) == ("llama-3.1-8b", "h200")
    assert s.source_of("model.name") == s.source_of("hardware.gpu") == "scenario"
    # a file's model and GPU are replaced, its other hardware fields kept
    own = {**PLAIN, "hardware": {"gpu": "m3-max", "memory_gb": 64}}
    assert Variant(gpu="m4-pro").apply(scenario_from_dict(own, None)).hardware.memory_gb == 64


# Point hashes of this sweep: stored sweeps resume by these keys, so they move only with ROW_VERSION. Under version 1
# (commit e8b09f0, Variant.apply on the mapping) they were 740a8fc5..., 32e6e54d..., 0560bdc6..., e55a4126...,
# 352523e5..., 0a0cb43a..., 3046e96e... and 1d5e2be3...; version 2 (2026-12-04: every point simulates with the base
# scenario's seed, not one drawn from its hash) moves every one. h100 is h100-sxm (the same profile: price kept);
# h200 another GPU (price dropped); speculative off clears it.
SWEEP_SCENARIO = {"model": "llama-3.1-8b", "hardware": "h100",
                  "deployment": {"replicas": 2, "speculative_config": {"method": "ngram", "num_speculative_tokens": 3,
                                                                       "acceptance_rate": 0.6}},
                  "workload": {"arrival": {"rate_per_s": 1.0}, "num_requests": 100,
                               "prompt_tokens": {"distribution": "fixed", "value": 512},
                               "output_tokens": {"distribution": "fixed", "value": 64}},
                  "slo": {"ttft_ms": 500}, "cost": {"price_usd_per_gpu_hour": 2.5}}
HASHES = {
    ("h100-sxm", True, 2.0): "73e3aafb22f5c114b613743d42bea5050864192818669a5d6e593a5745ab35aa",
    ("h100-sxm", True, 4.0): "711e2a80f5b5c9c60c92212285df127c3ea568b84a1ee5fd26618eee60197ff1",
    ("h100-sxm", False, 2.0): "c44d5bb6c8aa8d594c81db7f760f9ae84794c557920c7d314becd90de2b6449b",
    ("h100-sxm", False, 4.0): "274a37e4dccf0ca66c0645ab4b2cb3feec8c99304312bea7ca013070360359fe",
    ("h200", True, 2.0): "a524c363af3cf4d62184aede9a4e506455dbbe181b36bbb87e1537db2960ade5",
    ("h200", True, 4.0): "05ed0f1a125d2c4c6edd99007ef5dee1e8aa52b706247c5721250d45175a3075",
    ("h200", False, 2.0): "93074dc01a63b12fff074218c3b37649dbdb981eb533b0c0fd6ea2f4c9d862f4",
    ("h200", False, 4.0): "f7eea2ef90580920bddc936d07b20ae92d4ba6bb043569eb4876c8439768bc91",
}


def test_sweep_points_keep_their_hashes_and_seeds(tmp_path):
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(SWEEP_SCENARIO))
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump({
        "scenario": "base.yaml", "axes": {"gpu": ["h100-sxm", "h200"], "speculative": [True, False],
                                          "rate_per_s": [2, 4]}, "settings": {"num_requests": 50}}))
    sweep = load_sweep(tmp_path / "sweep.yaml")
    got = {(t.point.gpu, t.point.speculative, t.point.rate_per_s): (t.point_hash, t.seed)
           for t in tasks(build_sweep(sweep, load_yaml(sweep.scenario_path())))}
    assert got == {k: (h, 0) for k, h in HASHES.items()}      # the base scenario's seed, 0 by default
    # and the mapping a point is keyed by states what its typed scenario holds
    point = dataclasses.replace(Variant(gpu="h200", rate_per_s=4.0), clear_speculative=True)
    stated = scenario_from_dict(point.stated_in(SWEEP_SCENARIO, "h100"), None)
    applied = point.apply(scenario_from_dict(SWEEP_SCENARIO, None))
    # the same values; the applied one also says why its price is the profile's (the plan's price source)
    assert stated.cost.price_usd_per_gpu_hour is None
    assert applied.source_of(PRICE) == "not the scenario's $2.5, stated for its h100"
    assert dataclasses.replace(applied, sources=tuple((p, s) for p, s in applied.sources if p != PRICE)) == stated


def test_a_length_change_is_a_fixed_distribution():
    """--prompt-tokens 3000: the whole prompt distribution becomes one fixed length (the file's lognormal gone)."""
    lognormal = {**PLAIN, "workload": {**WORKLOAD, "prompt_tokens": {"distribution": "lognormal", "mean": 1200,
                                                                     "sigma": 0.5}}}
    s = Variant(prompt_tokens=3000, tpot_ms=25.0).apply(scenario_from_dict(lognormal, None))
    p = s.workload.prompt_tokens
    assert (p.distribution, p.value, p.mean, p.sigma) == ("fixed", 3000, None, None)
    assert s.slo.tpot_ms == 25.0 and s.workload.output_tokens.value == 10      # the rest stays the file's
