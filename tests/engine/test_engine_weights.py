"""Loading a local safetensors checkpoint: Hugging Face names onto the engine's fused weights."""

import json
import struct

import pytest
import torch

from engine.batch import SeqWork, build_step
from engine.config import engine_config
from engine.kernels import TORCH
from engine.kv_cache import PagedKVCache
from engine.model import Transformer
from engine.weights import load_weights, read_safetensors
from sizer.inputs.model_spec import load_model
from validation.errors import FieldError

CFG = engine_config(load_model("tiny"))


def write_safetensors(path, tensors):
    """The format by hand: u64 header length, JSON header (dtype, shape, byte range), raw bytes."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        raw = t.contiguous().view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": {torch.float32: "F32", torch.bfloat16: "BF16"}[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def hf_names(model):
    """The model's weights under the names a Llama checkpoint uses (q/k/v and gate/up unfused)."""
    q, kv = CFG.num_heads * CFG.head_dim, CFG.num_kv_heads * CFG.head_dim
    out = {"model.embed_tokens.weight": model.embed, "model.norm.weight": model.final_norm,
           "lm_head.weight": model.lm_head}
    for i, w in enumerate(model.layers):
        p = f"model.layers.{i}."
        qw, kw, vw = w.qkv.split([q, kv, kv])
        gate, up = w.gate_up.chunk(2)
        out.update({p + "input_layernorm.weight": w.input_norm, p + "post_attention_layernorm.weight": w.post_norm,
                    p + "self_attn.q_proj.weight": qw, p + "self_attn.k_proj.weight": kw,
                    p + "self_attn.v_proj.weight": vw,
                    p + "self_attn.o_proj.weight": w.o, p + "mlp.gate_proj.weight": gate, p + "mlp.up_proj.weight": up,
                    p + "mlp.down_proj.weight": w.down})
    return out


def logits(model):
    kv = PagedKVCache(CFG.num_layers, 4, 16, CFG.num_kv_heads, CFG.head_dim, torch.float32, "cpu")
    return model.forward(build_step([SeqWork(list(range(30)), 0, [0, 1])], 16, "cpu"), kv)


def test_a_checkpoint_round_trips(tmp_path):
    source = Transformer(CFG, torch.float32, "cpu", TORCH, 64, seed=1)
    names = hf_names(source)
    half = len(names) // 2          # two shard files, as large checkpoints come
    items = list(names.items())
    write_safetensors(tmp_path / "model-00001-of-00002.safetensors", dict(items[:half]))
    write_safetensors(tmp_path / "model-00002-of-00002.safetensors", dict(items[half:]))
    target = Transformer(CFG, torch.float32, "cpu", TORCH, 64, seed=2)
    assert not torch.equal(logits(target), logits(source))
    load_weights(target, tmp_path)
    assert torch.equal(logits(target), logits(source))


def test_bf16_values_read_exactly(tmp_path):
    t = torch.tensor([[1.5, -2.25], [3.0, 0.0078125]], dtype=torch.bfloat16)
    write_safetensors(tmp_path / "x.safetensors", {"w": t})
    assert torch.equal(read_safetensors(tmp_path / "x.safetensors")["w"], t)


def test_tied_embeddings_and_missing_tensors(tmp_path):
    source = Transformer(CFG, torch.float32, "cpu", TORCH, 64, seed=1)
    names = hf_names(source)
    del names["lm_head.weight"]                                  # tied: lm_head is the embedding
    write_safetensors(tmp_path / "model.safetensors", names)
    target = Transformer(CFG, torch.float32, "cpu", TORCH, 64, seed=2)
    load_weights(target, tmp_path)
    assert torch.equal(target.lm_head, source.embed)
    del names["model.layers.3.mlp.down_proj.weight"]
    write_safetensors(tmp_path / "model.safetensors", names)
    with pytest.raises(FieldError, match="model.layers.3.mlp.down_proj.weight: missing"):
        load_weights(target, tmp_path)


def write_header(path, header, data):
    text = json.dumps(header).encode() if isinstance(header, dict) else header
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


@pytest.mark.parametrize(("header", "field", "says"), [
    # 2x3 F32 = 24 bytes stated over 16: torch's reshape raised a RuntimeError before the check
    ({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 16]}}, "header.w.shape",
     "is 24 bytes, but its data_offsets hold 16 bytes"),
    ({"w": {"dtype": "F32", "shape": "4", "data_offsets": [0, 16]}}, "header.w.shape", "got '4'"),
    # a safetensors dtype the engine does not load (its random-weight runs are 16- and 32-bit)
    ({"w": {"dtype": "F8_E4M3", "shape": [16], "data_offsets": [0, 16]}}, "header.w.dtype",
     "'F8_E4M3', which the engine does not load"),
    # the same name twice: json.loads kept the last one silently; the shared reader refuses it
    (b'{"w": {"dtype": "U8", "shape": [16], "data_offsets": [0, 16]}, "w": {}}', "header", "duplicate key 'w'"),
    # a range past the data: the memory map's slice came back short and reshape raised
    ({"w": {"dtype": "U8", "shape": [32], "data_offsets": [0, 32]}}, "header.w.data_offsets", "16 data bytes"),
])
def test_a_malformed_header_is_one_field_error(tmp_path, header, field, says):
    path = write_header(tmp_path / "model.safetensors", header, bytes(16))
    with pytest.raises(FieldError) as caught:
        read_safetensors(path)
    assert (caught.value.file, caught.value.field) == (str(path), field)
    assert says in caught.value.message
