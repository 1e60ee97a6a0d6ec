"""`sizer import-kernels`: aiconfigurator-core's parquet tables converted with their meaning kept
(ms to us, KV length isl + step, all-reduce elements to bytes, the fastest kernel, full attention)."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from hardware_profiles import PROFILES_DIR
from sizer.cli import app
from sizer.timing.kernel_tables import load_kernel_tables

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


def table_folder(source, op: str):
    """The fake package's folder of `op`'s vLLM 0.9.9 tables (made)."""
    folder = source / "aiconfigurator_core" / "systems" / "data" / "h100_sxm" / op / "vllm" / "0.9.9"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def imported(source, out, *flags: str):
    """`sizer import-kernels` of the fake package's h100_sxm vLLM tables into `out`, read back."""
    result = runner.invoke(app, ["import-kernels", str(source), "--gpu", "h100-sxm", "--out", str(out), *flags])
    assert result.exit_code == 0, result.output
    return load_kernel_tables(out / "h100-sxm-vllm-0.9.9")


def test_import_keeps_the_sources_meaning(tmp_path):
    source = fake_package(tmp_path / "wheel")
    t = imported(source, tmp_path / "out", "--all-shapes")
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


def test_tensorrt_llm_tables_name_sizers_engine_and_keep_its_one_all_reduce(tmp_path):
    source = fake_package(tmp_path / "wheel")
    data = source / "aiconfigurator_core" / "systems" / "data" / "h100_sxm"
    for sub in ("gemm", "attention", "comm"):
        (data / sub / "vllm").rename(data / sub / "trtllm")
    ar = data / "comm" / "trtllm" / "0.9.9" / "custom_allreduce_perf.parquet"
    # TensorRT-LLM's table has no backend column: one kernel, its own
    pd.DataFrame([dict(META, kernel_source="TRTLLM", allreduce_dtype="bfloat16", num_gpus=2, message_size=1024,
                       latency=0.0027)]).to_parquet(ar)
    result = runner.invoke(app, ["import-kernels", str(source), "--gpu", "h100-sxm", "--framework", "trtllm",
                                 "--out", str(tmp_path / "out"), "--all-shapes"])
    assert result.exit_code == 0, result.output
    t = load_kernel_tables(tmp_path / "out" / "h100-sxm-tensorrt-llm-0.9.9")
    assert t.header.engine == "tensorrt-llm"                 # deployment.engine's name, so plans find the folder
    assert t.allreduce[(2,)] == pytest.approx({2048: 2.7e-6})


