"""All-reduce timing over message sizes, for profiles with tensor parallelism (TP > 1).

One process per rank (NCCL across GPUs, gloo across CPU processes), each all-reducing
random tensors of each size; the median over repeats of the slowest rank is the time a
TP step waits. Run only when `tp` devices are present; a CPU run exercises the same code.
"""

from __future__ import annotations

import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def message_sizes_bytes(max_bytes: int) -> list[int]:
    """Powers of four from 4 KiB up to and including `max_bytes`."""
    sizes, size = [], 4096
    while size < max_bytes:
        sizes.append(size)
        size *= 4
    return sizes + [max_bytes]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, kind: str, dtype: torch.dtype, sizes: list[int], repeats: int,
            results: mp.Queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    gpu = kind == "cuda"
    if gpu:
        torch.cuda.set_device(rank)
    else:
        torch.set_num_threads(1)
    dist.init_process_group("nccl" if gpu else "gloo", rank=rank, world_size=world)
    device = torch.device("cuda", rank) if gpu else torch.device("cpu")
    elem = dtype.itemsize
    rows = []
    for size in sizes:
        x = torch.randn(max(1, size // elem), device=device).to(dtype)
        times = []
        for i in range(repeats + 2):
            dist.barrier()
            if gpu:
                torch.cuda.synchronize()
            start = time.perf_counter()
            dist.all_reduce(x)
            if gpu:
                torch.cuda.synchronize()
            elapsed = torch.tensor([time.perf_counter() - start], device=device)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)     # the slowest rank decides
            if i >= 2:
                times.append(float(elapsed))
        rows.append({"bytes": size, "time_s": statistics.median(times)})
    if rank == 0:
        results.put(rows)
    dist.destroy_process_group()


def allreduce_table(world: int, kind: str, dtype: torch.dtype, max_bytes: int, repeats: int = 10) -> list[dict]:
    """Rows of (bytes, time_s) for all-reduce across `world` ranks of device `kind`."""
    results = mp.get_context("spawn").SimpleQueue()
    mp.spawn(_worker, args=(world, _free_port(), kind, dtype, message_sizes_bytes(max_bytes), repeats, results),
             nprocs=world, join=True)
    return results.get()
