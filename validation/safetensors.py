"""A safetensors file's header, read under bounds: the one reader sizer (a checkpoint's stored bytes) and the
engine (loading real weights) share.

The format: an 8-byte little-endian header length, a JSON header mapping each tensor's name to its dtype, shape
and byte range within the data that follows (`__metadata__` aside). Only a regular file is opened (a FIFO or a
device could block); the stated length is checked against the file's size and `MAX_HEADER_BYTES` before it is
read; the JSON goes through `validation.safe_load` (depth bound, duplicate keys refused); every byte range must
lie within the data and no two may overlap. Every refusal is `error(file, field, message)`.
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
    tensors = {name: entry for name, entry in header.items() if name != "__metadata__"}
    ranges = {}
    for name, entry in tensors.items():
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)
                and 0 <= offsets[0] <= offsets[1] <= data_bytes):
            raise error(file, f"header.{excerpt(name, quote=False)}.data_offsets",
                        f"expected [start, end] within the file's {data_bytes:,} data bytes, got {excerpt(offsets)}")
        ranges[name] = (offsets[0], offsets[1])
    ordered = sorted((start, end, name) for name, (start, end) in ranges.items())
    for (_, end, before), (start, _, name) in zip(ordered, ordered[1:], strict=False):
        if start < end:
            raise error(file, f"header.{excerpt(name, quote=False)}.data_offsets",
                        f"overlaps {excerpt(before, quote=False)} (starts at {start:,}, before its end "
                        f"{end:,}); expected each tensor's bytes once")
    return SafetensorsHeader(tensors, ranges, length)
