"""The device the engine runs on: naming it, checking it is the one asked for, timing on it.

Timing follows the workplace method: warm up, synchronise (device events on a GPU through
`triton.testing.do_bench`), repeat, take the median. On a CPU the device's own clock is the
CPU time of the engine's thread (it runs one torch thread): time the operating system gives
to other processes is not engine time, so a busy neighbour on a shared machine does not
count as a slow step.
"""

from __future__ import annotations

import ctypes
import platform
import re
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Protocol

import torch

from engine.profile import Versions
from validation.errors import FieldError

CPU_THREADS = 1   # one thread: stable timings on a shared machine, and what the CPU profile assumes


class GPUProfile(Protocol):
    """What the engine reads of an accelerator profile (sizer's HardwareSpec has these)."""
    id: str
    name: str
    memory_bandwidth_bytes_per_s: float

    def peak_flops(self, fmt: str) -> float: ...


@dataclass(frozen=True)
class Device:
    kind: str                 # "cpu" | "cuda"
    name: str                 # as the system reports it
    torch_device: torch.device
    dtype: torch.dtype        # bf16 on a GPU, float32 on a CPU

    def synchronize(self) -> None:
        if self.kind == "cuda":
            torch.cuda.synchronize()

    def clock(self) -> Clock:
        return WallClock(self) if self.kind == "cuda" else ThreadClock()


class WallClock:
    """Seconds since creation on a device-synchronised wall clock; waiting sleeps."""

    def __init__(self, device: Device):
        self.device = device
        self.start = self._read()

    def _read(self) -> float:
        self.device.synchronize()
        return time.perf_counter()

    def now_s(self) -> float:
        return self._read() - self.start

    def wait_until(self, t_s: float) -> None:
        time.sleep(max(0.0, t_s - self.now_s()))


class ThreadClock:
    """Seconds of this thread's CPU time since creation, plus the idle time skipped: waiting
    for an arrival jumps the clock instead of sleeping (a replay in the engine's own time)."""

    def __init__(self):
        self.start = time.thread_time()
        self.skipped = 0.0

    def now_s(self) -> float:
        return time.thread_time() - self.start + self.skipped

    def wait_until(self, t_s: float) -> None:
        self.skipped += max(0.0, t_s - self.now_s())


Clock = WallClock | ThreadClock


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _reuse_freed_memory() -> None:
    """Ask glibc to serve large allocations from its heap and keep freed memory.

    By default every temporary over 128 KiB is a fresh mmap, so each call of a big op pays
    page faults that cost more than the arithmetic (decode attention 3.5x slower) and vary
    from run to run; timings taken that way neither repeat nor predict. Other C libraries:
    nothing to do.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    libc.mallopt(m_mmap_threshold, 1 << 30)
    libc.mallopt(m_trim_threshold, 1 << 31)


def cpu_device(threads: int = CPU_THREADS) -> Device:
    """The CPU in float32, with `threads` torch threads and allocator settings for steady timings."""
    torch.set_num_threads(threads)
    _reuse_freed_memory()
    return Device("cpu", cpu_name(), torch.device("cpu"), torch.float32)


def gpu_matches(spec: GPUProfile, device_name: str) -> bool:
    """Whether a reported GPU name ('NVIDIA H100 80GB HBM3') is the profile's accelerator."""
    tokens = set(re.split(r"[^a-z0-9]+", device_name.lower()))
    family = spec.id.split("-")[0]
    if family not in tokens:
        return False
    if ("pcie" in spec.id) != ("pcie" in tokens):
        return False
    sizes = {t for t in tokens if re.fullmatch(r"\d+gb", t)}
    spec_sizes = set(re.findall(r"\d+gb", spec.id))
    return not (sizes and spec_sizes and not sizes & spec_sizes)


def gpu_device(spec: GPUProfile) -> Device:
    """The local GPU, refusing (FieldError) when there is none or it is not `spec`."""
    if not torch.cuda.is_available():
        raise FieldError(None, "gpu", "no CUDA GPU is present here; "
                                      f"run this on a machine with an {spec.name}, or use `--device cpu`")
    name = torch.cuda.get_device_name()
    if not gpu_matches(spec, name):
        raise FieldError(None, "gpu", f"the GPU here is {name!r}, not {spec.name!r}; name the GPU that is present")
    return Device("cuda", name, torch.device("cuda"), torch.bfloat16)


def versions() -> Versions:
    import triton

    driver = None
    if torch.cuda.is_available() and shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, check=False)
        driver = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    return Versions(torch=str(torch.__version__), triton=str(triton.__version__), cuda=torch.version.cuda,
                    driver=driver, python=platform.python_version())


def median_times_s(fns: dict[Hashable, Callable[[], object]], device: Device, rounds: int = 5,
                   calls_per_round: int = 3) -> dict[Hashable, float]:
    """Median seconds of one call of each of `fns`. On a CPU the calls are interleaved, round
    after round, so that a slow or fast spell of a shared machine falls on every entry of a
    table alike instead of on a few neighbouring ones; on a GPU each is timed by do_bench."""
    if device.kind == "cuda":
        return {key: median_time_s(fn, device) for key, fn in fns.items()}
    samples: dict[Hashable, list[float]] = {key: [] for key in fns}
    for fn in fns.values():
        fn()
    for _ in range(rounds):
        for key, fn in fns.items():
            for _ in range(calls_per_round):
                start = time.thread_time()
                fn()
                samples[key].append(time.thread_time() - start)
    return {key: statistics.median(times) for key, times in samples.items()}


def median_time_s(fn: Callable[[], object], device: Device, budget_s: float = 0.05,
                  min_repeats: int = 5, max_repeats: int = 50) -> float:
    """Median seconds of one call of `fn` (warmed up; events on a GPU, thread CPU time on a CPU)."""
    if device.kind == "cuda":
        import triton.testing

        return triton.testing.do_bench(fn, warmup=10, rep=max(20, int(budget_s * 1e3)), return_mode="median") / 1e3
    fn()
    times: list[float] = []
    spent = 0.0
    while len(times) < min_repeats or (spent < budget_s and len(times) < max_repeats):
        start = time.thread_time()
        fn()
        times.append(time.thread_time() - start)
        spent += times[-1]
    return statistics.median(times)
