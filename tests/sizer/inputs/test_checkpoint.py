"""Model references (path, checkpoint folder, catalog, cached Hugging Face id) and what a checkpoint
folder says beside config.json: hf_quant_config.json and the stored bytes of its safetensors files.

Fixture folders are built in tmp_path: a small Llama-style config (hidden 1024, 2 layers; its
bytes are derived in tests/sizer/analytic/test_memory_formats.py), ModelOpt's hf_quant_config.json
in the shape nvidia's checkpoints ship it, and .safetensors files with real headers (an 8-byte
little-endian length, then the JSON table of tensors and their byte ranges, per the safetensors
format) and zero bytes for data.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.cli import app
from sizer.inputs.checkpoint import read_weights
from sizer.inputs.model_spec import load_config, load_model
from validation.errors import FieldError

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1024, "intermediate_size": 4096,
          "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000,
          "max_position_embeddings": 4096, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
LINEAR = 30_408_704                 # the 12 matrices of the two layers (test_memory_formats.py)
UNCONVERTED = 2 * 1_024_000 + 5_120  # embedding, lm_head, norms
MODELOPT_FP8 = {"producer": {"name": "modelopt", "version": "0.23.0"},
                "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}}


def write_safetensors(path: Path, tensors: dict[str, int]) -> None:
    """A safetensors file whose tensors (name -> bytes) are zeros; only the header is real."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, nbytes in tensors.items():
        header[name] = {"dtype": "U8", "shape": [nbytes], "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))


def checkpoint(folder: Path, config: dict = CONFIG, hf_quant: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    if hf_quant is not None:
        (folder / "hf_quant_config.json").write_text(json.dumps(hf_quant))
    return folder


def plan_json(model: str) -> dict:
    result = CliRunner().invoke(app, ["plan", "--model", model, "--gpu", "h100", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def one_line_error(args: list[str]) -> str:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


def test_safetensors_headers_give_the_stored_bytes(tmp_path):
    write_safetensors(tmp_path / "model-00001-of-00002.safetensors", {"a.weight": 1000, "a.weight_scale": 4})
    write_safetensors(tmp_path / "model-00002-of-00002.safetensors", {"b.weight": 96})
    w = read_weights(tmp_path)      # 1,000 + 4 + 96 bytes of tensors
    assert (w.bytes, w.source) == (1100, "headers of 2 .safetensors file(s)")


def test_the_index_total_size_comes_first(tmp_path):
    write_safetensors(tmp_path / "model-00001-of-00001.safetensors", {"a": 8})
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 141_107_412_992},
                                                                       "weight_map": {"a": "x"}}))
    w = read_weights(tmp_path)
    assert (w.bytes, w.source) == (141_107_412_992, "model.safetensors.index.json metadata.total_size")


def test_hf_quant_config_is_the_quantisation_when_config_json_states_none(tmp_path):
    m = load_model(str(checkpoint(tmp_path / "ckpt", hf_quant=MODELOPT_FP8)))
    assert (m.quantization.method, m.quantization.format, m.quantization.source) == (
        "modelopt", "fp8", "hf_quant_config.json")


def test_config_json_quantisation_wins_over_hf_quant_config(tmp_path):
    # vLLM's get_quant_config takes config.json's quantization_config and reads hf_quant_config.json only without one
    awq = {**CONFIG, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}
    m = load_model(str(checkpoint(tmp_path / "ckpt", awq, MODELOPT_FP8)))
    assert m.quantization.format == "awq"
    assert any("hf_quant_config.json" in note and "is not used" in note for note in m.notes)


