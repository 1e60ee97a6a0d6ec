"""`sizer import-kernels` on source tables whose values are out of bounds: every table's sizes whole numbers from 1
(0 for a prefill's step and a window size) to MAX_SIZE, latencies finite and > 0, text columns strings, a GEMM table
with rows of a format sizer tables, the system's memory figures those tables.yaml holds. Each is one line naming the
file, the column and the row, exit 2, nothing written: before, an infinite m was a traceback, a negative or fractional
size was written (truncated), a NaN size dropped its row, a GEMM table of unknown formats only wrote no GEMM table and
a null device wrote `device_name: None` (the fuzz cases ik-import-kernels/gemm-*)."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from sizer.cli import app
from sizer.timing.aiconfigurator_import import MAX_SIZE

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")
from test_aiconfigurator_import import META, fake_package, table_folder  # noqa: E402

runner = CliRunner()
NAN, INF = float("nan"), float("inf")
MLA = dict(META, model="deepseek-ai/DeepSeek-V3", mla_dtype="bfloat16", kv_cache_dtype="bfloat16", tp_size=1,
           num_heads=16, batch_size=2, kernel_source="FLASH_ATTN", gemm_type="bfloat16")
GDN = dict(META, op_name="gdn", d_conv=4, num_k_heads=4, head_k_dim=128, num_v_heads=8, head_v_dim=128,
           batch_size=1, d_model=2048)
MOE = dict(META, op_name="moe", moe_dtype="bfloat16", distribution="balanced", hidden_size=2048, inter_size=768,
           topk=8, num_experts=128, moe_tp_size=1, moe_ep_size=1, num_tokens=32, kernel_source="triton")
ATTENTION = dict(META, kernel_source="fa3", num_heads=32, num_key_value_heads=8, head_dim=128, beam_width=1,
                 attn_dtype="bfloat16", kv_cache_dtype="bfloat16", window_size=0)
# source table -> (op folder, file, two valid rows)
SOURCES = {
    "gemm": ("gemm", "gemm_perf.parquet",
             [dict(META, kernel_source="torch", gemm_dtype="bfloat16", m=m, n=4096, k=4096, latency=0.015)
              for m in (1, 8)]),
    "context_attention": ("attention", "context_attention_perf.parquet",
                          [dict(ATTENTION, batch_size=1, isl=n, step=0, latency=0.03) for n in (1024, 2048)]),
    "generation_attention": ("attention", "generation_attention_perf.parquet",
                             [dict(ATTENTION, batch_size=4, isl=1, step=s, latency=0.01) for s in (0, 1023)]),
    "allreduce": ("comm", "custom_allreduce_perf.parquet",
                  [dict(META, kernel_source="graph", allreduce_dtype="bfloat16", num_gpus=2, message_size=s,
                        latency=0.004, backend="vllm_graph") for s in (1024, 2048)]),
    "moe": ("moe", "moe_perf.parquet", [dict(MOE, latency=0.4), dict(MOE, num_tokens=64, latency=0.5)]),
    "mla_context": ("mla", "mla_context_module_perf.parquet",
                    [dict(MLA, isl=n, step=0, latency=0.3) for n in (1024, 2048)]),
    "mla_generation": ("mla", "mla_generation_module_perf.parquet",
                       [dict(MLA, isl=1, step=s, latency=0.1) for s in (1, 4096)]),
    "gdn": ("linear_attention", "gdn_perf.parquet",
            [dict(GDN, phase="context", kernel_source=k, seq_len=512, num_tokens=512, latency=0.01)
             for k in ("causal_conv1d_fn", "chunk_gated_delta_rule_triton")]),
}


def write(source, table: str, column: str | None = None, value=None, row: int = 1, dtype: str | None = None):
    """`table`'s two valid rows with `column` of row `row` set to `value` (as `dtype`), written into the package."""
    op, file, rows = SOURCES[table]
    frame = pd.DataFrame(rows)
    if column is not None:
        frame[column] = frame[column].astype(dtype or object)
        frame.loc[row, column] = value
        if dtype is None:
            frame[column] = frame[column].infer_objects()
    path = table_folder(source, op) / file
    frame.to_parquet(path)
    return path


def run(source, out):
    return runner.invoke(app, ["import-kernels", str(source), "--gpu", "h100-sxm", "--out", str(out), "--all-shapes"])


def refused(tmp_path, table, column, value, row=1, dtype=None):
    """The one line `sizer import-kernels` answers with `table`'s `column` of row `row` set to `value`."""
    source = fake_package(tmp_path / "wheel")
    path = write(source, table, column, value, row, dtype)
    result = run(source, tmp_path / "out")
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert lines[0].startswith(f"error: {path}: {column} (row {row}): expected "), lines[0]
    assert not (tmp_path / "out").exists()
    return lines[0]


WHOLE = f"expected a whole number from 1 to {MAX_SIZE:,}, got "
# the fuzz cases: (table, column, value, row, dtype, what the line ends with)
FUZZ = {
    "gemm-inf-m": ("gemm", "m", INF, 1, "float64", WHOLE + "inf"),
    "gemm-neg-n": ("gemm", "n", -4096, 0, None, WHOLE + "-4096"),
    "gemm-frac": ("gemm", "n", 4096.5, 0, "float64", WHOLE + "4096.5"),
    "gemm-nan-n": ("gemm", "n", NAN, 1, "float64", WHOLE + "nan"),
    "gemm-device-null": ("gemm", "device", None, 0, None, "expected a non-empty string, got null"),
}


@pytest.mark.parametrize("case", list(FUZZ))
def test_the_fuzz_cases_are_one_line(tmp_path, case):
    table, column, value, row, dtype, says = FUZZ[case]
    assert refused(tmp_path, table, column, value, row, dtype).endswith(says)


