"""Where a sweep's points run: a local process pool, or a Ray cluster.

Both run `fn(shared, item)` for each item and hand each result to `on_result(item, result)` in the
driver as it arrives (in completion order; the caller keys results by the item, not by order).
`shared` (the base scenario, settings and the inputs read once by the driver: models, profiles, kernel
tables, trace) reaches each worker process once: through the pool's initializer, or through Ray's object
store (`ray.put` once; every task holds the reference, and each worker process fetches and unpickles it
once, `_ray_call`). A worker that dies
or a task that raises costs only its item: it is run again, at most `max_retries` times; an item
that still fails is handed to `on_failure(item, why)` and the sweep goes on.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from sizer.errors import InputError

RAY_EXTRA = "pip install 'sizer[ray]'"
_shared: dict[str, Any] = {}


def _init_worker(fn: Callable, shared: Any) -> None:
    _shared["fn"], _shared["shared"] = fn, shared


def _call(item: Any) -> Any:
    return _shared["fn"](_shared["shared"], item)


def run_local(fn: Callable, shared: Any, items: list, workers: int, max_retries: int,
              on_result: Callable[[Any, Any], None], on_failure: Callable[[Any, str], None]) -> None:
    """A pool of `workers` forked processes, `workers` items in flight: when one dies, the pool is
    rebuilt and only the items in flight are charged a try."""
    if workers <= 1:
        for item in items:
            _in_process(fn, shared, item, max_retries, on_result, on_failure)
        return
    tries = dict.fromkeys(range(len(items)), 0)
    todo = list(range(len(items)))[::-1]
    while todo:
        running: dict = {}
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                 initializer=_init_worker, initargs=(fn, shared)) as pool:
            try:
                while todo or running:
                    while todo and len(running) < workers:
                        i = todo.pop()
                        running[pool.submit(_call, items[i])] = i
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in sorted(done, key=lambda f: f.exception() is not None):   # results first
                        error = future.exception()
                        if isinstance(error, BrokenProcessPool):
                            raise error          # its item is still in `running`: retried below
                        i = running.pop(future)
                        if error is None:
                            on_result(items[i], future.result())
                        else:
                            _retry(i, f"{type(error).__name__}: {error}", tries, todo, max_retries, items, on_failure)
            except BrokenProcessPool:
                for i in running.values():       # a worker died: the items in flight lose one try each
                    _retry(i, "its worker process died", tries, todo, max_retries, items, on_failure)
                pool.shutdown(wait=True, cancel_futures=True)


def _in_process(fn: Callable, shared: Any, item: Any, max_retries: int, on_result: Callable[[Any, Any], None],
                on_failure: Callable[[Any, str], None]) -> None:
    """One item in this process, rerun while it raises (a crash of this process ends the sweep: rerun it)."""
    for attempt in range(max_retries + 1):
        try:
            result = fn(shared, item)
        except Exception as error:       # any failure of a point costs only that point
            if attempt == max_retries:
                on_failure(item, f"{type(error).__name__}: {error} ({attempt + 1} tries)")
            continue
        on_result(item, result)
        return


def _retry(i: int, why: str, tries: dict, todo: list, max_retries: int, items: list,
           on_failure: Callable[[Any, str], None]) -> None:
    tries[i] += 1
    if tries[i] > max_retries:
        on_failure(items[i], f"{why} ({tries[i]} tries)")
    else:
        todo.append(i)


def check_ray(flag: str = "--backend") -> None:
    """Before any work: ray is installed (looked up, not imported: it takes seconds)."""
    if importlib.util.find_spec("ray") is None:
        raise InputError(None, flag, f"ray is not installed; {RAY_EXTRA}")


def run_ray(fn: Callable, shared: Any, items: list, address: str | None, max_retries: int,
            on_result: Callable[[Any, Any], None], on_failure: Callable[[Any, str], None],
            num_cpus: int | None = None) -> None:
    """Each item a Ray task (`max_retries` for dead workers and raised exceptions alike). Joins the cluster at
    `address`, else uses the one this process already started, else starts a local one (shut down after)."""
    import ray
    started = not ray.is_initialized()
    if started:
        # Workers import the driver's sizer where its folder exists (this machine: a checkout, not only an installed
        # wheel); on other nodes the folder is absent and their installed sizer is imported.
        root = str(Path(__file__).resolve().parents[2])
        env = {"PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        try:
            ray.init(address=address, num_cpus=None if address else num_cpus, include_dashboard=False,
                     log_to_driver=False, runtime_env={"env_vars": env})
        except ConnectionError as error:
            raise InputError(None, "--address", f"cannot join the Ray cluster at {address}: {error}") from None
    try:
        remote = ray.remote(max_retries=max_retries, retry_exceptions=True)(_ray_call)
        # To the object store once, not once per task; the references go boxed in a list, so Ray does not fetch
        # and unpickle them for each task: each worker process does that once (_ray_call).
        boxed = [ray.put(fn), ray.put(shared)]
        pending = {remote.remote(boxed, item): item for item in items}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=min(len(pending), 64), timeout=0.5)
            for ref in done:
                item = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayError as error:
                    on_failure(item, f"{type(error).__name__} after {max_retries} retries: "
                                     f"{str(error).splitlines()[0] if str(error) else ''}")
                    continue
                on_result(item, result)
    finally:
        if started:
            ray.shutdown()


def _ray_call(boxed: list, item: Any) -> Any:
    """`fn(shared, item)` with `boxed` = [fn's reference, shared's reference], fetched once per worker process."""
    import ray
    key = tuple(ref.hex() for ref in boxed)
    if _shared.get("ray") != key:
        _shared["fn"], _shared["shared"] = ray.get(boxed)
        _shared["ray"] = key
    return _call(item)
