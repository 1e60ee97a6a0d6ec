"""`sizer calibrate` and `sizer validate` end to end on the CPU: calibrate the tiny model,
replay the bundled CPU scenario (64 Poisson requests with batching, chunked prefill and
prefix reuse) through the engine and the simulator, and check the prediction's error
(the median over three calibrate-then-validate pairs under 25% at p50; benchmarks/fidelity.py reports figures)."""

import json
import statistics
import time

import pytest
import torch
import yaml
from typer.testing import CliRunner

from sizer.cli import app

cli = CliRunner()
SCENARIO = "engine/scenarios/tiny-cpu.yaml"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_calibrate_refuses_a_gpu_that_is_not_here(tmp_path):
    result = cli.invoke(app, ["calibrate", "--gpu", "h100", "--model", "tiny", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: gpu: no CUDA GPU is present here; run this on a machine with an NVIDIA H100 SXM5 80GB, or use `--device cpu`"]
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("args,words", [
    (["--model", "tiny"], "give either --gpu NAME"),
    (["--model", "tiny", "--gpu", "h100", "--device", "cpu"], "give either --gpu NAME"),
    (["--model", "tiny", "--device", "tpu"], "expected 'cpu'"),
    (["--model", "deepseek-v3", "--device", "cpu"], "does not support MLA"),
    (["--model", "no-such-model", "--device", "cpu"], "unknown model"),
])
def test_calibrate_bad_input_is_one_line(args, words, tmp_path):
    result = cli.invoke(app, ["calibrate", *args, "--out", str(tmp_path)])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1 and words in result.stderr


PAIRS = 3     # calibrate-then-validate pairs: on a shared CPU a calibration itself lands 10-30% fast or slow


@pytest.mark.slow
def test_calibrate_then_validate_on_the_cpu(tmp_path):
    """Each pair calibrates into a fresh folder and validates at once (what a user runs); the
    median over the pairs' relative errors is held to 25%, so one calibration that caught the
    machine in a fast or slow moment does not decide the result."""
    reports, pair_seconds = [], []
    for pair in range(PAIRS):
        start = time.perf_counter()
        out = tmp_path / f"pair{pair}"
        result = cli.invoke(app, ["calibrate", "--device", "cpu", "--model", "tiny", "--out", str(out)])
        assert result.exit_code == 0, result.output
        folder = out / "cpu-tiny-tp1"
        header = yaml.safe_load((folder / "profile.yaml").read_text())
        assert header["device"]["kind"] == "cpu" and header["dtype"] == "float32" and header["device"]["threads"] == 1
        assert header["calls_per_step"]["qkv"] == 4 and header["calls_per_step"]["rmsnorm"] == 9   # 4 layers; 2 x 4 + 1 norms
        assert 0 < header["overhead"]["fixed_s"] < 0.05
        for table in ("token_ops", "seq_ops", "decode_attention", "prefill_attention", "steps"):
            assert (folder / f"{table}.csv").stat().st_size > 0
        result = cli.invoke(app, ["validate", SCENARIO, "--profile", str(folder), "--json"])
        assert result.exit_code == 0, result.output
        reports.append(json.loads(result.stdout))
        pair_seconds.append(time.perf_counter() - start)
    report = reports[0]
    # The workload exercised what it should: 64 requests, prefix-cache hits, chunks mixed with decodes.
    assert report["num_requests"] == 64
    assert report["cached_prompt_tokens"] > 0 and report["mixed_steps"] > 0
    assert report["out_of_range_steps"] == 0
    # The pool is resolve's memory budget (the host's RAM), cut to the engine's 256 MiB on a CPU:
    # 256 MiB / (K and V x 4 layers x 16 tokens x 2 KV heads x 32 dims x 4 B = 32 KiB) = 8,192 blocks.
    assert report["num_blocks"] == 8192 < report["num_blocks_requested"]
    assert "CPU allowance of 256 MiB" in report["num_blocks_limit"]
    for metric in ("ttft_p50_ms", "itl_p50_ms", "e2e_p50_ms"):
        errors = [next(r["relative_error"] for r in rep["rows"] if r["metric"] == metric) for rep in reports]
        assert abs(statistics.median(errors)) < 0.25, (metric, errors)
    # calibrate then validate, as the issue asks, in under 3 minutes
    assert max(pair_seconds) < 180, pair_seconds


def test_validate_refuses_a_profile_of_another_model(tmp_path):
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump({
        "schema_version": 1, "model": {"name": "llama-3.1-8b", "tp": 1}, "device": {"kind": "cpu"}}))
    for name in ("token_ops", "seq_ops"):
        (tmp_path / f"{name}.csv").write_text("tokens,seqs,x_s\n1,1,1e-3\n")
    (tmp_path / "decode_attention.csv").write_text("seqs,context_tokens,time_s\n1,0,1e-3\n")
    (tmp_path / "prefill_attention.csv").write_text("chunk_tokens,context_tokens,time_s\n2,0,1e-3\n")
    result = cli.invoke(app, ["validate", SCENARIO, "--profile", str(tmp_path)])
    assert result.exit_code == 2
    assert "model.name: 'tiny', but the profile was calibrated for 'llama-3.1-8b'" in result.stderr
