"""A `.gguf` file given as the model: its header, metadata and tensor table, never its weights.

sizer reads the header itself (the GGUF format, little- or big-endian, versions 2 and 3), bounded
before anything is allocated or walked: only a regular file; at most MAX_TENSORS tensors and MAX_KEYS
metadata keys; every count and length checked against the bytes left in the file; arrays of
fixed-size values skipped by their length (the tokenizer's scores and types, however long), arrays
of strings walked only up to MAX_ARRAY_STRINGS, arrays of arrays refused. From it:

- the architecture, as a config.json-style dict that sizer's model reader checks like any other
  (`{arch}.block_count` -> num_hidden_layers, `{arch}.embedding_length` -> hidden_size, ...); its other
  keys read, refused or named in a note (`_other_keys`);
- the checkpoint's quantisation: the tensor table (each tensor's element count in its GGUF type,
  sizer.inputs.gguf_types.TensorTable), from which the weights are sized tensor by tensor, layer by
  layer (sizer.analytic.formats), named after the preset `general.file_type` states (e.g. 15 =
  Q4_K_M) or, where that is missing, no preset sizer knows (an imatrix or MXFP4 mix) or a preset whose base type
  no tensor has (an all-F32 file stating Q4_K_M: a note says so), "gguf" with its type mix. Per-tensor overrides
  (llama-quantize --tensor-type, "dynamic" quants) are sized as the file holds them, not by the preset's rules;
- the stored bytes: every tensor's, beside what the plan counts. Tensors of a vision or audio
  encoder stored in the same file (`TOWER_PREFIXES`) are stored bytes only: llama.cpp's text model
  does not load them, and a note names them.

A model split in shards (`split.count` > 1, a uint16 as llama.cpp reads it, llama.cpp's `gguf-split`) is read
whole, as llama.cpp loads it: from its first shard, named `PREFIX-00001-of-0000N.gguf`, the others found beside it
by the same naming, one after another up to the first missing (their tensors added; the metadata is the first
shard's).

Refused, one line each naming the file and the field, where llama.cpp would refuse to load the file
or sizer would size something else: a file that is not GGUF or is truncated, a count or length past
the bounds or the file's end, a key or tensor stated twice, a tensor whose data is not where
llama.cpp looks for it (right after the one before, padded to the alignment: overlapping data, or
data past the end of the file), a row its type's blocks do not divide, a tensor type sizer does not
know, an architecture sizer has no config.json mapping for, missing or non-positive sizes, a
vocabulary the token embedding disagrees with, a token embedding, output matrix or norm of another shape than
llama.cpp creates it (check_tensor_dims), a tensor llama.cpp's loader for the architecture does not create
(`KNOWN_TENSOR`: done_getting_tensors' "wrong number of tensors"), a block count the tensor table disagrees with, no
tensors at all, and a shard that is not the first or whose other shards are not beside it. Blocks beyond
`block_count` (multi-token-prediction layers, blk.N.nextn.*) are refused with the rest: llama.cpp's loaders for the
architectures sizer maps create no such tensors and refuse the file (those that know MTP create them TENSOR_SKIP, not
loaded).
"""

from __future__ import annotations

import math
import mmap
import os
import re
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sizer.errors import InputError
from sizer.inputs import gguf_types as gg
from sizer.inputs.config_keys import KEYS as CONFIG_KEYS
from sizer.inputs.gguf_types import GGUFTensor
from sizer.inputs.quantization import Quantization
from validation.errors import excerpt
from validation.input_files import file_kind
from validation.schema import check_key

# GGUF general.architecture -> (the Hugging Face architecture, its model_type) whose config.json keys sizer reads
ARCHITECTURES = {"llama": ("LlamaForCausalLM", "llama"), "qwen2": ("Qwen2ForCausalLM", "qwen2"),
                 "qwen3": ("Qwen3ForCausalLM", "qwen3"), "qwen3moe": ("Qwen3MoeForCausalLM", "qwen3_moe")}
MIXTRAL = ("MixtralForCausalLM", "mixtral")      # GGUF writes Mixtral as "llama" with an expert count
# config.json key <- GGUF key under the architecture's prefix ("llama.block_count")
KEYS = {"num_hidden_layers": "block_count", "hidden_size": "embedding_length",
        "intermediate_size": "feed_forward_length", "num_attention_heads": "attention.head_count",
        "num_key_value_heads": "attention.head_count_kv", "max_position_embeddings": "context_length",
        "rope_theta": "rope.freq_base", "rms_norm_eps": "attention.layer_norm_rms_epsilon",
        "head_dim": "attention.key_length", "num_local_experts": "expert_count",
        "num_experts_per_tok": "expert_used_count", "moe_intermediate_size": "expert_feed_forward_length"}
REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "max_position_embeddings")
# Other keys under the architecture's prefix, as gguf-py names them (ggml-org/llama.cpp gguf-py/gguf/constants.py,
# Keys.LLM / Attention / Rope), by what they change:
# - values the layers compute with, not their sizes, memory or work: read as no feature;
NUMERICS_ONLY = ("rope.", "attention.layer_norm_epsilon", "attention.scale", "attention.clamp_kqv", "logit_scale",
                 "embedding_scale", "residual_scale", "attn_logit_softcapping", "final_logit_softcapping",
                 "router_logit_softcapping", "expert_weights_scale", "expert_weights_norm", "expert_gating_func",
                 "tensor_data_layout")
# - layers the mapped family does not have, refused unless the value turns them off (issue 24: a key whose value
#   switches a feature off is read, not refused): the value that does
OFF_VALUES = {"expert_shared_count": 0, "expert_shared_feed_forward_length": 0, "leading_dense_block_count": 0,
              "nextn_predict_layers": 0, "attention.q_lora_rank": 0, "attention.kv_lora_rank": 0,
              "attention.shared_kv_layers": 0, "attention.causal": True, "pooling_type": 0,
              "moe_every_n_layers": 0, "interleave_moe_layer_step": 0, "full_attention_interval": 0}
BLOCK = re.compile(r"blk\.(\d+)\.")          # a tensor of one block (layer): blk.7.attn_q.weight
# Tensors of a vision or audio encoder (gguf-py's V_* and A_* tensor names: v.blk.0.attn_q, v.patch_embd, mm.0,
# a.conv1d.0, resampler.proj): llama.cpp's text model creates none of them; its multimodal library (mtmd) loads an
# encoder from the projector file given as --mmproj
TOWER_PREFIXES = ("v.", "a.", "mm.", "resampler.")
# The tensors llama.cpp's loaders for the architectures sizer maps create (src/models/llama.cpp, qwen2.cpp, qwen3.cpp,
# qwen3moe.cpp load_arch_tensors; names from gguf-py's TENSOR_NAMES), each a .weight or a .bias: outside the blocks
# the token embedding, the output norm and matrix, Llama 3's rope frequencies and Qwen3's reranking head; within
# blk.N its norms, attention (q/k/v apart or fused, Qwen3's q/k norms), dense MLP and routed experts (apart, or gate
# and up fused). A tensor of any other name is one llama.cpp does not create, and its loader refuses the file
# (llama_model_loader::done_getting_tensors: "wrong number of tensors; expected N, got M")
GLOBAL_TENSORS = ("token_embd", "output_norm", "output", "rope_freqs", "cls.output")
BLOCK_TENSORS = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_qkv", "attn_output", "attn_q_norm", "attn_k_norm",
                 "ffn_norm", "ffn_gate", "ffn_up", "ffn_down", "ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps",
                 "ffn_down_exps", "ffn_gate_up_exps")
KNOWN_TENSOR = re.compile(rf"(?:(?:{'|'.join(map(re.escape, GLOBAL_TENSORS))})|blk\.\d+\.(?:{'|'.join(BLOCK_TENSORS)})"
                          r")\.(?:weight|bias)")


