"""Convert aiconfigurator-core's measured operator tables into sizer's kernel tables.

NVIDIA's aiconfigurator-core (Apache-2.0; the `kernels` extra installs version 0.12.0) ships, per
GPU and per framework version, operator latencies measured inside the serving framework:
`systems/data/<system>/<op>/<framework>/<version>/<table>_perf.parquet`. What its columns mean
(read from its collectors and modelling code; latencies in milliseconds):

  gemm_perf                  m, n, k: x[m, k] @ W[n, k]^T (torch.nn.functional.linear for bf16; several
                             FP8 kernels, `kernel_source`); gemm_dtype bfloat16 / fp8 / fp8_block
  context_attention_perf     batch_size sequences of `isl` new tokens, no prefix (step 0); num_heads,
                             num_key_value_heads per GPU; window_size 0 = full attention
  generation_attention_perf  batch_size sequences decoding one token (isl 1) after `step` earlier
                             ones: KV length isl + step
  custom_allreduce_perf      message_size in elements of `allreduce_dtype` (the collector all-reduces a
                             [size / 4096, 4096] tensor), num_gpus; backend vllm_graph / sglang_graph = the
                             engine's custom all-reduce under CUDA graphs (TensorRT-LLM's table has no backend
                             column: one kernel, its own all-reduce)

Element-wise kernels are not tabled there: its model prices them as bytes over `mem_bw` x
`mem_bw_empirical_scaling_factor` plus `mem_empirical_constant_latency` each (systems/<system>.yaml);
those three figures are copied into tables.yaml.

  moe_perf                   num_tokens (the whole EP group's: at EP 8, 16,384 FP8 tokens of Qwen3-235B's shape
                             take 714 us on the H200, 44% of the FP8 peak for this GPU's eighth of their routed
                             FLOPs) through one MoE layer's routed experts (hidden_size, inter_size per expert,
                             topk of num_experts; moe_tp_size slices each expert, moe_ep_size spreads them),
                             moe_dtype the experts' format, distribution balanced / power-law routing

  mla_context_module_perf    one whole attention block of an MLA model (vLLM's DeepseekV2MLAAttention built from
                             the `model`'s config with num_heads per GPU, tp_size 1: down-projections, norms,
                             q_b/kv_b, rotary, attention, o_proj) over batch_size sequences of `isl` new tokens,
                             no prefix (step 0); gemm_type the linears' dtype, mla_dtype the prefill query's
  mla_generation_module_perf the same block for batch_size sequences decoding one token (isl 1) at position
                             step - 1: KV length `step`, the new token's included
  gdn_perf                   gated delta net kernels of one layer per GPU (num_k_heads, num_v_heads after the TP
                             split; d_model only names the model measured): phase context runs causal_conv1d_fn
                             and a chunked delta-rule scan over batch_size x seq_len tokens, phase generation
                             causal_conv1d_update and the recurrent delta-rule step for batch_size sequences

Where a shape was measured with several kernels, the fastest is kept (the framework's own
choice among them is not recorded). Only the full-attention rows (window 0) are kept: windowed
layers are priced as full attention over at most their window. `prune_to_catalog` keeps the GEMM
grid points that bracket the shapes of the catalog's models at TP 1, 2, 4 and 8, and the
attention shapes those models have, so the bundled tables stay small.

MLA: the rows of the models named in `MLA_MODELS` (the source states a model, not its dimensions: they are read
from sizer's catalog entry), bfloat16 prefill queries, bfloat16 or block-FP8 linears. GDN: one layer's latency is
the sum of its two kernels (the fastest convolution kernel plus the fastest delta-rule kernel of the shape and
size); a shape measured under several models (d_model) keeps the fastest sum. The sparse-MLA (DSA) module tables
are not converted (hardware_profiles/kernels/README.md: their prefill rows were timed eagerly).
"""

from __future__ import annotations

import csv
import datetime
import gzip
import io
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import yaml

