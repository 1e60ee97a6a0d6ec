"""GGUF files written byte by byte from the layout (magic, version, tensor and key counts, metadata, tensor
table, padding, data), for tests/sizer/inputs/test_fuzz_gguf.py and the malformed-file corpus
(tests/bad_inputs/gguf/). Run as a script, it writes the corpus files listed in CASES:

    PYTHONPATH=$PWD python3 tests/sizer/inputs/ggufhelp.py
"""

from __future__ import annotations

import math
import struct
from pathlib import Path

U16, U32, I32, F32, BOOL, STRING, ARRAY, U64 = 2, 4, 5, 6, 7, 8, 9, 10      # GGUF value types
Q4_K = 12                               # GGML type id: blocks of 256 values in 144 bytes
ALIGNMENT = 32                          # GGUF's default general.alignment


def s(text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(data)) + data


def kv(key: str, kind: int, payload: bytes) -> bytes:
    return s(key) + struct.pack("<I", kind) + payload


def u32(key: str, value: int) -> bytes:
    return kv(key, U32, struct.pack("<I", value))


def u16(key: str, value: int) -> bytes:
    return kv(key, U16, struct.pack("<H", value))


def header(kvs: list[bytes], tensors: list[bytes] = (), tensor_count: int | None = None,
           kv_count: int | None = None, version: int = 3) -> bytes:
    return (b"GGUF" + struct.pack("<IQQ", version, len(tensors) if tensor_count is None else tensor_count,
                                  len(kvs) if kv_count is None else kv_count) + b"".join(kvs) + b"".join(tensors))


def tensor(name: str, dims: tuple[int, ...], kind: int = 0, offset: int = 0) -> bytes:
    return s(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, kind, offset)


# A 2-block Llama of embedding length 64 and 8 tokens
LLAMA = [kv("general.architecture", STRING, s("llama")), u32("llama.block_count", 2),
         u32("llama.embedding_length", 64), u32("llama.attention.head_count", 4), u32("llama.context_length", 4096),
         u32("llama.vocab_size", 8), u32("general.file_type", 0)]
# Its tensors (name, dims), F32: the token embedding (64 x 8) and one norm per block
TENSORS = (("token_embd.weight", (64, 8)), ("blk.0.attn_norm.weight", (64,)), ("blk.1.attn_norm.weight", (64,)))


def model(kvs: list[bytes], tensors=TENSORS, offsets: list[int] | None = None) -> bytes:
    """A file of `kvs` and F32 `tensors`, each one's data (zeros) right after the one before it, padded to the
    alignment, as llama.cpp lays them out (or at `offsets`)."""
    table, at, ends = [], 0, [0]
    for i, (name, dims) in enumerate(tensors):
        offset = at if offsets is None else offsets[i]
        table.append(tensor(name, dims, offset=offset))
        at = offset + -(-math.prod(dims) * 4 // ALIGNMENT) * ALIGNMENT
        ends.append(at)
    body = header(kvs, table)
    return body + b"\0" * (-len(body) % ALIGNMENT) + b"\0" * max(ends)


def valid(extra: list[bytes] = (), hidden: int = 64) -> bytes:
    return model([*LLAMA[:2], u32("llama.embedding_length", hidden), *LLAMA[3:], *extra])


def without(key: bytes) -> list[bytes]:
    """LLAMA without the key whose name holds `key`."""
    return [k for k in LLAMA if key not in k]


def _split(shard: int, count: int = 2, tensors: int = 3) -> list[bytes]:
    return [u16("split.no", shard), u16("split.count", count),
            kv("split.tensors.count", I32, struct.pack("<i", tensors))]


# Corpus files: name -> bytes (tests/bad_inputs/gguf/README.md says what each is)
CASES = {
    "no-tensors.gguf": header(LLAMA),
    "tensors-at-offset-0.gguf": model(LLAMA, offsets=[0, 0, 0]),
    "tensor-twice.gguf": model(LLAMA, (*TENSORS, TENSORS[1])),
    "key-twice.gguf": model([*LLAMA, u32("llama.block_count", 80)]),
    "row-not-whole-blocks.gguf": header(LLAMA, [tensor("token_embd.weight", (100, 64), kind=Q4_K)]),
    "block-count-80-tensors-2.gguf": model([*without(b"block_count"), u32("llama.block_count", 80)]),
    "vocab-size-zero.gguf": model([*without(b"vocab_size"), u32("llama.vocab_size", 0)]),
    "vocab-size-not-embedding.gguf": model([*without(b"vocab_size"), u32("llama.vocab_size", 2000)]),
    "tokens-not-strings.gguf": model([*without(b"vocab_size"),
                                      kv("tokenizer.ggml.tokens", ARRAY, struct.pack("<IQ3I", U32, 3, 1, 2, 3))]),
    "split-count-2-unnamed.gguf": model([*LLAMA, *_split(0)]),
    "split-missing-00001-of-00002.gguf": model([*LLAMA, *_split(0)]),
    "split-later-00002-of-00002.gguf": model([*LLAMA, *_split(1)]),
    "split-count-u32-max-00001-of-4294967295.gguf": model([*LLAMA, u16("split.no", 0), u32("split.count", 2**32 - 1)]),
    "split-count-65535-00001-of-65535.gguf": model([*LLAMA, *_split(0, 65535)]),
    "tensor-unknown.gguf": model(LLAMA, (*TENSORS, ("junk.weight", (64, 1000)))),
    "tensor-name-empty.gguf": model(LLAMA, (*TENSORS, ("", (64,)))),
    "output-other-vocabulary.gguf": model(LLAMA, (*TENSORS, ("output.weight", (64, 9)))),
    "output-transposed.gguf": model(LLAMA, (*TENSORS, ("output.weight", (8, 64)))),
    "norm-other-width.gguf": model(LLAMA, (*TENSORS[:2], ("blk.1.attn_norm.weight", (32, 2)))),
    "block-count-2e40.gguf": model([*without(b"block_count"), kv("llama.block_count", U64, struct.pack("<Q", 2**40))]),
    "head-count-kv-array.gguf": model([*LLAMA, kv("llama.attention.head_count_kv", ARRAY, struct.pack("<IQ2I", U32, 2,
                                                                                                     4, 4))]),
    "key-length-float.gguf": model([*LLAMA, kv("llama.attention.key_length", F32, struct.pack("<f", 16.0))]),
    "file-type-text.gguf": model([*without(b"file_type"), kv("general.file_type", STRING, s("Q4_K_M"))]),
    "alignment-true.gguf": model([*LLAMA, kv("general.alignment", BOOL, b"\x01")]),
}


if __name__ == "__main__":
    folder = Path(__file__).resolve().parents[2] / "bad_inputs" / "gguf"
    for name, data in CASES.items():
        (folder / name).write_bytes(data)
        print(f"wrote {folder / name} ({len(data):,} bytes)")
