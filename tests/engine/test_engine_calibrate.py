"""Pieces of `sizer calibrate` that need no timing: grids, call counts and the step sweep's requests (the overhead
fit: tests/sizer/timing/test_overhead_fit.py); and a sweep of two small waves at the shortest contexts."""

import random

import pytest
import torch

from engine.calibrate import (
    SWEEP_MIN_OUTPUT_TOKENS,
    SWEEP_OUTPUT_TOKENS,
    _sweep_longest,
    _sweep_requests,
    calls_per_step,
    step_sweep,
)
from engine.config import engine_config
from engine.device import cpu_device
from engine.kernels import TORCH
from engine.microbench import chunk_grid, context_grid, seq_grid, token_grid
from engine.model import Transformer
from sizer.cli.calibrate import MAX_SEED, MIN_MAX_MODEL_LEN
from sizer.inputs.model_spec import load_model
from sizer.timing.profile import Limits


def test_grids_cover_their_limits():
    assert token_grid(256) == [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256]
    assert token_grid(100) == [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 100]
    assert seq_grid(64) == [1, 2, 4, 8, 16, 32, 64] and seq_grid(48) == [1, 2, 4, 8, 16, 32, 48]
    assert context_grid(2048) == [0, 32, 128, 512, 2048]
    assert chunk_grid(256) == [2, 8, 16, 32, 64, 128, 256]


def test_calls_per_step_count_layers():
    dense = engine_config(load_model("tiny"))
    # 4 layers: two norms each plus the final one = 9; one of each projection per layer
    assert calls_per_step(dense, ["embed", "rmsnorm", "qkv", "gate_up"]) == {"embed": 1, "rmsnorm": 9, "qkv": 4,
                                                                             "gate_up": 4}
    moe = engine_config(load_model("mixtral-8x7b"))
    assert calls_per_step(moe, ["moe", "qkv"]) == {"moe": 32, "qkv": 32}


def sweep_wave(max_model_len: int, count: int = 64):
    limits = Limits(256, 64, max_model_len, 16)
    return _sweep_requests(count, _sweep_longest(limits), max_model_len, random.Random(0), 0)


def test_the_flags_minimum_is_the_sweeps():
    # sizer/cli/calibrate.py cannot import the engine (torch) for its flag's bound: a 1-token prompt and the sweep's
    # fewest output tokens
    assert MIN_MAX_MODEL_LEN == 1 + SWEEP_MIN_OUTPUT_TOKENS


@pytest.mark.parametrize("max_model_len", [MIN_MAX_MODEL_LEN, 4, 16, 56, 94])
def test_sweep_requests_fit_a_short_context(max_model_len):
    # the scheduler refuses a request longer than max_model_len: the sweep ran none of them (or crashed)
    for r in sweep_wave(max_model_len):
        assert r.prompt_tokens >= 1 and r.output_tokens >= 2          # a prefill step, then a decode step
        assert r.prompt_tokens + r.output_tokens <= max_model_len


@pytest.mark.parametrize("max_model_len", [95, 256, 2048, 8192])
def test_sweep_requests_are_not_cut_from_95(max_model_len):
    wave = sweep_wave(max_model_len)
    assert all(SWEEP_OUTPUT_TOKENS[0] <= r.output_tokens <= SWEEP_OUTPUT_TOKENS[1] for r in wave)
    assert max(r.prompt_tokens for r in wave) <= max_model_len // 2


@pytest.mark.parametrize("max_model_len", [MIN_MAX_MODEL_LEN, 16, 256])
def test_step_sweep_at_a_context_within_the_step_budget(max_model_len):
    # up to max_num_batched_tokens (256), the runner's warm-up indexed past the model's rotary tables
    dev, cfg = cpu_device(), engine_config(load_model("tiny"))
    model = Transformer(cfg, dev.dtype, dev.torch_device, TORCH, max_model_len)
    steps = step_sweep(model, dev, Limits(256, 2, max_model_len, 16), seed=0)
    assert len(steps) >= 2                        # a step after the first of each wave (of 1 and 2 requests)


def test_seed_bound_is_torchs():
    torch.manual_seed(MAX_SEED)
    torch.Generator().manual_seed(MAX_SEED)
    with pytest.raises(ValueError, match="Overflow"):
        torch.manual_seed(MAX_SEED + 1)
