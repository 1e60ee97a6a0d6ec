"""The engine's kernels: each a Triton version and a plain-torch reference with one contract.

Triton decides when a kernel is decorated whether to compile it or interpret it, so without
a CUDA device the interpreter is switched on here, before the kernel modules are imported
(an explicit TRITON_INTERPRET in the environment wins). On a GPU the Triton versions run;
on a CPU the engine uses the torch versions for speed and tests run the Triton ones through
the interpreter.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from engine.kernels.paged_decode import decode_attention, decode_attention_ref  # noqa: E402
from engine.kernels.paged_prefill import prefill_attention, prefill_attention_ref  # noqa: E402
from engine.kernels.rmsnorm import rms_norm, rms_norm_ref  # noqa: E402
from engine.kernels.rope_cache import rope_kv, rope_kv_ref  # noqa: E402


@dataclass(frozen=True)
class Kernels:
    """One implementation of every kernel the model calls."""

    name: str
    decode_attention: Callable
    prefill_attention: Callable
    rms_norm: Callable
    rope_kv: Callable


TRITON = Kernels("triton", decode_attention, prefill_attention, rms_norm, rope_kv)
TORCH = Kernels("torch", decode_attention_ref, prefill_attention_ref, rms_norm_ref, rope_kv_ref)


def select(backend: str) -> Kernels:
    """`triton`, `torch`, or `auto` (Triton on a GPU, torch on a CPU)."""
    if backend == "auto":
        return TRITON if torch.cuda.is_available() else TORCH
    return {"triton": TRITON, "torch": TORCH}[backend]
