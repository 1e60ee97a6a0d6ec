"""Kernel tables from a calibrated profile: what the bundled engine timed, keyed by shape.

`sizer calibrate` measures one model's shard: its four dense GEMMs by tokens, the lm_head by
sequences, decode attention by (sequences, context), prefill attention by chunk, the all-reduce by
bytes. The same measurements keyed by shape, in the kernel-table format of
`sizer/timing/kernel_tables.py` (GEMM by (n, k, m), attention by (heads, KV heads, head dim,
batch, length), all-reduce by (GPUs, bytes)), price any model with those shapes; they are written
beside the profile, in `<profile>/kernels/`. Prefill attention keeps the chunks measured on an
empty cache (the table's causal prefill), decode attention's KV length is the context + 1. Element-
wise kernels: the measured copy bandwidth (fraction 1) and the fused residual add + RMSNorm's time
at one token as the fixed latency of each. MoE layers (timed as one op) are not converted.
"""

from __future__ import annotations

from sizer.inputs.layers import Attention
from sizer.inputs.model_spec import ModelSpec
from sizer.timing.calibrated_tables import tables_header
from sizer.timing.profile import (
    ALLREDUCE_FILE,
    DECODE_FILE,
    PREFILL_FILE,
    SEQ_OPS_FILE,
    TOKEN_OPS_FILE,
    CalibrationProfile,
)

KERNELS_SUBDIR = "kernels"
DTYPES = {"bfloat16": "bfloat16", "float16": "bfloat16", "float32": "float32"}   # torch dtype -> table dtype


def kernel_tables_from_profile(profile: CalibrationProfile, model: ModelSpec) -> tuple[dict, dict[str, list[tuple]]]:
    """(tables.yaml content, rows per table, latencies in us) of a profile calibrated for `model`."""
    h = profile.header
    tp, hidden, dtype = h.model.tp, model.hidden_size, DTYPES[h.dtype]
    attention = model.attention
    assert isinstance(attention, Attention), "the engine runs softmax attention only (engine/config.py)"
    heads, kv_heads, head_dim = attention.num_heads // tp, max(1, attention.num_kv_heads // tp), attention.head_dim
    width = model.intermediate_size // tp
    shapes = {"qkv": ((heads + 2 * kv_heads) * head_dim, hidden), "o": (hidden, heads * head_dim),
              "gate_up": (2 * width, hidden), "down": (hidden, width)}
    ops = profile.token_ops
    gemm = [(dtype, n, k, int(m), float(t) * 1e6) for op, (n, k) in shapes.items() if f"{op}_s" in ops.columns
            for m, t in zip(ops.x, ops.columns[f"{op}_s"], strict=True)]
    gemm += [(dtype, round(model.vocab_size / tp), hidden, int(s), float(t) * 1e6)
             for s, t in zip(profile.seq_ops.x, profile.seq_ops.columns["lm_head_s"], strict=True)]
    key = (dtype, heads, kv_heads, head_dim)
    d = profile.decode_attention
    generation = [(*key, int(s), int(c) + 1, float(d.values[i, j]) * 1e6)
                  for i, s in enumerate(d.x) for j, c in enumerate(d.y)]
    p = profile.prefill_attention
    empty = list(p.y).index(0) if 0 in p.y else None
    context = [] if empty is None else [(*key, 1, int(n), float(p.values[i, empty]) * 1e6) for i, n in enumerate(p.x)]
    allreduce = [] if profile.allreduce is None else [
        (tp, int(b), float(t) * 1e6) for b, t in zip(profile.allreduce.x, profile.allreduce.columns["time_s"],
                                                       strict=True)]
    files = [f"{profile.path.name}/{f}" for f in (TOKEN_OPS_FILE, SEQ_OPS_FILE, DECODE_FILE, PREFILL_FILE)]
    files += [f"{profile.path.name}/{ALLREDUCE_FILE}"] if allreduce else []
    norm_s = float(ops.columns["rmsnorm_s"][0]) if "rmsnorm_s" in ops.columns else 0.0
    header = tables_header(h.device.id, h.device.name, h.kernels, h.versions.torch, h.achieved.copy_bytes_per_s,
                           norm_s, files, h.date)
    return header, {"gemm": gemm, "context_attention": context, "generation_attention": generation,
                    "allreduce": allreduce}