from sizer.inputs.hardware import load_hardware
from sizer.inputs.layers import LatentAttention
from sizer.inputs.model_spec import load_model
from sizer.timing.kernel_shapes import catalog_shapes
from sizer.timing.kernel_step import GEMM_DTYPES, KV_DTYPES, bracket
from sizer.timing.kernel_tables import (
    HEADER_FILE,
    MAX_LATENCY_US,
    MIN_LATENCY_US,
    SCHEMA_VERSION,
    TABLES,
    TP_SIZES,
    ElementwiseCost,
)
from sizer.timing.roofline import (
    EP_LOAD_IMBALANCE,
    MARLIN_MOE_DTYPE,
    MOE_DTYPES,
    MXFP8_ACTIVATED_MOE_DTYPE,
    skewed_routing,
)
from validation.errors import FieldError, excerpt
from validation.safe_yaml import load_yaml
from validation.schema import check_key, key_for

SOURCE = "aiconfigurator-core"
LICENCE = "Apache-2.0"
# (our table, aiconfigurator's op folder, its file)
FILES = {"gemm": ("gemm", "gemm_perf.parquet"),
         "context_attention": ("attention", "context_attention_perf.parquet"),
         "generation_attention": ("attention", "generation_attention_perf.parquet"),
         "allreduce": ("comm", "custom_allreduce_perf.parquet"),
         "moe": ("moe", "moe_perf.parquet"),
         "mla_context": ("mla", "mla_context_module_perf.parquet"),
         "mla_generation": ("mla", "mla_generation_module_perf.parquet"),
         "mla_kernel_context": ("mla", "context_mla_perf.parquet"),
         "mla_kernel_generation": ("mla", "generation_mla_perf.parquet"),
         "gdn": ("linear_attention", "gdn_perf.parquet")}            # -> gdn_context and gdn_generation
# aiconfigurator's MLA module model -> sizer's catalog entry, whose config gives the block's dimensions
MLA_MODELS = {"deepseek-ai/DeepSeek-V3": "deepseek-v3"}
MLA_LINEAR_DTYPES = ("bfloat16", "fp8_block")
# aiconfigurator's framework folder -> sizer's engine (deployment.engine), and the all-reduce backend kept
ENGINES = {"vllm": "vllm", "sglang": "sglang", "trtllm": "tensorrt-llm"}
ALLREDUCE_BACKENDS = {"vllm": "vllm_graph", "sglang": "sglang_graph"}
TABLE_DTYPES = sorted(set(GEMM_DTYPES.values()) - {"float32"})       # aiconfigurator measures no float32
TABLE_KV_DTYPES = sorted(set(KV_DTYPES.values()) - {"float32"})
MOE_TABLE_DTYPES = sorted({*MOE_DTYPES.values(), MXFP8_ACTIVATED_MOE_DTYPE, MARLIN_MOE_DTYPE})
SKEWED_ROUTING = tuple(skewed_routing(alpha) for alpha in EP_LOAD_IMBALANCE)   # the power-law rows moe_skewed keeps


def data_dir(package: Path) -> Path:
    """aiconfigurator-core's data folder, given the package folder, the unpacked wheel or the data folder."""
    for candidate in (package / "aiconfigurator_core" / "systems" / "data", package / "systems" / "data", package):
        if candidate.is_dir() and any(candidate.glob("*/gemm")):
            return candidate
    raise FieldError(str(package), None, "expected aiconfigurator-core's package folder (with systems/data/<gpu>/gemm)")


def _version_key(v: str) -> tuple:
    return tuple(int(x) if x.isdigit() else -1 for x in v.replace("rc", ".").split("."))


def newest_version(data: Path, system: str, op: str, framework: str, file: str) -> str | None:
    versions = [p.parent.name for p in (data / system / op / framework).glob(f"*/{file}")]
    return max(versions, key=_version_key) if versions else None


