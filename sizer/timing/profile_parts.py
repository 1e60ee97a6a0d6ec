"""The parts of a calibrated profile that the kernel-table step model shares (sizer/timing/kernel_tables.py,
sizer/timing/kernel_step.py): the largest step a profile covers and what whole steps cost beyond the kernel
tables (a batch's split into decode and prefill attention: simulator/step_batch.py `split_attention`). Without
numpy, so a plan that reads neither a profile nor kernel tables loads none of sizer/timing/profile.py's tables.
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


# A step's fitted overhead at most a minute, per step or per sequence, and the kernels at most 100 times slower in a
# whole step than alone (fits give milliseconds and about 1): 1e300 passed and priced a request at 1e300 s.
MAX_OVERHEAD_S = 60.0
MAX_KERNEL_FACTOR = 100.0


@dataclass(frozen=True)
class Overhead:
    """What whole steps cost beyond the kernel tables (sizer/timing/overhead_fit.py `fit_overhead`).
    The fit's statistics are None before the fit; the decode-only line is None when the
    sweep had too few decode-only steps for it. A fit may give 0."""

    fixed_s: float = schema.field(ge=0, le=MAX_OVERHEAD_S)
    per_seq_s: float = schema.field(ge=0, le=MAX_OVERHEAD_S)
    kernel_factor: float = schema.field(ge=0, le=MAX_KERNEL_FACTOR)
    host_fixed_s: float | None = None
    forward_fixed_s: float | None = None
    fit_steps: int | None = None
    dropped_steps: int | None = None
    decode_fixed_s: float | None = schema.field(None, ge=0, le=MAX_OVERHEAD_S)
    decode_kernel_factor: float | None = schema.field(None, ge=0, le=MAX_KERNEL_FACTOR)
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
