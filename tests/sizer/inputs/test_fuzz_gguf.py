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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sizer.errors import InputError
from sizer.inputs.gguf_file import MAX_ARRAY_STRINGS, MAX_TENSORS, read_gguf

U32, F32, STRING, ARRAY, U64 = 4, 6, 8, 9, 10


def s(text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(data)) + data


def kv(key: str, kind: int, payload: bytes) -> bytes:
    return s(key) + struct.pack("<I", kind) + payload


def u32(key: str, value: int) -> bytes:
    return kv(key, U32, struct.pack("<I", value))


def header(kvs: list[bytes], tensors: list[bytes] = (), tensor_count: int | None = None,
           kv_count: int | None = None, version: int = 3) -> bytes:
    return (b"GGUF" + struct.pack("<IQQ", version, len(tensors) if tensor_count is None else tensor_count,
                                  len(kvs) if kv_count is None else kv_count) + b"".join(kvs) + b"".join(tensors))


def tensor(name: str, dims: tuple[int, ...], kind: int = 0, offset: int = 0) -> bytes:
    return s(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, kind, offset)


LLAMA = [kv("general.architecture", STRING, s("llama")), u32("llama.block_count", 2),
         u32("llama.embedding_length", 64), u32("llama.attention.head_count", 4), u32("llama.context_length", 4096),
         u32("llama.vocab_size", 100), u32("general.file_type", 0)]


def valid(extra: list[bytes] = (), hidden: int = 64) -> bytes:
    kvs = [*LLAMA[:2], u32("llama.embedding_length", hidden), *LLAMA[3:], *extra]
    body = header(kvs, [tensor("token_embd.weight", (64, 100))])
    pad = -len(body) % 32
    return body + b"\0" * pad + b"\0" * (64 * 100 * 4)


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
    assert (g.architecture, g.config["hidden_size"], g.config["vocab_size"], g.tensor_bytes) == \
        ("llama", 64, 100, 64 * 100 * 4)


def test_a_ten_million_element_array_in_a_small_file_is_refused_without_walking_it(tmp_path):
    big = kv("tokenizer.ggml.scores", ARRAY, struct.pack("<IQ", F32, 10_000_000))
    e = refused(tmp_path, header([*LLAMA, big]))
    assert e.field == "tokenizer.ggml.scores" and "10,000,000 entries" in e.message


def test_a_long_array_of_numbers_is_skipped_by_its_length(tmp_path):
    scores = kv("tokenizer.ggml.scores", ARRAY, struct.pack("<IQ", F32, 2_000_000) + b"\0" * 8_000_000)
    start = time.process_time()
    g = read_gguf(write(tmp_path, valid([scores])))
    assert g.config["vocab_size"] == 100 and time.process_time() - start < 2


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
    except InputError as e:
        assert "\n" not in str(e)
    assert time.process_time() - start < 2



def test_a_long_tokenizer_is_counted_by_its_lengths(tmp_path):
    n = 300_000
    tokens = kv("tokenizer.ggml.tokens", ARRAY, struct.pack("<IQ", STRING, n) + b"".join(s(f"t{i}") for i in range(n)))
    kvs = [k for k in LLAMA if b"vocab_size" not in k] + [tokens]
    start = time.process_time()
    assert read_gguf(write(tmp_path, header(kvs))).config["vocab_size"] == n
    assert time.process_time() - start < 2
    e = refused(tmp_path, header(kvs)[:-3])
    assert e.field == "tokenizer.ggml.tokens" and "run past the end" in e.message
