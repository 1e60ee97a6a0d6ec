"""Weight formats: the format to size a model in, and the bytes each matrix takes in it.

A format is its name, its bits and a scheme (sizer.inputs.quantization.Quantization): the layout
of its scales and zeros, what the activations run in, and which modules stay unquantised. A
checkpoint's own format carries the checkpoint's scheme; a format named on the command line carries
sizer's defaults for it (`FORMATS`). Matrices are counted exactly: scales per tensor, row, group or
block, and the layers a checkpoint leaves unquantised (matched by name, sizer.analytic.module_names)
at 16 bits, so a group of matrices partly excluded counts partly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sizer.analytic.module_names import mentions_vision, quantised_share
from sizer.analytic.weights import LinearGroup
from sizer.errors import InputError
from sizer.inputs.layers import LM_HEAD, ROUTER, VISION
from sizer.inputs.model_spec import ModelSpec
from sizer.inputs.quantization import Quantization

PLAIN = ("bf16", "fp16", "fp32")
GROUPED = ("awq", "gptq")        # integer formats whose group size the scenario may set
# vLLM's dtype=auto serves float32 checkpoints in float16, bfloat16 ones in bfloat16.
DTYPE_FORMATS = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp16", "half": "fp16"}
UNCONVERTED_KINDS = {ROUTER, LM_HEAD}   # vLLM builds routers and the lm_head without a quantisation method


@dataclass(frozen=True)
class WeightFormat:
    name: str
    bits: int                    # bits per stored value of a converted matrix
    compute: str                 # the GEMMs' input format ("bf16" when the activations stay 16-bit)
    description: str
    scheme: Quantization         # scales, activations, unquantised modules: the checkpoint's or sizer's defaults

    @property
    def from_checkpoint(self) -> bool:
        return bool(self.scheme.method)


def _format(name: str, bits: int, description: str, scheme: Quantization) -> WeightFormat:
    compute = name if name in PLAIN else "bf16" if scheme.weight_only else scheme.activations
    return WeightFormat(name, bits, compute, description, scheme)


def _default(name: str, bits: int, description: str, **scheme) -> WeightFormat:
    return _format(name, bits, description, Quantization("", name, bits, source=f"sizer's defaults for {name}",
                                                         **scheme))


FORMATS = {
    "bf16": _default("bf16", 16, "bfloat16, 2 bytes per value"),
    "fp16": _default("fp16", 16, "float16, 2 bytes per value"),
    "fp32": _default("fp32", 32, "float32, 4 bytes per value"),
    "fp8": _default("fp8", 8, "FP8 E4M3 weights and activations; fp32 weight and input scale per tensor",
                    activations="fp8", static_activations=True),
    "int8": _default("int8", 8, "INT8 weights and activations (W8A8); fp32 scale per output channel",
                     scales="channel", activations="int8"),
    "awq": _default("awq", 4, "AWQ 4-bit weights; fp16 scale and 4-bit zero per group along the input; "
                    "activations 16-bit", scales="group", scale_bytes=2, zero_points=True),
    "gptq": _default("gptq", 4, "GPTQ 4-bit weights; fp16 scale and 4-bit zero per group along the input; "
                     "activations 16-bit", scales="group", scale_bytes=2, zero_points=True),
    "nvfp4": _default("nvfp4", 4, "NVFP4: 4-bit floats in blocks of 16 with an FP8 (E4M3) scale each, "
                      "plus fp32 per-tensor scales", scales="group", group_size=16, scale_bytes=1,
                      activations="fp4", static_activations=True),
    "mxfp4": _default("mxfp4", 4, "MXFP4: 4-bit floats in blocks of 32 with a power-of-two (E8M0, 1 byte) scale each",
                      scales="group", group_size=32, scale_bytes=1, activations="fp4"),
}


def checkpoint_format(q: Quantization) -> WeightFormat:
    """The checkpoint's own format: its bits, scales, activations and unquantised modules."""
    bits = q.bits or FORMATS[q.format].bits
    return _format(q.format, bits, f"{q.summary} (read from {q.source})", q)


def weight_format(m: ModelSpec, requested: str, group_size: int, file: str | None = None) -> tuple[WeightFormat, int]:
    """The format to size and its AWQ/GPTQ group size: for `auto` the checkpoint's own (its scheme and group
    size), else the requested one, with the checkpoint's scheme when it is the checkpoint's format."""
    q = m.quantization
    if requested == "auto" and q is None:
        return FORMATS[DTYPE_FORMATS.get(m.torch_dtype, "bf16")], group_size
    if requested == "auto" and not q.format:
        raise InputError(file, "deployment.quantization", f"the checkpoint's {q.why_not}; name a format "
                                                          f"({', '.join(FORMATS)})")
    if requested != "auto" and (q is None or q.format != requested):
        return FORMATS[requested], group_size
    if q.format in GROUPED and q.scales == "channel":
        return checkpoint_format(q), -1
    return checkpoint_format(q), q.group_size or group_size


def plain_bytes_per_value(fmt: WeightFormat) -> float:
    """Bytes per value of what `fmt` leaves unconverted (embeddings, norms, lm_head, routers, excluded modules):
    the format's own width when it is a plain float format, else 16-bit as quantised checkpoints keep them."""
    return fmt.bits / 8 if fmt.bits >= 16 else 2


def converted_share(g: LinearGroup, fmt: WeightFormat, m: ModelSpec) -> float:
    """Share of `g`'s matrices stored in `fmt` (the rest stay 16-bit): by the scheme's targets and exclusions,
    matched against the full module name of each layer's copy."""
    q = fmt.scheme
    if fmt.bits >= 16 or g.kind in UNCONVERTED_KINDS:
        return 0.0
    if g.kind == VISION:
        named = mentions_vision(q.ignore) or (q.targets and not mentions_vision(q.targets))
        return 0.0 if named else 1.0
    if not q.ignore and not q.targets:
        return 1.0
    return quantised_share(g.name, g.layers, q.ignore, q.targets, m.architecture)


def scale_bytes(g: LinearGroup, fmt: WeightFormat, group_size: int) -> float:
    """Bytes of scales and zeros `fmt` stores for all of `g`'s matrices, were they all converted."""
    q, k, n = fmt.scheme, g.in_features, g.out_features
    if fmt.bits >= 16:
        return 0.0
    if fmt.name in GROUPED:          # group_size -1 is GPTQ's per-channel: one group spans the input
        scales = math.ceil(k / (k if group_size == -1 else group_size)) * n
    elif q.scales == "group":
        scales = math.ceil(k / q.group_size) * n
    elif q.scales == "channel":
        scales = n
    elif q.scales == "block":        # vLLM's weight_block_size: [output rows, input columns]
        scales = math.ceil(n / q.block_size[0]) * math.ceil(k / q.block_size[1])
    else:
        scales = 1
    # fp32 per matrix: NVFP4's global weight scale, and the input scale of static activation quantisation
    per_matrix = 4 * ((fmt.name == "nvfp4") + q.static_activations)
    return (scales * (q.scale_bytes + (0.5 if q.zero_points else 0)) + per_matrix) * g.count


def group_bytes(g: LinearGroup, fmt: WeightFormat, group_size: int, m: ModelSpec) -> tuple[float, float, float]:
    """(value bytes, scale bytes, value bytes stored in `fmt`) of group `g`: converted matrices at the format's
    bits with their scales, the rest at 16 bits."""
    share = converted_share(g, fmt, m)
    converted = g.params * share * fmt.bits / 8
    plain = g.params * (1 - share) * plain_bytes_per_value(fmt)
    return converted + plain, scale_bytes(g, fmt, group_size) * share, converted

