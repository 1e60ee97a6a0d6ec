"""Pieces of `sizer calibrate` that need no timing: grids and call counts (the overhead fit:
tests/sizer/timing/test_overhead_fit.py)."""

from engine.calibrate import calls_per_step
from engine.config import engine_config
from engine.microbench import chunk_grid, context_grid, seq_grid, token_grid
from sizer.inputs.model_spec import load_model


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
