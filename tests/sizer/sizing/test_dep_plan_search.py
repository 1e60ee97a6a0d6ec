"""DeepSeek-R1 in FP8 on 8 H200s as TensorRT-LLM serves it for throughput, attention DP 8 + EP 8 ("DEP8"), and as it
serves it for latency, TP 8: the plan costs the all-to-all per step; the search picks between them by the SLO.
DeepSeek-R1 shares DeepSeek-V3's config.json (deepseek-ai/DeepSeek-R1: DeepseekV3ForCausalLM, the same dimensions and
block-FP8 quantization_config), so the catalog's deepseek-v3 stands for it."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from sizer.cli.app import app
from sizer.inputs.scenario import scenario_from_dict
from sizer.sizing.plan import make_plan
from sizer.sizing.resolve import resolve
from sizer.sizing.result import GoodputSettings
from sizer.sizing.search import SearchSettings, SearchSpace, search


def r1(rate: float, ttft_ms: float, itl_ms: float, attention_dp: bool = False) -> dict:
    return {"name": "deepseek-r1-fp8", "model": "deepseek-v3", "hardware": {"gpu": "h200"},
            "deployment": {"engine": "tensorrt-llm", "tensor_parallel_size": 8, "quantization": "fp8",
                           "max_model_len": 4096, "enable_attention_dp": attention_dp},
            "workload": {"arrival": {"process": "poisson", "rate_per_s": rate},
                         "prompt_tokens": {"distribution": "fixed", "value": 1000},
                         "output_tokens": {"distribution": "fixed", "value": 1000}, "num_requests": 150},
            "slo": {"ttft_ms": ttft_ms, "itl_ms": itl_ms}}


def test_a_dep8_plan_costs_the_all_to_all_of_each_step():
    plan = make_plan(resolve(scenario_from_dict(r1(1, 2000, 50, attention_dp=True), None)))
    assert (plan.parallel.tensor_parallel_size, plan.parallel.data_parallel_size,
            plan.parallel.expert_parallel_size) == (1, 8, 8)
    s = plan.step_times
    # one decode token per rank: 58 MoE layers x (all-gather + reduce-scatter of 7 ranks' 7,168 bf16 values) over
    # NVLink 4 (450 GB/s) + 2 x 58 x (47 us + 4.27 us waiting for the last of 8 GPUs: 3 us x 1.4236, the expected
    # largest of 8 standard normals) = 5.95 ms + 0.013 ms
    assert s.alltoall_batch1_ms == pytest.approx((2 * 58 * 7 * 7168 * 2 / 450e9 + 2 * 58 * (47e-6 + 3e-6 * 1.4236))
                                                 * 1e3, rel=1e-5)
    assert s.alltoall_memory_limited_batch_ms > s.alltoall_batch1_ms
    assert "NVLink" in s.alltoall_link
    out = CliRunner().invoke(app, ["plan", "--model", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--attention-dp",
                                   "--weights", "fp8"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "EP all-to-all" in out.output and "1 x 1 x 8 = 8 GPUs per replica; EP 8" in out.output



def test_each_attention_dp_rank_schedules_its_own_sequences():
    # TensorRT-LLM's attention-DP ranks are one executor each (presets.engine_loop's sources): a DEP8 step's
    # per-sequence CPU cost is the busiest rank's, 0.5 ms + 20 us x ceil(1,001 / 8) = 0.5 + 20 us x 126 = 3.02 ms
    # for 1,001 decodes; TP 8 is one scheduler: 0.5 + 20 us x 1,001 = 20.52 ms
    dep = resolve(scenario_from_dict(r1(1, 2000, 50, attention_dp=True), None)).replica.engine_loop
    tp = resolve(scenario_from_dict(r1(1, 2000, 50), None)).replica.engine_loop
    assert (dep.scheduler_ranks, tp.scheduler_ranks) == (8, 1)
    assert dep.period_s(0.0, 1001) == pytest.approx(3.02e-3)
    assert tp.period_s(0.0, 1001) == pytest.approx(20.52e-3)

@pytest.mark.slow
@pytest.mark.parametrize(("rate", "ttft_ms", "itl_ms", "chosen"), [
    (0.5, 2000, 22, "h200 TP8 fp8/auto KV"),          # interactive: DEP's all-to-all alone is 5.5 ms a step
    (20, 20000, 200, "h200 DEP8 fp8/auto KV"),         # throughput: 8x the KV (MLA's latent is whole per rank)
])
def test_search_picks_tp8_or_dep8_by_the_slo(rate, ttft_ms, itl_ms, chosen):
    space = SearchSpace(gpus=("h200",), tensor_parallel_sizes=(8,), weight_formats=("fp8",),
                        kv_cache_dtypes=("auto",), attention_dp=(False, True))
    result = search(r1(rate, ttft_ms, itl_ms), None, space, SearchSettings(GoodputSettings(num_requests=150)))
    assert {o.candidate.label for o in result.outcomes} == {"h200 TP8 fp8/auto KV", "h200 DEP8 fp8/auto KV"}
    assert result.recommended is not None and result.recommended.candidate.label == chosen
