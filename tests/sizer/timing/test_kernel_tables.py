"""Kernel tables: the bundled ones read back with their provenance and the source's measurements;
bad tables refused with one line naming the file."""

from __future__ import annotations

import gzip
import shutil

import pytest

from sizer.timing.kernel_tables import (
    HEADER_FILE,
    KERNELS_DIR,
    Table,
    bundled_tables_dir,
    cached_kernel_tables,
    load_kernel_tables,
)
from validation.errors import FieldError


@pytest.fixture(scope="module")
def h100():
    return load_kernel_tables(bundled_tables_dir("h100-sxm", "vllm"))


def test_bundled_h100_tables_say_where_they_come_from(h100):
    h = h100.header
    assert (h.gpu, h.device_name, h.engine, h.engine_version) == ("h100-sxm", "NVIDIA H100 80GB HBM3", "vllm", "0.24.0")
    p = h.provenance
    assert (p.source, p.source_version, p.licence) == ("aiconfigurator-core", "0.12.0", "Apache-2.0")
    assert "aiconfigurator_core/systems/data/h100_sxm/gemm/vllm/0.24.0/gemm_perf.parquet" in p.files
    assert h.description == ("kernel tables measured on NVIDIA H100 80GB HBM3 in vllm 0.24.0 "
                             "(aiconfigurator-core 0.12.0)")
    # aiconfigurator-core 0.12.0 systems/h100_sxm.yaml: mem_bw 3.35e12, scaling factor 0.8, 3 us per op
    assert (h.elementwise.memory_bandwidth_bytes_per_s, h.elementwise.bandwidth_fraction,
            h.elementwise.latency_s) == (3.35e12, 0.8, 3e-6)


def test_bundled_h100_entries_are_the_sources_measurements(h100):
    # rows of aiconfigurator-core 0.12.0's h100_sxm vllm 0.24.0 parquet tables (latency in ms), kept to 4 digits:
    # gemm_perf: m 1, n 4096, k 4096, bfloat16 (torch.nn.functional.linear) 0.015045 ms
    assert h100.gemm[("bfloat16", 4096, 4096)][1] == pytest.approx(15.05e-6)
    # fp8 per-tensor (CutlassFP8ScaledMMLinearKernel) 0.013772 ms, the only fp8 (not fp8_block) kernel
    assert h100.gemm[("fp8", 4096, 4096)][1] == pytest.approx(13.77e-6)
    # generation_attention_perf: batch 1, isl 1, step 1023 (KV length 1024), 32 / 8 heads of 128, fa3: 0.013579 ms
    assert h100.generation_attention[("bfloat16", 32, 8, 128, 1)][1024] == pytest.approx(13.58e-6)
    # context_attention_perf: batch 1, isl 8192, same heads, window 0: 0.912219 ms
    assert h100.context_attention[("bfloat16", 32, 8, 128, 1)][8192] == pytest.approx(912.2e-6)
    # custom_allreduce_perf: 2 GPUs, 128 bf16 elements (256 bytes), vllm_graph: 0.004292 ms
    assert h100.allreduce[(2,)][256] == pytest.approx(4.292e-6)


@pytest.mark.parametrize("gpu", ["h100-sxm", "h200", "a100-80gb", "l40s", "b200", "gb200"])
def test_each_bundled_gpu_has_tables_for_each_engine_aiconfigurator_measured(gpu):
    for engine in ("vllm", "sglang", "tensorrt-llm"):
        folder = bundled_tables_dir(gpu, engine)
        assert folder is not None and folder.name.startswith(f"{gpu}-{engine}-")
    assert bundled_tables_dir(gpu, "lmdeploy") is None


def test_tensorrt_llm_tables_hold_its_own_all_reduce():
    tables = cached_kernel_tables(bundled_tables_dir("h100-sxm", "tensorrt-llm"))
    assert tables.header.engine == "tensorrt-llm" and tables.header.engine_version == "1.3.0rc20"
    # comm/trtllm/1.3.0rc20/custom_allreduce_perf.parquet: 2 GPUs, 128 bf16 elements (256 bytes): 0.002662 ms
    assert tables.allreduce[(2,)][256] == pytest.approx(2.662e-6)


def copy_of(tmp_path, h100):
    folder = tmp_path / "t"
    shutil.copytree(h100.path, folder)
    return folder


