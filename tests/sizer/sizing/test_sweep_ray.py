"""The Ray backend on a local cluster this module starts (2 CPUs, no dashboard) and shuts down:
the same points give the same Parquet contents as the local backend, a worker killed
mid-sweep costs only its point, and a model path and a trace read by the driver need not exist
when the tasks run."""

from __future__ import annotations

import functools
import os
import shutil
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from sweephelp import model_folder, sweep_of, trace_sweep, write_sweep

from sizer.outputs.sweep_store import ResultStore
from sizer.sizing.sweep import evaluate_point, run_sweep, tasks

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow          # the cluster takes ~10-20 s to start

REPO = Path(__file__).resolve().parents[3]
# 2 GPUs x 2 TP x 2 KV formats x 2 TTFT targets x 2 rates = 32 points, every one simulated (none pruned): every axis
# has two values, so a column written in another order or a point lost on either backend shows (4 rates, 64 points,
# took 28 s of the file's 45; main 8c00154)
AXES = {"gpu": ["h100-sxm", "h200"], "tensor_parallel_size": [1, 2], "kv_cache_dtype": ["auto", "fp8"],
        "ttft_ms": [300, 500], "rate_per_s": [1, 2]}


@pytest.fixture(scope="module")
def cluster():
    # the workers import this checkout's sizer, and this module's functions travel by value
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    ray.shutdown()


def run(tmp_path: Path, name: str, backend: str, axes: dict = AXES, **kw):
    sweep = sweep_of(write_sweep(tmp_path, axes, settings={"max_retries": 2}))
    store = ResultStore(tmp_path / f"{name}.parquet")
    summary = run_sweep(sweep, store.done(), store.add, backend, 2, **kw)
    store.close()
    return sweep, summary, pq.read_table(tmp_path / f"{name}.parquet")


def test_ray_and_local_write_the_same_rows(cluster, tmp_path):
    _, on_ray, by_ray = run(tmp_path, "ray", "ray")
    _, local, by_pool = run(tmp_path, "local", "local")
    assert on_ray.simulated == local.simulated == 32 and by_ray.num_rows == 32
    assert by_ray.equals(by_pool)                     # every column, to the bit
    assert by_ray.column("ttft_p95_ms").null_count == 0


def dies_once(marker: Path, sweep, task):
    """The first task to get here kills its Ray worker process, once."""
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return evaluate_point(sweep, task)
    os.close(fd)
    os._exit(1)


def test_a_killed_ray_worker_costs_only_its_point(cluster, tmp_path):
    axes = {**AXES, "rate_per_s": [1]}                # 16 points
    sweep, summary, table = run(tmp_path, "killed", "ray", axes,
                                evaluate=functools.partial(dies_once, tmp_path / "died"))
    assert len(sweep.points) == 16
    assert (tmp_path / "died").exists() and summary.failed == ()
    assert sorted(table.column("point_hash").to_pylist()) == sorted(t.point_hash for t in tasks(sweep))


def test_ray_workers_read_no_model_or_trace_file(cluster, tmp_path):
    folder = model_folder(tmp_path)
    path = trace_sweep(tmp_path, {"model": [str(folder)], "gpu": ["h100-sxm", "h200"], "rate_per_s": [2]})
    sweep = sweep_of(path)
    pooled = ResultStore(tmp_path / "local.parquet")
    run_sweep(sweep, set(), pooled.add, "local", 1)
    pooled.close()
    shutil.rmtree(folder)                  # both read once by the driver: the tasks get them from the object store
    (tmp_path / "trace.csv").unlink()
    store = ResultStore(tmp_path / "ray.parquet")
    summary = run_sweep(sweep, set(), store.add, "ray", 2)
    store.close()
    table = pq.read_table(tmp_path / "ray.parquet")
    assert summary.failed == () and summary.simulated == 2
    assert set(table.column("status").to_pylist()) <= {"ok", "rejected"}
    assert table.equals(pq.read_table(tmp_path / "local.parquet"))     # as the pool sized them with the files there


class CountsUnpickles:
    """evaluate_point, noting in `log` each time it is unpickled (it travels in the object store with the sweep)."""

    def __init__(self, log: Path):
        self.log = log

    def __reduce__(self):
        return unpickled, (self.log,)

    def __call__(self, sweep, task):
        return evaluate_point(sweep, task)


def unpickled(log: Path) -> CountsUnpickles:
    with open(log, "a") as f:
        f.write("x")
    return CountsUnpickles(log)


def test_the_shared_inputs_are_unpickled_once_per_worker_not_per_task(cluster, tmp_path):
    log = tmp_path / "unpickled"
    sweep, summary, _ = run(tmp_path, "once", "ray", {**AXES, "rate_per_s": [1]}, evaluate=CountsUnpickles(log))
    assert summary.simulated == 16 and summary.failed == ()
    # 16 tasks on a 2-CPU cluster: one unpickling per worker process (2, a few more if Ray starts spares), not 16
    assert 1 <= len(log.read_text()) <= 4