# per source table: (text columns, numeric columns) the conversion reads; every table has a latency (ms)
_ATTENTION = (("kv_cache_dtype",), ("num_heads", "num_key_value_heads", "head_dim", "batch_size", "isl"))
_MLA = (("model", "mla_dtype", "gemm_type", "kv_cache_dtype"), ("tp_size", "num_heads", "batch_size", "isl", "step"))
_MLA_KERNEL = (("mla_dtype", "kv_cache_dtype"), ("num_heads", "batch_size", "isl", "step"))
COLUMNS = {"gemm": (("gemm_dtype", "device"), ("n", "k", "m")),
           "context_attention": _ATTENTION, "generation_attention": (_ATTENTION[0], (*_ATTENTION[1], "step")),
           # and `backend` where there is one (TensorRT-LLM's table has none: its one all-reduce)
           "allreduce": (("allreduce_dtype",), ("num_gpus", "message_size")),
           "moe": (("distribution", "moe_dtype"), ("hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
                                                   "moe_ep_size", "num_tokens")),
           "mla_context": _MLA, "mla_generation": _MLA, "mla_kernel_context": _MLA_KERNEL,
           "mla_kernel_generation": _MLA_KERNEL,
           "gdn": (("phase", "kernel_source"), ("num_k_heads", "head_k_dim", "num_v_heads", "head_v_dim", "d_conv",
                                                "batch_size", "seq_len", "d_model"))}
# per source table: (text columns, numeric columns) read where the table has them (older tables lack them)
OPTIONAL_COLUMNS = {"context_attention": ((), ("window_size",)), "generation_attention": ((), ("window_size",)),
                    "allreduce": (("backend",), ()), "moe": (("kernel_source",), ())}
# The bounds of a source table's values, all applied by `_check_values`: text a non-empty string; every size, count
# and shape a whole number from 1 (0 where FROM_ZERO says) to MAX_SIZE; latencies finite, from 1 ns to 1,000 s
# (sizer's tables hold them to the same, kernel_tables._row_values). aiconfigurator-core 0.12.0's tables hold no
# other value: no null, NaN or fraction in any column read, no latency <= 0 (so no failed measurement is filtered
# out here).
MAX_SIZE = 1 << 40     # its largest is an all-reduce of 2**29 elements; below 2**53: a float column's whole numbers
                       # are exact
# the sizes that count from 0: a prefill's `step` (no earlier tokens; generation attention's KV length is isl + step)
# and `window_size` (0: full attention). mla_generation's step is its KV length, the new token's included: >= 1
FROM_ZERO = {"context_attention": {"window_size"}, "generation_attention": {"step", "window_size"},
             "mla_context": {"step"}, "mla_kernel_context": {"step"}, "mla_kernel_generation": {"step"}}
# A source table's bounds, from its footer before anything is decompressed: aiconfigurator's largest holds a few
# hundred thousand rows in a few MB
MAX_PARQUET_ROWS = 10_000_000
MAX_PARQUET_BYTES = 1 << 30           # decompressed
MAX_SYSTEM_BYTES = 1 << 20
# the system YAML's memory figures -> the tables.yaml fields (kernel_tables.ElementwiseCost) they become, whose
# declarations bound them
SYSTEM_FIGURES = {"mem_bw": "memory_bandwidth_bytes_per_s", "mem_bw_empirical_scaling_factor": "bandwidth_fraction",
                  "mem_empirical_constant_latency": "latency_s"}


def _read(path: Path, table: str):
    """A source table: a regular Parquet file within the bounds, with the columns COLUMNS names, holding the values
    `_check_values` allows; anything else one FieldError naming the file and column (and the row)."""
    file = str(path)
    df = _parquet(path)
    text, numeric = COLUMNS[table]
    for column in (*text, *numeric, "latency"):
        if column not in df.columns:
            raise FieldError(file, column, "missing; expected aiconfigurator-core's columns")
    if df.empty:
        raise FieldError(file, None, "no rows; expected measurements")
    _check_values(df, file, table)
    return df


