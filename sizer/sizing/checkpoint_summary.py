"""What the checkpoint says about its weights, beside what sizer derives: where it was read, its
quantisation and where that came from, the bytes its files hold, and how the GPU runs its format."""

from __future__ import annotations

from dataclasses import dataclass

from sizer.analytic.memory import GB
from sizer.sizing.resolve import Resolved

# Stored and derived weight bytes further apart than this are named in the plan's assumptions. A .gguf file's
# weights are counted from its own tensor table, so they part only by the tensors llama.cpp does not load with the
# model (an encoder's, which the model's notes name).
STORED_GAP_FLAGGED = 0.05


@dataclass(frozen=True)
class CheckpointSummary:
    config_file: str                   # where config.json was read (the catalog's file for a catalog name)
    found_as: str                      # "catalog", "path", or the Hugging Face cache snapshot
    quantization: str                  # the scheme sized ("" for 16-bit weights)
    quantization_source: str           # "config.json quantization_config", "hf_quant_config.json", or a default
    kv_cache_stated: str               # the KV-cache format the checkpoint states ("fp8"), "" if none
    stored_bytes: int | None           # tensor bytes in the checkpoint's files (None: no weights beside config.json)
    stored_bytes_source: str
    derived_bytes: float               # one full copy as sizer counts it (WeightMemory.total_bytes)
    stored_vs_derived: float | None    # (stored - derived) / derived


def summarise_checkpoint(r: Resolved) -> CheckpointSummary:
    c, scheme = r.checkpoint, r.weight_format.scheme
    # a quantised format, or a .gguf file's own (16-bit too): its weights are counted from its tensor table
    stated = r.weight_format.bits < 16 or scheme.gguf_tensors is not None
    derived = r.weights.total_bytes
    gap = (c.stored_bytes - derived) / derived if c.stored_bytes is not None and derived else None
    text = r.weight_format.description if r.weight_format.gguf else scheme.summary   # GGUF: its type mix
    return CheckpointSummary(c.config_file, c.found_as, text if stated else "",
                             scheme.source if stated else "", scheme.kv_cache, c.stored_bytes,
                             c.stored_bytes_source, derived, gap)


def checkpoint_notes(r: Resolved, summary: CheckpointSummary) -> list[str]:
    """The plan's assumptions about the checkpoint's format and bytes."""
    notes = [f"weights run as: {r.execution.note}"] if r.execution.note else []
    if summary.quantization_source == "hf_quant_config.json":
        notes.append("quantisation read from the checkpoint's hf_quant_config.json (ModelOpt): config.json states "
                     "none, and vLLM then reads that file")
    if summary.kv_cache_stated and summary.kv_cache_stated != r.kv_cache_dtype:
        notes.append(f"the checkpoint states its KV cache as {summary.kv_cache_stated} (vLLM's --kv-cache-dtype "
                     f"{summary.kv_cache_stated}); this plan caches KV in {r.kv_cache_dtype} (kv_cache_dtype)")
    gap = summary.stored_vs_derived
    if gap is not None and abs(gap) > STORED_GAP_FLAGGED:
        notes.append(f"checkpoint files hold {summary.stored_bytes / GB:,.2f} GB of tensors "
                     f"({summary.stored_bytes_source}) but sizer derives {summary.derived_bytes / GB:,.2f} GB "
                     f"({gap:+.1%}): tensors sizer does not load or count (multi-token-prediction layers, "
                     "towers), or a format read differently")
    return notes
