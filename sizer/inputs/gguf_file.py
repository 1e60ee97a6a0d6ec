"""A `.gguf` file given as the model: its header, metadata and tensor table, never its weights.

The `gguf` package (the optional extra `sizer[gguf]`) parses the file; only the metadata and the
tensor table are read (the package maps the file; no tensor data is touched). From them:

- the architecture, as a config.json-style dict that sizer's model reader checks like any other
  (`{arch}.block_count` -> num_hidden_layers, `{arch}.embedding_length` -> hidden_size, ...);
- the preset (`general.file_type`, e.g. 15 = Q4_K_M) as the checkpoint's quantisation;
- the exact bytes: each tensor's element count in its GGUF type (sizer.inputs.gguf_types), which
  the plan compares with what the preset's rules give.

Refused, one line each naming the file and the field: a file the package cannot parse (truncated or
not GGUF), a tensor whose data runs past the end of the file, a tensor type sizer does not know,
an architecture sizer has no config.json mapping for, and missing keys.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.errors import excerpt
from sizer.errors import InputError
from sizer.inputs import gguf_types as gg
from sizer.inputs.quantization import Quantization

# GGUF general.architecture -> the Hugging Face architecture whose config.json keys sizer reads
ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
                 "qwen3moe": "Qwen3MoeForCausalLM"}
MIXTRAL = "MixtralForCausalLM"          # GGUF writes Mixtral as "llama" with an expert count
# config.json key <- GGUF key under the architecture's prefix ("llama.block_count")
KEYS = {"num_hidden_layers": "block_count", "hidden_size": "embedding_length",
        "intermediate_size": "feed_forward_length", "num_attention_heads": "attention.head_count",
        "num_key_value_heads": "attention.head_count_kv", "max_position_embeddings": "context_length",
        "rope_theta": "rope.freq_base", "rms_norm_eps": "attention.layer_norm_rms_epsilon",
        "head_dim": "attention.key_length", "num_local_experts": "expert_count",
        "num_experts_per_tok": "expert_used_count", "moe_intermediate_size": "expert_feed_forward_length"}
REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "max_position_embeddings")


@dataclass(frozen=True)
class GGUFTensor:
    name: str
    type: gg.GGMLType
    values: int

    @property
    def nbytes(self) -> float:
        return self.type.tensor_bytes(self.values)


@dataclass(frozen=True)
class GGUFModel:
    path: str
    architecture: str
    config: dict[str, Any]          # config.json-style, for sizer's model reader
    preset: gg.Preset | None        # from general.file_type; None when the file's type is not one of sizer's presets
    file_type: int | None
    tensors: tuple[GGUFTensor, ...]

    @property
    def tensor_bytes(self) -> int:
        return int(sum(t.nbytes for t in self.tensors))

    @property
    def type_counts(self) -> str:
        """e.g. "Q4_K x 193, Q6_K x 33, F32 x 65"."""
        counts = Counter(t.type.name for t in self.tensors)
        return ", ".join(f"{name} x {n}" for name, n in counts.most_common())

    def quantization(self) -> Quantization:
        source = f"{Path(self.path).name} general.file_type {self.file_type}"
        if self.preset is None:
            return Quantization("gguf", "", source=source,
                                why_not=f"GGUF file type {self.file_type} is not a llama.cpp preset sizer knows "
                                        f"({', '.join(p.name for p in gg.PRESETS.values())}); its tensors are "
                                        f"{self.type_counts}")
        base = gg.TYPES[self.preset.base]
        bits = int(base.bits_per_value) if base.quantized else 16
        return Quantization("gguf", self.preset.key, bits, source=f"{source} ({self.preset.name})")


def _value(field: Any) -> Any:
    """A metadata field's value (gguf >= 0.10: ReaderField.contents())."""
    return field.contents()


def read_gguf(path: Path) -> GGUFModel:
    """The model a .gguf file describes, from its metadata and tensor table."""
    file = str(path)
    try:
        from gguf import GGUFReader
    except ImportError:
        raise InputError(file, None, "reading a .gguf file needs the gguf package: pip install 'sizer[gguf]'") from None
    try:
        reader = GGUFReader(path)
    except ValueError as exc:
        if "GGMLQuantizationType" in str(exc):
            why = f"a tensor type the gguf package does not know ({excerpt(str(exc))})"
            raise InputError(file, "tensors.type", f"{why}; sizer knows {', '.join(gg.TYPES)}") from None
        raise InputError(file, None, f"not a readable GGUF file (truncated or corrupt: {excerpt(str(exc))})") from None
    except (IndexError, KeyError, OverflowError) as exc:
        raise InputError(file, None, f"not a readable GGUF file (truncated or corrupt: {excerpt(str(exc))})") from None
    except OSError as exc:
        raise InputError(file, None, f"cannot read: {exc.strerror or exc}") from None
    size = path.stat().st_size
    tensors = []
    for t in reader.tensors:
        ggml_type = gg.BY_ID.get(int(t.tensor_type))
        if ggml_type is None:
            raise InputError(file, f"tensors.{excerpt(t.name, quote=False)}.type",
                             f"GGUF type {t.tensor_type.name} (id {int(t.tensor_type)}) is one sizer does not know; "
                             f"known: {', '.join(gg.TYPES)}")
        if int(t.data_offset) + int(t.n_bytes) > size:
            raise InputError(file, f"tensors.{excerpt(t.name, quote=False)}",
                             f"data ends at byte {int(t.data_offset) + int(t.n_bytes):,} of a {size:,}-byte file: "
                             "the file is truncated")
        tensors.append(GGUFTensor(t.name, ggml_type, int(t.n_elements)))
    fields = {name: _value(f) for name, f in reader.fields.items() if not name.startswith("tokenizer.ggml.")}
    arch = fields.get("general.architecture")
    if arch not in ARCHITECTURES:
        raise InputError(file, "general.architecture", f"expected one of {', '.join(ARCHITECTURES)} (the GGUF "
                                                       f"architectures sizer maps to config.json), got {excerpt(arch)}")
    config: dict[str, Any] = {k: fields[f"{arch}.{g}"] for k, g in KEYS.items() if f"{arch}.{g}" in fields}
    missing = [KEYS[k] for k in REQUIRED if k not in config]
    if missing:
        raise InputError(file, f"{arch}.{missing[0]}", "missing: a GGUF model file states it")
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    embd = next((t for t in tensors if t.name == "token_embd.weight"), None)
    vocab = fields.get(f"{arch}.vocab_size") or (len(tokens.data) if tokens is not None else None) or (
        embd.values // config["hidden_size"] if embd else None)
    if not vocab:
        raise InputError(file, f"{arch}.vocab_size", "missing, and no tokenizer.ggml.tokens or token_embd.weight")
    hf_arch = MIXTRAL if arch == "llama" and config.get("num_local_experts") else ARCHITECTURES[arch]
    if arch == "qwen3moe":
        config["num_experts"] = config.pop("num_local_experts", None)
    config.update(architectures=[hf_arch], model_type=hf_arch.removesuffix("ForCausalLM").lower(), vocab_size=vocab,
                  tie_word_embeddings=not any(t.name == "output.weight" for t in tensors), torch_dtype="bfloat16")
    file_type = fields.get("general.file_type")
    preset = gg.PRESET_BY_FILE_TYPE.get(file_type) if isinstance(file_type, int) else None
    return GGUFModel(file, arch, {k: v for k, v in config.items() if v is not None}, preset, file_type,
                     tuple(tensors))