def _parquet(path: Path):
    """The table of a regular Parquet file within MAX_PARQUET_ROWS and MAX_PARQUET_BYTES, its rows numbered from 0
    in the file's order (the row an error names)."""
    file = str(path)
    try:
        import pandas  # lazily: only the importer reads parquet (pandas + pyarrow, the `kernels` extra)
        import pyarrow
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise FieldError(file, None, f"reading parquet needs pyarrow: pip install 'sizer[kernels]' ({exc})") from None
    if not path.is_file():
        raise FieldError(file, None, "expected a regular Parquet file")
    try:
        meta = pq.ParquetFile(path).metadata
        size = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        if meta.num_rows > MAX_PARQUET_ROWS or size > MAX_PARQUET_BYTES:
            raise FieldError(file, None, f"holds {meta.num_rows:,} rows, {size:,} bytes decompressed; expected at "
                                         f"most {MAX_PARQUET_ROWS:,} rows and {MAX_PARQUET_BYTES:,} bytes")
        return pandas.read_parquet(path).reset_index(drop=True)
    except (OSError, pyarrow.ArrowException) as exc:
        raise FieldError(file, None, f"expected a Parquet table ({excerpt(str(exc))})") from None


def _check_values(df, file: str, table: str) -> None:
    """Every column of `table` the conversion reads (COLUMNS, and OPTIONAL_COLUMNS where present) within its bounds:
    the one check of every source table's values, so none is dropped, truncated or defaulted on its way out."""
    text, numeric = COLUMNS[table]
    optional_text, optional_numeric = OPTIONAL_COLUMNS.get(table, ((), ()))
    for column in (*text, *(c for c in optional_text if c in df.columns)):
        values = df[column].astype(object)
        _refuse(df, file, column, ~values.map(lambda v: isinstance(v, str) and v.strip() != "").to_numpy(bool),
                "a non-empty string")
    for column in (*numeric, *(c for c in optional_numeric if c in df.columns)):
        low = 0 if column in FROM_ZERO.get(table, ()) else 1
        x = _numbers(df, file, column)
        _refuse(df, file, column, ~((x >= low) & (x <= MAX_SIZE) & (x.round() == x)),      # NaN fails each comparison
                f"a whole number from {low} to {MAX_SIZE:,}")
    x = _numbers(df, file, "latency")
    # what sizer's tables read back (kernel_tables.MIN_LATENCY_US, MAX_LATENCY_US)
    low_ms, top_ms = MIN_LATENCY_US / 1e3, MAX_LATENCY_US / 1e3
    _refuse(df, file, "latency", ~((x >= low_ms) & (x <= top_ms)),
            f"a latency of at least {low_ms:g} and at most {top_ms:g} (milliseconds)")


def _numbers(df, file: str, column: str):
    """A numeric column's values as floats (NaN where null); text or booleans one FieldError."""
    import pandas
    values = df[column]
    if not pandas.api.types.is_numeric_dtype(values) or pandas.api.types.is_bool_dtype(values):
        raise FieldError(file, column, f"expected numbers, got {values.dtype} values")
    return values.to_numpy(dtype=float, na_value=float("nan"))


def _refuse(df, file: str, column: str, bad, expected: str) -> None:
    """One FieldError naming the first row where `bad` is true, if there is one."""
    if bad.any():
        row = int(bad.nonzero()[0][0])
        raise FieldError(file, f"{column} (row {row})", f"expected {expected}, got {_shown(df[column], row)}")


def _shown(values, row: int) -> str:
    """Row `row`'s value for an error message: a number as Python prints it (a float column's NaN `nan`), a missing
    value `null`."""
    import pandas
    value = values.iloc[row]
    if pandas.api.types.is_scalar(value) and pandas.isna(value) and not (
            isinstance(value, float) and pandas.api.types.is_float_dtype(values)):
        return "null"
    return excerpt(value.item() if hasattr(value, "item") else value)     # numpy's scalars: the number alone


def _require_any(df, file: str, column: str, allowed: list[str]) -> None:
    """At least one row whose `column` is one of `allowed` (the rows of other values are not sizer's to table)."""
    if not df[column].isin(allowed).any():
        raise FieldError(file, column, f"expected rows of {', '.join(allowed)} (the formats sizer tables), got only "
                                       f"{excerpt(sorted(set(df[column])))}")


