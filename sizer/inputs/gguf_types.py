"""GGUF (llama.cpp) tensor types and the named quantisation presets, as data.

A GGUF tensor type stores its values in blocks: `block_values` values in `block_bytes` bytes, the
scales (and mins) inside the block, so a row of n values takes n / block_values x block_bytes
bytes. A preset (llama.cpp's "file type", e.g. Q4_K_M) is a default tensor type plus rules that
keep some tensors at more bits: the output matrix, attention V and part of the FFN down
projections. `tensor_type` picks the type llama.cpp's quantizer gives one tensor.

Sources:
[GGML] ggml/src/ggml-common.h (block structs: block_q4_0 = fp16 d + 16 bytes of nibbles, ...) and
    ggml/src/ggml.c type_traits (blck_size, type_size), ggml-org/llama.cpp; the same table ships as
    gguf-py's GGML_QUANT_SIZES (tests/analytic/test_gguf_formats.py checks ours against it).
[QUANT] src/llama-quant.cpp, ggml-org/llama.cpp: llama_ftype_get_default_type (each preset's
    default type), llama_tensor_get_type_impl (the per-tensor rules below), tensor_type_fallback
    (rows not divisible by the block), tensor_allows_quantization (norms, 1-D tensors and
    ffn_gate_inp are not quantised).
Not modelled as formats to size a model in (not in the scenario's list of formats, so refused by name): the presets
that need an importance matrix (IQ1_*, IQ2_*, IQ3_XXS, Q2_K_S), IQ3_S/XS/M, MXFP4_MOE, llama.cpp's Falcon-only rules,
and --tensor-type / --pure overrides. A .gguf file given as the model needs none of them: its tensor table
(`TensorTable`) states each tensor's type, whatever its preset (sizer.analytic.formats).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class GGMLType:
    name: str             # as llama.cpp prints it, "Q4_K"
    type_id: int          # enum ggml_type, as a .gguf file's tensor table stores it
    block_values: int     # values per block
    block_bytes: int      # bytes per block, scales included

    @property
    def bits_per_value(self) -> float:
        return self.block_bytes * 8 / self.block_values

    @property
    def quantized(self) -> bool:
        return self.name not in PLAIN_TYPES

    def tensor_bytes(self, values: int) -> float:
        return values / self.block_values * self.block_bytes


@dataclass(frozen=True)
class GGUFTensor:
    """One row of a .gguf file's tensor table: the tensor's name, its type, how many values it holds and its shape
    (GGML order: shape[0] is a row's length; () where not read from a file)."""
    name: str
    type: GGMLType
    values: int
    shape: tuple[int, ...] = ()

    @property
    def nbytes(self) -> float:
        return self.type.tensor_bytes(self.values)


def type_counts(tensors: tuple[GGUFTensor, ...]) -> str:
    """The tensors' types, most frequent first: "Q4_K x 193, Q6_K x 33, F32 x 65"."""
    return ", ".join(f"{name} x {n}" for name, n in Counter(t.type.name for t in tensors).most_common())


@dataclass(frozen=True, eq=False)
class TensorTable:
    """The tensors of a .gguf file that llama.cpp loads with the model, as the file's tensor table states them: the
    weights of a model given as a .gguf file are sized from these, tensor by tensor (sizer.analytic.formats), not from
    a preset's rules. Compared by identity (a table is one file's)."""
    file: str                       # the .gguf file (a split model's first shard)
    source: str                     # "GGUF tensor table (Q4_K x 193, Q6_K x 33, F32 x 65)"
    tensors: tuple[GGUFTensor, ...]

    @cached_property
    def by_name(self) -> dict[str, GGUFTensor]:
        return {t.name: t for t in self.tensors}

    @property
    def main_type(self) -> GGMLType:
        """The type holding the most bytes."""
        held: dict[str, float] = {}
        for t in self.tensors:
            held[t.type.name] = held.get(t.type.name, 0.0) + t.nbytes
        return TYPES[max(held, key=held.__getitem__)]


PLAIN_TYPES = ("F32", "F16", "BF16", "F64", "I8", "I16", "I32", "I64")
TYPES: dict[str, GGMLType] = {t.name: t for t in (
    GGMLType("F32", 0, 1, 4),
    GGMLType("F16", 1, 1, 2),
    GGMLType("Q4_0", 2, 32, 18),       # fp16 scale + 32 x 4 bits
    GGMLType("Q4_1", 3, 32, 20),       # fp16 scale and min + 32 x 4 bits
    GGMLType("Q5_0", 6, 32, 22),       # fp16 scale + 32 high bits + 32 x 4 bits
    GGMLType("Q5_1", 7, 32, 24),
    GGMLType("Q8_0", 8, 32, 34),       # fp16 scale + 32 x 8 bits
    GGMLType("Q8_1", 9, 32, 40),
    GGMLType("Q2_K", 10, 256, 84),     # super-block of 256: 16 x 4-bit scales/mins, fp16 d and dmin, 2-bit values
    GGMLType("Q3_K", 11, 256, 110),
    GGMLType("Q4_K", 12, 256, 144),    # fp16 d, dmin; 12 bytes of 6-bit scales and mins; 128 bytes of nibbles
    GGMLType("Q5_K", 13, 256, 176),
    GGMLType("Q6_K", 14, 256, 210),
    GGMLType("Q8_K", 15, 256, 292),
    GGMLType("IQ2_XXS", 16, 256, 66),
    GGMLType("IQ2_XS", 17, 256, 74),
    GGMLType("IQ3_XXS", 18, 256, 98),
    GGMLType("IQ1_S", 19, 256, 50),
    GGMLType("IQ4_NL", 20, 32, 18),
    GGMLType("IQ3_S", 21, 256, 110),
    GGMLType("IQ2_S", 22, 256, 82),
    GGMLType("IQ4_XS", 23, 256, 136),
    GGMLType("I8", 24, 1, 1),
    GGMLType("I16", 25, 1, 2),
    GGMLType("I32", 26, 1, 4),
    GGMLType("I64", 27, 1, 8),
    GGMLType("F64", 28, 1, 8),
    GGMLType("IQ1_M", 29, 256, 56),
    GGMLType("BF16", 30, 1, 2),
    GGMLType("TQ1_0", 34, 256, 54),
    GGMLType("TQ2_0", 35, 256, 66),
    GGMLType("MXFP4", 39, 32, 17),     # E8M0 scale + 32 x 4-bit floats
)}
BY_ID: dict[int, GGMLType] = {t.type_id: t for t in TYPES.values()}

# [QUANT] tensor_type_fallback: a row whose length the block does not divide gets this type (else F16)
FALLBACK = {"IQ4_XS": "IQ4_NL", "Q2_K": "Q4_0", "Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}

# Tensor categories, as [QUANT] tensor_get_category sorts GGUF tensor names. ATTN_V covers attn_v,
# the fused attn_qkv and MLA's attn_kv_b (category_is_attn_v).
TOKEN_EMBD, OUTPUT, ATTN_Q, ATTN_K, ATTN_V, ATTN_OUTPUT, FFN_UP, FFN_GATE, FFN_DOWN, OTHER = (
    "token_embd", "output", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_up", "ffn_gate", "ffn_down", "other")


@dataclass(frozen=True)
class ModelFacts:
    """What llama.cpp's rules read of the model."""
    gqa: int              # query heads per KV head (hparams.n_gqa() of layer 0)
    experts: int          # routed experts per MoE layer (0: dense)
    is_70b: bool          # llama.cpp's LLM_TYPE_70B: 80 layers with grouped KV heads


def use_more_bits(i: int, n: int) -> bool:
    """[QUANT] the first and last eighth of the tensors, and every third one between."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


# Conditions a rule holds under: (index of the tensor among its category, how many there are, the model)
WHEN: dict[str, Callable[[int, int, ModelFacts], bool]] = {
    "always": lambda i, n, f: True,
    "more_bits": lambda i, n, f: use_more_bits(i, n),
    "first_eighth": lambda i, n, f: i < n // 8,
    "first_sixteenth": lambda i, n, f: i < n // 16,
    "first_two": lambda i, n, f: i < 2,
    "first_four": lambda i, n, f: i < 4,
    "gqa4": lambda i, n, f: f.gqa >= 4,
    "experts8": lambda i, n, f: f.experts == 8,
}


@dataclass(frozen=True)
class Rule:
    category: str
    when: str             # a key of WHEN
    type: str             # a key of TYPES


@dataclass(frozen=True)
class Preset:
    name: str             # llama.cpp's name, "Q4_K_M"
    file_type: int        # enum llama_ftype (general.file_type in a .gguf)
    base: str             # the default tensor type
    rules: tuple[Rule, ...] = ()   # first match per category wins; no match: the base type

    @property
    def key(self) -> str:
        """The weight-format name sizer accepts: llama.cpp's, lower-cased."""
        return self.name.lower()


def _r(category: str, when: str, type_: str) -> Rule:
    return Rule(category, when, type_)


# [QUANT] llama_tensor_get_type_impl, without an importance matrix and for non-Falcon models.
_EXPERTS8_ATTN_OUTPUT = _r(ATTN_OUTPUT, "experts8", "Q5_K")   # the 8-expert (Mixtral) rule of the listed presets
PRESETS: dict[str, Preset] = {p.key: p for p in (
    Preset("F16", 1, "F16"),
    Preset("Q8_0", 7, "Q8_0"),
    Preset("Q6_K", 18, "Q6_K"),
    Preset("Q5_1", 9, "Q5_1"),
    Preset("Q5_0", 8, "Q5_0"),
    Preset("Q4_1", 3, "Q4_1"),
    Preset("Q4_0", 2, "Q4_0"),
    Preset("Q5_K_S", 16, "Q5_K"),
    Preset("Q5_K_M", 17, "Q5_K", (_r(ATTN_V, "more_bits", "Q6_K"), _r(FFN_DOWN, "more_bits", "Q6_K"))),
    Preset("Q4_K_S", 14, "Q4_K", (_r(ATTN_V, "first_four", "Q5_K"), _r(FFN_DOWN, "first_eighth", "Q5_K"),
                                  _EXPERTS8_ATTN_OUTPUT)),
    Preset("Q4_K_M", 15, "Q4_K", (_r(ATTN_V, "more_bits", "Q6_K"), _r(FFN_DOWN, "more_bits", "Q6_K"),
                                  _EXPERTS8_ATTN_OUTPUT)),
    Preset("Q3_K_S", 11, "Q3_K", (_EXPERTS8_ATTN_OUTPUT,)),
    Preset("Q3_K_M", 12, "Q3_K", (_r(ATTN_V, "first_two", "Q5_K"), _r(ATTN_V, "always", "Q4_K"),
                                  _r(FFN_DOWN, "first_sixteenth", "Q5_K"), _r(FFN_DOWN, "always", "Q4_K"),
                                  _EXPERTS8_ATTN_OUTPUT, _r(ATTN_OUTPUT, "always", "Q4_K"))),
    Preset("Q3_K_L", 13, "Q3_K", (_r(ATTN_V, "always", "Q5_K"), _r(FFN_DOWN, "always", "Q5_K"),
                                  _r(ATTN_OUTPUT, "experts8", "Q3_K"), _r(ATTN_OUTPUT, "always", "Q5_K"))),
    Preset("Q2_K", 10, "Q2_K", (_r(ATTN_V, "gqa4", "Q4_K"), _r(ATTN_V, "always", "Q3_K"),
                                _r(FFN_DOWN, "always", "Q3_K"),
                                _EXPERTS8_ATTN_OUTPUT, _r(ATTN_OUTPUT, "always", "Q3_K"))),
    Preset("IQ4_NL", 25, "IQ4_NL", (_r(ATTN_V, "gqa4", "Q5_K"), _r(FFN_DOWN, "first_eighth", "Q5_K"),
                                    _EXPERTS8_ATTN_OUTPUT)),
    Preset("IQ4_XS", 30, "IQ4_XS", (_r(ATTN_V, "gqa4", "Q5_K"), _r(FFN_DOWN, "first_eighth", "Q5_K"),
                                    _EXPERTS8_ATTN_OUTPUT)),
)}
PRESET_BY_FILE_TYPE = {p.file_type: p for p in PRESETS.values()}


def _fits(t: GGMLType, row_values: int) -> GGMLType:
    """[QUANT] tensor_type_fallback: the type a row of `row_values` can be stored in."""
    if row_values % t.block_values == 0:
        return t
    fallback = TYPES[FALLBACK.get(t.name, "F16")]
    return fallback if row_values % fallback.block_values == 0 else TYPES["F16"]


def tensor_type(preset: Preset, category: str, index: int, count: int, row_values: int, facts: ModelFacts,
                tied: bool = False) -> GGMLType:
    """The type llama.cpp's quantizer gives a weight matrix of `category` (the `index`-th of `count` such tensors:
    attn_v counts its tensors, ffn_down its layers) whose rows hold `row_values` values. `tied`: token_embd
    doubles as the output matrix."""
    base = TYPES[preset.base]
    if not base.quantized:
        return base
    if category == OUTPUT or (tied and category == TOKEN_EMBD):
        # [QUANT]: rows the base block does not divide, and Q8_0 files, keep Q8_0; every other preset Q6_K
        return TYPES["Q8_0"] if row_values % base.block_values or base.name == "Q8_0" else TYPES["Q6_K"]
    chosen = next((TYPES[r.type] for r in preset.rules
                   if r.category == category and WHEN[r.when](index, count, facts)), base)
    if category == ATTN_V:
        if facts.is_70b and chosen.name in ("Q3_K", "Q4_K"):   # [QUANT]: V is 8x smaller than Q in the 70B
            chosen = TYPES["Q5_K"]
        if facts.experts == 8:                                  # [QUANT]: Mixtral's attn_v ~128 MB more
            chosen = TYPES["Q8_0"]
    if category == ATTN_K and facts.experts == 8:
        chosen = TYPES["Q8_0"]
    return _fits(chosen, row_values)
