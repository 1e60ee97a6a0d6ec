"""`sizer import-kernels`: aiconfigurator-core's parquet tables converted with their meaning kept
(ms to us, KV length isl + step, all-reduce elements to bytes, the fastest kernel, full attention)."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from sizer.cli import app
from sizer.inputs.kernel_tables import load_kernel_tables

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")
runner = CliRunner()
META = {"framework": "VLLM", "version": "0.9.9", "device": "Test GPU"}


def fake_package(root):
    """A two-GEMM, two-attention, two-all-reduce aiconfigurator-core data tree for h100_sxm."""
    data = root / "aiconfigurator_core" / "systems" / "data" / "h100_sxm"
    for sub in ("gemm", "attention", "comm"):
        (data / sub / "vllm" / "0.9.9").mkdir(parents=True)
    (root / "aiconfigurator_core" / "systems" / "h100_sxm.yaml").write_text(yaml.safe_dump(
        {"gpu": {"mem_bw": 3.35e12, "mem_bw_empirical_scaling_factor": 0.8, "mem_empirical_constant_latency": 3e-6}}))
    gemm = [dict(META, kernel_source=src, gemm_dtype=d, m=m, n=4096, k=4096, latency=t)
            for src, d, m, t in (("torch", "bfloat16", 1, 0.015), ("torch", "bfloat16", 8, 0.016),
                                 ("cutlass", "fp8", 1, 0.014), ("other", "fp8", 1, 0.020),
                                 ("block", "fp8_block", 1, 0.010))]
    pd.DataFrame(gemm).to_parquet(data / "gemm" / "vllm" / "0.9.9" / "gemm_perf.parquet")
    attn = dict(META, kernel_source="fa3", num_heads=32, num_key_value_heads=8, head_dim=128, beam_width=1,
                attn_dtype="bfloat16", kv_cache_dtype="bfloat16")
    ctx = [dict(attn, batch_size=1, isl=1024, step=0, window_size=w, latency=t) for w, t in ((0, 0.0355), (128, 0.01))]
    pd.DataFrame(ctx).to_parquet(data / "attention" / "vllm" / "0.9.9" / "context_attention_perf.parquet")
    gen = [dict(attn, batch_size=4, isl=1, step=1023, window_size=0, latency=0.0136)]
    pd.DataFrame(gen).to_parquet(data / "attention" / "vllm" / "0.9.9" / "generation_attention_perf.parquet")
    ar = [dict(META, kernel_source=k, allreduce_dtype="bfloat16", num_gpus=2, message_size=1024, latency=t, backend=b)
          for k, b, t in (("graph", "vllm_graph", 0.0042), ("eager", "vllm_eager", 0.0200))]
    pd.DataFrame(ar).to_parquet(data / "comm" / "vllm" / "0.9.9" / "custom_allreduce_perf.parquet")
    return root


def test_import_keeps_the_sources_meaning(tmp_path):
    source = fake_package(tmp_path / "wheel")
    result = runner.invoke(app, ["import-kernels", str(source), "--gpu", "h100-sxm", "--out", str(tmp_path / "out"),
                                 "--all-shapes"])
    assert result.exit_code == 0, result.output
    t = load_kernel_tables(tmp_path / "out" / "h100-sxm-vllm-0.9.9")
    assert (t.header.device_name, t.header.engine_version) == ("Test GPU", "0.9.9")
    assert t.header.provenance.source == "aiconfigurator-core"
    # ms -> s; of the two per-tensor fp8 kernels the faster (0.014 ms); fp8_block is not per-tensor fp8
    assert t.gemm[("bfloat16", 4096, 4096)] == pytest.approx({1: 15e-6, 8: 16e-6})
    assert t.gemm[("fp8", 4096, 4096)] == pytest.approx({1: 14e-6})
    assert not any(k[0] == "fp8_block" for k in t.gemm)
    # full attention only (the window-128 row dropped); decode KV length = isl 1 + step 1023
    assert list(t.context_attention) == [("bfloat16", 32, 8, 128, 1)]
    assert t.context_attention[("bfloat16", 32, 8, 128, 1)] == pytest.approx({1024: 35.5e-6})
    assert list(t.generation_attention) == [("bfloat16", 32, 8, 128, 4)]
    assert t.generation_attention[("bfloat16", 32, 8, 128, 4)] == pytest.approx({1024: 13.6e-6})
    # 1,024 bf16 elements = 2,048 bytes; under CUDA graphs (the eager row dropped)
    assert list(t.allreduce) == [(2,)] and t.allreduce[(2,)] == pytest.approx({2048: 4.2e-6})


def test_a_folder_without_the_data_is_one_line_and_exit_2(tmp_path):
    result = runner.invoke(app, ["import-kernels", str(tmp_path), "--gpu", "h100-sxm", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "aiconfigurator-core's package folder" in result.stderr


def test_an_output_folder_that_cannot_be_written_is_one_line(tmp_path):
    source = fake_package(tmp_path / "wheel")
    (tmp_path / "file").write_text("")
    result = runner.invoke(app, ["import-kernels", str(source), "--gpu", "h100-sxm", "--out", str(tmp_path / "file")])
    assert result.exit_code == 2
    assert "--out" in result.stderr and "cannot write here" in result.stderr