def _system(path: Path) -> dict[str, float]:
    """The memory figures of aiconfigurator's system YAML (gpu.mem_bw, its scaling factor and constant latency) as
    tables.yaml's element-wise fields, each checked by its declaration there."""
    spec = load_yaml(path, MAX_SYSTEM_BYTES, "system file")
    gpu = spec.get("gpu") if isinstance(spec, dict) else None
    if not isinstance(gpu, dict):
        raise FieldError(str(path), "gpu", "expected a mapping of the GPU's figures")
    return {field: check_key(key_for(ElementwiseCost, field, key), gpu.get(key), str(path), f"gpu.{key}")
            for key, field in SYSTEM_FIGURES.items()}


def convert(package: Path, gpu: str, framework: str = "vllm", prune_to_catalog: bool = True
            ) -> tuple[dict, dict[str, list[tuple]]]:
    """(tables.yaml content, rows per table) for `gpu` measured in `framework`."""
    spec = load_hardware(gpu, None, "--gpu")
    if spec.aiconfigurator_system is None:     # aiconfigurator's name for the GPU is its profile's
        raise FieldError(spec.profile_file or None, "aiconfigurator_system",
                         f"--gpu {gpu}: the profile names no aiconfigurator-core system to import tables of")
    gpu, system = spec.id, spec.aiconfigurator_system
    if framework not in ENGINES:
        raise FieldError(None, "--framework", f"expected one of {', '.join(ENGINES)}, got {framework}")
    data = data_dir(package)
    versions = {t: newest_version(data, system, op, framework, f) for t, (op, f) in FILES.items()}
    if versions["gemm"] is None:
        raise FieldError(str(data / system), None, f"no {framework} GEMM table for {system}")
    # MoE: the collection of the GEMM's version where there is one (a newer one may cover only the models it was
    # collected for: TensorRT-LLM 1.3.0rc23's holds three Nemotron-3 shapes, 1.3.0rc20's twenty-four)
    if (data / system / FILES["moe"][0] / framework / versions["gemm"] / FILES["moe"][1]).is_file():
        versions["moe"] = versions["gemm"]
    paths = {t: data / system / FILES[t][0] / framework / v / FILES[t][1] for t, v in versions.items() if v}
    frames = {t: _read(path, t) for t, path in paths.items()}
    _require_any(frames["gemm"], str(paths["gemm"]), "gemm_dtype", TABLE_DTYPES)     # GEMMs are required, as above
    shapes = catalog_shapes() if prune_to_catalog else None
    gemms, attention, moe, mla, gdn = ((shapes.gemms, shapes.attention, shapes.moe, shapes.mla, shapes.gdn)
                                       if shapes else (None,) * 5)
    rows = {"gemm": _gemm_rows(frames["gemm"], gemms)}
    for t in ("context_attention", "generation_attention"):
        rows[t] = _attention_rows(frames[t], t, attention) if t in frames else []
    rows["allreduce"] = _allreduce_rows(frames["allreduce"], framework) if "allreduce" in frames else []
    rows["moe"] = _moe_rows(frames["moe"], moe, framework) if "moe" in frames else []
    rows["moe_skewed"] = _moe_rows(frames["moe"], moe, framework, SKEWED_ROUTING) if "moe" in frames else []
    for t in ("mla_context", "mla_generation"):
        rows[t] = _mla_rows(frames[t], t, mla) if t in frames else []
    if not rows["mla_context"]:            # the attention kernel alone, where no module table is measured (SGLang)
        for t in ("mla_kernel_context", "mla_kernel_generation"):
            rows[t] = _mla_kernel_rows(frames[t], t, mla) if t in frames else []
    rows["gdn_context"], rows["gdn_generation"] = _gdn_rows(frames["gdn"], gdn) if "gdn" in frames else ([], [])
    device = str(frames["gemm"]["device"].iloc[0])
    files = [f"aiconfigurator_core/systems/data/{system}/{FILES[t][0]}/{framework}/{v}/{FILES[t][1]}"
             for t, v in versions.items() if v] + [f"aiconfigurator_core/systems/{system}.yaml"]
    spec = _system(data.parent / f"{system}.yaml")
    header = {"schema_version": SCHEMA_VERSION, "gpu": gpu, "device_name": device, "engine": ENGINES[framework],
              "engine_version": versions["gemm"],
              "elementwise": spec,
              "provenance": {"source": SOURCE, "source_version": _package_version(data), "licence": LICENCE,
                             "files": files, "converted": datetime.date.today().isoformat()}}
    return header, rows


