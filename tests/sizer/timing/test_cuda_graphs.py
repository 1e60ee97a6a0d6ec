"""Decode steps padded to the CUDA-graph batch sizes a deployment states (sizer/timing/cuda_graphs.py:
TensorRT-LLM's cuda_graph_config.batch_sizes with enable_padding)."""

from __future__ import annotations

from simulator.step_batch import StepBatch
from sizer.inputs.scenario import scenario_from_dict
from sizer.sizing.resolve import resolve
from sizer.timing.cuda_graphs import CudaGraphPadding, captured_sizes
from sizer.timing.step_model import step_model_for

# TensorRT-LLM's perf-overview page's llm_options.yml (docs/source/performance/perf-overview.md)
PAGE_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192)


class Recorder:
    """A step-time model that prices a step at its sequences (1 ms each) and keeps what it was asked."""
    name = "recorder"

    def __init__(self):
        self.batches: list[StepBatch] = []

    def step_time(self, batch: StepBatch) -> float:
        self.batches.append(batch)
        return batch.num_seqs * 1e-3


def decodes(n: int, context: int = 1000) -> StepBatch:
    return StepBatch.from_seqs([(1, context)] * n)


def test_a_decode_step_runs_at_the_next_captured_size():
    inner = Recorder()
    padded = CudaGraphPadding(inner, PAGE_SIZES, ranks=1, max_num_seqs=2048, max_num_batched_tokens=8192)
    # 300 decodes: the smallest listed size at least 300 is 384, so 84 dummy one-token decodes join them
    assert padded.step_time(decodes(300)) == 384e-3
    batch = inner.batches[-1]
    assert (batch.num_seqs, batch.new_tokens) == (384, 384)
    assert batch.context_tokens == 300 * 1000                  # the dummies cache nothing of their own
    assert padded.step_time(decodes(384)) == 384e-3            # a captured size runs as it is


def test_attention_dp_ranks_run_the_busiest_ranks_padded_size():
    inner = Recorder()
    padded = CudaGraphPadding(inner, PAGE_SIZES, ranks=8, max_num_seqs=2048, max_num_batched_tokens=8192)
    # 1,000 decodes over 8 ranks: the busiest holds ceil(1000 / 8) = 125, every rank runs the 128 graph: 1,024
    assert padded.step_time(decodes(1000)) == 1024e-3


def test_a_listed_size_above_the_cap_captures_the_cap_itself():
    # TensorRT-LLM's _filter_cuda_graph_batch_sizes with padding on: sizes up to min(max_batch_size, max_num_tokens)
    # and, as a listed size (2,048) is above max_num_seqs 1,500, a graph of 1,500 too: 1,200 decodes pad to 1,500
    assert captured_sizes(PAGE_SIZES, 1500, 8192)[-2:] == (1024, 1500)
    assert captured_sizes(PAGE_SIZES, 2048, 8192)[-1] == 2048                 # the cap is a listed size
    assert captured_sizes(PAGE_SIZES, 20_000, 1000)[-2:] == (512, 1000)       # max_num_tokens the cap
    padded = CudaGraphPadding(Recorder(), PAGE_SIZES, ranks=1, max_num_seqs=1500, max_num_batched_tokens=8192)
    assert padded.step_time(decodes(1200)) == 1500e-3


def test_steps_with_a_prompt_and_steps_past_the_largest_capture_run_unpadded():
    inner = Recorder()
    # sizes listed up to 1,024 and max_num_seqs 1,500: none above the cap, so 1,024 is the largest graph
    padded = CudaGraphPadding(inner, PAGE_SIZES[:12], ranks=1, max_num_seqs=1500, max_num_batched_tokens=8192)
    assert padded.step_time(decodes(1200)) == 1200e-3
    mixed = StepBatch.from_seqs([(1, 1000)] * 300 + [(512, 0)])
    assert padded.step_time(mixed) == 301e-3


class MeanContext:
    """A step-time model that prices a step at its sequences' mean context (1 us a token), as a model that
    prices decode attention at the batch's mean context does."""
    name = "mean-context"

    def step_time(self, batch: StepBatch) -> float:
        return batch.context_tokens / batch.num_seqs * 1e-6


def test_padding_never_prices_a_step_below_itself():
    padded = CudaGraphPadding(MeanContext(), PAGE_SIZES, ranks=1, max_num_seqs=2048, max_num_batched_tokens=8192)
    # 3 decodes at 2,000 tokens pad to 4; the dummy's zero context would put the mean at 1,500 (1.5 ms), below
    # the 2 ms of the 3 real ones: the step is never cheaper for the work padding adds
    assert padded.step_time(decodes(3, 2000)) == 2000e-6


SCENARIO = {"name": "graphs", "model": "llama-3.1-8b", "hardware": {"gpu": "h200"},
            "deployment": {"engine": "tensorrt-llm", "quantization": "fp8", "kv_cache_dtype": "fp8",
                           "max_model_len": 4096},
            "workload": {"arrival": {"process": "poisson", "rate_per_s": 1},
                         "prompt_tokens": {"distribution": "fixed", "value": 128},
                         "output_tokens": {"distribution": "fixed", "value": 128}, "num_requests": 10}}


def test_a_deployment_that_states_its_sizes_prices_decodes_padded():
    plain = step_model_for(resolve(scenario_from_dict(SCENARIO, None)))
    stated = {**SCENARIO, "deployment": {**SCENARIO["deployment"], "cuda_graph_batch_sizes": list(PAGE_SIZES)}}
    padded = step_model_for(resolve(scenario_from_dict(stated, None)))
    assert not isinstance(plain, CudaGraphPadding)
    assert padded.sources == plain.sources
    # 600 decodes run as the 1,024 graph: the step of 1,024 sequences (424 of them one-token dummies)
    dummies = StepBatch.from_seqs([(1, 1000)] * 600 + [(1, 0)] * 424)
    assert padded.step_time(decodes(600)) == plain.step_time(dummies)
    assert padded.step_time(decodes(600)) > plain.step_time(decodes(600))