def test_plan_shows_stored_beside_derived_bytes_and_flags_a_gap(tmp_path):
    folder = checkpoint(tmp_path / "ckpt", hf_quant=MODELOPT_FP8)
    # ModelOpt FP8, lm_head excluded: 12 matrices at 1 byte + a weight and an input scale (fp32) each,
    # embedding, lm_head and norms at 2 bytes
    derived = LINEAR + 12 * 8 + UNCONVERTED * 2
    write_safetensors(folder / "model.safetensors", {"all": derived})
    plan = plan_json(str(folder))
    c = plan["checkpoint"]
    assert (c["stored_bytes"], c["derived_bytes"], c["stored_vs_derived"]) == (derived, derived, 0.0)
    assert c["quantization_source"] == "hf_quant_config.json" and c["kv_cache_stated"] == "fp8"
    assert not any("checkpoint files hold" in a for a in plan["assumptions"])
    write_safetensors(folder / "model.safetensors", {"all": derived, "mtp.layers.0.weight": derived // 10})
    flagged = [a for a in plan_json(str(folder))["assumptions"] if "checkpoint files hold" in a]
    assert len(flagged) == 1 and "+10.0%" in flagged[0]


def test_a_cached_hugging_face_id(tmp_path, monkeypatch):
    # huggingface_hub's cache: models--{org}--{name}/refs/main names the snapshot folder
    repo = tmp_path / "hub" / "models--nvidia--Tiny-FP8"
    checkpoint(repo / "snapshots" / "0123456789abcdef", hf_quant=MODELOPT_FP8)
    checkpoint(repo / "snapshots" / "fedcba9876543210")                   # an older, unquantised snapshot
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123456789abcdef")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    ckpt = load_config("nvidia/Tiny-FP8")
    assert ckpt.name == "nvidia/Tiny-FP8" and ckpt.found_as.startswith("Hugging Face cache snapshot 0123456789ab")
    assert plan_json("nvidia/Tiny-FP8")["weights"]["format"] == "fp8"


@pytest.mark.parametrize(("ref", "message"), [
    ("0123456789abcdef", "names snapshot 0123456789abcdef, which is not in"),     # an interrupted download
    ("../../../../etc", "expected a commit hash (hexadecimal), got '../../../../etc'"),
])
def test_refs_main_naming_no_snapshot_is_refused_not_passed_over(tmp_path, monkeypatch, ref, message):
    # the cache's one snapshot is not the one refs/main names: reading it instead would size another revision
    repo = tmp_path / "hub" / "models--org--model"
    checkpoint(repo / "snapshots" / "fedcba9876543210")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(ref)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(FieldError) as err:
        load_config("org/model")
    assert err.value.file == str(repo / "refs" / "main") and message in err.value.message


@pytest.mark.parametrize(("make", "message"), [
    (lambda ref: ref.mkdir(), "a directory, not a regular file"),
    (lambda ref: ref.symlink_to(ref.parent / "gone"), "file not found"),
    (lambda ref: ref.write_text("a" * 2000), "larger than 1,024 bytes, the most a refs file may be"),
])
def test_a_refs_main_that_is_no_commit_file_is_refused_not_passed_over(tmp_path, monkeypatch, make, message):
    # a refs/main there but not readable as a commit (a folder, a dangling link) was passed over for the only snapshot
    repo = tmp_path / "hub" / "models--org--model"
    checkpoint(repo / "snapshots" / "fedcba9876543210")
    (repo / "refs").mkdir()
    make(repo / "refs" / "main")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(FieldError) as err:
        load_config("org/model")
    assert err.value.file == str(repo / "refs" / "main") and message in err.value.message


def test_hf_home_is_used_without_hf_hub_cache(tmp_path, monkeypatch):
    checkpoint(tmp_path / "home" / "hub" / "models--org--only" / "snapshots" / "abc1234")   # one snapshot, no refs
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert load_config("org/only").config["hidden_size"] == 1024


def test_an_id_not_in_the_cache_is_one_line_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    line = one_line_error(["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100"])
    # --model is read up front (sizer/cli/flags.py check_model), so the refusal names the flag
    assert line.startswith("error: --model: Hugging Face model 'meta-llama/Llama-3.1-8B-Instruct' is not in the "
                           f"local Hugging Face cache ({tmp_path}; sizer never downloads)"), line


@pytest.mark.parametrize(("write", "field"), [
    (lambda p: p.write_bytes(b"\x01\x00"), "header"),                                        # shorter than 8 bytes
    (lambda p: p.write_bytes(struct.pack("<Q", 10**12) + b"{}"), "header"),                  # length past the file
    (lambda p: p.write_bytes(struct.pack("<Q", 4) + b"[1] "), "header"),                     # not an object
    (lambda p: p.write_bytes(struct.pack("<Q", 2) + b"\xff\xfe"), "header"),                 # not UTF-8
    (lambda p: p.write_bytes(struct.pack("<Q", 36) + b'{"w": {"data_offsets": [0, 9999]}}  '), "header.w.data_offsets"),
    # no tensors: its 0 bytes were compared with the derived weights as a -100% gap
    (lambda p: p.write_bytes(struct.pack("<Q", 2) + b"{}"), "header"),
])
def test_a_broken_safetensors_file_is_one_line(tmp_path, write, field):
    folder = checkpoint(tmp_path / "ckpt")
    write(folder / "model.safetensors")
    line = one_line_error(["plan", "--model", str(folder), "--gpu", "h100"])
    assert f"{folder / 'model.safetensors'}: {field}: " in line, line


@pytest.mark.parametrize(("name", "text", "field"), [
    ("model.safetensors.index.json", '{"metadata": {"total_size": "big"}}', "metadata.total_size"),
    ("model.safetensors.index.json", '{"weight_map": {}}', "metadata.total_size"),
    # no weights at all: 0 bytes, or a weight_map listing no tensor (an index vLLM could not load shards from)
    ("model.safetensors.index.json", '{"metadata": {"total_size": 0}, "weight_map": {"a": "x"}}',
     "metadata.total_size"),
    ("model.safetensors.index.json", '{"metadata": {"total_size": 10}, "weight_map": {}}', "weight_map"),
    ("model.safetensors.index.json", '{"metadata": {"total_size": 10}, "weight_map": [1, 2]}', "weight_map"),
    ("hf_quant_config.json", '{"producer": {}}', "quantization"),
    ("hf_quant_config.json", '{"quantization": {"quant_algo": "FP8", "exclude_modules": "lm_head"}}',
     "quantization.exclude_modules"),
])
def test_broken_checkpoint_json_files_are_one_line(tmp_path, name, text, field):
    folder = checkpoint(tmp_path / "ckpt")
    (folder / name).write_text(text)
    line = one_line_error(["plan", "--model", str(folder), "--gpu", "h100"])
    assert f"{folder / name}: {field}: " in line, line


def test_a_lone_config_file_is_not_a_checkpoint_folder(tmp_path):
    (tmp_path / "tiny.json").write_text(json.dumps(CONFIG))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(MODELOPT_FP8))
    ckpt = load_config(str(tmp_path / "tiny.json"))
    assert ckpt.quantization is None and ckpt.stored_bytes is None and ckpt.name == "tiny"


def test_unknown_references_name_every_kind_accepted():
    with pytest.raises(FieldError, match="a Hugging Face id"):
        load_config("no-such-model")


# ---- AutoGPTQ / AutoAWQ sidecars, packed weights, and the index checked against its shards ----------------------
#
# A GPTQ checkpoint of CONFIG as AutoGPTQ writes it: per linear layer (in_features x out_features) an int32 qweight
# [in/8, out] (eight 4-bit values an int32), int32 qzeros [in/128, out/8], fp16 scales [in/128, out] and an int32
# g_idx [in]; quantize_config.json as AutoGPTQ's BaseQuantizeConfig.save_pretrained writes it (TheBloke's GPTQ
# repositories ship this file, with no quantization_config in config.json before transformers' GPTQ integration).
GPTQ_SIDECAR = {"bits": 4, "group_size": 128, "damp_percent": 0.01, "desc_act": False, "static_groups": False,
                "sym": True, "true_sequential": True, "model_name_or_path": None, "model_file_base_name": "model"}
AWQ_SIDECAR = {"zero_point": True, "q_group_size": 128, "w_bit": 4, "version": "GEMM"}   # AutoAWQ's quant_config.json
MATRICES = {"self_attn.q_proj": (1024, 1024), "self_attn.k_proj": (1024, 256), "self_attn.v_proj": (1024, 256),
            "self_attn.o_proj": (1024, 1024), "mlp.gate_proj": (1024, 4096), "mlp.up_proj": (1024, 4096),
            "mlp.down_proj": (4096, 1024)}
DTYPE_BYTES = {"F16": 2, "I32": 4}


def gptq_tensors(g_idx: bool = True) -> dict[str, tuple[str, list[int]]]:
    t = {"model.embed_tokens.weight": ("F16", [1000, 1024]), "lm_head.weight": ("F16", [1000, 1024]),
         "model.norm.weight": ("F16", [1024])}
    for layer in range(2):
        p = f"model.layers.{layer}."
        t[p + "input_layernorm.weight"] = t[p + "post_attention_layernorm.weight"] = ("F16", [1024])
        for m, (i, o) in MATRICES.items():
            t[p + m + ".qweight"] = ("I32", [i // 8, o])
            t[p + m + ".qzeros"] = ("I32", [i // 128, o // 8])
            t[p + m + ".scales"] = ("F16", [i // 128, o])
            if g_idx:
                t[p + m + ".g_idx"] = ("I32", [i])
    return t


def write_typed_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> int:
    """A safetensors file with these (dtype, shape) tensors, its data a hole of zeros (a sparse file); its bytes."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, (dtype, shape) in tensors.items():
        nbytes = DTYPE_BYTES[dtype]
        for d in shape:
            nbytes *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + offset)
    return offset


# sizer's GPTQ int4, group 128: LINEAR values at half a byte (15,204,352), a 2-byte scale and a 4-bit zero per 128
# inputs (LINEAR / 128 = 237,568 groups x 2.5 B = 593,920), embedding, lm_head and norms at 2 bytes (4,106,240)
GPTQ_DERIVED = LINEAR // 2 + LINEAR // 128 * 5 // 2 + UNCONVERTED * 2
# the files add AutoGPTQ's g_idx, 4 bytes per input row of each matrix: (6 x 1024 + 4096) x 4 B x 2 layers = 81,920
GPTQ_STORED = GPTQ_DERIVED + (6 * 1024 + 4096) * 4 * 2


def test_the_hand_derived_gptq_bytes():
    assert (GPTQ_DERIVED, GPTQ_STORED) == (19_904_512, 19_986_432)


def test_a_gptq_sidecar_is_refused_without_the_flag_and_sized_with_it(tmp_path):
    # vLLM reads quantize_config.json only with --quantization gptq (weight_utils.get_quant_config, run when
    # ModelConfig.quantization is set); without it the model is built unquantised and qweight fails to load
    folder = checkpoint(tmp_path / "gptq", {**CONFIG, "torch_dtype": "float16"})
    (folder / "quantize_config.json").write_text(json.dumps(GPTQ_SIDECAR))
    assert write_typed_safetensors(folder / "model.safetensors", gptq_tensors()) == GPTQ_STORED
    line = one_line_error(["plan", "--model", str(folder), "--gpu", "h100"])
    assert line.startswith(f"error: {folder / 'quantize_config.json'}: states gptq int4 weights, but config.json "
                           "states no quantization_config"), line
    assert "--quantization gptq" in line and "--weights gptq" in line
    result = CliRunner().invoke(app, ["plan", "--model", str(folder), "--gpu", "h100", "--weights", "gptq", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    c = plan["checkpoint"]
    assert plan["weights"]["format"] == "gptq" and c["quantization_source"] == str(folder / "quantize_config.json")
    assert (c["stored_bytes"], c["derived_bytes"]) == (GPTQ_STORED, GPTQ_DERIVED)     # +0.4%: g_idx, not flagged
    assert any("quantize_config.json keys sizer does not read" in a and "damp_percent = 0.01" in a
               for a in plan["assumptions"])


def test_a_sidecar_checkpoint_is_emitted_with_the_method_it_needs(tmp_path):
    # review finding: the emitted command left --quantization out (the format was the checkpoint's), so vLLM would
    # build the model unquantised and `sizer check` refused sizer's own command; a checkpoint stating its
    # quantization_config still gets none (an engine refuses a method that differs from it). Spelled gptq_marlin:
    # the sidecar's 4 symmetric bits in groups of 128 are what Marlin runs, and an explicit `gptq` would force
    # vLLM's ExLlama kernel (format_support [VLLM-MARLIN-COMPAT])
    folder = checkpoint(tmp_path / "gptq", {**CONFIG, "torch_dtype": "float16"})
    (folder / "quantize_config.json").write_text(json.dumps(GPTQ_SIDECAR))
    write_typed_safetensors(folder / "model.safetensors", gptq_tensors())
    stated = checkpoint(tmp_path / "stated", {**CONFIG, "quantization_config": {"quant_method": "gptq", "bits": 4,
                                                                                "group_size": 128, "desc_act": False}})
    for model, weights, flagged in ((folder, "gptq", True), (stated, "auto", False)):
        out = tmp_path / f"{model.name}.sh"
        result = CliRunner().invoke(app, ["plan", "--model", str(model), "--gpu", "h100", "--weights", weights,
                                          "--emit", "vllm", "--emit-to", str(out)])
        assert result.exit_code == 0, result.output
        assert ("--quantization gptq_marlin " in out.read_text()) is flagged, out.read_text()
        assert "--quantization gptq " not in out.read_text()


def test_a_gptq_lm_head_true_stores_the_lm_head_in_int4(tmp_path):
    # vLLM's GPTQConfig lm_head_quantized builds the ParallelLMHead with the GPTQ method: the lm_head's 1,000 x 1,024
    # = 1,024,000 values at half a byte and 8,000 groups of 128 x 2.5 B, where they were 2 bytes each:
    # GPTQ_DERIVED - 2,048,000 + 512,000 + 20,000
    gptq = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}
    sized = {}
    for lm_head in (False, True):
        folder = checkpoint(tmp_path / f"lm-{lm_head}", {**CONFIG, "quantization_config": {**gptq, "lm_head": lm_head}})
        result = CliRunner().invoke(app, ["plan", "--model", str(folder), "--gpu", "h100", "--json"])
        assert result.exit_code == 0, result.output
        sized[lm_head] = json.loads(result.stdout)["checkpoint"]["derived_bytes"]
    assert sized == {False: GPTQ_DERIVED, True: GPTQ_DERIVED - 2_048_000 + 512_000 + 20_000}


def test_an_awq_sidecar_is_read_as_vllm_awq_reads_it(tmp_path):
    folder = checkpoint(tmp_path / "awq")
    (folder / "quant_config.json").write_text(json.dumps(AWQ_SIDECAR))
    q = load_model(str(folder)).quantization
    assert (q.format, q.bits, q.group_size, q.zero_points, q.needs_flag) == ("awq", 4, 128, True, "awq")


def test_a_sidecar_beside_a_quantization_config_is_named_not_read(tmp_path):
    # vLLM's get_quant_config takes config.json's quantization_config and looks for no file then
    gptq = {**CONFIG, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True}}
    folder = checkpoint(tmp_path / "both", gptq)
    (folder / "quantize_config.json").write_text("{not even JSON")
    m = load_model(str(folder))
    assert m.quantization.format == "gptq" and not m.quantization.needs_flag
    assert any("quantize_config.json is not read: quantization_config comes first" in n for n in m.notes)
    assert any("desc_act = true" in n for n in m.notes)     # act-order: whole scales on every GPU, named


def test_packed_weights_without_a_quantisation_are_refused_not_sized_as_bf16(tmp_path):
    folder = checkpoint(tmp_path / "packed")
    write_typed_safetensors(folder / "model.safetensors", gptq_tensors())
    line = one_line_error(["plan", "--model", str(folder), "--gpu", "h100"])
    assert "packed integer weights (model.layers.0.self_attn.q_proj.qweight (I32))" in line
    assert str(folder / "model.safetensors") in line


def index(folder: Path, total: int, weight_map: dict[str, str]) -> None:
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total},
                                                                     "weight_map": weight_map}))


def test_the_index_is_checked_against_its_shards(tmp_path):
    write_safetensors(tmp_path / "a.safetensors", {"x": 100})
    write_safetensors(tmp_path / "b.safetensors", {"y": 28})
    files = sum((tmp_path / f).stat().st_size for f in ("a.safetensors", "b.safetensors"))
    for total in (128, files):      # the tensors' bytes, or the files' (headers counted): as stated
        index(tmp_path, total, {"x": "a.safetensors", "y": "b.safetensors"})
        w = read_weights(tmp_path)
        assert (w.bytes, w.notes) == (128, ()) and w.source.startswith("headers of the 2 .safetensors file(s)")
    index(tmp_path, files + 1, {"x": "a.safetensors", "y": "b.safetensors"})
    (note,) = read_weights(tmp_path).notes     # beyond the headers: named, the headers' bytes kept
    assert f"states {files + 1:,} bytes, but the 2 shards' headers hold 128 bytes" in note
    index(tmp_path, 5000, {"x": "a.safetensors", "y": "b.safetensors", "z": "c.safetensors"})
    w = read_weights(tmp_path)           # a shard missing: total_size, and the missing one named
    assert w.bytes == 5000 and "1 of the 3 shard files" in w.notes[0] and "'c.safetensors'" in w.notes[0]
    # review leftover: a link to a blob that is not there (the Hugging Face cache's layout after an interrupted
    # download) is a missing shard, not a header to read
    (tmp_path / "c.safetensors").symlink_to(tmp_path / "blobs" / "missing")
    w = read_weights(tmp_path)
    assert w.bytes == 5000 and "1 of the 3 shard files" in w.notes[0] and "'c.safetensors'" in w.notes[0]
    (tmp_path / "c.safetensors").unlink()
    index(tmp_path, 128, {"x": "a.safetensors", "y": "b.safetensors", "w": "b.safetensors"})
    with pytest.raises(FieldError) as err:     # listed, in no shard: vLLM leaves it unloaded and refuses
        read_weights(tmp_path)
    assert err.value.field == "weight_map.w"


def test_an_index_or_shard_that_is_a_link_loop_is_refused_not_passed_over(tmp_path):
    # audit finding: Path.exists() is False on a link loop, so an index that was one was passed over silently (the
    # .safetensors files read without it) and a shard that was one counted as not downloaded; a loop elsewhere (a
    # .safetensors file, a sidecar) was "cannot read: Too many levels of symbolic links"
    write_safetensors(tmp_path / "a.safetensors", {"x": 100})
    loop = tmp_path / "model.safetensors.index.json"
    loop.symlink_to(loop.name)
    with pytest.raises(FieldError) as err:
        read_weights(tmp_path)
    assert err.value.file == str(loop) and err.value.message == "cannot read: Too many levels of symbolic links"
    loop.unlink()
    index(tmp_path, 5000, {"x": "a.safetensors", "y": "b.safetensors"})
    (tmp_path / "b.safetensors").symlink_to("b.safetensors")
    with pytest.raises(FieldError) as err:
        read_weights(tmp_path)
    assert err.value.file == str(tmp_path / "b.safetensors") and "Too many levels" in err.value.message


def test_routing_keys_on_a_dense_llama_are_named(tmp_path):
    # vLLM's LlamaForCausalLM (and transformers' LlamaConfig) read no expert key: a top-k there routes nothing
    for key in ("num_experts_per_tok", "moe_topk"):
        m = load_model(str(checkpoint(tmp_path / key, {**CONFIG, key: 2})))
        assert not m.is_moe
        assert any(n.startswith(f"mixture-of-experts keys on a model with no experts, not used: {key} = 2")
                   for n in m.notes), m.notes