def _package_version(data: Path) -> str:
    for dist in data.parents[2].glob("aiconfigurator_core-*.dist-info"):
        return dist.name.removeprefix("aiconfigurator_core-").removesuffix(".dist-info")
    try:
        return version("aiconfigurator-core")
    except PackageNotFoundError:
        return "unknown"


def _rows(df, keep: list[bool]):
    """The rows of `df` where `keep` is true (a plain list: an empty one still selects rows, not columns)."""
    return df.loc[df.index[[i for i, k in enumerate(keep) if k]]]


def _fastest(df, keys: list[str]):
    return df.groupby(keys, as_index=False)["latency"].min()


def _gemm_rows(df, needed: frozenset[tuple[int, int]] | None) -> list[tuple]:
    df = _fastest(df[df["gemm_dtype"].isin(TABLE_DTYPES)], ["gemm_dtype", "n", "k", "m"])
    if needed is not None:
        keep = set()
        for dtype in TABLE_DTYPES:
            sub = df[df["gemm_dtype"] == dtype]
            ns, ks = sorted(set(sub["n"])), sorted(set(sub["k"]))
            if not ns:
                continue
            for n, k in needed:
                n0, n1, _ = bracket(ns, n)
                k0, k1, _ = bracket(ks, k)
                keep |= {(dtype, a, b) for a in (n0, n1) for b in (k0, k1)}
        df = _rows(df, [(d, n, k) in keep for d, n, k in zip(df["gemm_dtype"], df["n"], df["k"], strict=True)])
    return [(d, int(n), int(k), int(m), float(t) * 1e3)
            for d, n, k, m, t in df[["gemm_dtype", "n", "k", "m", "latency"]].itertuples(index=False)]


def _attention_rows(df, table: str, needed: frozenset[tuple[int, int, int]] | None) -> list[tuple]:
    full = df["window_size"] == 0 if "window_size" in df else True      # older tables: full attention only
    df = df[full & df["kv_cache_dtype"].isin(TABLE_KV_DTYPES)].copy()
    df["length"] = df["isl"] if table == "context_attention" else df["isl"] + df["step"]
    keys = ["kv_cache_dtype", "num_heads", "num_key_value_heads", "head_dim", "batch_size", "length"]
    df = _fastest(df, keys)
    if needed is not None:
        df = _rows(df, [s in needed for s in zip(df["num_heads"], df["num_key_value_heads"], df["head_dim"],
                                                 strict=True)])
    return [(kv, int(h), int(g), int(d), int(b), int(n), float(t) * 1e3)
            for kv, h, g, d, b, n, t in df[[*keys, "latency"]].itertuples(index=False)]