def test_a_table_row_that_is_not_numbers_is_refused_naming_file_and_line(tmp_path, h100):
    folder = copy_of(tmp_path, h100)
    table = folder / "allreduce.csv.gz"
    lines = gzip.decompress(table.read_bytes()).decode().splitlines()
    lines[2] = "2,128 256,4.3 oops"
    table.write_bytes(gzip.compress("\n".join(lines).encode()))
    with pytest.raises(FieldError) as err:
        load_kernel_tables(folder)
    assert str(table) in err.value.one_line() and "line 3" in err.value.one_line()


@pytest.mark.parametrize("folder", sorted(p.parent.name for p in KERNELS_DIR.glob(f"*/{HEADER_FILE}")))
def test_every_bundled_folder_reads_whole(folder):
    # a plan reads the bundled tables' rows on first lookup (step_model.bundled_tables): every row of every bundled
    # table is checked here instead, as a folder a user gives is when it is loaded
    tables = load_kernel_tables(KERNELS_DIR / folder)
    assert tables.header.gpu and len(tables.gemm) > 0


def test_a_table_read_lazily_refuses_a_bad_row_when_it_is_looked_up(tmp_path, h100):
    folder = copy_of(tmp_path, h100)
    table = folder / "allreduce.csv.gz"
    lines = gzip.decompress(table.read_bytes()).decode().splitlines()
    lines[2] = "4,128 256,4.3 -1"                       # the 4-GPU row: a negative latency
    table.write_bytes(gzip.compress("\n".join(lines).encode()))
    lazy = load_kernel_tables(folder, whole=False)
    assert isinstance(lazy.allreduce, Table) and (4,) in lazy.allreduce and len(lazy.allreduce) == 3
    assert lazy.allreduce[(2,)][256] == pytest.approx(4.292e-6)     # the other rows read as they are
    with pytest.raises(FieldError) as err:
        lazy.allreduce[(4,)]
    assert str(table) in err.value.one_line() and "line 3" in err.value.one_line()
    with pytest.raises(FieldError, match="line 3"):              # read whole, the folder is refused up front
        load_kernel_tables(folder)
    # a repeated key is refused with the file, lazily too: keys are read with it
    lines[2] = lines[1]
    table.write_bytes(gzip.compress("\n".join(lines).encode()))
    with pytest.raises(FieldError, match="repeats the key"):
        load_kernel_tables(folder, whole=False)


def test_a_header_without_provenance_is_refused_naming_the_field(tmp_path, h100):
    folder = copy_of(tmp_path, h100)
    header = folder / HEADER_FILE
    text = header.read_text()
    header.write_text(text[:text.index("provenance:")])
    with pytest.raises(FieldError) as err:
        load_kernel_tables(folder)
    assert "provenance" in err.value.one_line() and "missing" in err.value.one_line()


def test_a_table_that_is_not_gzip_is_refused(tmp_path, h100):
    folder = copy_of(tmp_path, h100)
    (folder / "gemm.csv.gz").write_text("dtype,n,k,m,latency_us\n")
    with pytest.raises(FieldError, match="gzip"):
        load_kernel_tables(folder)


def test_bundled_h100_moe_entries_are_the_sources_measurements(h100):
    # moe_perf: bfloat16, hidden 2048, expert width 768, top 8 of 128 (Qwen3-30B-A3B), TP 1, EP 1, balanced,
    # vllm_unquantizedfusedmoe_triton_tritonexperts: 1 token 0.049072 ms, 64 tokens 0.431941 ms
    rows = h100.moe[("bfloat16", 2048, 768, 8, 128, 1, 1)]
    assert rows[1] == pytest.approx(49.07e-6) and rows[64] == pytest.approx(431.9e-6)


def test_power_law_moe_rows_without_their_routing_column_are_refused_naming_the_columns(tmp_path, h100):
    # moe_skewed.csv.gz keys each row by its routing first (power_law_1.01 / power_law_1.2): a table written with
    # moe.csv.gz's columns would read each row's dtype as its routing and its hidden size as its dtype
    folder = copy_of(tmp_path, h100)
    table = folder / "moe_skewed.csv.gz"
    lines = gzip.decompress(table.read_bytes()).decode().splitlines()
    assert lines[0] == "routing,dtype,hidden,inter,topk,experts,tp,ep,tokens,latency_us"
    table.write_bytes(gzip.compress("\n".join([lines[0].split(",", 1)[1], *(r.split(",", 1)[1] for r in lines[1:])])
                                    .encode()))
    with pytest.raises(FieldError) as err:
        load_kernel_tables(folder)
    assert str(table) in err.value.one_line()
    assert "routing,dtype,hidden,inter,topk,experts,tp,ep,tokens,latency_us" in err.value.one_line()
