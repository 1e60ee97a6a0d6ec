"""The operator shapes a set of models needs from kernel tables: what the importer keeps of a vendor's
tables (sizer/timing/aiconfigurator_import.py) and what `sizer calibrate` measures on a device
(sizer/sizing/device_calibration.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sizer.analytic.parallel import ParallelConfig, validate_split
from sizer.inputs.model_spec import ModelSpec, catalog_names, load_model
from sizer.timing.kernel_step import attention_shapes, delta_net_shapes, dense_gemms, latent_shapes
from sizer.timing.kernel_tables import TP_SIZES
from validation.errors import FieldError


@dataclass(frozen=True)
class ModelShapes:
    gemms: frozenset[tuple[int, int]]                  # dense GEMMs and lm_heads (n, k) per GPU
    attention: frozenset[tuple[int, int, int]]         # softmax attention (heads, KV heads, head dim) per GPU
    moe: frozenset[tuple[int, int, int, int]]          # MoE layers (hidden, expert width, top-k, experts), unsplit
    mla: frozenset[tuple[int, ...]] = frozenset()      # dense MLA blocks (kernel_tables.MLA_DIMS, heads per GPU)
    gdn: frozenset[tuple[int, ...]] = frozenset()      # gated delta net kernels (kernel_tables.GDN_DIMS, per GPU)
    tp_sizes: tuple[int, ...] = ()                     # the sizes asked for that split at least one of the models


def model_shapes(models: Iterable[ModelSpec], tp_sizes: tuple[int, ...] = TP_SIZES) -> ModelShapes:
    """The shapes of every model at each tensor-parallel size its split allows (a size that does not divide a
    model's heads or widths is skipped for that model: `validate_split`)."""
    gemms, attention, moe, mla, gdn, split = set(), set(), set(), set(), set(), set()
    for m in models:
        if m.moe is not None:
            moe.add((m.hidden_size, m.moe.expert_width, m.moe.top_k, m.moe.num_experts))
        for tp in tp_sizes:
            p = ParallelConfig(tp=tp)
            try:
                validate_split(m, p)
            except FieldError:
                continue
            split.add(tp)
            gemms |= {(s.n, s.k) for s in dense_gemms(m, p)}
            gemms.add((round(m.vocab_size / tp), m.hidden_size))
            attention |= {(s.heads, s.kv_heads, s.head_dim) for s in attention_shapes(m, p)}
            mla |= {s.dims for s in latent_shapes(m, p)}
            gdn |= {s.dims for s in delta_net_shapes(m, p)}
    return ModelShapes(frozenset(gemms), frozenset(attention), frozenset(moe), frozenset(mla), frozenset(gdn),
                       tuple(sorted(split)))


def catalog_shapes() -> ModelShapes:
    """The shapes of every catalog model (`sizer models`)."""
    return model_shapes(load_model(name) for name in catalog_names())