def _moe_rows(df, needed: frozenset[tuple[int, int, int, int]] | None, framework: str,
              routing: tuple[str, ...] = ("balanced",)) -> list[tuple]:
    """`routing` (balanced, else the power-law distributions: then each row starts with its distribution, and only
    experts sliced by TP are kept, the split sizer reads them for); experts sliced by TP (EP 1) or spread whole over
    EP (TP 1); the expert formats of
    MOE_TABLE_DTYPES, except vLLM's per-tensor FP8 rows: ModelOpt checkpoints' FlashInfer CUTLASS kernel, which
    measures non-monotonic in tokens there (Llama-4-Scout's shape at TP 2 on H100: 1.90 ms for 64 tokens, 0.92 ms
    for 2,048; Qwen3-235B's at EP 8 on H200: 620 us for 16 tokens, 308 us for 2,048). TensorRT-LLM's own FP8 MoE
    (its CUTLASS kernel) rises monotonically and is kept. vLLM's Marlin MXFP4 rows are their own dtype
    (MARLIN_MOE_DTYPE: another kernel than triton_kernels' W4A16 MXFP4), kept in every shape measured (few: the
    roofline's Marlin figures are derived from them, benchmarks/moe_efficiencies.py)."""
    dtypes = [d for d in MOE_TABLE_DTYPES if not (framework == "vllm" and d == "fp8")]
    skewed = routing != ("balanced",)
    df = df.copy()
    if "kernel_source" in df.columns:          # without it a table cannot tell Marlin's rows from the others'
        marlin = df["moe_dtype"].eq(MOE_DTYPES["mxfp4"]) & df["kernel_source"].astype(str).str.contains("marlin")
        df.loc[marlin, "moe_dtype"] = MARLIN_MOE_DTYPE
    split = (df["moe_ep_size"] == 1) if skewed else (df["moe_ep_size"] == 1) | (df["moe_tp_size"] == 1)
    df = df[df["distribution"].isin(routing) & df["moe_dtype"].isin(dtypes) & split]
    keys = [*(["distribution"] if skewed else []), "moe_dtype", "hidden_size", "inter_size", "topk", "num_experts",
            "moe_tp_size", "moe_ep_size", "num_tokens"]
    df = _fastest(df, keys)
    if needed is not None:
        shape = zip(df["hidden_size"], df["inter_size"], df["topk"], df["num_experts"], strict=True)
        split = zip(df["moe_tp_size"], df["moe_ep_size"], strict=True)
        df = _rows(df, [(s in needed or d == MARLIN_MOE_DTYPE) and max(sp) in TP_SIZES
                        for d, s, sp in zip(df["moe_dtype"], shape, split, strict=True)])
    first = len(keys) - 7          # the text columns: routing where kept, the dtype
    return [(*text[:first], *map(int, text[first:]), float(t) * 1e3)
            for *text, t in df[[*keys, "latency"]].itertuples(index=False)]


def mla_dims(model: str) -> tuple[int, ...]:
    """kernel_tables.MLA_DIMS of a catalog model's (first) multi-head latent attention layer."""
    m = load_model(model)
    a = next(layer.mixer for layer in m.layers if isinstance(layer.mixer, LatentAttention))
    return m.hidden_size, a.q_lora_rank, a.kv_lora_rank, a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim


def _mla_rows(df, table: str, needed: frozenset[tuple[int, ...]] | None) -> list[tuple]:
    """(linear dtype, KV dtype, *MLA_DIMS, heads, batch, tokens or KV length, us), the fastest backend."""
    df = df[df["model"].isin(list(MLA_MODELS)) & (df["mla_dtype"] == "bfloat16") & (df["tp_size"] == 1)
            & df["gemm_type"].isin(MLA_LINEAR_DTYPES) & df["kv_cache_dtype"].isin(TABLE_KV_DTYPES)].copy()
    if table == "mla_context":
        df = df[df["step"] == 0].copy()                     # no prefix: a causal prefill of isl tokens
    df["length"] = df["isl"] if table == "mla_context" else df["step"]
    keys = ["gemm_type", "kv_cache_dtype", "model", "num_heads", "batch_size", "length"]
    dims = {model: mla_dims(name) for model, name in MLA_MODELS.items()}
    out = []
    for d, kv, model, h, b, n, t in _fastest(df, keys)[[*keys, "latency"]].itertuples(index=False):
        shape = (*dims[model], int(h))
        if needed is None or shape in needed:
            out.append((d, kv, *shape, int(b), int(n), float(t) * 1e3))
    return out


