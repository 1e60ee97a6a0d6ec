"""Kernel tables: measured operator latencies of one GPU in one serving engine, keyed by shape.

One folder per GPU and engine version, `<gpu>-<engine>-<version>/` (bundled ones under
`hardware_profiles/kernels/`): `tables.yaml` (`KernelTablesHeader`: the GPU, the engine and its
version, where the numbers come from) and gzip CSV tables beside it, one row per key with its grid
column (the last before the latency) and latencies in microseconds as space-separated lists:

  gemm.csv.gz                  dtype, n, k, m, latency_us       (x[m, k] @ W[n, k]^T: m tokens, n outputs, k inputs)
  context_attention.csv.gz     kv_dtype, heads, kv_heads, head_dim, batch, tokens, latency_us
                               (batch sequences of `tokens` new tokens each, nothing cached: causal prefill)
  generation_attention.csv.gz  kv_dtype, heads, kv_heads, head_dim, batch, context_tokens, latency_us
                               (batch sequences decoding one token each on `context_tokens` of KV)
  allreduce.csv.gz             gpus, message_bytes, latency_us  (one all-reduce of a bf16 message)
  moe.csv.gz                   dtype, hidden, inter, topk, experts, tp, ep, tokens, latency_us
                               (one MoE layer's routed experts for `tokens` tokens, the whole EP group's,
                               routing balanced; each expert's width split over tp, the experts over ep;
                               dtype the experts' format: bfloat16, fp8, fp8_block, w4a16_mxfp4, nvfp4)
  moe_skewed.csv.gz            routing, the same key, tokens, latency_us (the same layer, each expert's width split
                               over tp (ep 1), with the tokens routed by a power law: routing power_law_1.01 or
                               power_law_1.2, the skew aiconfigurator-core routes a model's family with)
  mla_context.csv.gz           dtype, kv_dtype, hidden, q_lora_rank, kv_lora_rank, qk_nope_head_dim,
                               qk_rope_head_dim, v_head_dim, heads, batch, tokens, latency_us
                               (one whole multi-head latent attention block, vLLM's DeepseekV2MLAAttention on one
                               GPU's `heads`: the down-projections and their norms, q_b/kv_b, rotary, the causal
                               prefill of batch sequences of `tokens` new tokens each, o_proj; no all-reduce;
                               dtype: the linear layers' (bfloat16, fp8_block), kv_dtype the cache's)
  mla_generation.csv.gz        the same key, context_tokens, latency_us (the block for batch sequences decoding one
                               token each on `context_tokens` of KV, the new token's included: projections, the
                               absorbed kv_b BMMs, attention, o_proj)
  mla_kernel_context.csv.gz    kv_dtype, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, heads, batch,
                               tokens, latency_us
                               (the attention kernel of a multi-head latent attention layer alone, on one GPU's
                               `heads`: the causal prefill of batch sequences of `tokens` new tokens each; its
                               projections are GEMMs. SGLang's tables, where no module table is measured)
  mla_kernel_generation.csv.gz the same key, context_tokens, latency_us (the absorbed decode over the latent and rope
                               key of batch sequences decoding one token each on `context_tokens` of KV, the new
                               token's included)
  gdn_context.csv.gz           k_heads, k_head_dim, v_heads, v_head_dim, conv_kernel, batch, tokens, latency_us
                               (gated delta net's kernels of one layer: the causal convolution and the chunked
                               delta-rule scan over batch sequences of `tokens` new tokens each; not its
                               projections, which are GEMMs)
  gdn_generation.csv.gz        k_heads, k_head_dim, v_heads, v_head_dim, conv_kernel, batch, latency_us
                               (the convolution-state update and the recurrent delta-rule step of `batch`
                               sequences decoding one token each: independent of their context)

Heads are per GPU (after the tensor-parallel split). A model never needs these tables to be
planned: without them (or for a shape they lack) steps are priced by the roofline. The tables
are plain gzip CSV, read with the standard library (no pyarrow, no aiconfigurator).
"""

from __future__ import annotations

import gzip
import os
import stat
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from hardware_profiles import PROFILES_DIR
from sizer.timing.profile_parts import Limits, Overhead
from validation import schema
from validation.errors import FieldError, excerpt
from validation.input_files import file_kind
from validation.safe_yaml import load_yaml

