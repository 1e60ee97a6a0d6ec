"""GGUF headers are read bounded (issue 25): counts and lengths are checked against stated bounds and
the bytes left before anything is allocated or walked, long arrays are skipped by their length, and
only a regular file is read. Any header, however corrupt, is a model or one InputError, quickly."""

from __future__ import annotations

import os
import struct
import threading
import time
from pathlib import Path

import pytest
from ggufhelp import ARRAY, F32, LLAMA, Q4_K, STRING, TENSORS, U32, header, kv, model, s, tensor, u32, valid, without
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sizer.errors import InputError
from sizer.inputs.gguf_file import MAX_ARRAY_STRINGS, MAX_TENSORS, read_gguf
from validation.errors import FieldError


def write(tmp_path: Path, data: bytes, name: str = "m.gguf") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def refused(tmp_path: Path, data: bytes, limit_s: float = 2.0) -> InputError:
    # CPU seconds of this process (time.process_time), not the wall clock: the bounds say how much work a read
    # does, which a loaded machine does not change (a walk of 10 million entries takes many CPU seconds)
    start = time.process_time()
    with pytest.raises(InputError) as caught:
        read_gguf(write(tmp_path, data))
    assert time.process_time() - start < limit_s
    assert "\n" not in str(caught.value)
    return caught.value


def test_a_valid_header_reads(tmp_path):
    g = read_gguf(write(tmp_path, valid()))
    # F32 tensors: the 64 x 8 token embedding and two 64-value norms, 4 bytes a value
    assert (g.architecture, g.config["hidden_size"], g.config["vocab_size"], g.tensor_bytes) == \
        ("llama", 64, 8, 64 * 8 * 4 + 2 * 64 * 4)


def test_a_ten_million_element_array_in_a_small_file_is_refused_without_walking_it(tmp_path):
    big = kv("tokenizer.ggml.scores", ARRAY, struct.pack("<IQ", F32, 10_000_000))
    e = refused(tmp_path, header([*LLAMA, big]))
    assert e.field == "tokenizer.ggml.scores" and "10,000,000 entries" in e.message


def test_a_long_array_of_numbers_is_skipped_by_its_length(tmp_path):
    scores = kv("tokenizer.ggml.scores", ARRAY, struct.pack("<IQ", F32, 2_000_000) + b"\0" * 8_000_000)
    start = time.process_time()
    g = read_gguf(write(tmp_path, valid([scores])))
    assert g.config["vocab_size"] == 8 and time.process_time() - start < 2


def test_millions_of_empty_arrays_are_refused(tmp_path):
    nested = kv("x.nested", ARRAY, struct.pack("<IQ", ARRAY, 5_000_000) + struct.pack("<IQ", U32, 0) * 1000)
    e = refused(tmp_path, header([*LLAMA, nested]))
    assert e.field == "x.nested" and "array of value type 9" in e.message


def test_too_many_strings_are_refused_before_walking(tmp_path):
    tokens = kv("tokenizer.ggml.tokens", ARRAY, struct.pack("<IQ", STRING, MAX_ARRAY_STRINGS + 1))
    e = refused(tmp_path, header([*LLAMA, tokens]))
    assert "expected at most" in e.message


@pytest.mark.parametrize("count", [300_000, 2**64 - 1])
def test_too_many_tensors_are_refused_before_reading_them(tmp_path, count):
    e = refused(tmp_path, header(LLAMA, tensor_count=count))
    assert e.field == "tensor_count" and f"expected at most {MAX_TENSORS:,}" in e.message


def test_a_tensor_count_the_file_cannot_hold_is_refused(tmp_path):
    e = refused(tmp_path, header(LLAMA, tensor_count=60_000))
    assert e.field == "tensor_count" and "truncated" in e.message


def test_a_zero_embedding_length_is_refused_not_divided_by(tmp_path):
    e = refused(tmp_path, valid(hidden=0))
    assert e.field == "llama.embedding_length" and "positive integer" in e.message


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    out: list[BaseException] = []
    reader = threading.Thread(target=lambda: out.append(pytest.raises(InputError, read_gguf, fifo).value), daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert "a FIFO, not a regular file" in str(out[0])


@pytest.mark.parametrize(("data", "field"), [
    (b"", None), (b"GGUF", None), (b"GGML" + b"\0" * 40, None),
    (header(LLAMA, version=1), "version"), (header(LLAMA, version=99), "version"),
    (header(LLAMA, kv_count=2**40), "metadata_kv_count"),
    (header([kv("k", 99, b"")]), "k"),
    (header([*LLAMA, s("general.alignment") + struct.pack("<II", U32, 3)]), "general.alignment"),
    (header(LLAMA, [tensor("t", (1, 2, 3, 4, 5))]), "tensors.t"),
    (header(LLAMA, [tensor("t", (2**40, 2**40))]), "tensors.t"),
    (header(LLAMA, [tensor("t", (64,), kind=40)]), "tensors.t.type"),
    (header([kv("general.architecture", STRING, struct.pack("<Q", 2**62))]), "general.architecture"),
])
def test_corrupt_headers_are_one_line(tmp_path, data, field):
    assert refused(tmp_path, data).field == field


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, 400), flips=st.lists(st.tuples(st.integers(0, 399), st.integers(0, 255)), max_size=6))
def test_any_corruption_of_a_header_is_a_model_or_one_line(tmp_path, cut, flips):
    data = bytearray(valid())
    for at, byte in flips:
        data[at % len(data)] = byte
    data = bytes(data[:len(data) - cut] if cut else data)
    start = time.process_time()
    try:
        read_gguf(write(tmp_path, data))
    except FieldError as e:      # InputError, or check_key's FieldError for a value out of its key's bounds: the
        assert "\n" not in str(e)   # CLI prints either as one line, exit code 2 (sizer/errors.py)
    assert time.process_time() - start < 2



