"""A Variant puts each change where the scenario keeps it, and its clears bring defaults back."""

from sizer.inputs.scenario import scenario_from_dict
from sizer.inputs.variant import Variant

BASE = {"model": "llama-3.1-8b", "hardware": "h100",
        "deployment": {"replicas": 3, "speculative_config": {"method": "ngram", "num_speculative_tokens": 4,
                                                             "acceptance_rate": 0.6}},
        "workload": {"arrival": {"rate_per_s": 2.0}, "prompt_tokens": {"distribution": "fixed", "value": 100},
                     "output_tokens": {"distribution": "fixed", "value": 10}},
        "cost": {"price_usd_per_gpu_hour": 2.5}}


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
    # what the variant does not name stays the scenario's
    assert s.cost.price_usd_per_gpu_hour == 2.5 and d.speculative_config is not None


def test_clears_bring_the_defaults_back_and_leave_the_mapping_alone():
    s = scenario_from_dict(BASE, None, Variant(clear_replicas=True, clear_speculative=True, clear_price=True))
    assert s.deployment.replicas is None and s.deployment.speculative_config is None
    assert s.cost.price_usd_per_gpu_hour is None
    assert BASE["deployment"]["replicas"] == 3          # apply() copies; the caller's mapping is unchanged