def test_a_gemm_table_of_no_format_sizer_tables_is_refused(tmp_path):
    # gemm-other-dtype: before, exit 0 and tables without a GEMM table
    source = fake_package(tmp_path / "wheel")
    path = write(source, "gemm", "gemm_dtype", "int3", 0)
    frame = pd.read_parquet(path).assign(gemm_dtype="int3")
    frame.to_parquet(path)
    result = run(source, tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (f"error: {path}: gemm_dtype: expected rows of bfloat16, fp8 (the formats sizer "
                                     "tables), got only ['int3']")


def test_rows_of_other_formats_beside_sizers_are_left_out_as_before(tmp_path):
    # deliberate filtering: fp8_block, nvfp4, ... GEMMs are measured, not tabled; the table's bfloat16 rows are
    source = fake_package(tmp_path / "wheel")
    write(source, "gemm", "gemm_dtype", "int3", 0)
    result = run(source, tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "gemm: 1 measured points" in result.output


# every source table, each class of bad value: (table, column, value, row, dtype)
CASES = {
    "gemm n huge": ("gemm", "n", 1e300, 1, "float64"),
    "gemm k past MAX_SIZE": ("gemm", "k", MAX_SIZE + 1, 1, "int64"),
    "gemm m null (nullable ints)": ("gemm", "m", pd.NA, 1, "Int64"),
    "gemm dtype null": ("gemm", "gemm_dtype", None, 1, None),
    "gemm device empty": ("gemm", "device", " ", 1, None),
    "gemm latency inf": ("gemm", "latency", INF, 1, "float64"),
    "context heads NaN": ("context_attention", "num_heads", NAN, 1, "float64"),
    "context window -1": ("context_attention", "window_size", -1, 1, None),
    "context kv dtype null": ("context_attention", "kv_cache_dtype", None, 0, None),
    "context isl 0": ("context_attention", "isl", 0, 1, None),
    "generation step -1": ("generation_attention", "step", -1, 1, None),
    "generation batch fraction": ("generation_attention", "batch_size", 4.5, 0, "float64"),
    "allreduce message fraction": ("allreduce", "message_size", 1024.5, 0, "float64"),
    "allreduce gpus 0": ("allreduce", "num_gpus", 0, 1, None),
    "allreduce backend null": ("allreduce", "backend", None, 1, None),
    "moe tokens inf": ("moe", "num_tokens", INF, 1, "float64"),
    "moe ep negative": ("moe", "moe_ep_size", -8, 0, None),
    "moe kernel null": ("moe", "kernel_source", None, 0, None),
    "moe latency 0": ("moe", "latency", 0.0, 1, "float64"),
    "mla context step -1": ("mla_context", "step", -1, 1, None),
    "mla context model null": ("mla_context", "model", None, 0, None),
    "mla generation step 0": ("mla_generation", "step", 0, 0, None),        # its KV length, the new token's included
    "gdn kernel null": ("gdn", "kernel_source", None, 1, None),
    "gdn seq_len NaN": ("gdn", "seq_len", NAN, 0, "float64"),
    "gdn d_model fraction": ("gdn", "d_model", 2048.25, 1, "float64"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_values_in_every_table_are_one_line(tmp_path, case):
    refused(tmp_path, *CASES[case])


def test_booleans_are_not_numbers(tmp_path):
    source = fake_package(tmp_path / "wheel")
    path = write(source, "gemm")
    pd.read_parquet(path).assign(m=[True, True]).to_parquet(path)
    result = run(source, tmp_path / "out")
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {path}: m: expected numbers, got bool values"


def test_whole_numbers_stored_as_floats_and_zero_steps_import(tmp_path):
    # a float column of whole numbers is the same measurement; a prefill's step 0 and generation's step 0 (KV length
    # isl 1 + 0) are measurements too
    source = fake_package(tmp_path / "wheel")
    path = write(source, "gemm")
    pd.read_parquet(path).astype({"n": "float64", "m": "float64"}).to_parquet(path)
    for table in ("context_attention", "generation_attention"):
        write(source, table)
    result = run(source, tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "gemm: 2 measured points" in result.output and "generation_attention: 2 measured points" in result.output


@pytest.mark.parametrize("key, value, says", [           # the bounds of tables.yaml's ElementwiseCost fields
    ("mem_bw", 0, "a number in [100000000, 1e+15]"),
    ("mem_bw", 10**400, "a number in [100000000, 1e+15]"),  # was an OverflowError converting it
    ("mem_bw", 1e-300, "a number in [100000000, 1e+15]"),   # priced a kernel at infinity in a plan
    ("mem_bw_empirical_scaling_factor", 2.0, "a number > 0 and <= 1"),
    ("mem_bw_empirical_scaling_factor", 0, "a number > 0 and <= 1"),
    ("mem_empirical_constant_latency", -1e-6, "a number in [0, 1]"),
    ("mem_empirical_constant_latency", 1e300, "a number in [0, 1]"),
])
def test_system_figures_out_of_the_tables_bounds_are_one_line(tmp_path, key, value, says):
    # before, mem_bw 0 or a factor of 2 was written into tables.yaml, which plans then refused
    source = fake_package(tmp_path / "wheel")
    system = source / "aiconfigurator_core" / "systems" / "h100_sxm.yaml"
    spec = yaml.safe_load(system.read_text())
    spec["gpu"][key] = value
    system.write_text(yaml.safe_dump(spec))
    result = run(source, tmp_path / "out")
    assert result.exit_code == 2
    assert result.stderr.strip().startswith(f"error: {system}: gpu.{key}: expected {says}"), result.stderr
