"""A safetensors file's header, read under bounds: the one reader sizer (a checkpoint's stored bytes) and the
engine (loading real weights) share.

The format: an 8-byte little-endian header length, a JSON header mapping each tensor's name to its dtype, shape
and byte range within the data that follows (`__metadata__` aside). Only a regular file is opened (a FIFO or a
device could block); the stated length is checked against the file's size and `MAX_HEADER_BYTES` before it is
read; the JSON goes through `validation.safe_load` (depth bound, duplicate keys refused). The rest is refused as
the safetensors library itself refuses it (huggingface/safetensors, safetensors/src/tensor.rs, `Metadata::validate`
and `read_metadata`), so a file that no engine could load is not priced either: a dtype it names, a shape whose
elements x the dtype's bits are whole bytes and the range's length, the ranges laid end to end from the data's
start (none overlapping, none apart) and the last ending at the file's end. Every refusal is
`error(file, field, message)`.
"""

from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from validation.errors import FieldError, excerpt
from validation.safe_load import loads_json

# safetensors refuses headers above 100 MB; a real one holds about 150 bytes per tensor, so a
# checkpoint of 100,000 tensors has a header of ~15 MB.
MAX_HEADER_BYTES = 100_000_000

# the library counts elements in a usize (64 bits): a shape whose product overflows it is refused
MAX_ELEMENTS = 2**64

# bits an element of each dtype the safetensors library names (tensor.rs `Dtype::bitsize`, huggingface/safetensors
# main, 2026-05-12): F4 and the F6 formats pack below a byte
DTYPE_BITS = {"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8,
              "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
              "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64}


@dataclass(frozen=True)
class SafetensorsHeader:
    """A file's tensors (name -> its header entry, `__metadata__` left out), each with a checked byte range."""

    tensors: dict[str, dict[str, Any]]
    ranges: dict[str, tuple[int, int]]     # name -> (start, end) within the data, bytes
    header_bytes: int                      # the JSON header's length

    @property
    def data_start_bytes(self) -> int:
        """Where the data begins in the file: after the 8-byte length and the header."""
        return 8 + self.header_bytes

    @property
    def tensor_bytes(self) -> int:
        return sum(end - start for start, end in self.ranges.values())


def read_header(path: str | Path, error: type[FieldError] = FieldError) -> SafetensorsHeader:
    """The checked header of a .safetensors file; anything else is `error` naming the file and the field."""
    file = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise error(file, None, "not a regular file")
            head = f.read(8)
            if len(head) < 8:
                raise error(file, "header", "shorter than the 8-byte header length of a safetensors file")
            (length,) = struct.unpack("<Q", head)
            if length > min(MAX_HEADER_BYTES, info.st_size - 8):
                raise error(file, "header", f"states a {length:,}-byte header in a {info.st_size:,}-byte file "
                                            f"(at most {MAX_HEADER_BYTES:,}): not a safetensors file")
            raw = f.read(length)
    except OSError as exc:
        raise error(file, None, f"cannot read: {exc.strerror or exc}") from None
    try:
        header = loads_json(raw.decode("utf-8"), file, "header")
    except UnicodeDecodeError:
        raise error(file, "header", "not UTF-8 JSON: not a safetensors file") from None
    if not isinstance(header, dict):
        raise error(file, "header", "expected a JSON object of tensors")
    data_bytes = info.st_size - 8 - length
    metadata = header.get("__metadata__", {})
    if not (isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())):
        raise error(file, "header.__metadata__", f"expected a mapping of strings to strings, as the safetensors "
                                                 f"library reads it, got {excerpt(metadata)}")
    tensors = {name: entry for name, entry in header.items() if name != "__metadata__"}
    ranges = {name: checked_range(file, name, entry, data_bytes, error) for name, entry in tensors.items()}
    ordered = sorted((start, end, name) for name, (start, end) in ranges.items())
    laid_to, last = 0, None                             # where the ranges so far end, and whose ends there
    for start, end, name in ordered:
        field = f"header.{excerpt(name, quote=False)}.data_offsets"
        if start < laid_to:
            raise error(file, field, f"overlaps {excerpt(last, quote=False)} (starts at {start:,}, before its end "
                                     f"{laid_to:,}); expected each tensor's bytes once")
        if start > laid_to:
            raise error(file, field, f"starts at {start:,}, where the tensors before it end at {laid_to:,}; expected "
                                     "the tensors' bytes laid end to end, as the safetensors library reads them")
        laid_to, last = end, name
    if laid_to != data_bytes:
        raise error(file, "header", f"its tensors end at byte {laid_to:,} of the {data_bytes:,} data bytes the file "
                                    "holds; expected them to fill the file, as the safetensors library reads it")
    return SafetensorsHeader(tensors, ranges, length)


def checked_range(file: str, name: str, entry: Any, data_bytes: int,
                  error: type[FieldError]) -> tuple[int, int]:
    """One tensor's (start, end) within the data, its dtype and shape agreeing with the range's length."""
    field = f"header.{excerpt(name, quote=False)}"
    offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)
            and 0 <= offsets[0] <= offsets[1] <= data_bytes):
        raise error(file, f"{field}.data_offsets",
                    f"expected [start, end] within the file's {data_bytes:,} data bytes, got {excerpt(offsets)}")
    dtype = entry.get("dtype")
    if not (isinstance(dtype, str) and dtype in DTYPE_BITS):
        raise error(file, f"{field}.dtype",
                    f"expected one of the safetensors dtypes ({', '.join(DTYPE_BITS)}), got {excerpt(dtype)}")
    shape = entry.get("shape")
    if not (isinstance(shape, list) and all(type(d) is int and 0 <= d < MAX_ELEMENTS for d in shape)):
        raise error(file, f"{field}.shape", f"expected a list of dimensions (integers from 0 to 2^64 - 1), got "
                                            f"{excerpt(shape)}")
    elements = 1
    for d in shape:         # as the library multiplies them, refusing an overflow (and never a product of huge ints)
        elements *= d
        if elements >= MAX_ELEMENTS:
            raise error(file, f"{field}.shape", f"{excerpt(shape)} holds 2^64 elements or more: past what the "
                                                "safetensors library counts")
    bits = elements * DTYPE_BITS[dtype]
    if bits != 8 * (offsets[1] - offsets[0]):
        size = f"{bits // 8:,} bytes" if bits % 8 == 0 else f"{bits:,} bits, not whole bytes"
        raise error(file, f"{field}.shape", f"{excerpt(shape)} of {dtype} is {size}, but its data_offsets hold "
                                            f"{offsets[1] - offsets[0]:,} bytes")
    return offsets[0], offsets[1]
