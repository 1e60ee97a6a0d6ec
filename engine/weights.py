"""Loading real weights from a local Hugging Face safetensors checkpoint (optional).

safetensors is a tiny format (8-byte little-endian header length, a JSON header of name ->
dtype, shape, byte offsets, then raw data), read here with the standard library and torch
alone so the engine needs no extra package. Llama/Mistral/Qwen names are mapped onto the
engine's fused q/k/v and gate/up weights; Mixtral (`block_sparse_moe`) and Qwen-MoE
(`mlp.experts`) experts too; gated shared experts are refused. One device only (TP 1).
"""

from __future__ import annotations

import mmap
from pathlib import Path

import torch

from engine.model import Transformer
from validation.errors import FieldError, excerpt
from validation.safetensors import read_header

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8}


def read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    """All tensors of one file, on the CPU (copied out of a read-only memory map). The header, each tensor's dtype,
    shape and bytes, is read and checked by validation/safetensors.py; a dtype torch holds that the engine does not
    load is refused here before anything is allocated."""
    header = read_header(path)
    out = {}
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        for name, meta in header.tensors.items():
            dtype = DTYPES.get(meta["dtype"])
            if dtype is None:
                raise FieldError(str(path), f"header.{excerpt(name, quote=False)}.dtype",
                                 f"{excerpt(meta['dtype'])}, which the engine does not load; expected one of "
                                 f"{', '.join(DTYPES)}")
            shape = meta["shape"]
            start, end = header.ranges[name]
            base = header.data_start_bytes
            raw = bytearray(mm[base + start:base + end])
            tensor = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
            out[name] = tensor.reshape(shape)
    return out


def read_checkpoint(folder: Path) -> dict[str, torch.Tensor]:
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FieldError(str(folder), None, "no *.safetensors files in this folder")
    tensors: dict[str, torch.Tensor] = {}
    for f in files:
        tensors.update(read_safetensors(f))
    return tensors


def load_weights(model: Transformer, folder: str | Path) -> None:
    """Replace the model's random weights with the checkpoint's (names as Hugging Face writes them)."""
    folder = Path(folder)
    if model.cfg.tp != 1:
        raise FieldError(str(folder), None, "loading a checkpoint is supported for TP 1 only")
    t = read_checkpoint(folder)

    def take(*names: str) -> torch.Tensor:
        for name in names:
            if name in t:
                return t[name].to(model.dtype).to(model.device)
        raise FieldError(str(folder), names[0], "missing from the checkpoint")

    def cat(*names: str) -> torch.Tensor:
        return torch.cat([take(n) for n in names])

    model.embed = take("model.embed_tokens.weight")
    model.final_norm = take("model.norm.weight")
    model.lm_head = take("lm_head.weight", "model.embed_tokens.weight")
    for i, w in enumerate(model.layers):
        p = f"model.layers.{i}."
        w.input_norm = take(p + "input_layernorm.weight")
        w.post_norm = take(p + "post_attention_layernorm.weight")
        w.qkv = cat(*(p + f"self_attn.{x}_proj.weight" for x in "qkv"))
        if p + "self_attn.q_proj.bias" in t:
            w.qkv_bias = cat(*(p + f"self_attn.{x}_proj.bias" for x in "qkv"))
        w.o = take(p + "self_attn.o_proj.weight")
        if w.router is None:
            w.gate_up = cat(p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight")
            w.down = take(p + "mlp.down_proj.weight")
            continue
        if p + "block_sparse_moe.gate.weight" in t:        # Mixtral: w1 gate, w3 up, w2 down
            moe, gate, up, down = p + "block_sparse_moe.", "w1", "w3", "w2"
        else:                                               # Qwen-MoE
            moe, gate, up, down = p + "mlp.", "gate_proj", "up_proj", "down_proj"
        w.router = take(moe + "gate.weight")
        if any(name.startswith(moe + "shared_expert") for name in t):
            raise FieldError(str(folder), moe + "shared_expert",
                             "gated shared experts are not supported by the engine yet")
        experts = range(model.cfg.num_experts)
        w.experts_gate_up = torch.stack([cat(f"{moe}experts.{e}.{gate}.weight", f"{moe}experts.{e}.{up}.weight")
                                         for e in experts])
        w.experts_down = torch.stack([take(f"{moe}experts.{e}.{down}.weight") for e in experts])
