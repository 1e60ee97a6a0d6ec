"""Inputs a driver read once, installed in a worker process so that the worker reads none of those files.

`sizer sweep` resolves, in its driver, every model reference, hardware profile, kernel table and trace
its points need (`sizer.sizing.sweep.build_sweep`), and ships them once per worker with the sweep (the
process pool's initializer; Ray's object store). `install` puts them here; the readers look here
first: model references (`sizer.sizing.resolve.checkpoint_of`), profiles (`hardware.load_hardware`),
kernel tables (`sizer.timing.step_model.kernel_tables_for`; a scenario's own folder:
`sizer.sizing.resolve`) and traces (`sizer.sizing.workload`,
and the scenario's check that the trace file exists). A worker on a node without the driver's files
(a model given as a path, a custom profile, the trace) therefore works, and nothing is re-read per
point. Outside a sweep nothing is installed and every reader reads its file.

Values are typed loosely (this module imports nothing of sizer, so every reader may import it).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Preloaded:
    checkpoints: dict[tuple[str, str], Any] = field(default_factory=dict)  # (scenario folder, model) -> Checkpoint
    profiles: dict[str, Any] | None = None                                  # all_profiles(): id -> HardwareSpec
    kernel_tables: dict[tuple[str, str], Any] = field(default_factory=dict)  # (GPU id, engine) -> KernelTables | None
    # (path, requests read; None: all of them) -> Workload
    traces: dict[tuple[str, int | None], Any] = field(default_factory=dict)
    kernel_headers: dict[tuple[str, str], Any] = field(default_factory=dict)  # (GPU id, engine) -> header | None
    kernel_folders: dict[str, Any] = field(default_factory=dict)    # hardware.kernel_tables folder -> KernelTables


_installed: list[Preloaded] = []          # at most one: what this process was given


def install(inputs: Preloaded | None) -> None:
    """Make `inputs` what this process's readers use (None: read files again)."""
    _installed[:] = [inputs] if inputs is not None else []


def current() -> Preloaded | None:
    return _installed[0] if _installed else None


@contextmanager
def installed(inputs: Preloaded | None) -> Iterator[None]:
    """`inputs` installed for the block, then whatever was before."""
    before = current()
    install(inputs)
    try:
        yield
    finally:
        install(before)


def checkpoint(folder: str, reference: str) -> Any | None:
    p = current()
    return p.checkpoints.get((folder, reference)) if p else None


def profiles() -> dict[str, Any] | None:
    p = current()
    return p.profiles if p else None


def has_kernel_tables(gpu: str, engine: str) -> bool:
    p = current()
    return p is not None and (gpu, engine) in p.kernel_tables


def kernel_tables(gpu: str, engine: str) -> Any | None:
    return current().kernel_tables[gpu, engine]


def has_kernel_header(gpu: str, engine: str) -> bool:
    p = current()
    return p is not None and (gpu, engine) in p.kernel_headers


def kernel_header(gpu: str, engine: str) -> Any | None:
    return current().kernel_headers[gpu, engine]


def kernel_folder(folder: str) -> Any | None:
    p = current()
    return p.kernel_folders.get(folder) if p else None


def trace(path: str, limit: int | None) -> Any | None:
    p = current()
    return p.traces.get((path, limit)) if p else None


def has_trace(path: str) -> bool:
    p = current()
    return p is not None and any(k[0] == path for k in p.traces)