KERNELS_DIR = PROFILES_DIR / "kernels"
HEADER_FILE = "tables.yaml"
SCHEMA_VERSION = 1
MAX_HEADER_BYTES = 1 << 16
MAX_TABLE_BYTES = 64 << 20           # decompressed; the bundled tables are a few MB at most
# A table's latency: at most 10^9 us (1,000 s; the bundled tables' longest is 4 s), so that sums over layers and
# steps stay finite (10^298 us passed as finite and priced a request at 10^298 s)
MAX_LATENCY_US = 1e9
# ... and at least 10^-3 us (1 ns): a kernel reads its inputs from device memory, one access of which takes hundreds
# of nanoseconds on any GPU or CPU, and its launch microseconds (the bundled tables' shortest is 1.7 us, a CPU's
# calibrated 5.5 us); 1 ns, a few clock cycles, is below any of them by two orders of magnitude. A latency under it
# is a unit error or garbage (1e-300 us priced a step at its table-free terms alone)
MIN_LATENCY_US = 1e-3
LATENCY_BOUNDS = f"latencies of at least {MIN_LATENCY_US:g} and at most {MAX_LATENCY_US:g} us"
# Bandwidths and rates as hardware profiles bound them (sizer/inputs/hardware.py): from 100 MB/s to 1 PB/s, and
# from 10^9 to 10^18 FLOP/s; a rate of 1e-300 overflowed a step's time to infinity (an OverflowError, not a
# refusal). An element-wise kernel's fixed latency at most 1 s (aiconfigurator-core's is 3 us, a CPU's 44 us; 1e300
# priced a request at 1e304 s).
MIN_BYTES_PER_S, MAX_BYTES_PER_S = 1e8, 1e15
MIN_FLOPS_PER_S, MAX_FLOPS_PER_S = 1e9, 1e18
MAX_ELEMENTWISE_LATENCY_S = 1.0
TP_SIZES = (1, 2, 4, 8)              # the tensor-parallel splits tables cover: a shard is one GPU's share
# the engine of the tables `sizer calibrate` measures in sizer's own engine on the user's device, which price any
# serving engine (sizer/sizing/resolve.py checked_kernel_tables)
CALIBRATED_ENGINE = "sizer-engine"