@dataclass(frozen=True)
class GGUFModel:
    path: str                       # the file given (a split model's first shard)
    architecture: str
    config: dict[str, Any]          # config.json-style, for sizer's model reader
    preset: gg.Preset | None        # from general.file_type; None when the file's type is not one of sizer's presets
    file_type: int | None
    tensors: tuple[GGUFTensor, ...]  # every shard's
    shards: int = 1

    @property
    def tensor_bytes(self) -> int:
        return int(sum(t.nbytes for t in self.tensors))

    @property
    def name(self) -> str:
        """The model's name: its file's, without a split model's shard suffix ("model-00001-of-00003" -> "model")."""
        return Path(self.path).name.removesuffix(_shard_suffix(1, self.shards) if self.shards > 1 else ".gguf")

    @property
    def tensor_source(self) -> str:
        """Where tensor_bytes was read: "GGUF tensor table (Q4_K x 193, ...)"."""
        return self._source(self.tensors)

    def _source(self, tensors: tuple[GGUFTensor, ...]) -> str:
        tables = f"tensor tables of {self.shards} shards" if self.shards > 1 else "tensor table"
        return f"GGUF {tables} ({gg.type_counts(tensors)})"

    def quantization(self) -> Quantization:
        """The file's format: the tensors llama.cpp loads with the model, at the types and bytes the tensor table
        states (the weights are sized from these), named after the preset general.file_type states, or "gguf" where
        it states none sizer knows (an imatrix or MXFP4 mix, or no file type): its type mix is its description."""
        stated = f"general.file_type {self.file_type}" if self.file_type is not None else "no general.file_type"
        source = f"{Path(self.path).name} {stated}"
        loaded = tuple(t for t in self.tensors if not t.name.startswith(TOWER_PREFIXES))
        table = gg.TensorTable(self.path, self._source(loaded), loaded)
        if self.preset is None:
            named = gg.PRESET_BY_FILE_TYPE.get(self.file_type)
            why = (f"{named.name}, but no tensor is {named.base}: named from the tensors" if named is not None
                   else "no llama.cpp preset sizer knows")
            return Quantization("gguf", "gguf", int(table.main_type.bits_per_value), gguf_tensors=table,
                                source=f"{source} ({why})")
        return Quantization("gguf", self.preset.key, int(gg.TYPES[self.preset.base].bits_per_value),
                            source=f"{source} ({self.preset.name})", gguf_tensors=table)


# Bounds on what a header may declare, checked before anything is read or allocated. The largest models
# have a few thousand tensors and a few dozen keys; the largest vocabularies a few hundred thousand tokens.
MAX_TENSORS = 1 << 16
MAX_KEYS = 1 << 16
MAX_ARRAY_STRINGS = 1 << 20              # strings in one array (tokens, merges): each is walked
MAX_DIMS = 4                             # GGML_MAX_DIMS
MAX_STRING_BYTES = 1 << 24
SMALL_ARRAY = 1 << 12                    # fixed-size arrays up to this long are kept as values; longer, skipped
_FIXED = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
_UINT16 = 2
TYPE_NAMES = {0: "uint8", 1: "int8", 2: "uint16", 3: "int16", 4: "uint32", 5: "int32", 6: "float32", 7: "bool",
              8: "string", 9: "array", 10: "uint64", 11: "int64", 12: "float64"}
DEFAULT_ALIGNMENT = 32


@dataclass(frozen=True)
class Skipped:
    """A long array, skipped: its length and the GGUF type of its items."""
    length: int
    item: int


class _Header:
    """A cursor over a mapped GGUF file: every read checked against the file's end."""

    def __init__(self, data: mmap.mmap | bytes, file: str):
        self.data, self.file, self.at, self.order = data, file, 0, "<"

    def fail(self, field: str | None, why: str) -> InputError:
        return InputError(self.file, field, why)

    def take(self, n: int, field: str | None) -> int:
        if n < 0 or self.at + n > len(self.data):
            raise self.fail(field, f"declares {n:,} bytes at byte {self.at:,} of a {len(self.data):,}-byte file: the "
                                   "file is truncated or not GGUF")
        at, self.at = self.at, self.at + n
        return at

    def unpack(self, fmt: str, field: str | None):
        fmt = self.order + fmt
        return struct.unpack_from(fmt, self.data, self.take(struct.calcsize(fmt), field))[0]

    def count(self, field: str, bound: int, least_bytes: int) -> int:
        """A u64 count of items of at least `least_bytes` each: at most `bound` and what the file can hold."""
        n = self.unpack("Q", field)
        if n > bound:
            raise self.fail(field, f"declares {n:,} entries; expected at most {bound:,}")
        if n * least_bytes > len(self.data) - self.at:
            raise self.fail(field, f"declares {n:,} entries, more than the {len(self.data) - self.at:,} bytes left "
                                   "hold: the file is truncated or not GGUF")
        return n

    def string(self, field: str | None) -> str:
        n = self.unpack("Q", field)
        if n > MAX_STRING_BYTES:
            raise self.fail(field, f"a string of {n:,} bytes; expected at most {MAX_STRING_BYTES:,}")
        return bytes(self.data[self.take(n, field):self.at]).decode("utf-8", "replace")

    def skip_strings(self, n: int, field: str) -> None:
        """Past `n` strings, walked by their lengths (nothing decoded or kept; a tight loop: a tokenizer's
        hundreds of thousands)."""
        data, at, end, fmt = self.data, self.at, len(self.data), self.order + "Q"
        for _ in range(n):
            if at + 8 > end:
                break
            at += 8 + struct.unpack_from(fmt, data, at)[0]
        else:
            if at <= end:
                self.at = at
                return
        raise self.fail(field, f"declares {n:,} strings that run past the end of the {end:,}-byte file: the file "
                               "is truncated or not GGUF")

    def value(self, kind: int, field: str) -> Any:
        if kind in _FIXED:
            return self.unpack(_FIXED[kind], field)
        if kind == _STRING:
            return self.string(field)
        if kind != _ARRAY:
            raise self.fail(field, f"value type {kind}; expected a GGUF type 0-12")
        item = self.unpack("I", field)
        if item in _FIXED:
            size = struct.calcsize(_FIXED[item])
            n = self.count(field, len(self.data), size)
            if n > SMALL_ARRAY:
                self.take(n * size, field)
                return Skipped(n, item)
            return list(struct.unpack_from(f"{self.order}{n}{_FIXED[item]}", self.data, self.take(n * size, field)))
        if item == _STRING:
            n = self.count(field, MAX_ARRAY_STRINGS, 8)
            if n <= SMALL_ARRAY:
                return [self.string(field) for _ in range(n)]
            self.skip_strings(n, field)
            return Skipped(n, item)
        raise self.fail(field, f"an array of value type {item}; expected an array of numbers, booleans or strings")


