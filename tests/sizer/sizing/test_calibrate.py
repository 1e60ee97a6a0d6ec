"""`sizer calibrate`'s writer (sizer/sizing/calibrate.py `write_profile`) on a measurement rebuilt from the committed
CPU profile (hardware_profiles/calibrated/cpu-tiny-tp1, which `sizer calibrate --device cpu --model tiny` wrote):
the engine's rows and whole steps as engine/calibrate.py returns them, written and fitted by sizer alone (no torch)."""

import csv
import dataclasses
import statistics
from dataclasses import asdict
from types import SimpleNamespace

import pytest

from engine.config import engine_config
from hardware_profiles import CALIBRATED_DIR
from simulator.step_batch import StepBatch
from sizer.inputs.model_spec import load_model
from sizer.sizing.calibrate import DEFAULT_LIMITS, StepBounds, write_profile
from sizer.timing.profile import CalibratedStepTimeModel, Limits, load_profile, read_header

CPU_TINY = CALIBRATED_DIR / "cpu-tiny-tp1"


def rows(name: str) -> list[dict]:
    with (CPU_TINY / name).open(newline="") as f:
        return [{k: (int(v) if v.isdigit() else float(v)) for k, v in r.items()} for r in csv.DictReader(f)]


def measurement():
    """The committed profile's tables and steps as the engine hands them to sizer (engine.calibrate.ProfileMeasurement's
    fields; steps: engine.runner.StepRecord's batch, duration_s and forward_s)."""
    h = read_header(CPU_TINY)
    achieved = asdict(h.achieved)
    achieved = {k: v for k, v in achieved.items() if v is not None}
    steps = [SimpleNamespace(batch=StepBatch(r["num_seqs"], r["new_tokens"], r["context_tokens"], r["attention_pairs"],
                                             r["prefill_seqs"], r["prefill_tokens"]),
                             duration_s=r["measured_s"], forward_s=r["forward_s"]) for r in rows("steps.csv")]
    return h, SimpleNamespace(
        token_ops=rows("token_ops.csv"), seq_ops=rows("seq_ops.csv"), decode_attention=rows("decode_attention.csv"),
        prefill_attention=rows("prefill_attention.csv"), allreduce=[], achieved=achieved,
        calls_per_step=dict(h.calls_per_step), per_layer_ops=h.per_layer_ops,
        allreduce_calls_per_layer=h.allreduce_calls_per_layer, device_kind=h.device.kind, device_name=h.device.name,
        threads=h.device.threads, versions=asdict(h.versions), dtype=h.dtype, dtype_bytes=h.dtype_bytes,
        kernels=h.kernels, steps=steps)


def test_the_committed_profile_is_written_again_from_its_measurements(tmp_path):
    committed, m = measurement()
    cfg = engine_config(load_model("tiny"))
    folder = write_profile(m, cfg, "cpu", 1.0, committed.limits, tmp_path)
    assert folder == tmp_path / "cpu-tiny-tp1"                  # <device>-<model>-tp<N>
    written = load_profile(folder)
    h = written.header
    # what the engine measured is kept as it was: the header's facts and every table cell
    assert (h.device, h.versions, h.model, h.limits, h.calls_per_step, h.achieved) == (
        committed.device, committed.versions, committed.model, committed.limits, committed.calls_per_step,
        committed.achieved)
    original = load_profile(CPU_TINY)
    assert (written.token_ops.x == original.token_ops.x).all()
    columns = original.token_ops.columns
    assert all((written.token_ops.columns[k] == columns[k]).all() for k in columns)
    assert (written.decode_attention.values == original.decode_attention.values).all()
    # the overhead refitted to the committed steps gives the committed fit: same steps kept and dropped, the same
    # coefficients up to steps.csv's 9 significant digits (the committed fit saw the unrounded times)
    o, want = h.overhead, committed.overhead
    assert (o.fit_steps, o.dropped_steps) == (want.fit_steps, want.dropped_steps) == (425, 4)
    for name in ("fixed_s", "per_seq_s", "kernel_factor", "decode_fixed_s", "decode_kernel_factor"):
        assert getattr(o, name) == pytest.approx(getattr(want, name), rel=1e-5), name
    # the whole-step error is the fitted model's median relative error over those steps (13.5% here; the committed
    # header's 13.4% was priced by the step model of its day)
    model = CalibratedStepTimeModel(written)
    assert o.step_error_p50 == statistics.median(abs(model.step_time(r.batch) - r.duration_s) / r.duration_s
                                                 for r in m.steps)
    assert o.step_error_p50 == pytest.approx(want.step_error_p50, abs=0.005)
    # steps.csv: the tables' price of each step, as the committed one has it
    assert [r["tables_s"] for r in rows("steps.csv")] == pytest.approx(
        [float(r["tables_s"]) for r in csv.DictReader((folder / "steps.csv").open())], rel=1e-8)


def test_the_step_bounds_default_by_device_kind():
    # flags left out take the CPU defaults (256 tokens, 64 sequences, 2,048 tokens of context); sequences never
    # above the tokens of a step, context never beyond the model's positions
    assert DEFAULT_LIMITS["cpu"] == (256, 64, 2048)
    assert StepBounds(None, None, None, 16).limits("cpu", None) == Limits(256, 64, 2048, 16)
    assert StepBounds(32, None, 8192, 16).limits("cpu", 4096) == Limits(32, 32, 4096, 16)


@pytest.mark.parametrize(("name", "folder"), [("../../escaped", "cpu-..--..--escaped-tp1"),
                                              ("Qwen/Qwen3-0.6B", "cpu-Qwen--Qwen3-0.6B-tp1"),
                                              ("a\nb\\c", "cpu-a-b-c-tp1"),
                                              ("x" * 300, "cpu-" + "x" * (255 - 8) + "-tp1")])
def test_the_profile_folder_is_one_folder_inside_out_whatever_the_model_is_called(tmp_path, name, folder):
    # the folder is named after the model: a config's `_sizer.id` of ../../escaped wrote the profile two folders above
    # --out; a Hugging Face id made a folder per organisation; a 300-character id was a traceback (File name too
    # long) after the minutes of measuring
    committed, m = measurement()
    cfg = dataclasses.replace(engine_config(load_model("tiny")), name=name)
    out = tmp_path / "a" / "b"
    written = write_profile(m, cfg, "cpu", 1.0, committed.limits, out)
    assert written == out / folder and len(folder.encode()) <= 255
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_dir()) == sorted(["a", "b", folder])