# the shape of a multi-head latent attention block (LatentAttention's fields, and the model's hidden size)
MLA_DIMS = ("hidden", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
# the shape of an MLA layer's attention kernel alone (its projections are GEMMs)
MLA_KERNEL_DIMS = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
# a gated delta net layer's kernel shape per GPU (GatedDeltaNet's fields, heads after the TP split)
GDN_DIMS = ("k_heads", "k_head_dim", "v_heads", "v_head_dim", "conv_kernel")
# table file -> (categorical key columns, numeric grid columns); every table ends in latency_us
TABLES = {
    "gemm": (("dtype",), ("n", "k", "m")),
    "context_attention": (("kv_dtype",), ("heads", "kv_heads", "head_dim", "batch", "tokens")),
    "generation_attention": (("kv_dtype",), ("heads", "kv_heads", "head_dim", "batch", "context_tokens")),
    "allreduce": ((), ("gpus", "message_bytes")),
    "moe": (("dtype",), ("hidden", "inter", "topk", "experts", "tp", "ep", "tokens")),
    "moe_skewed": (("routing", "dtype"), ("hidden", "inter", "topk", "experts", "tp", "ep", "tokens")),
    "mla_context": (("dtype", "kv_dtype"), (*MLA_DIMS, "heads", "batch", "tokens")),
    "mla_generation": (("dtype", "kv_dtype"), (*MLA_DIMS, "heads", "batch", "context_tokens")),
    "mla_kernel_context": (("kv_dtype",), (*MLA_KERNEL_DIMS, "heads", "batch", "tokens")),
    "mla_kernel_generation": (("kv_dtype",), (*MLA_KERNEL_DIMS, "heads", "batch", "context_tokens")),
    "gdn_context": ((), (*GDN_DIMS, "batch", "tokens")),
    "gdn_generation": ((), (*GDN_DIMS, "batch")),
}


@dataclass(frozen=True)
class Provenance:
    source: str                      # "aiconfigurator-core" or "sizer calibrate"
    source_version: str              # the package's version, or sizer's
    licence: str
    files: tuple[str, ...]           # the source files converted (paths inside the package)
    converted: str                   # date the tables were written (ISO)


@dataclass(frozen=True)
class ElementwiseCost:
    """Element-wise kernels (residual add + norm, activation) are priced, not tabled: bytes moved over the
    memory bandwidth x a fraction, plus a fixed latency each (aiconfigurator-core's model and figures)."""
    memory_bandwidth_bytes_per_s: float = schema.field(ge=MIN_BYTES_PER_S, le=MAX_BYTES_PER_S)
    bandwidth_fraction: float = schema.field(gt=0, le=1)
    latency_s: float = schema.field(ge=0, le=MAX_ELEMENTWISE_LATENCY_S)


@dataclass(frozen=True)
class BundledEngine:
    """How sizer's bundled engine ran when `sizer calibrate` measured a device's tables (imported tables have
    none): what `sizer validate --kernel-tables` needs to replay the engine, and the device's measured ceilings."""
    kernels: str                     # 'triton' or 'torch'
    dtype: str                       # the torch dtype every kernel ran in ('bfloat16' on a GPU, 'float32' on a CPU)
    matmul_flops_per_s: float = schema.field(ge=MIN_FLOPS_PER_S, le=MAX_FLOPS_PER_S)  # a square matrix product's rate
    copy_bytes_per_s: float = schema.field(ge=MIN_BYTES_PER_S, le=MAX_BYTES_PER_S)   # a large copy's bytes read +
                                                                                       # written per second
    limits: Limits                   # the largest step in tokens and sequences, and the longest context, measured
    fitted_on: str                   # the model whose whole engine steps `overhead` was fitted to
    fitted_layers: int = schema.field(ge=1)            # its decoder layers (the forward's fixed part is per layer)
    overhead: Overhead               # each step beyond the tables: fixed + per sequence, and the kernels' factor
    threads: int | None = schema.field(None, ge=1)     # CPU threads the engine ran on (None on a GPU)
    # the tensor-parallel sizes whose shards were timed (`sizer calibrate --tp-sizes`; tables written before the
    # flag hold all of TP_SIZES): a deployment at another size finds its shapes priced by the roofline, named
    tp_sizes: tuple[int, ...] = schema.field(TP_SIZES, ge=1)


@dataclass(frozen=True)
class KernelTablesHeader:
    schema_version: int = schema.field(ge=1, le=SCHEMA_VERSION)
    gpu: str                         # sizer's hardware profile id ("h100-sxm")
    device_name: str                 # as the measuring machine reported it
    engine: str                      # "vllm", ..., or CALIBRATED_ENGINE
    engine_version: str              # the engine the GEMMs and attention were measured in
    elementwise: ElementwiseCost
    provenance: Provenance
    bundled_engine: BundledEngine | None = None

    @property
    def description(self) -> str:
        p = self.provenance
        return (f"kernel tables measured on {self.device_name} in {self.engine} {self.engine_version} "
                f"({p.source} {p.source_version})")


class Table(Mapping):
    """One table's rows, {key: {grid value: seconds}}, as `_read_table` read them. A folder read whole has
    every row's numbers read and checked; otherwise a row's numbers are read (and checked) on its first lookup:
    a plan looks up 28 of the H100 tables' 3,400 rows, and reading all their numbers was a sixth of its CPU
    time. Every row's key is read with the file either way (a malformed or repeated key is refused
    there), so iterating, `in` and `len` read no numbers."""

    def __init__(self, file: str, name: str, rows: dict[tuple, dict[int, float] | tuple[int, str]]):
        self.file, self.name = file, name
        self._rows = rows           # key -> its {grid value: seconds}, or (line number, text) not read yet

    def __getitem__(self, key: tuple) -> dict[int, float]:
        row = self._rows[key]
        if isinstance(row, tuple):
            row = self._rows[key] = _row_values(self.file, self.name, *row)
        return row

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    def __iter__(self) -> Iterator[tuple]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


@dataclass(frozen=True)
class KernelTables:
    path: Path
    header: KernelTablesHeader
    # each: key tuple (categorical values, then the numeric grid columns but the last) -> {last column: seconds}
    gemm: Mapping[tuple, dict[int, float]]
    context_attention: Mapping[tuple, dict[int, float]]
    generation_attention: Mapping[tuple, dict[int, float]]
    allreduce: Mapping[tuple, dict[int, float]]
    moe: Mapping[tuple, dict[int, float]] = field(default_factory=dict)
    moe_skewed: Mapping[tuple, dict[int, float]] = field(default_factory=dict)
    mla_context: Mapping[tuple, dict[int, float]] = field(default_factory=dict)
    mla_generation: Mapping[tuple, dict[int, float]] = field(default_factory=dict)
    mla_kernel_context: Mapping[tuple, dict[int, float]] = field(default_factory=dict)
    mla_kernel_generation: Mapping[tuple, dict[int, float]] = field(default_factory=dict)
    gdn_context: Mapping[tuple, dict[int, float]] = field(default_factory=dict)
    gdn_generation: Mapping[tuple, dict[int, float]] = field(default_factory=dict)


def _columns(name: str) -> str:
    categorical, numeric = TABLES[name]
    return ",".join((*categorical, *numeric, "latency_us"))


def _bad_row(file: str, name: str, line: int, text: str) -> FieldError:
    return FieldError(file, f"line {line}", f"expected {_columns(name)} (the last two: lists of the same length; "
                                            f"sizes >= 1, {LATENCY_BOUNDS}), got {excerpt(text)}")


def _row_key(file: str, name: str, line: int, text: str) -> tuple:
    """A row's key: its categorical values, then its numeric ones but the grid column's."""
    categorical, numeric = TABLES[name]
    try:
        prefix, _, _ = text.rsplit(",", 2)
        parts = prefix.split(",")
        key = (*parts[:len(categorical)], *map(int, parts[len(categorical):]))
        if len(parts) != len(categorical) + len(numeric) - 1 or min(key[len(categorical):], default=1) < 1:
            raise ValueError(text)
    except ValueError:
        raise _bad_row(file, name, line, text) from None
    return key


def _row_values(file: str, name: str, line: int, text: str) -> dict[int, float]:
    """A row's {grid value: seconds}: the grid column and the latencies are space-separated lists of the same
    length."""
    _, xs, ys = text.rsplit(",", 2)         # three parts: its key was read
    try:
        grid, latency = list(map(int, xs.split())), list(map(float, ys.split()))
        if not grid or len(grid) != len(latency) or min(grid) < 1:
            raise ValueError(text)
    except ValueError:
        raise _bad_row(file, name, line, text) from None
    # NaN fails both comparisons
    bad = next((i for i, t in enumerate(latency) if not MIN_LATENCY_US <= t <= MAX_LATENCY_US), None)
    if bad is not None:
        raise FieldError(file, f"line {line}", f"latency_us: expected {LATENCY_BOUNDS}, got "
                                               f"{excerpt(ys.split()[bad])} at {TABLES[name][1][-1]} {grid[bad]}")
    if len(set(grid)) != len(grid):
        raise FieldError(file, f"line {line}", f"expected each {TABLES[name][1][-1]} once, got a repeated one in "
                                               f"{excerpt(xs)}")
    return {x: t * 1e-6 for x, t in zip(grid, latency, strict=True)}


def _read_table(path: Path, name: str, whole: bool = True) -> Table:
    """{key columns: {grid value: seconds}}, one row per key (a few thousand rows, read in milliseconds); with
    `whole`, every row's numbers read and checked now, in the file's order, else each on its first lookup."""
    file = str(path)
    raw = _decompressed(path)
    try:
        lines = raw.decode("utf-8").splitlines()
    except UnicodeDecodeError as e:       # a key of replaced characters would match no shape, silently
        line = raw.count(b"\n", 0, e.start) + 1
        raise FieldError(file, f"line {line}", "not UTF-8 text; expected a CSV table") from None
    columns = _columns(name)
    if not lines or lines[0] != columns:
        raise FieldError(file, "header", f"expected the columns {columns}, got {excerpt(lines[0] if lines else '')}")
    if len(lines) < 2:
        raise FieldError(file, None, "expected at least one row after the header (leave an unmeasured table out)")
    rows: dict[tuple, dict[int, float] | tuple[int, str]] = {}
    for line, text in enumerate(lines[1:], 2):
        key = _row_key(file, name, line, text)
        row = _row_values(file, name, line, text) if whole else (line, text)
        if key in rows:
            raise FieldError(file, f"line {line}", f"repeats the key {excerpt(','.join(map(str, key)))} of an "
                                                   "earlier row; expected one row per key")
        rows[key] = row
    return Table(file, name, rows)


def _decompressed(path: Path) -> bytes:
    """A regular gzip file's content, decompressed as a stream and refused past MAX_TABLE_BYTES (a small file that
    expands to gigabytes stops there)."""
    file = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise FieldError(file, None, f"{file_kind(info.st_mode)}, not a regular file")
        with os.fdopen(fd, "rb") as f:
            with gzip.GzipFile(fileobj=f) as stream:
                raw = stream.read(MAX_TABLE_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:          # gzip.BadGzipFile is an OSError
        raise FieldError(file, None, f"expected a gzip CSV table ({exc})") from None
    if len(raw) > MAX_TABLE_BYTES:
        raise FieldError(file, None, f"expected at most {MAX_TABLE_BYTES:,} bytes decompressed")
    return raw


def read_header(folder: Path) -> KernelTablesHeader:
    header_file = folder / HEADER_FILE
    data = load_yaml(header_file, MAX_HEADER_BYTES, "kernel tables header")
    header = schema.build(KernelTablesHeader, data, "", str(header_file))
    engine = header.bundled_engine
    if engine is not None and 1 not in engine.tp_sizes:     # the overhead was fitted on TP-1 steps priced from them
        raise FieldError(str(header_file), "bundled_engine.tp_sizes",
                         f"expected a list holding 1, got {excerpt(list(engine.tp_sizes))}")
    return header


def load_kernel_tables(folder: Path, whole: bool = True) -> KernelTables:
    """A folder's header and tables; `whole`: every row's numbers read and checked now (a folder a user gives),
    else each row's on its first lookup (the bundled folders, each checked whole by tests/sizer/timing/
    test_kernel_tables.py)."""
    header = read_header(folder)
    if whole:
        _refuse_unread_tables(folder)
    tables = {name: _read_table(folder / f"{name}.csv.gz", name, whole)
              if os.path.lexists(folder / f"{name}.csv.gz") else {} for name in TABLES}
    return KernelTables(folder, header, **tables)


# A file of a table's kind (these endings) that is none of TABLES' is refused, not left unread: a misspelt or an
# uncompressed table (all_reduce.csv.gz, gemm.csv) left its operators to the roofline, said only as "what they lack"
TABLE_ENDINGS = (".csv", ".gz", ".parquet")


def _refuse_unread_tables(folder: Path) -> None:
    known = {f"{name}.csv.gz" for name in TABLES}
    for entry in sorted(os.listdir(folder)):
        if entry.endswith(TABLE_ENDINGS) and entry not in known:
            raise FieldError(str(folder / entry), None, "a table sizer does not read; expected tables named "
                                                        f"{', '.join(sorted(known))} (gzip CSV)")


def bundled_tables_dir(gpu: str, engine: str) -> Path | None:
    """The bundled folder for `gpu` measured in `engine` (the newest version when several), or None."""
    def version(header: Path) -> tuple[int, ...]:
        return tuple(int(x) if x.isdigit() else 0 for x in header.parent.name.rsplit("-", 1)[-1].split("."))

    found = sorted(KERNELS_DIR.glob(f"{gpu}-{engine}-*/{HEADER_FILE}"), key=version)
    return found[-1].parent if found else None


def bundled_folders(gpu: str) -> list[str]:
    """The names of the folders bundled for a GPU profile id (`<gpu>-<engine>-<version>`)."""
    return sorted(h.parent.name for h in KERNELS_DIR.glob(f"{gpu}-*/{HEADER_FILE}"))


def cached_kernel_tables(folder: Path, whole: bool = True) -> KernelTables:
    """`load_kernel_tables`, read once per process while the files stay as they were (their times and sizes:
    a search or sweep resolves a scenario per candidate)."""
    files = [folder / name for name in (HEADER_FILE, *(f"{table}.csv.gz" for table in TABLES))]
    stamp = tuple((f.stat().st_mtime_ns, f.stat().st_size) if f.is_file() else None for f in files)
    return _load(folder.resolve(), stamp, whole)


@lru_cache(maxsize=8)
def _load(folder: Path, stamp: tuple, whole: bool) -> KernelTables:
    return load_kernel_tables(folder, whole)