def _mla_kernel_rows(df, table: str, needed: frozenset[tuple[int, ...]] | None) -> list[tuple]:
    """(KV dtype, *kernel_tables.MLA_KERNEL_DIMS, heads, batch, tokens or KV length, us), the fastest kernel. The
    source's MLA kernel tables (SGLang's `context_mla_perf`, `generation_mla_perf`) name no model: they are
    DeepSeek-V3's attention (aiconfigurator-core queries them for DeepSeek-V3/R1 by 128 heads / TP, its
    `_MLA_KERNEL_TABLE_NATIVE_HEADS`), so their latent, nope, rope and value dimensions are MLA_MODELS' model's;
    `num_heads` is per GPU. Prefill rows are step 0 (no prefix); a decode row's KV length is isl + step, as
    generation attention's."""
    _, _, kv_lora_rank, nope, rope, v = mla_dims(next(iter(MLA_MODELS.values())))
    dims = (kv_lora_rank, nope, rope, v)
    df = df[(df["mla_dtype"] == "bfloat16") & df["kv_cache_dtype"].isin(TABLE_KV_DTYPES)].copy()
    if table == "mla_kernel_context":
        df = df[df["step"] == 0].copy()
    df["length"] = df["isl"] if table == "mla_kernel_context" else df["isl"] + df["step"]
    keys = ["kv_cache_dtype", "num_heads", "batch_size", "length"]
    heads = None if needed is None else {d[-1] for d in needed if d[2:6] == dims}
    return [(kv, *dims, int(h), int(b), int(n), float(t) * 1e3)
            for kv, h, b, n, t in _fastest(df, keys)[[*keys, "latency"]].itertuples(index=False)
            if heads is None or h in heads]


def _gdn_rows(df, needed: frozenset[tuple[int, ...]] | None) -> tuple[list[tuple], list[tuple]]:
    """(context rows: *GDN_DIMS, batch, tokens, us; generation rows: *GDN_DIMS, batch, us): per shape and size the
    fastest convolution kernel plus the fastest delta-rule kernel, then the fastest over the models measured."""
    df = df.copy()
    df["conv"] = df["kernel_source"].str.startswith("causal_conv1d")
    shape = ["num_k_heads", "head_k_dim", "num_v_heads", "head_v_dim", "d_conv"]
    keys = ["phase", *shape, "batch_size", "seq_len", "d_model"]
    kernels = df.groupby([*keys, "conv"], as_index=False)["latency"].min()
    both = kernels.groupby(keys, as_index=False).agg(latency=("latency", "sum"), kinds=("conv", "nunique"))
    layer = _fastest(both[both["kinds"] == 2], keys[:-1])
    context, generation = [], []
    for phase, *rest, t in layer[[*keys[:-1], "latency"]].itertuples(index=False):
        dims, (b, n) = tuple(map(int, rest[:5])), map(int, rest[5:])
        if needed is not None and dims not in needed:
            continue
        if phase == "context":
            context.append((*dims, b, n, float(t) * 1e3))
        elif n == 1:
            generation.append((*dims, b, float(t) * 1e3))
    return context, generation


def _allreduce_rows(df, framework: str) -> list[tuple]:
    df = df[df["allreduce_dtype"] == "bfloat16"]
    if "backend" in df:
        df = df[df["backend"] == ALLREDUCE_BACKENDS[framework]]
    df = _fastest(df, ["num_gpus", "message_size"])
    return [(int(g), int(s) * 2, float(t) * 1e3) for g, s, t in df.itertuples(index=False)]   # bf16: 2 bytes each


def write_tables(folder: Path, header: dict, rows: dict[str, list[tuple]]) -> None:
    """`tables.yaml` and one gzip CSV per table (mtime 0: the same rows give the same bytes)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / HEADER_FILE).write_text(yaml.safe_dump(header, sort_keys=False))
    for name, table_rows in rows.items():
        if not table_rows:
            continue
        categorical, numeric = TABLES[name]
        grouped: dict[tuple, list[tuple]] = {}
        for r in sorted(table_rows):
            grouped.setdefault(r[:-2], []).append(r[-2:])
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow([*categorical, *numeric, "latency_us"])
        w.writerows((*key, " ".join(str(x) for x, _ in points), " ".join(f"{t:.4g}" for _, t in points))
                    for key, points in grouped.items())
        (folder / f"{name}.csv.gz").write_bytes(gzip.compress(buf.getvalue().encode(), mtime=0))