def test_a_long_tokenizer_is_counted_by_its_lengths(tmp_path):
    n = 300_000
    tokens = kv("tokenizer.ggml.tokens", ARRAY, struct.pack("<IQ", STRING, n) + b"".join(s(f"t{i}") for i in range(n)))
    kvs = without(b"vocab_size") + [tokens]
    start = time.process_time()
    # without the token embedding, whose 8 rows would not hold the 300,000 tokens
    assert read_gguf(write(tmp_path, model(kvs, TENSORS[1:]))).config["vocab_size"] == n
    assert time.process_time() - start < 2
    e = refused(tmp_path, header(kvs)[:-3])
    assert e.field == "tokenizer.ggml.tokens" and "run past the end" in e.message


def test_tensors_on_the_same_bytes_are_refused_not_summed(tmp_path):
    # 1,000 tensors of 4096 x 4096 Q4_K at offset 0 once made a 9.5 MB file report 9.44 GB of weights
    e = refused(tmp_path, model(LLAMA, tuple((f"x{i}", (64, 64)) for i in range(1000)), offsets=[0] * 1000))
    # the first tensor's F32 data ends at 64 x 64 x 4 = 16,384 bytes: where llama.cpp looks for the second
    assert e.field == "tensors.x1" and "offset 0; expected 16,384" in e.message


def test_a_gap_before_a_tensor_is_refused_as_llama_cpp_does(tmp_path):
    # llama.cpp (gguf.cpp) requires each tensor's data at the running size of those before it, padded to 32:
    # the embedding's 64 x 8 x 4 = 2,048 bytes, so 2,080 is a gap of one alignment
    e = refused(tmp_path, model(LLAMA, offsets=[0, 2_080, 2_336]))
    assert e.field == "tensors.blk.0.attn_norm.weight" and "offset 2,080; expected 2,048" in e.message


def test_a_row_its_blocks_do_not_divide_is_refused(tmp_path):
    e = refused(tmp_path, header(LLAMA, [tensor("token_embd.weight", (100, 64), kind=Q4_K)]))   # 256 values a block
    assert e.field == "tensors.token_embd.weight" and "rows of 100 values" in e.message


@pytest.mark.parametrize(("data", "field"), [
    (header(LLAMA), "tensor_count"),                                                 # a vocabulary-only file
    (model([*LLAMA, u32("llama.block_count", 80)]), "llama.block_count"),            # a key stated twice
    (model(LLAMA, (*TENSORS, TENSORS[1])), "tensors.blk.0.attn_norm.weight"),        # a tensor stated twice
    (model(without(b"vocab_size") + [u32("llama.vocab_size", 0)]), "llama.vocab_size"),
    (model(without(b"vocab_size")
           + [kv("tokenizer.ggml.tokens", ARRAY, struct.pack("<IQ3I", U32, 3, 1, 2, 3))]), "tokenizer.ggml.tokens"),
])
def test_a_model_file_that_is_not_one_model_is_refused(tmp_path, data, field):
    assert refused(tmp_path, data).field == field


def test_the_block_count_must_match_the_tensor_table(tmp_path):
    kvs = without(b"block_count") + [u32("llama.block_count", 80)]
    e = refused(tmp_path, model(kvs))
    # TENSORS holds blk.0 and blk.1: sizer would otherwise size 80 layers of a 2-layer file
    assert e.field == "llama.block_count" and e.message == ("80 blocks stated, but the tensor table holds tensors of "
                                                            "2 (blk.0 to blk.1)")


def test_the_vocabulary_must_match_the_token_embedding(tmp_path):
    kvs = without(b"vocab_size") + [u32("llama.vocab_size", 2000)]
    e = refused(tmp_path, model(kvs))
    # token_embd.weight is 64 x 8 = 512 values: 8 tokens, not 2,000
    assert e.field == "tensors.token_embd.weight" and "512 values" in e.message and "2,000" in e.message


def test_a_mapped_key_of_another_type_is_named_as_the_file_names_it(tmp_path):
    """Per-layer KV heads (an array) beside the attention tensors: the shape check multiplied the list (a TypeError
    formatting its message); the GGUF key is now checked as config.json's num_key_value_heads is, and named."""
    data = model([*LLAMA, kv("llama.attention.head_count_kv", ARRAY, struct.pack("<IQ2I", U32, 2, 2, 2))],
                 (*TENSORS, ("blk.0.attn_k.weight", (64, 32))))
    path = tmp_path / "m.gguf"
    path.write_bytes(data)
    with pytest.raises(InputError) as e:
        read_gguf(path)
    assert (e.value.field, e.value.message) == ("llama.attention.head_count_kv", "expected an integer, got [2, 2]")
