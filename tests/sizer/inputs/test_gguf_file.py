"""A .gguf file as the model: metadata and tensor table read with the gguf package, never the weights.

The files are synthetic (gguf.GGUFWriter, tiny tensors of zeros in the types llama.cpp's Q4_K_M
gives them); no real model file is committed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sizer.analytic.formats import FORMATS, group_bytes, weight_format
from sizer.analytic.memory import weight_memory
from sizer.analytic.offload import offload
from sizer.analytic.parallel import ParallelConfig
from sizer.analytic.weights import linear_groups
from sizer.errors import InputError
from sizer.inputs.gguf_file import read_gguf
from sizer.inputs.hardware import load_hardware
from sizer.inputs.layers import SLIDING, Attention
from sizer.inputs.model_spec import load_config, load_model

gguf = pytest.importorskip("gguf")
T = gguf.GGMLQuantizationType
np = pytest.importorskip("numpy")

HIDDEN, FFN, LAYERS, VOCAB, HEADS, KV_HEADS = 256, 512, 2, 1000, 4, 2
KV = HIDDEN // HEADS * KV_HEADS          # 128
ROOT = Path(__file__).resolve().parents[3]


# Bytes of `values` values by hand, blocks of (values, bytes): Q4_K (256, 144), Q6_K (256, 210), Q8_0 (32, 34)
def q4k(values: int) -> int:
    return values // 256 * 144


def q6k(values: int) -> int:
    return values // 256 * 210


def q80(values: int) -> int:
    return values // 32 * 34


# Every FFN tensor in Q8_0, as `llama-quantize --tensor-type ffn=q8_0` writes a Q4_K_M file
FFN_Q8_0 = {f"blk.{i}.ffn_{part}.weight": T.Q8_0 for i in range(LAYERS) for part in ("gate", "up", "down")}


def _quantised(rows: int, cols: int, t) -> tuple:
    if t == T.F16:
        return np.zeros((rows, cols), np.float16), None
    block, nbytes = gguf.GGML_QUANT_SIZES[t]
    return np.zeros((rows, cols // block * nbytes), np.uint8), t


def write_llama(path: Path, attn_q_type=T.Q4_K, truncate_bytes: int = 0, split_max_tensors: int = 0,
                keys: dict[str, int | bool] | None = None, types: dict | None = None, file_type: int | None = 15,
                extra: dict | None = None, drop: tuple[str, ...] = ()) -> Path:
    """A 2-layer Llama in llama.cpp's Q4_K_M types: attn_v and ffn_down Q6_K where use_more_bits(i, 2) holds
    (i >= 7 x 2 // 8 = 1: layer 1 only), output Q6_K, the rest Q4_K, norms F32. With `split_max_tensors`, split
    in shards of that many tensors as gguf-split does (PATH-00001-of-0000N.gguf, ...); `keys` adds metadata
    (uint32 or bool values); `types` gives tensors other types than the preset's (as llama-quantize --tensor-type
    does), `file_type` another general.file_type (None: none), `extra` more tensors (name -> (rows, cols, type)),
    `drop` leaves tensors out."""
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
    if file_type is not None:
        w.add_file_type(file_type)                       # 15: LLAMA_FTYPE_MOSTLY_Q4_K_M
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
    shapes = {f"blk.{i}.{name}.weight": shape for i in range(LAYERS) for name, shape in (
        ("attn_q", (HIDDEN, HIDDEN)), ("attn_k", (KV, HIDDEN)), ("attn_v", (KV, HIDDEN)),
        ("attn_output", (HIDDEN, HIDDEN)), ("ffn_gate", (FFN, HIDDEN)), ("ffn_up", (FFN, HIDDEN)),
        ("ffn_down", (HIDDEN, FFN)))}
    tensors |= {name: _quantised(*shapes[name], t) for name, t in (types or {}).items()}
    tensors |= {name: _quantised(rows, cols, t) for name, (rows, cols, t) in (extra or {}).items()}
    for name, (data, raw) in tensors.items():
        if name not in drop:
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


def test_a_later_shard_that_is_a_folder_or_a_link_loop_is_refused_naming_it(tmp_path):
    # audit finding: a folder where shard 2 goes raised IsADirectoryError from os.fdopen (a traceback)
    write_llama(tmp_path / "split.gguf", split_max_tensors=8)
    second = tmp_path / "split-00002-of-00003.gguf"
    second.unlink()
    second.mkdir()
    with pytest.raises(InputError) as err:
        read_gguf(tmp_path / "split-00001-of-00003.gguf")
    assert err.value.file == str(second) and err.value.message == "a directory, not a regular file"
    second.rmdir()
    second.symlink_to(second.name)
    with pytest.raises(InputError) as err:
        read_gguf(tmp_path / "split-00001-of-00003.gguf")
    assert err.value.file == str(second) and "Too many levels of symbolic links" in err.value.message


def test_a_later_shard_is_refused_naming_the_first(tmp_path):
    write_llama(tmp_path / "split.gguf", split_max_tensors=8)
    with pytest.raises(InputError) as err:
        read_gguf(tmp_path / "split-00002-of-00003.gguf")
    assert err.value.field == "split.no" and "-00001-of-00003.gguf" in err.value.message


def test_tensor_types_the_preset_rules_do_not_give_are_sized_from_the_table(tmp_path):
    """general.file_type says Q4_K_M, but every FFN tensor is Q8_0: the weights are the file's tensor bytes, not what
    llama.cpp's Q4_K_M rules give (the FFN in Q4_K, layer 1's ffn_down in Q6_K), which sizer counted before."""
    path = write_llama(tmp_path / "ffn-q8.gguf", types=FFN_Q8_0)
    m = load_model(str(path))
    fmt, _ = weight_format(m, "auto", 128)
    attention = LAYERS * (2 * q4k(HIDDEN * HIDDEN) + q4k(KV * HIDDEN)) + q4k(KV * HIDDEN) + q6k(KV * HIDDEN)
    ffn = LAYERS * 3 * q80(FFN * HIDDEN)                                   # 835,584 bytes
    expected = q4k(VOCAB * HIDDEN) + q6k(VOCAB * HIDDEN) + attention + ffn + (1 + 2 * LAYERS) * HIDDEN * 4
    w = weight_memory(m, fmt, ParallelConfig())
    assert w.total_bytes == w.per_gpu_bytes == expected == read_gguf(path).tensor_bytes == 1_424_336
    rules = LAYERS * 2 * q4k(FFN * HIDDEN) + q4k(HIDDEN * FFN) + q6k(HIDDEN * FFN)
    assert weight_memory(m, FORMATS["q4_k_m"], ParallelConfig()).total_bytes == expected - ffn + rules
    assert fmt.name == "q4_k_m" and fmt.description == ("GGUF Q4_K_M: each tensor at its own type and size, as the "
                                                        "file's GGUF tensor table (Q4_K x 8, Q8_0 x 6, F32 x 5, Q6_K "
                                                        "x 2) states")


@pytest.mark.parametrize("file_type", [38, None])       # MXFP4_MOE, a preset sizer has no rules for; none at all
def test_a_file_type_that_is_no_preset_sizer_knows_is_sized_from_its_tensors(tmp_path, file_type):
    """Refused before ("GGUF file type 38 is not a llama.cpp preset sizer knows"): its tensors are all of types sizer
    knows, so it is sized from them, as "gguf" with the type holding most bytes (here Q8_0) as its base."""
    path = write_llama(tmp_path / "mix.gguf", types=FFN_Q8_0, file_type=file_type)
    m = load_model(str(path))
    fmt, _ = weight_format(m, "auto", 128)
    assert (fmt.name, fmt.gguf.name, fmt.bits) == ("gguf", "Q8_0 mix", 8)
    assert weight_memory(m, fmt, ParallelConfig()).total_bytes == read_gguf(path).tensor_bytes == 1_424_336


def test_cli_plans_a_file_type_sizer_has_no_preset_for_and_says_where_its_bytes_came_from(tmp_path):
    path = write_llama(tmp_path / "mix.gguf", types=FFN_Q8_0, file_type=38)
    out = subprocess.run([sys.executable, "-m", "sizer", "plan", "--model", str(path), "--gpu", "rtx-4090", "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    c = plan["checkpoint"]
    assert plan["weights"]["format"] == "gguf" and plan["weights"]["total_bytes"] == 1_424_336
    assert "GGUF tensor table (Q4_K x 8, Q8_0 x 6, F32 x 5, Q6_K x 2)" in c["quantization"]
    assert c["quantization_source"] == "mix.gguf general.file_type 38 (no llama.cpp preset sizer knows)"
    assert c["stored_vs_derived"] == 0.0 and not any("checkpoint files hold" in a for a in plan["assumptions"])


def test_a_layer_split_gives_each_part_its_own_layers_bytes(tmp_path):
    """Layer 1's FFN in Q8_0, layer 0's in Q4_K; llama.cpp's layer split with -ngl 1 (sizer's llama.cpp plans are one
    device a server: the GPU and the host are the split's two parts): the GPU holds layer 1, the host layer 0, the
    output matrix and the token embedding, each part at its own layers' bytes (the GPU 536,832), not the mean of the
    two layers (434,304, as each matrix's bytes were spread evenly over its layers)."""
    path = write_llama(tmp_path / "split.gguf", types={f"blk.1.ffn_{p}.weight": T.Q8_0 for p in ("gate", "up", "down")})
    m = load_model(str(path))
    fmt, _ = weight_format(m, "auto", 128)
    first = q4k(2 * HIDDEN * HIDDEN + 2 * KV * HIDDEN + 3 * FFN * HIDDEN)
    last = q4k(2 * HIDDEN * HIDDEN + KV * HIDDEN) + q6k(KV * HIDDEN) + 3 * q80(FFN * HIDDEN)
    o = offload(m, fmt, load_hardware("rtx-4090"), 1, 128)
    assert (o.gpu_weight_bytes, o.host_layer_bytes) == (last, first + q6k(VOCAB * HIDDEN)) == (536_832, 541_776)
    assert o.host_weight_bytes == o.host_layer_bytes + q4k(VOCAB * HIDDEN)
    norms = (1 + 2 * LAYERS) * HIDDEN * 4                  # the split leaves the F32 norms out
    assert o.gpu_weight_bytes + o.host_weight_bytes + norms == read_gguf(path).tensor_bytes


def test_a_merged_qkv_tensor_is_shared_by_its_rows(tmp_path):
    """llama.cpp loads attn_qkv for q, k and v where the file has it (create_tensor_qkv): each holds its rows' share
    of it, at its one type."""
    qkv = {f"blk.{i}.attn_qkv.weight": (HIDDEN + 2 * KV, HIDDEN, T.Q8_0) for i in range(LAYERS)}
    separate = tuple(f"blk.{i}.attn_{x}.weight" for i in range(LAYERS) for x in "qkv")
    path = write_llama(tmp_path / "qkv.gguf", extra=qkv, drop=separate)
    m = load_model(str(path))
    fmt, _ = weight_format(m, "auto", 128)
    held = {g.name: group_bytes(g, fmt, 128, m)[0] for g in linear_groups(m)}
    assert held["self_attn.q_proj"] == LAYERS * q80(HIDDEN * HIDDEN)
    assert held["self_attn.k_proj"] == held["self_attn.v_proj"] == LAYERS * q80(KV * HIDDEN)
    assert weight_memory(m, fmt, ParallelConfig()).total_bytes == read_gguf(path).tensor_bytes


def test_a_matrix_the_table_lacks_is_refused_naming_it(tmp_path):
    """llama.cpp refuses a block without its attn_k; sizer, which would otherwise count it as nothing, too."""
    m = load_model(str(write_llama(tmp_path / "holed.gguf", drop=("blk.1.attn_k.weight",))))
    fmt, _ = weight_format(m, "auto", 128)
    with pytest.raises(InputError) as err:
        weight_memory(m, fmt, ParallelConfig())
    assert err.value.field == "tensors.blk.1.attn_k.weight" and "missing from the tensor table" in err.value.message


def test_a_file_without_its_output_norm_is_refused_as_llama_cpp_refuses_it(tmp_path):
    # audit finding: output_norm.weight, which llama.cpp's loaders create as required, was not looked for
    m = load_model(str(write_llama(tmp_path / "no-norm.gguf", drop=("output_norm.weight",))))
    fmt, _ = weight_format(m, "auto", 128)
    with pytest.raises(InputError) as err:
        weight_memory(m, fmt, ParallelConfig())
    assert err.value.field == "tensors.output_norm.weight" and "missing from the tensor table" in err.value.message


@pytest.mark.parametrize("extra, field, message", [
    # the output matrix of another vocabulary than the header's (a million rows beside 1,000): its values were summed
    ({"output.weight": (1_000_000, HIDDEN, T.Q6_K)}, "tensors.output.weight",
     "shape [256, 1,000,000]; expected [256, 1,000] (embedding_length x the vocabulary), as llama.cpp checks it"),
    ({"output.weight": (HIDDEN, VOCAB, T.F16)}, "tensors.output.weight", "shape [1,000, 256]; expected [256, 1,000]"),
    ({"blk.0.ffn_norm.weight": (2, HIDDEN // 2, T.F16)}, "tensors.blk.0.ffn_norm.weight",
     "shape [128, 2]; expected [256] (embedding_length)"),
    # a tensor no llama.cpp loader of the architecture creates (its 256 MB were counted as the model's norms)
    ({"junk.weight": (1000, HIDDEN, T.F16)}, "tensors.junk.weight",
     "'junk.weight', 512,000 bytes: not a tensor llama.cpp's llama model has, so llama.cpp refuses the file "
     "(done_getting_tensors: 'wrong number of tensors')"),
    ({"blk.0.scalar": (1, 256, T.F16), "blk.1.extra.weight": (1, 256, T.F16)}, "tensors.blk.0.scalar",
     "'blk.0.scalar', 512 bytes (of 2 such tensors, 1,024 bytes in all): not a tensor"),
])
def test_tensors_llama_cpp_would_refuse_are_refused_naming_them(tmp_path, extra, field, message):
    with pytest.raises(InputError) as err:
        read_gguf(write_llama(tmp_path / "bad.gguf", extra=extra))
    assert err.value.field == field and message in err.value.message


def test_a_file_type_no_tensor_holds_is_not_the_formats_name(tmp_path):
    # audit finding: general.file_type 15 (Q4_K_M) over tensors none of which is Q4_K was sized and timed as Q4_K_M
    f16 = {name: (rows, cols, T.F16) for name, (rows, cols) in {
        "token_embd.weight": (VOCAB, HIDDEN), "output.weight": (VOCAB, HIDDEN),
        **{f"blk.{i}.{n}.weight": shape for i in range(LAYERS) for n, shape in (
            ("attn_q", (HIDDEN, HIDDEN)), ("attn_k", (KV, HIDDEN)), ("attn_v", (KV, HIDDEN)),
            ("attn_output", (HIDDEN, HIDDEN)), ("ffn_gate", (FFN, HIDDEN)), ("ffn_up", (FFN, HIDDEN)),
            ("ffn_down", (HIDDEN, FFN)))}}.items()}
    path = write_llama(tmp_path / "f16.gguf", extra=f16)
    g = read_gguf(path)
    q = g.quantization()
    assert g.preset is None and q.format == "gguf" and "(Q4_K_M, but no tensor is Q4_K: named from the tensors)" in \
        q.source
    m = load_model(str(path))
    assert any("general.file_type 15 states Q4_K_M (Q4_K tensors), but none of the file's tensors is Q4_K" in n
               for n in m.notes)
    fmt, _ = weight_format(m, "auto", 128)
    assert fmt.name == "gguf" and fmt.description.startswith("GGUF F16 mix")
    # a Q4_K_M file (the Q4_K tensors there) keeps its name
    assert read_gguf(write_llama(tmp_path / "q4.gguf")).preset.name == "Q4_K_M"


def test_an_encoders_tensors_in_the_file_are_named_not_counted(tmp_path):
    """A vision encoder and projector stored beside the text model (v.*, mm.*): llama.cpp's text model does not load
    them, so the weights leave them out and a note names them; the stored bytes hold them."""
    extra = {"v.blk.0.attn_q.weight": (64, 64, T.F16), "mm.0.weight": (HIDDEN, 64, T.F16)}
    path = write_llama(tmp_path / "vl.gguf", extra=extra)
    m = load_model(str(path))
    fmt, _ = weight_format(m, "auto", 128)
    encoder = (64 * 64 + HIDDEN * 64) * 2
    assert weight_memory(m, fmt, ParallelConfig()).total_bytes == read_gguf(path).tensor_bytes - encoder
    assert any(n.startswith("2 tensors of a vision or audio encoder (mm.*, v.*: 0.00 GB)") for n in m.notes)


def write_qwen3moe(path: Path, merged: bool) -> Path:
    """A 2-layer Qwen3-MoE of 4 experts 256 wide: experts' gate and up Q4_K (as ffn_gate_exps and ffn_up_exps, or
    `merged` in one ffn_gate_up_exps as newer conversions write them), down Q8_0, the router F32."""
    experts, width, head = 4, 256, HIDDEN // HEADS
    w = gguf.GGUFWriter(str(path), "qwen3moe")
    for add, value in ((w.add_block_count, LAYERS), (w.add_embedding_length, HIDDEN), (w.add_head_count, HEADS),
                       (w.add_head_count_kv, KV_HEADS), (w.add_context_length, 4096), (w.add_expert_count, experts),
                       (w.add_expert_used_count, 2), (w.add_expert_feed_forward_length, width), (w.add_file_type, 15)):
        add(value)
    w.add_token_list([f"t{i}" for i in range(VOCAB)])
    ones = lambda n: (np.ones(n, np.float32), None)                     # noqa: E731
    tensors = {"token_embd.weight": _quantised(VOCAB, HIDDEN, T.Q4_K),
               "output.weight": _quantised(VOCAB, HIDDEN, T.Q6_K), "output_norm.weight": ones(HIDDEN)}
    for i in range(LAYERS):
        gate_up = {"ffn_gate_up_exps": (2 * width, T.Q4_K)} if merged else {
            "ffn_gate_exps": (width, T.Q4_K), "ffn_up_exps": (width, T.Q4_K)}
        tensors |= {f"blk.{i}.attn_q.weight": _quantised(HIDDEN, HIDDEN, T.Q4_K),
                    f"blk.{i}.attn_k.weight": _quantised(KV, HIDDEN, T.Q4_K),
                    f"blk.{i}.attn_v.weight": _quantised(KV, HIDDEN, T.Q6_K),
                    f"blk.{i}.attn_output.weight": _quantised(HIDDEN, HIDDEN, T.Q4_K),
                    f"blk.{i}.attn_q_norm.weight": ones(head), f"blk.{i}.attn_k_norm.weight": ones(head),
                    f"blk.{i}.attn_norm.weight": ones(HIDDEN), f"blk.{i}.ffn_norm.weight": ones(HIDDEN),
                    f"blk.{i}.ffn_gate_inp.weight": (np.ones((experts, HIDDEN), np.float32), None),
                    f"blk.{i}.ffn_down_exps.weight": _quantised(experts * HIDDEN, width, T.Q8_0),
                    **{f"blk.{i}.{name}.weight": _quantised(experts * rows, HIDDEN, t)
                       for name, (rows, t) in gate_up.items()}}
    for name, (data, raw) in tensors.items():
        w.add_tensor(name, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("merged", [False, True])
def test_experts_and_router_are_read_from_their_tensors(tmp_path, merged):
    """ffn_gate_exps + ffn_up_exps (or one ffn_gate_up_exps) are the experts' gate_up_proj, ffn_down_exps their
    down_proj, ffn_gate_inp the router; by hand over 2 layers of 4 experts 256 x 256: gate and up 1,048,576 values in
    Q4_K (589,824 bytes), down 524,288 in Q8_0 (557,056), the router 2,048 in F32 (8,192)."""
    path = write_qwen3moe(tmp_path / "moe.gguf", merged)
    m = load_model(str(path))
    fmt, _ = weight_format(m, "auto", 128)
    held = {g.name: group_bytes(g, fmt, 128, m)[0] for g in linear_groups(m)}
    assert (held["mlp.experts.gate_up_proj"], held["mlp.experts.down_proj"], held["mlp.gate"]) == (
        q4k(LAYERS * 4 * 2 * 256 * HIDDEN), q80(LAYERS * 4 * 256 * HIDDEN), LAYERS * 4 * HIDDEN * 4) == (
        589_824, 557_056, 8_192)
    assert weight_memory(m, fmt, ParallelConfig()).total_bytes == read_gguf(path).tensor_bytes


def test_the_reports_recheck_command_reads_a_type_mix_again(tmp_path):
    """A file type with no preset plans as "gguf", which --weights does not take: the report's re-check command names
    the checkpoint's own format as --weights auto, and, llama.cpp being a slot engine, no --tp / --pp /
    --kv-cache-dtype (its cache type f16 is no value of that flag); running it plans the same bytes."""
    from sizer.inputs.scenario import scenario_from_dict
    from sizer.outputs.report.data import _answer
    from sizer.sizing.resolve import resolve
    from sizer.sizing.search import SearchSettings

    path = write_llama(tmp_path / "mix.gguf", types=FFN_Q8_0, file_type=38)
    spec = {"model": str(path), "hardware": "rtx-4090", "deployment": {"engine": "llama.cpp"},
            "workload": {"arrival": {"rate_per_s": 0.5}, "num_requests": 20,
                         "prompt_tokens": {"distribution": "fixed", "value": 64},
                         "output_tokens": {"distribution": "fixed", "value": 16}}}
    scenario = tmp_path / "mix.yaml"
    scenario.write_text(json.dumps(spec))
    r = resolve(scenario_from_dict(spec, str(scenario)))
    answer, _ = _answer(r, "the scenario's configuration", SearchSettings())
    assert "--weights auto " in answer.plan_command
    flags = answer.plan_command.split()[2:]          # the scenario, then the flags
    flags = [f for f in flags if f != "--simulate"] + ["--json"]
    out = subprocess.run([sys.executable, "-m", "sizer", "plan", *flags], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["weights"]["total_bytes"] == 1_424_336
