"""validation/safetensors.py: the one safetensors header reader sizer (a checkpoint's stored bytes) and the engine
(loading weights) share; every malformed header is one FieldError naming the file and the field."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from validation.errors import FieldError
from validation.safetensors import MAX_HEADER_BYTES, read_header

CORPUS = Path(__file__).resolve().parents[1] / "bad_inputs" / "checkpoint"


def write(path: Path, header: dict | bytes, data: bytes = b"") -> Path:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


def u8(start: int, end: int) -> dict:
    """A U8 tensor over [start, end): one byte an element."""
    return {"dtype": "U8", "shape": [end - start], "data_offsets": [start, end]}


def test_a_header_is_read_with_its_ranges(tmp_path):
    # two tensors: 2x3 F32 = 24 bytes at [0, 24), 4 U8 at [24, 28); the metadata entry is no tensor
    header = {"__metadata__": {"format": "pt"}, "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
              "b": {"dtype": "U8", "shape": [4], "data_offsets": [24, 28]}}
    read = read_header(write(tmp_path / "m.safetensors", header, bytes(28)))
    assert set(read.tensors) == {"a", "b"}
    assert read.ranges == {"a": (0, 24), "b": (24, 28)}
    assert read.tensor_bytes == 28
    assert read.data_start_bytes == 8 + len(json.dumps(header).encode())


def test_sub_byte_formats_are_read_by_their_bits(tmp_path):
    # tensor.rs Dtype::bitsize: 4 F4 elements pack into 2 bytes, 4 F6_E2M3 into 3, then 2 F8_E8M0 scales
    header = {"q": {"dtype": "F4", "shape": [2, 2], "data_offsets": [0, 2]},
              "r": {"dtype": "F6_E2M3", "shape": [4], "data_offsets": [2, 5]},
              "s": {"dtype": "F8_E8M0", "shape": [2], "data_offsets": [5, 7]}}
    assert read_header(write(tmp_path / "m.safetensors", header, bytes(7))).tensor_bytes == 7


@pytest.mark.parametrize(("header", "data", "field", "says"), [
    (b"[1]", b"", "header", "expected a JSON object of tensors"),
    (b"\xff\xfe", b"", "header", "not UTF-8 JSON"),
    (b'{"w": 1, "w": 2}', b"", "header", "duplicate key 'w'"),
    ({"w": {"data_offsets": [0, 9]}}, b"", "header.w.data_offsets", "within the file's 0 data bytes"),
    ({"w": {"data_offsets": [4, 2]}}, bytes(4), "header.w.data_offsets", "expected [start, end]"),
    ({"w": {"data_offsets": [0.0, 2]}}, bytes(4), "header.w.data_offsets", "expected [start, end]"),
    ({"w": []}, b"", "header.w.data_offsets", "got None"),
    ({"v": u8(0, 4), "w": u8(2, 6)}, bytes(6), "header.w.data_offsets", "overlaps v (starts at 2, before its end 4)"),
    # what the safetensors library refuses besides (safetensors/src/tensor.rs, Metadata::validate, read_metadata):
    # a gap between tensors, data past the last tensor, a dtype it does not name, a shape that is not the range
    ({"v": u8(0, 4), "w": u8(6, 8)}, bytes(8), "header.w.data_offsets",
     "starts at 6, where the tensors before it end at 4; expected the tensors' bytes laid end to end"),
    ({"v": u8(0, 4)}, bytes(6), "header", "its tensors end at byte 4 of the 6 data bytes the file holds"),
    ({"w": {"dtype": "F12", "shape": [2], "data_offsets": [0, 3]}}, bytes(3), "header.w.dtype",
     "expected one of the safetensors dtypes (BOOL, F4, F6_E2M3"),
    ({"w": {"shape": [2], "data_offsets": [0, 2]}}, bytes(2), "header.w.dtype", "got None"),
    ({"w": {"dtype": "F32", "shape": [2, -1], "data_offsets": [0, 8]}}, bytes(8), "header.w.shape",
     "expected a list of dimensions (integers from 0 to 2^64 - 1), got [2, -1]"),
    ({"w": {"dtype": "F32", "shape": "2x3", "data_offsets": [0, 24]}}, bytes(24), "header.w.shape",
     "expected a list of dimensions"),
    # 2 x 3 F32 is 24 bytes, not 20; three F4 elements are 12 bits, not whole bytes
    ({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}}, bytes(20), "header.w.shape",
     "[2, 3] of F32 is 24 bytes, but its data_offsets hold 20 bytes"),
    ({"w": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}, bytes(2), "header.w.shape",
     "[3] of F4 is 12 bits, not whole bytes"),
    # the library's usize element count: 100,000 dimensions of 10^11 overflow it at the second (the product of them
    # all, a million-digit integer, took minutes); __metadata__ is a map of strings to strings
    ({"w": {"dtype": "F32", "shape": [10**11] * 100_000, "data_offsets": [0, 4]}}, bytes(4), "header.w.shape",
     "holds 2^64 elements or more"),
    ({"w": u8(0, 4), "__metadata__": ["pt"]}, bytes(4), "header.__metadata__", "expected a mapping of strings"),
    ({"w": u8(0, 4), "__metadata__": {"format": {"pt": 1}}}, bytes(4), "header.__metadata__",
     "expected a mapping of strings"),
])
def test_a_malformed_header_is_one_error_naming_the_field(tmp_path, header, data, field, says):
    path = write(tmp_path / "m.safetensors", header, data)
    with pytest.raises(FieldError) as caught:
        read_header(path)
    assert (caught.value.file, caught.value.field) == (str(path), field)
    assert says in caught.value.message


def test_the_stated_length_is_checked_before_reading(tmp_path):
    # a 2-byte file, an 8-byte length past a 10-byte file, and a length above the bound in a file that holds it
    short = tmp_path / "short.safetensors"
    short.write_bytes(b"\x01\x00")
    with pytest.raises(FieldError, match="shorter than the 8-byte header length"):
        read_header(short)
    past = tmp_path / "past.safetensors"
    past.write_bytes(struct.pack("<Q", 10**12) + b"{}")
    with pytest.raises(FieldError, match="states a 1,000,000,000,000-byte header in a 10-byte file"):
        read_header(past)
    big = tmp_path / "big.safetensors"
    with big.open("wb") as f:                   # sparse: MAX_HEADER_BYTES + 1 stated and present, never read
        f.write(struct.pack("<Q", MAX_HEADER_BYTES + 1))
        f.truncate(8 + MAX_HEADER_BYTES + 1)
    with pytest.raises(FieldError, match=f"at most {MAX_HEADER_BYTES:,}"):
        read_header(big)


def test_only_a_regular_file_is_read(tmp_path):
    fifo = tmp_path / "m.safetensors"
    os.mkfifo(fifo)                             # opened without blocking, refused before any read
    with pytest.raises(FieldError, match="not a regular file"):
        read_header(fifo)


def test_the_caller_chooses_the_error_type(tmp_path):
    class Refused(FieldError):
        pass

    with pytest.raises(Refused):
        read_header(write(tmp_path / "m.safetensors", b"[1]"), Refused)


@pytest.mark.parametrize("case", sorted(p.name for p in CORPUS.glob("safetensors-*")))
def test_every_safetensors_file_of_the_bad_input_corpus_is_refused(case):
    with pytest.raises(FieldError) as caught:
        read_header(CORPUS / case / "model.safetensors")
    assert caught.value.file == str(CORPUS / case / "model.safetensors")
