"""`sizer calibrate` and `sizer validate` end to end on the CPU: calibrate the tiny model,
replay the bundled CPU scenario (64 Poisson requests with batching, chunked prefill and
prefix reuse) through the engine and the simulator, and check the prediction's error
(the engine's own steps priced within 30% with the machine's drift between calibrating and validating taken out,
machine_speed.py, and the p50 latencies within 30% at the engine's measured step speed; benchmarks/fidelity.py
reports figures)."""

import json
import shutil
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import yaml
from machine_speed import drift_free_error, sampled, slowdown
from typer.testing import CliRunner

import sizer.cli.calibrate
from hardware_profiles import CALIBRATED_DIR
from sizer.cli import app
from sizer.cli.calibrate import user_calibrated_dir
from sizer.timing.kernel_tables import load_kernel_tables
from sizer.timing.profile import load_profile, read_header

cli = CliRunner()
SCENARIO = "engine/scenarios/tiny-cpu.yaml"
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_calibrate_refuses_a_gpu_that_is_not_here(tmp_path):
    result = cli.invoke(app, ["calibrate", "--gpu", "h100", "--model", "tiny", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: gpu: no CUDA GPU is present here; "
        "run this on a machine with an NVIDIA H100 SXM5 80GB, or use `--device cpu`"]
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


# The scenario's own max_num_seqs (engine/scenarios/tiny-cpu.yaml): the calibration's whole-step sweep then runs
# waves of 1 to 16 requests, not up to the CPU default's 64 (sizer/sizing/calibrate.py DEFAULT_LIMITS), which the
# scenario never reaches; the wave of 64 was 25 s of a 62 s calibration (250 steps timed instead of 418; 2026-12-02).
SEQS = "16"


@pytest.mark.parametrize("env,where", [
    ({"SIZER_HOME": "home", "XDG_DATA_HOME": "xdg"}, "home/calibrated"),
    ({"XDG_DATA_HOME": "xdg"}, "xdg/sizer/calibrated"),
    ({}, "user/.local/share/sizer/calibrated"),
])
def test_calibrate_writes_to_a_user_directory_by_default(env, where, tmp_path, monkeypatch):
    """Without --out the profile goes to $SIZER_HOME/calibrated, else $XDG_DATA_HOME/sizer/calibrated,
    else ~/.local/share/sizer/calibrated: never into the repository or the installed package.
    The measurement is stubbed (a copy of the committed profile): only the destination is tested."""
    for name in ("SIZER_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, str(tmp_path / value))
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    destinations = []

    def measured(spec, target, scale, out, bounds, seed, log):
        destinations.append(out)
        return Path(shutil.copytree(CALIBRATED_DIR / "cpu-tiny-tp1", out / "cpu-tiny-tp1"))

    monkeypatch.setattr(sizer.cli.calibrate, "calibrate_profile", measured)
    assert user_calibrated_dir() == tmp_path / where
    assert not user_calibrated_dir().is_relative_to(REPO)
    result = cli.invoke(app, ["calibrate", "--device", "cpu", "--model", "tiny"])
    assert result.exit_code == 0, result.output
    assert destinations == [tmp_path / where]
    assert f"wrote {tmp_path / where / 'cpu-tiny-tp1'}" in result.stdout
    result = cli.invoke(app, ["calibrate", "--device", "cpu", "--model", "tiny", "--out", str(tmp_path / "chosen")])
    assert result.exit_code == 0 and destinations[-1] == tmp_path / "chosen"


@pytest.mark.slow
def test_calibrate_then_validate_on_the_cpu(tmp_path, monkeypatch):
    """Calibrate into the default destination (a fresh $SIZER_HOME) and validate at once, as a user runs them, and
    hold the prediction's error in its two parts (engine/validate.py):

    - the step pricing: the engine's own steps, each batch as it ran, priced by the new profile against their
      measured times, with the machine's drift between calibrating and validating taken out (machine_speed.py: a
      fixed probe sampled all through each), within 40%. The committed profile with every op and overhead timed at
      half replays at -59% (doctored, 2026-12-02).
    - the rest, at the engine's own speed: TTFT, ITL and E2E p50 predicted with every step priced at the speed the
      engine measured in this very run (the replay's ratio, taken in the same run, so no drift to take out),
      within 30%: the scheduler model, and the profile's shape (prefill chunks against decodes, one sequence
      against many). The committed profile with prefill attention at four times its time replays at +39% and,
      at the engine's speed, puts TTFT p50 at +58% and ITL p50 at -25% (doctored, 2026-12-02).

    Until 2026-12-02 the latencies' own errors were held, the median over three pairs: queueing magnifies a step
    bias into TTFT and E2E, and a CI run failed on TTFT p50 at -37%, -48% and -3% (-31%, -52%, -18% drift-free)
    when the calibrations had caught the machine at other speeds than the validations. Seventeen single pairs at
    loads of 0.6 to 4.7 on the 2 cores (2026-12-02), the latencies' own p50 errors -35% to +39%: the drift-free
    step error -16% to +17%, the p50s at the engine's speed -16% to +20%. One pair, where three took 100 s."""
    monkeypatch.setenv("SIZER_HOME", str(tmp_path))
    start = time.process_time()
    with sampled() as calibrating:
        result = cli.invoke(app, ["calibrate", "--device", "cpu", "--model", "tiny", "--max-num-seqs", SEQS])
    assert result.exit_code == 0, result.output
    calibrated = time.process_time()
    folder = tmp_path / "calibrated" / "cpu-tiny-tp1"
    header = read_header(folder)
    assert header.device.kind == "cpu" and header.dtype == "float32" and header.device.threads == 1
    assert header.calls_per_step["qkv"] == 4 and header.calls_per_step["rmsnorm"] == 9   # 4 layers; 2 x 4 + 1 norms
    assert 0 < header.overhead.fixed_s < 0.05
    for table in ("token_ops", "seq_ops", "decode_attention", "prefill_attention", "steps"):
        assert (folder / f"{table}.csv").stat().st_size > 0
    # the same measurements as kernel tables (docs/engine.md): the tiny model's fused QKV is 384 x 256
    tables = load_kernel_tables(folder / "kernels")
    assert tables.header.engine == "sizer-engine" and ("float32", 384, 256) in tables.gemm
    validating = time.process_time()
    with sampled() as validated:
        result = cli.invoke(app, ["validate", SCENARIO, "--profile", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    calibrate_s, validate_s = calibrated - start, time.process_time() - validating
    report = json.loads(result.stdout)
    # The workload exercised what it should: 64 requests, prefix-cache hits, chunks mixed with decodes.
    assert report["num_requests"] == 64
    assert report["cached_prompt_tokens"] > 0 and report["mixed_steps"] > 0
    assert report["out_of_range_steps"] == 0
    # The pool is resolve's memory budget (the host's RAM), cut to the engine's 256 MiB on a CPU:
    # 256 MiB / (K and V x 4 layers x 16 tokens x 2 KV heads x 32 dims x 4 B = 32 KiB) = 8,192 blocks.
    assert report["num_blocks"] == 8192 < report["num_blocks_requested"]
    assert "CPU allowance of 256 MiB" in report["num_blocks_limit"]
    slow = slowdown(calibrating, validated)
    step_error = drift_free_error(report["replay"]["relative_error"], slow)
    # 40%: the doctored profile (every op at half) replays at -59%; a sound one's drift-free error reached +31% on a
    # loaded CI run (2026-12-03: raw +7%, the probe 1.23x slower while validating), past the 30% held until then
    assert abs(step_error) < 0.40, (report["replay"], slow, step_error)
    for row in report["rows"]:
        if row["metric"] in ("ttft_p50_ms", "itl_p50_ms", "e2e_p50_ms"):
            assert abs(row["at_engine_speed_error"]) < 0.30, (row, report["replay"])
    # Calibrating took about twice the validation's CPU seconds (20.4 and 10.5 CPU s with SEQS, where the default
    # 64 sequences took 39.5 and 9.3, 4.2x, at a load of 5, 2026-12-02). Held as a ratio of the process's CPU
    # seconds in the same test (wall time at a load of 12 put one pair at 5.3x): a calibration that measured 2.5
    # times more than it does fails.
    assert calibrate_s < 5 * validate_s, (calibrate_s, validate_s)


def test_validate_refuses_a_profile_of_another_model(tmp_path):
    folder = Path(shutil.copytree(CALIBRATED_DIR / "cpu-tiny-tp1", tmp_path / "profile"))
    header = load_profile(folder).header
    other = replace(header, model=replace(header.model, name="llama-3.1-8b"))
    (folder / "profile.yaml").write_text(yaml.safe_dump(other.to_dict()))
    result = cli.invoke(app, ["validate", SCENARIO, "--profile", str(folder)])
    assert result.exit_code == 2
    assert "model.name: 'tiny', but the profile was calibrated for 'llama-3.1-8b'" in result.stderr


def test_a_device_pool_too_small_for_the_longest_request_is_one_line(monkeypatch):
    # the device's own cap (found once the weights are loaded) below the 22 blocks of 16 the longest of the first
    # two requests needs (346 tokens: ceil(345 / 16) = 22; tests/sizer/cli/test_engine_flag_bounds.py): one line,
    # not the scheduler refusing every request and the metrics failing on none
    import engine.validate
    monkeypatch.setattr(engine.validate, "device_block_limit", lambda *a: (5, "a test's cap"))
    result = cli.invoke(app, ["validate", SCENARIO, "--profile", str(CALIBRATED_DIR / "cpu-tiny-tp1"),
                              "--num-requests", "2"])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == ("error: device: the pool holds 5 KV blocks of 16 (capped by a test's cap); the "
                                     "longest request replayed (346 tokens) needs 22: replay shorter requests or a "
                                     "smaller model")