def test_an_unknown_framework_is_one_line_and_exit_2(tmp_path):
    result = runner.invoke(app, ["import-kernels", str(fake_package(tmp_path / "wheel")), "--gpu", "h100-sxm",
                                 "--framework", "lmdeploy", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "--framework" in result.output


def test_a_folder_without_the_data_is_one_line_and_exit_2(tmp_path):
    result = runner.invoke(app, ["import-kernels", str(tmp_path), "--gpu", "h100-sxm", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "aiconfigurator-core's package folder" in result.stderr


def test_an_output_folder_that_cannot_be_written_is_one_line(tmp_path):
    source = fake_package(tmp_path / "wheel")
    (tmp_path / "file").write_text("")
    result = runner.invoke(app, ["import-kernels", str(source), "--gpu", "h100-sxm", "--out", str(tmp_path / "file")])
    assert result.exit_code == 2       # refused before the tables are read (check_folder_destination)
    assert result.stderr == f"error: {tmp_path / 'file'}: --out: is a file; expected a folder to write into\n"


def test_mla_module_and_gdn_tables_keep_their_meaning(tmp_path):
    source = fake_package(tmp_path / "wheel")
    mla_folder, gdn_folder = table_folder(source, "mla"), table_folder(source, "linear_attention")
    mla = dict(META, model="deepseek-ai/DeepSeek-V3", mla_dtype="bfloat16", kv_cache_dtype="bfloat16", tp_size=1,
               num_heads=16, batch_size=2)
    ctx = [dict(mla, kernel_source=k, gemm_type="fp8_block", isl=1024, step=0, latency=t)
           for k, t in (("FLASH_ATTN", 0.300), ("FLASH_ATTN_MLA", 0.250))]             # two backends: the faster
    ctx.append(dict(mla, kernel_source="FLASH_ATTN", gemm_type="fp8_block", isl=1024, step=0, latency=0.1,
                    model="someone/Other-MLA"))                                     # a model not in MLA_MODELS
    ctx.append(dict(mla, kernel_source="FLASH_ATTN", gemm_type="nvfp4", isl=1024, step=0, latency=0.1))
    pd.DataFrame(ctx).to_parquet(mla_folder / "mla_context_module_perf.parquet")
    gen = [dict(mla, kernel_source="FLASHMLA", gemm_type="bfloat16", isl=1, step=4096, latency=0.120)]
    pd.DataFrame(gen).to_parquet(mla_folder / "mla_generation_module_perf.parquet")
    shape = dict(META, op_name="gdn", d_conv=4, num_k_heads=4, head_k_dim=128, num_v_heads=8, head_v_dim=128)
    gdn = [dict(shape, phase="context", kernel_source=k, batch_size=1, seq_len=512, num_tokens=512, d_model=d,
                latency=t)
           for d, k, t in ((2048, "causal_conv1d_fn", 0.004), (2048, "chunk_gated_delta_rule_flashinfer", 0.030),
                           (2048, "chunk_gated_delta_rule_triton", 0.040),
                           (4096, "causal_conv1d_fn", 0.005), (4096, "chunk_gated_delta_rule_flashinfer", 0.031))]
    gdn += [dict(shape, phase="generation", kernel_source=k, batch_size=8, seq_len=1, num_tokens=8, d_model=2048,
                 latency=t)
            for k, t in (("causal_conv1d_update", 0.002), ("fused_recurrent_gated_delta_rule_packed_decode", 0.006))]
    # a size whose delta-rule kernel failed (out of memory): no row rather than the convolution alone
    gdn.append(dict(shape, phase="generation", kernel_source="causal_conv1d_update", batch_size=16, seq_len=1,
                    num_tokens=16, d_model=2048, latency=0.003))
    pd.DataFrame(gdn).to_parquet(gdn_folder / "gdn_perf.parquet")
    t = imported(source, tmp_path / "out", "--all-shapes")
    # DeepSeek-V3's block (catalog config: hidden 7168, q LoRA 1536, KV LoRA 512, qk 128 + 64, v 128), 16 heads
    dims = (7168, 1536, 512, 128, 64, 128, 16)
    assert list(t.mla_context) == [("fp8_block", "bfloat16", *dims, 2)]
    assert t.mla_context[("fp8_block", "bfloat16", *dims, 2)] == pytest.approx({1024: 250e-6})
    # decode: the KV length is the source's step (the new token's position + 1)
    assert list(t.mla_generation) == [("bfloat16", "bfloat16", *dims, 2)]
    assert t.mla_generation[("bfloat16", "bfloat16", *dims, 2)] == pytest.approx({4096: 120e-6})
    # one GDN layer = convolution + the fastest delta-rule kernel (4 + 30 us); of the two models' sums the faster
    assert list(t.gdn_context) == [(4, 128, 8, 128, 4, 1)]
    assert t.gdn_context[(4, 128, 8, 128, 4, 1)] == pytest.approx({512: 34e-6})
    assert list(t.gdn_generation) == [(4, 128, 8, 128, 4)]
    assert t.gdn_generation[(4, 128, 8, 128, 4)] == pytest.approx({8: 8e-6})


def test_the_system_is_the_profiles(tmp_path, monkeypatch):
    # aiconfigurator's name for a GPU is its profile's aiconfigurator_system (issue 22: a GPU is one YAML file): a
    # profile of the user's naming h100_sxm imports its tables under its own id; an alias finds it too
    source = fake_package(tmp_path / "wheel")
    profiles = tmp_path / "home" / "profiles"
    profiles.mkdir(parents=True)
    data = yaml.safe_load((PROFILES_DIR / "h100-sxm.yaml").read_text())
    data.update(id="x9000", aliases=["x9k"], kubernetes=None)
    (profiles / "x9000.yaml").write_text(yaml.safe_dump(data))
    monkeypatch.setenv("SIZER_HOME", str(tmp_path / "home"))
    result = runner.invoke(app, ["import-kernels", str(source), "--gpu", "x9k", "--out", str(tmp_path / "out"),
                                 "--all-shapes"])
    assert result.exit_code == 0, result.output
    assert load_kernel_tables(tmp_path / "out" / "x9000-vllm-0.9.9").header.gpu == "x9000"
    # a GPU aiconfigurator has no system for: one line naming the profile's field
    result = runner.invoke(app, ["import-kernels", str(source), "--gpu", "h20", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    said = " ".join(result.output.split())
    assert "h20.yaml: aiconfigurator_system: --gpu h20: the profile names no aiconfigurator-core system" in said


def test_mla_kernel_tables_are_read_where_no_module_table_is(tmp_path):
    # SGLang's MLA tables are the attention kernel alone (context_mla_perf, generation_mla_perf), no model named:
    # DeepSeek-V3's attention (latent 512, nope 128, rope 64, value 128: the catalog's deepseek-v3), heads per GPU
    source = fake_package(tmp_path / "wheel")
    folder = table_folder(source, "mla")
    row = dict(META, op_name="mla", mla_dtype="bfloat16", kv_cache_dtype="bfloat16", num_heads=16, tp_size=4,
               batch_size=4)
    ctx = [dict(row, kernel_source=k, isl=1024, step=0, latency=t) for k, t in (("flash_attention", 0.168),
                                                                               ("other", 0.2))]
    ctx.append(dict(row, kernel_source="flash_attention", isl=1024, step=512, latency=0.3))    # a prefix: not kept
    ctx.append(dict(row, kernel_source="flash_attention", isl=1024, step=0, mla_dtype="fp8", latency=0.1))
    pd.DataFrame(ctx).to_parquet(folder / "context_mla_perf.parquet")
    gen = [dict(row, kernel_source="flash_attention", isl=1, step=2047, latency=0.0177)]
    pd.DataFrame(gen).to_parquet(folder / "generation_mla_perf.parquet")
    t = imported(source, tmp_path / "out", "--all-shapes")
    assert t.mla_context == {} and t.mla_generation == {}
    # prefill: the faster kernel of the prefix-free row; decode: KV length isl + step = 2,048
    assert dict(t.mla_kernel_context) == {("bfloat16", 512, 128, 64, 128, 16, 4): pytest.approx({1024: 168e-6})}
    assert dict(t.mla_kernel_generation) == {("bfloat16", 512, 128, 64, 128, 16, 4): pytest.approx({2048: 17.7e-6})}


def test_marlin_mxfp4_moe_rows_are_their_own_dtype_in_every_shape(tmp_path):
    # vLLM's Marlin MXFP4 MoE and OpenAI's triton_kernels are both moe_dtype w4a16_mxfp4 in the source; the faster of
    # the two would stand for both. Marlin's rows become `w4a16_mxfp4_marlin`, kept in shapes no catalog model has
    # (896 experts of 3,584 x 3,072, top 16: the only shape the H100/H200 tables measure Marlin in); the others
    # keep the catalog's shapes only (a 3,584 x 3,072 triton row is pruned)
    source = fake_package(tmp_path / "wheel")
    folder = table_folder(source, "moe")
    row = dict(META, op_name="moe", moe_dtype="w4a16_mxfp4", distribution="balanced", moe_tp_size=1, moe_ep_size=1,
               num_tokens=8192)
    gpt_oss = dict(row, hidden_size=2880, inter_size=2880, topk=4, num_experts=128)
    other = dict(row, hidden_size=3584, inter_size=3072, topk=16, num_experts=896)
    pd.DataFrame([dict(gpt_oss, kernel_source="vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic",
                       latency=2.9),
                  dict(gpt_oss, kernel_source="vllm_gptossmxfp4moe_marlin_marlinexperts", latency=7.0),
                  dict(other, kernel_source="vllm_compressedtensorsw4a4mxfp4moe_marlin_marlinexperts", latency=44.4),
                  dict(other, kernel_source="triton", latency=20.0)]).to_parquet(folder / "moe_perf.parquet")
    t = imported(source, tmp_path / "out")
    assert dict(t.moe) == {("w4a16_mxfp4", 2880, 2880, 4, 128, 1, 1): pytest.approx({8192: 2.9e-3}),
                           ("w4a16_mxfp4_marlin", 2880, 2880, 4, 128, 1, 1): pytest.approx({8192: 7.0e-3}),
                           ("w4a16_mxfp4_marlin", 3584, 3072, 16, 896, 1, 1): pytest.approx({8192: 44.4e-3})}


def test_power_law_moe_rows_keep_their_routing_for_experts_sliced_by_tp(tmp_path):
    # aiconfigurator-core measures every MoE shape three ways: tokens routed evenly (balanced) and by a power law of
    # skew 1.01 or 1.2. The balanced rows go to moe (sliced by TP or spread over EP); the power-law rows to moe_skewed
    # with their routing, for experts sliced by TP only (the split sizer reads them for; EP takes the balanced rows
    # and the busiest GPU's imbalance), the fastest kernel of each (ms to us)
    source = fake_package(tmp_path / "wheel")
    folder = table_folder(source, "moe")
    row = dict(META, op_name="moe", moe_dtype="bfloat16", hidden_size=2048, inter_size=768, topk=8, num_experts=128,
               num_tokens=32, kernel_source="triton")
    pd.DataFrame([dict(row, distribution="balanced", moe_tp_size=1, moe_ep_size=1, latency=0.422),
                  dict(row, distribution="balanced", moe_tp_size=1, moe_ep_size=2, latency=0.300),
                  dict(row, distribution="power_law_1.2", moe_tp_size=1, moe_ep_size=1, latency=0.359),
                  dict(row, distribution="power_law_1.2", moe_tp_size=1, moe_ep_size=1, latency=0.500,
                       kernel_source="slower"),
                  dict(row, distribution="power_law_1.01", moe_tp_size=2, moe_ep_size=1, latency=0.250),
                  dict(row, distribution="power_law_1.2", moe_tp_size=1, moe_ep_size=2, latency=0.400),
                  ]).to_parquet(folder / "moe_perf.parquet")
    t = imported(source, tmp_path / "out")
    shape = ("bfloat16", 2048, 768, 8, 128)
    assert dict(t.moe) == {(*shape, 1, 1): pytest.approx({32: 422e-6}), (*shape, 1, 2): pytest.approx({32: 300e-6})}
    assert dict(t.moe_skewed) == {("power_law_1.2", *shape, 1, 1): pytest.approx({32: 359e-6}),
                                  ("power_law_1.01", *shape, 2, 1): pytest.approx({32: 250e-6})}