@dataclass(frozen=True)
class _Entry:
    """One row of a tensor table, as the file states it."""
    name: str
    type_id: int
    shape: tuple[int, ...]          # GGML order: shape[0] is a row's length
    offset: int                     # within the tensor data


@dataclass(frozen=True)
class _File:
    """One parsed GGUF file: its metadata, tensor table, where its tensor data starts, its size."""
    path: str
    fields: dict[str, Any]
    types: dict[str, int]           # each key's GGUF value type
    table: list[_Entry]
    data_start: int
    alignment: int
    size: int


def _parse(data: mmap.mmap | bytes, file: str) -> _File:
    """The header of a mapped GGUF file: metadata (each key once) and tensor table."""
    h = _Header(data, file)
    if len(data) < 24 or bytes(data[:4]) != b"GGUF":
        raise h.fail(None, "not a GGUF file (expected the magic GGUF and a header)")
    h.at = 4
    version = h.unpack("I", "version")
    if version & 0xFFFF == 0:               # written big-endian
        h.order, h.at = ">", 4
        version = h.unpack("I", "version")
    if version not in (2, 3):
        raise h.fail("version", f"expected GGUF version 2 or 3, got {version}")
    tensors = h.count("tensor_count", MAX_TENSORS, 8 + 4 + 4 + 8)
    keys = h.count("metadata_kv_count", MAX_KEYS, 8 + 4)
    fields: dict[str, Any] = {}
    types: dict[str, int] = {}
    for i in range(keys):
        key = h.string(f"metadata[{i}].key")
        if key in fields:
            raise h.fail(excerpt(key, quote=False), "stated twice; expected each key once (llama.cpp refuses a "
                                                    "duplicate key)")
        types[key] = h.unpack("I", excerpt(key, quote=False))
        fields[key] = h.value(types[key], excerpt(key, quote=False))
    table = []
    for i in range(tensors):
        name = h.string(f"tensors[{i}].name")
        where = f"tensors.{excerpt(name, quote=False)}"
        dims = h.unpack("I", where)
        if dims > MAX_DIMS:
            raise h.fail(where, f"{dims:,} dimensions; expected at most {MAX_DIMS}")
        shape = tuple(h.unpack("Q", where) for _ in range(dims))
        kind, offset = h.unpack("I", where), h.unpack("Q", where)
        table.append(_Entry(name, kind, shape, offset))
    alignment = fields.get("general.alignment", DEFAULT_ALIGNMENT)
    if not _positive(alignment) or alignment & (alignment - 1):
        raise h.fail("general.alignment", f"expected a power of two, got {excerpt(alignment)}")
    return _File(file, fields, types, table, -(-h.at // alignment) * alignment, alignment, len(data))


def _tensors(f: _File, seen: set[str]) -> list[GGUFTensor]:
    """The tensors of one file's table, each where llama.cpp looks for its data: right after the one before it
    (padded to the alignment), within the file; a row its type's blocks divide; a name not in `seen` (the
    tensors of the shards before), which it joins."""
    tensors, expected = [], 0
    for e in f.table:
        where = f"tensors.{excerpt(e.name, quote=False)}"
        ggml_type = gg.BY_ID.get(e.type_id)
        if ggml_type is None:
            raise InputError(f.path, f"{where}.type",
                             f"GGUF type id {e.type_id} is one sizer does not know; known: {', '.join(gg.TYPES)}")
        if e.name in seen:
            raise InputError(f.path, where, "stated twice; expected each tensor once (llama.cpp refuses a duplicate)")
        if e.shape and e.shape[0] % ggml_type.block_values:
            raise InputError(f.path, where, f"rows of {e.shape[0]:,} values; {ggml_type.name} stores whole blocks of "
                                            f"{ggml_type.block_values}")
        if e.offset != expected:
            raise InputError(f.path, where, f"data at offset {e.offset:,}; expected {expected:,}, where the tensor "
                                            f"before it ends (padded to {f.alignment}): overlapping or misplaced "
                                            "tensor data, which llama.cpp refuses")
        nbytes = math.ceil(ggml_type.tensor_bytes(math.prod(e.shape)))
        end = f.data_start + e.offset + nbytes
        if end > f.size:
            raise InputError(f.path, where, f"data ends at byte {end:,} of a {f.size:,}-byte file: the file is "
                                            "truncated")
        expected += -(-nbytes // f.alignment) * f.alignment
        seen.add(e.name)
        tensors.append(GGUFTensor(e.name, ggml_type, math.prod(e.shape), e.shape))
    return tensors


def _mapped(path: Path) -> mmap.mmap | bytes:
    """The file mapped read-only: a regular file only (a FIFO or device is refused without blocking)."""
    file = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise InputError(file, None, f"cannot read: {exc.strerror or exc}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):     # before os.fdopen, which raises IsADirectoryError on a folder
        os.close(fd)
        raise InputError(file, None, f"{file_kind(info.st_mode)}, not a regular file")
    with os.fdopen(fd, "rb") as f:
        if info.st_size == 0:
            return b""
        try:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:
            raise InputError(file, None, f"cannot read: {exc}") from None


def _length(tokens: Any) -> int | None:
    """The length of an array of strings (a token list), else None."""
    if isinstance(tokens, Skipped):
        return tokens.length if tokens.item == _STRING else None
    return len(tokens) if isinstance(tokens, list) and all(isinstance(t, str) for t in tokens) else None


def read_gguf(path: Path) -> GGUFModel:
    """The model a .gguf file describes (with its other shards, for a split model's first), from its metadata and
    tensor tables."""
    first = _parse(_mapped(path), str(path))
    file, fields = first.path, first.fields
    seen: set[str] = set()
    files = _shards(path, first)
    tensors = [t for f in files for t in _tensors(f, seen)]
    if not tensors:
        raise InputError(file, "tensor_count", "0: no tensors (a vocabulary-only file?); expected the model's weights")
    tokens = fields.get("tokenizer.ggml.tokens")
    fields = {name: v for name, v in fields.items() if not name.startswith("tokenizer.ggml.")}
    arch = fields.get("general.architecture")
    if arch not in ARCHITECTURES:
        raise InputError(file, "general.architecture", f"expected one of {', '.join(ARCHITECTURES)} (the GGUF "
                                                       f"architectures sizer maps to config.json), got {excerpt(arch)}")
    config: dict[str, Any] = {k: fields[f"{arch}.{g}"] for k, g in KEYS.items() if f"{arch}.{g}" in fields}
    missing = [KEYS[k] for k in REQUIRED if k not in config]
    if missing:
        raise InputError(file, f"{arch}.{missing[0]}", "missing: a GGUF model file states it")
    for k in REQUIRED:
        if not _positive(config[k]):
            raise InputError(file, f"{arch}.{KEYS[k]}", f"expected a positive integer, got {excerpt(config[k])}")
    for k, value in config.items():     # as config.json's keys are checked (config_keys.KEYS), named as the file does
        config[k] = _checked(k, value, f"{arch}.{KEYS[k]}", file)
    _check_names(tensors, arch, file)
    _check_blocks(tensors, config["num_hidden_layers"], f"{arch}.{KEYS['num_hidden_layers']}", file)
    config.update(_other_keys(fields, arch, config, file))
    _check_shapes(tensors, config, arch, file)
    hf_arch, model_type = MIXTRAL if arch == "llama" and config.get("num_local_experts") else ARCHITECTURES[arch]
    if arch == "qwen3moe":
        config["num_experts"] = config.pop("num_local_experts", None)
    config.update(architectures=[hf_arch], model_type=model_type,
                  vocab_size=_vocab(fields, tokens, tensors, arch, config["hidden_size"], file),
                  tie_word_embeddings=not any(t.name == "output.weight" for t in tensors), torch_dtype="bfloat16")
    _check_vectors_and_head(tensors, config["hidden_size"], config["vocab_size"], file)
    towers = [t for t in tensors if t.name.startswith(TOWER_PREFIXES)]
    if towers:
        prefixes = sorted({t.name.split(".", 1)[0] + ".*" for t in towers})
        config.setdefault("_sizer", {}).setdefault("notes", []).append(
            f"{len(towers):,} tensors of a vision or audio encoder ({', '.join(prefixes)}: "
            f"{sum(t.nbytes for t in towers) / 1e9:,.2f} GB) are in the file beside the text model: llama.cpp's "
            "text model does not load them (an encoder is loaded from a --mmproj file), so the weights leave them out")
    file_type = fields.get("general.file_type")
    if file_type is not None and not (_positive(file_type) or file_type == 0):
        raise InputError(file, "general.file_type", f"expected llama.cpp's file type number, got {excerpt(file_type)}")
    preset = gg.PRESET_BY_FILE_TYPE.get(file_type)
    loaded = [t for t in tensors if not t.name.startswith(TOWER_PREFIXES)]
    if preset is not None and not any(t.type.name == preset.base for t in loaded):
        # llama.cpp prints the stated type and runs each tensor at its own; sizer names the format from the tensors
        config.setdefault("_sizer", {}).setdefault("notes", []).append(
            f"general.file_type {file_type} states {preset.name} ({preset.base} tensors), but none of the file's "
            f"tensors is {preset.base} ({gg.type_counts(tuple(loaded))}): the format is named from the tensors, "
            "not the stated file type")
        preset = None
    return GGUFModel(file, arch, {k: v for k, v in config.items() if v is not None}, preset, file_type,
                     tuple(tensors), len(files))


def _other_keys(fields: dict[str, Any], arch: str, config: dict[str, Any], file: str) -> dict[str, Any]:
    """The config.json keys of the architecture's other GGUF keys: a sliding window as config.json states it, a
    value head size equal to the key head size read, layers the mapped family lacks refused (OFF_VALUES), and any
    key sizer neither reads nor knows named in a note (`_sizer.notes`), not silently dropped."""
    prefix, mapped = f"{arch}.", {*KEYS.values(), "vocab_size"}        # vocab_size: read by _vocab
    out: dict[str, Any] = {}
    unknown = []
    for key in sorted(k.removeprefix(prefix) for k in fields if k.startswith(prefix)):
        value, field = fields[prefix + key], prefix + key
        if key in mapped or key.startswith(NUMERICS_ONLY):
            continue
        if key == "attention.sliding_window":
            out["sliding_window"] = _checked("sliding_window", value, field, file)
        elif key == "attention.value_length":
            key_length = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
            if value != key_length:
                raise InputError(file, field, f"{excerpt(value)} against a key length of {excerpt(key_length)}: "
                                              "value heads of another size than the keys are not modelled for "
                                              f"GGUF architecture {arch!r}")
        elif key in OFF_VALUES:
            if value != OFF_VALUES[key]:
                raise InputError(file, field, f"{excerpt(value)}: layers that GGUF architecture {arch!r} (read as "
                                              f"{ARCHITECTURES[arch][0]}) does not have are not modelled; expected "
                                              f"{excerpt(OFF_VALUES[key])} (off) or no such key")
        else:
            unknown.append(excerpt(field, quote=False))
    if unknown:
        out["_sizer"] = {"notes": [f"GGUF keys sizer does not read, so their effect (if any) is not modelled: "
                                   f"{', '.join(unknown)}"]}
    return out


def _check_shapes(tensors: list[GGUFTensor], config: dict[str, Any], arch: str, file: str) -> None:
    """The first block's matrices hold the values its sizes say (llama.cpp's tensor names: attn_q [hidden x heads x
    head dim], attn_k and attn_v [hidden x KV heads x head dim], attn_output, ffn_gate/up/down [hidden x width], or a
    MoE block's ffn_*_exps [hidden x expert width x experts] and router ffn_gate_inp [hidden x experts]): a size
    the tensors contradict is refused naming its key, as llama.cpp refuses to load the file. Tensors a block does not
    have (another layout) are not checked."""
    first = {t.name.removeprefix("blk.0."): t.values for t in tensors if t.name.startswith("blk.0.")}
    h, heads = config["hidden_size"], config["num_attention_heads"]
    kv, head = config.get("num_key_value_heads") or heads, config.get("head_dim") or h // heads
    q_key = "attention.key_length" if "head_dim" in config else "attention.head_count"
    expected = {"attn_q.weight": (h * heads * head, q_key), "attn_output.weight": (heads * head * h, q_key),
                "attn_k.weight": (h * kv * head, "attention.head_count_kv"),
                "attn_v.weight": (h * kv * head, "attention.head_count_kv")}
    experts = config.get("num_local_experts")
    if experts:
        if "ffn_gate_inp.weight" not in first:
            raise InputError(file, f"{arch}.{KEYS['num_local_experts']}", f"{experts} experts stated, but blk.0 holds "
                                                                          "no router (ffn_gate_inp): a dense block")
        stated = "moe_intermediate_size" if config.get("moe_intermediate_size") else "intermediate_size"
        width, key = config.get(stated), KEYS[stated]
        expected["ffn_gate_inp.weight"] = (h * experts, KEYS["num_local_experts"])
        expected |= {f"ffn_{part}_exps.weight": (h * (width or 0) * experts, key) for part in ("gate", "up", "down")}
    else:
        expected |= {f"ffn_{part}.weight": (h * config.get("intermediate_size", 0), KEYS["intermediate_size"])
                     for part in ("gate", "up", "down")}
    for name, (values, key) in expected.items():
        if name in first and first[name] != values:
            raise InputError(file, f"{arch}.{key}", f"the sizes give blk.0.{name} {values:,} values, but the tensor "
                                                    f"table holds {first[name]:,}: the metadata and the tensors "
                                                    "disagree")


def _check_names(tensors: list[GGUFTensor], arch: str, file: str) -> None:
    """Every tensor one llama.cpp's loader for the architecture creates (KNOWN_TENSOR), or one of an encoder stored
    beside the model (TOWER_PREFIXES, named in a note); another is refused naming it, with how many there are and
    their bytes, as llama.cpp refuses the file (its bytes were counted as the model's norms)."""
    unknown = [t for t in tensors if not t.name.startswith(TOWER_PREFIXES) and not KNOWN_TENSOR.fullmatch(t.name)]
    if unknown:
        first, size = unknown[0], sum(t.nbytes for t in unknown)
        more = f" (of {len(unknown):,} such tensors, {size:,.0f} bytes in all)" if len(unknown) > 1 else ""
        raise InputError(file, f"tensors.{excerpt(first.name, quote=False)}" if first.name else "tensors",
                         f"{excerpt(first.name)}, {first.nbytes:,.0f} bytes{more}: not a tensor llama.cpp's "
                         f"{arch} model has, so llama.cpp refuses the file (done_getting_tensors: 'wrong number of "
                         "tensors'); expected only the model's tensors")


def _check_vectors_and_head(tensors: list[GGUFTensor], hidden: int, vocab: int, file: str) -> None:
    """The token embedding and the output matrix of [embedding_length, vocabulary] values, and the norms of
    [embedding_length], dimension by dimension, as llama.cpp's loader checks each tensor it creates
    (llama_model_loader::check_tensor_dims: 'tensor has wrong shape')."""
    for t in tensors:
        if t.name in ("token_embd.weight", "output.weight"):
            want, what = (hidden, vocab), "embedding_length x the vocabulary"
        elif t.name == "output_norm.weight" or re.fullmatch(r"blk\.\d+\.(?:attn|ffn)_norm\.weight", t.name):
            want, what = (hidden,), "embedding_length"
        else:
            continue
        got = t.shape + (1,) * (MAX_DIMS - len(t.shape))
        if got != want + (1,) * (MAX_DIMS - len(want)):
            shape, expected = (", ".join(f"{d:,}" for d in dims) for dims in (t.shape, want))
            raise InputError(file, f"tensors.{t.name}", f"shape [{shape}]; expected [{expected}] ({what}), as "
                                                        "llama.cpp checks it")


def _checked(key: str, value: Any, field: str, file: str) -> Any:
    """A GGUF value read for config.json key `key`: a GGUF integer where the key is one (llama.cpp refuses a key of
    another type), within the key's bounds (config_keys.KEYS), else refused naming the GGUF key."""
    spec = CONFIG_KEYS[key]
    if spec.tp is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise InputError(file, field, f"expected an integer, got {excerpt(value)}")
    return check_key(spec, value, file, field)


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _shards(path: Path, first: _File) -> list[_File]:
    """A model's files, as llama.cpp finds them from the first (llama_split_path: PREFIX-%05d-of-%05d.gguf): the
    one given when it is not split, else every shard, each checked to be the one its name says."""
    count = first.fields.get("split.count", 1)
    kind = first.types.get("split.count", _UINT16)
    # llama.cpp reads split.count as a uint16 (llama_model_loader: `uint16_t n_split; get_key(LLM_KV_SPLIT_COUNT,
    # n_split)`, which refuses a key of another type: "key split.count has wrong type"); gguf-split and gguf-py's
    # writer store it so. A uint32 of 4,294,967,295 made sizer list that many shard names
    if kind != _UINT16 or not _positive(count):
        got = f"{excerpt(count)} ({TYPE_NAMES.get(kind, kind)})" if kind != _UINT16 else excerpt(count)
        raise InputError(first.path, "split.count", f"expected a uint16 from 1 to 65,535 (the shards; llama.cpp "
                                                    f"reads no other type), got {got}")
    if count == 1:
        return [first]
    shard = first.fields.get("split.no", 0)
    suffix = _shard_suffix(1, count)
    if shard != 0:
        raise InputError(first.path, "split.no", f"{excerpt(shard)}: this file is a later shard of a model split in "
                                                 f"{count}; give the first (its name ending {suffix}), as llama.cpp "
                                                 "loads a split model")
    if not path.name.endswith(suffix):
        raise InputError(first.path, "split.count", f"{count}: the first shard of a split model, but not named "
                                                    f"PREFIX{suffix}, so its other shards cannot be found (llama.cpp's "
                                                    "naming)")
    files = [first]
    for i in range(1, count):           # each read before the next is looked for: the first missing one stops it
        name = path.name.removesuffix(suffix) + _shard_suffix(i + 1, count)
        if not os.path.lexists(path.parent / name):
            raise InputError(first.path, "split.count", f"{count}: the model is split in {count} shards; shard "
                                                        f"{i + 1} is not beside this one: {name}")
        f = _parse(_mapped(path.parent / name), str(path.parent / name))
        for key, want in (("split.no", i), ("split.count", count)):
            if f.fields.get(key) != want:
                raise InputError(f.path, key, f"expected {want} (shard {i + 1} of {count}, by its name), got "
                                              f"{excerpt(f.fields.get(key))}")
        files.append(f)
    stated = first.fields.get("split.tensors.count")
    held = sum(len(f.table) for f in files)
    if stated is not None and stated != held:
        raise InputError(first.path, "split.tensors.count", f"{excerpt(stated)} tensors stated; the {count} shards "
                                                            f"hold {held:,}")
    return files


def _shard_suffix(shard: int, count: int) -> str:
    """The end of shard `shard` of `count`'s file name (llama_split_path: PREFIX-%05d-of-%05d.gguf)."""
    return f"-{shard:05d}-of-{count:05d}.gguf"


def _check_blocks(tensors: list[GGUFTensor], stated: int, key: str, file: str) -> None:
    """The tensor table holds tensors of exactly the blocks (layers) the metadata states: blk.0 to blk.N-1."""
    blocks = {int(m.group(1)) for t in tensors if (m := BLOCK.match(t.name))}
    if len(blocks) != stated or blocks != set(range(stated)):     # the length first: a stated 2^40 builds no range
        held = f"{len(blocks):,} (blk.{min(blocks)} to blk.{max(blocks)})" if blocks else "none"
        raise InputError(file, key, f"{stated:,} blocks stated, but the tensor table holds tensors of {held}")


def _vocab(fields: dict[str, Any], tokens: Any, tensors: list[GGUFTensor], arch: str, hidden: int, file: str) -> int:
    """The vocabulary: {arch}.vocab_size, else the tokenizer's token list, else the token embedding's rows; the
    token embedding, when there is one, holds a row of embedding_length values for each."""
    key, vocab = f"{arch}.vocab_size", fields.get(f"{arch}.vocab_size")
    if vocab is None and tokens is not None:
        key, vocab = "tokenizer.ggml.tokens", _length(tokens)
        if vocab is None:
            raise InputError(file, key, f"expected an array of strings (the tokens), got {excerpt(tokens)}")
    embd = next((t for t in tensors if t.name == "token_embd.weight"), None)
    if vocab is None:
        if embd is None:
            raise InputError(file, key, "missing, and no tokenizer.ggml.tokens or token_embd.weight")
        key, vocab = "tensors.token_embd.weight", embd.values // hidden
    if not _positive(vocab):
        raise InputError(file, key, f"expected a positive integer (the vocabulary), got {excerpt(vocab)}")
    if embd is not None and embd.values != vocab * hidden:
        raise InputError(file, "tensors.token_embd.weight", f"{embd.values:,} values; expected the vocabulary "
                                                            f"({key}: {vocab:,}) x embedding_length ({hidden:,})")
    return vocab
