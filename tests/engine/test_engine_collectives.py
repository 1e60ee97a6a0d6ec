"""All-reduce timing across TP ranks, on two CPU processes (gloo): the same code as NCCL on GPUs."""

import pytest
import torch

from engine.collectives import allreduce_table, message_sizes_bytes


def test_message_sizes():
    # powers of four from 4 KiB, then the largest message itself
    assert message_sizes_bytes(100_000) == [4096, 16384, 65536, 100_000]


@pytest.mark.slow
def test_two_cpu_ranks_all_reduce():
    rows = allreduce_table(2, "cpu", torch.float32, 65536, repeats=3)
    assert [r["bytes"] for r in rows] == [4096, 16384, 65536]
    assert all(0 < r["time_s"] < 1.0 for r in rows)
