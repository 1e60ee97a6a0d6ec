"""A .gguf file as the model: metadata and tensor table read with the gguf package, never the weights.

The files are synthetic (gguf.GGUFWriter, tiny tensors of zeros in the types llama.cpp's Q4_K_M
gives them); no real model file is committed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sizer.analytic.formats import weight_format
from sizer.analytic.memory import weight_memory
from sizer.analytic.parallel import ParallelConfig
from sizer.errors import InputError
from sizer.inputs.gguf_file import read_gguf
from sizer.inputs.layers import SLIDING, Attention
from sizer.inputs.model_spec import load_config, load_model

gguf = pytest.importorskip("gguf")
T = gguf.GGMLQuantizationType
np = pytest.importorskip("numpy")

HIDDEN, FFN, LAYERS, VOCAB, HEADS, KV_HEADS = 256, 512, 2, 1000, 4, 2
KV = HIDDEN // HEADS * KV_HEADS          # 128


def _quantised(rows: int, cols: int, t) -> tuple:
    block, nbytes = gguf.GGML_QUANT_SIZES[t]
    return np.zeros((rows, cols // block * nbytes), np.uint8), t


def write_llama(path: Path, attn_q_type=T.Q4_K, truncate_bytes: int = 0, split_max_tensors: int = 0,
                keys: dict[str, int | bool] | None = None) -> Path:
    """A 2-layer Llama in llama.cpp's Q4_K_M types: attn_v and ffn_down Q6_K where use_more_bits(i, 2) holds
    (i >= 7 x 2 // 8 = 1: layer 1 only), output Q6_K, the rest Q4_K, norms F32. With `split_max_tensors`, split
    in shards of that many tensors as gguf-split does (PATH-00001-of-0000N.gguf, ...); `keys` adds metadata
    (uint32 or bool values)."""
    w = gguf.GGUFWriter(str(path), "llama", split_max_tensors=split_max_tensors)
    for key, value in (keys or {}).items():
        (w.add_bool if isinstance(value, bool) else w.add_uint32)(key, value)
    w.add_block_count(LAYERS)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_context_length(4096)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(15)                                  # LLAMA_FTYPE_MOSTLY_Q4_K_M
    w.add_token_list([f"t{i}" for i in range(VOCAB)])
    tensors = {"token_embd.weight": _quantised(VOCAB, HIDDEN, T.Q4_K),
               "output.weight": _quantised(VOCAB, HIDDEN, T.Q6_K),
               "output_norm.weight": (np.ones(HIDDEN, np.float32), None)}
    for i in range(LAYERS):
        tensors |= {f"blk.{i}.attn_q.weight": _quantised(HIDDEN, HIDDEN, attn_q_type),
                    f"blk.{i}.attn_k.weight": _quantised(KV, HIDDEN, T.Q4_K),
                    f"blk.{i}.attn_v.weight": _quantised(KV, HIDDEN, T.Q6_K if i == 1 else T.Q4_K),
                    f"blk.{i}.attn_output.weight": _quantised(HIDDEN, HIDDEN, T.Q4_K),
                    f"blk.{i}.ffn_gate.weight": _quantised(FFN, HIDDEN, T.Q4_K),
                    f"blk.{i}.ffn_up.weight": _quantised(FFN, HIDDEN, T.Q4_K),
                    f"blk.{i}.ffn_down.weight": _quantised(HIDDEN, FFN, T.Q6_K if i == 1 else T.Q4_K),
                    f"blk.{i}.attn_norm.weight": (np.ones(HIDDEN, np.float32), None),
                    f"blk.{i}.ffn_norm.weight": (np.ones(HIDDEN, np.float32), None)}
    for name, (data, raw) in tensors.items():
        w.add_tensor(name, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if truncate_bytes:
        path.write_bytes(path.read_bytes()[:-truncate_bytes])
    return path


def test_architecture_and_exact_bytes_from_the_header(tmp_path):
    g = read_gguf(write_llama(tmp_path / "tiny.gguf"))
    assert g.preset.name == "Q4_K_M" and g.config["num_hidden_layers"] == LAYERS
    assert g.config["num_key_value_heads"] == KV_HEADS and g.config["vocab_size"] == VOCAB
    assert g.config["tie_word_embeddings"] is False
    # By hand, bytes per block / 256 values: Q4_K 144, Q6_K 210; F32 4 per value.
    q4k = (VOCAB * HIDDEN + LAYERS * (HIDDEN * HIDDEN + KV * HIDDEN + HIDDEN * HIDDEN + 2 * FFN * HIDDEN)
           + KV * HIDDEN + HIDDEN * FFN) // 256 * 144                     # layer 0's attn_v and ffn_down
    q6k = (VOCAB * HIDDEN + KV * HIDDEN + HIDDEN * FFN) // 256 * 210     # output, layer 1's attn_v and ffn_down
    f32 = (1 + 2 * LAYERS) * HIDDEN * 4
    assert g.tensor_bytes == q4k + q6k + f32


def test_model_and_format_follow_the_file(tmp_path):
    """The ModelSpec is read like a config.json; the file type is the checkpoint's format, with its stored bytes."""
    path = write_llama(tmp_path / "tiny.gguf")
    m, ckpt = load_model(str(path)), load_config(str(path))
    assert m.num_layers == LAYERS and m.hidden_size == HIDDEN and m.quantization.format == "q4_k_m"
    assert ckpt.stored_bytes == read_gguf(path).tensor_bytes and "Q4_K x" in ckpt.stored_bytes_source
    # The file follows llama.cpp's Q4_K_M rules, so the rules' count of the same architecture is exact.
    fmt, _ = weight_format(m, "auto", 128)
    assert weight_memory(m, fmt, ParallelConfig()).total_bytes == ckpt.stored_bytes


def test_the_architectures_other_keys_are_read_refused_or_named(tmp_path):
    """gguf-py's keys beyond the mapped ones (llama.cpp gguf-py/gguf/constants.py): a sliding window read as
    config.json states it, a value length equal to the key length (HIDDEN / HEADS) and a feature switched off read,
    a rope scaling key read as numerics only; a key sizer does not know named in the plan's notes."""
    path = write_llama(tmp_path / "tiny.gguf", keys={
        "llama.attention.sliding_window": 64, "llama.attention.value_length": HIDDEN // HEADS,
        "llama.expert_shared_count": 0, "llama.attention.causal": True, "llama.rope.scaling.original_context_length":
        2048, "llama.altup.num_inputs": 4})
    g = read_gguf(path)
    assert g.config["sliding_window"] == 64
    assert g.config["_sizer"] == {"notes": ["GGUF keys sizer does not read, so their effect (if any) is not "
                                            "modelled: llama.altup.num_inputs"]}
    m = load_model(str(path))
    assert "llama.altup.num_inputs" in " ".join(m.notes)
    assert {(a.span, a.window_tokens) for a in m.mixers(Attention)} == {(SLIDING, 64)}


@pytest.mark.parametrize(("key", "value", "says"), [
    ("llama.expert_shared_count", 2, "2: layers that GGUF architecture 'llama' (read as LlamaForCausalLM) does not "
                                     "have are not modelled; expected 0 (off) or no such key"),
    ("llama.attention.causal", False, "expected True (off)"),
    ("llama.attention.value_length", 2 * HIDDEN // HEADS,
     f"{2 * HIDDEN // HEADS} against a key length of {HIDDEN // HEADS}: value heads of another size"),
])
def test_a_key_that_adds_what_the_family_lacks_is_refused(tmp_path, key, value, says):
    with pytest.raises(InputError) as err:
        read_gguf(write_llama(tmp_path / "tiny.gguf", keys={key: value}))
    assert err.value.field == key and says in err.value.message


def test_a_truncated_file_is_refused(tmp_path):
    with pytest.raises(InputError) as err:
        read_gguf(write_llama(tmp_path / "cut.gguf", truncate_bytes=1000))
    assert "truncated" in str(err.value) and "\n" not in str(err.value)


def test_a_type_sizer_does_not_know_is_refused_naming_the_tensor(tmp_path):
    """NVFP4 (id 40) is in gguf-py but not in sizer's table."""
    with pytest.raises(InputError) as err:
        read_gguf(write_llama(tmp_path / "nv.gguf", attn_q_type=T.NVFP4))
    assert err.value.field == "tensors.blk.0.attn_q.weight.type"


def test_cli_exits_2_with_one_line_for_a_truncated_file(tmp_path):
    path = write_llama(tmp_path / "cut.gguf", truncate_bytes=1000)
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "-m", "sizer", "plan", "--model", str(path), "--gpu", "rtx-4090"],
                         cwd=root, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and str(path) in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_a_split_model_is_read_whole_from_its_first_shard(tmp_path):
    whole = read_gguf(write_llama(tmp_path / "whole.gguf"))
    write_llama(tmp_path / "split.gguf", split_max_tensors=8)
    g = read_gguf(tmp_path / "split-00001-of-00003.gguf")
    # 3 + 9 x 2 layers = 21 tensors in shards of 8, 8 and 5: the same tensors and bytes as the file written whole
    assert (g.shards, len(g.tensors), g.tensor_bytes) == (3, 21, whole.tensor_bytes)
    assert g.config == whole.config and "tensor tables of 3 shards" in g.tensor_source
    # the model is named after the files without their shard suffix, as the file written whole is after its own
    assert load_model(str(tmp_path / "split-00001-of-00003.gguf")).name == "split"


def test_a_split_model_without_its_other_shards_is_refused_naming_them(tmp_path):
    write_llama(tmp_path / "split.gguf", split_max_tensors=8)
    (tmp_path / "split-00003-of-00003.gguf").unlink()
    with pytest.raises(InputError) as err:
        read_gguf(tmp_path / "split-00001-of-00003.gguf")
    # planned alone, the first shard's 8 tensors would pass for the whole model
    assert err.value.field == "split.count" and "not beside this one: split-00003-of-00003.gguf" in err.value.message


def test_a_later_shard_is_refused_naming_the_first(tmp_path):
    write_llama(tmp_path / "split.gguf", split_max_tensors=8)
    with pytest.raises(InputError) as err:
        read_gguf(tmp_path / "split-00002-of-00003.gguf")
    assert err.value.field == "split.no" and "-00001-of-00003.gguf" in err.value.message
