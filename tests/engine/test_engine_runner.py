"""The runner drives the simulator's scheduler over the real model: every request gets its
tokens, and prefix-cache reuse and preemption (recompute) change the work done, never the
tokens generated."""

import pytest

from engine.config import engine_config
from engine.device import cpu_device
from engine.kernels import TORCH
from engine.model import Transformer
from engine.runner import EngineRunner, prompt_token_ids
from simulator.engine_loop import BARE
from simulator.replica import ReplicaConfig
from simulator.request import Request
from simulator.scheduler import SchedulerConfig
from sizer.inputs.model_spec import load_model

DEVICE = cpu_device()
CFG = engine_config(load_model("tiny"))
SHARED = tuple(range(100, 164))         # a 64-token system prompt, as token ids (segment_tokens = 1)


def workload():
    """12 requests at t=0: prompts of 40..150 tokens, two thirds opening with SHARED."""
    return [Request(i, 0.0, 40 + 10 * i, 6 + i % 4, prefix_segments=SHARED if i % 3 else ()) for i in range(12)]


def run(num_blocks, prefix_caching):
    model = Transformer(CFG, DEVICE.dtype, DEVICE.torch_device, TORCH, 512, seed=1)
    config = SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=64, enable_chunked_prefill=True,
                             preemption_mode="recompute", speculative=None, max_model_len=512, prefill_only=False,
                             reserve_full_kv=False)
    replica = ReplicaConfig(config, num_blocks, 16, prefix_caching, tenant_isolation=False, swap=None, engine_loop=BARE)
    return EngineRunner(model, DEVICE, replica).run(workload())


@pytest.fixture(scope="module")
def plain():
    return run(num_blocks=200, prefix_caching=False)


def test_prompt_ids_follow_the_prefix_segments():
    r = Request(3, 0.0, 70, 5, prefix_segments=SHARED)
    ids = prompt_token_ids(r, 4096)
    assert len(ids) == 70 and ids[:64] == list(SHARED)
    assert ids[64:] != prompt_token_ids(Request(4, 0.0, 70, 5, prefix_segments=SHARED), 4096)[64:]   # tails differ
    # segments of 8 tokens: equal segment ids give equal tokens
    a = prompt_token_ids(Request(1, 0.0, 20, 5, prefix_segments=(7, 9), segment_tokens=8), 4096)
    b = prompt_token_ids(Request(2, 0.0, 20, 5, prefix_segments=(7, 5), segment_tokens=8), 4096)
    assert a[:8] == b[:8] and a[8:16] != b[8:16]


def test_every_request_gets_its_tokens_in_order(plain):
    for r in plain.requests:
        times = plain.token_times_s[r.request_id]
        assert len(times) == len(plain.output_ids[r.request_id]) == r.output_tokens == r.num_output_tokens
        assert times == sorted(times) and r.first_token_s == times[0] and r.finished_s == times[-1]
    # Batching and chunked prefill happened: a 64-token budget splits every prompt over 64 tokens.
    assert max(s.batch.num_seqs for s in plain.steps) > 1
    assert any(s.batch.prefill_seqs and s.batch.num_seqs > s.batch.prefill_seqs for s in plain.steps)
    # All requests arrive at t=0, so the engine is never idle: step times add up to the run.
    assert sum(s.duration_s for s in plain.steps) == pytest.approx(plain.steps[-1].end_s - plain.steps[0].start_s)


@pytest.mark.slow
def test_prefix_reuse_and_preemption_change_no_token(plain):
    cached = run(num_blocks=200, prefix_caching=True)
    preempting = run(num_blocks=24, prefix_caching=False)      # 24 blocks of 16 < what 8 running requests need
    assert sum(r.num_cached_prompt_tokens for r in cached.requests) > 0
    assert sum(s.batch.new_tokens for s in cached.steps) < sum(s.batch.new_tokens for s in plain.steps)
    assert sum(r.num_preemptions for r in preempting.requests) > 0
    assert cached.output_ids == plain.output_ids
    assert preempting.output_ids == plain.output_ids


def test_warm_up_stays_within_max_model_len():
    # a context shorter than the step budget (max_model_len 64, 256 tokens a step): the warm-up prefilled 256 tokens
    # and decoded at position 256, past the model's 64 rotary positions (IndexError in validate and calibrate)
    model = Transformer(CFG, DEVICE.dtype, DEVICE.torch_device, TORCH, 64, seed=1)
    config = SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=256, enable_chunked_prefill=True,
                             preemption_mode="recompute", speculative=None, max_model_len=64, prefill_only=False,
                             reserve_full_kv=False)
    replica = ReplicaConfig(config, 100, 16, True, tenant_isolation=False, swap=None, engine_loop=BARE)
    runner = EngineRunner(model, DEVICE, replica)
    runner.warm_up()
    run = runner.run([Request(0, 0.0, 40, 24)])
    assert len(run.output_ids[0]) == 24
