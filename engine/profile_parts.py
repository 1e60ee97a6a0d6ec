"""The parts of a calibrated profile that the kernel-table step model shares (sizer/inputs/kernel_tables.py,
sizer/analytic/kernel_step.py): the largest step a profile covers, what whole steps cost beyond the kernel
tables, and a batch's split into decode and prefill attention. Without numpy, so a plan that reads neither a
profile nor kernel tables loads none of engine/profile.py's tables.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.step_batch import StepBatch
from validation import schema


@dataclass(frozen=True)
class Limits:
    """The largest step the profile covers (the deployment's scheduler limits)."""

    max_num_batched_tokens: int = schema.field(ge=1)
    max_num_seqs: int = schema.field(ge=1)
    max_model_len: int = schema.field(ge=1)
    block_size: int = schema.field(ge=1)


@dataclass(frozen=True)
class Overhead:
    """What whole steps cost beyond the kernel tables (engine/calibrate.py `fit_overhead`).
    The fit's statistics are None before the fit; the decode-only line is None when the
    sweep had too few decode-only steps for it. A fit may give 0."""

    fixed_s: float = schema.field(ge=0)
    per_seq_s: float = schema.field(ge=0)
    kernel_factor: float = schema.field(ge=0)
    host_fixed_s: float | None = None
    forward_fixed_s: float | None = None
    fit_steps: int | None = None
    dropped_steps: int | None = None
    decode_fixed_s: float | None = schema.field(None, ge=0)
    decode_kernel_factor: float | None = schema.field(None, ge=0)
    step_error_p50: float | None = None

    def line(self, batch: StepBatch, layers_ratio: float = 1.0) -> tuple[float, float]:
        """(kernel factor, seconds beyond the kernels) of a whole step: the decode-only line when it was
        fitted and the step is decode-only, else the mixed steps' line. `layers_ratio`: the layers of the
        model priced over those of the model fitted; the forward pass's fixed part (the Python between
        kernels, per layer) scales with it, the host's does not."""
        decode_only = batch.prefill_seqs == 0 and self.decode_kernel_factor is not None
        factor = self.decode_kernel_factor if decode_only else self.kernel_factor
        fixed = self.decode_fixed_s if decode_only else self.fixed_s
        if layers_ratio != 1.0:
            host = self.host_fixed_s or 0.0
            fixed = host + (fixed - host) * layers_ratio
        return factor, fixed + self.per_seq_s * batch.num_seqs


def split_attention(batch: StepBatch) -> tuple[int, float, int, float, float]:
    """(decode seqs, context per decode seq, prefill seqs, tokens per prefill seq, context
    per prefill seq) from a batch's totals, assuming equal prefill chunks.

    Decodes contribute c + 1 pairs each, a prefill chunk of n tokens on c cached ones
    n c + n (n + 1) / 2, so pairs - context - decodes = P c (n - 1) + P n (n + 1) / 2.
    """
    prefill, decode = batch.prefill_seqs, batch.num_seqs - batch.prefill_seqs
    n = batch.prefill_tokens / prefill if prefill else 0.0
    if prefill and n <= 1:                       # one-token chunks run as decodes
        decode, prefill, n = decode + prefill, 0, 0.0
    c = 0.0
    if prefill:
        excess = batch.attention_pairs - batch.context_tokens - decode - prefill * n * (n + 1) / 2
        c = min(max(0.0, excess / (prefill * (n - 1))), batch.context_tokens / prefill)
    decode_ctx = (batch.context_tokens - prefill * c) / decode if decode else 0.0
    return decode, decode_ctx, prefill, n, c
