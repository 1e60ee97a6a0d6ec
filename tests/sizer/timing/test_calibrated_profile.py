"""The calibrated step-time model on a hand-made profile whose tables are exact linear or
bilinear functions, so every prediction can be derived by hand."""

import copy
import csv
from dataclasses import replace

import pytest
import yaml

from hardware_profiles import CALIBRATED_DIR
from simulator.step_batch import StepBatch, split_attention
from sizer.timing.profile import (
    CalibratedStepTimeModel,
    DeviceInfo,
    ModelInfo,
    Overhead,
    ProfileHeader,
    load_profile,
)
from sizer.timing.roofline import decode_batch
from validation.errors import FieldError

CPU_TINY = CALIBRATED_DIR / "cpu-tiny-tp1"


def write(path, rows):
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


@pytest.fixture
def profile(tmp_path):
    # qkv: 1e-4 + 1e-5 (t - 1) s per call; embed 1e-5 flat; lm_head 1e-4 + 1e-5 (s - 1); sampling 1e-5;
    # decode attention 1e-5 + 1e-6 s + 1e-8 s c; prefill attention 2e-5 + 1e-7 n + 1e-9 n c (bilinear: exact).
    write(tmp_path / "token_ops.csv", [{"tokens": t, "qkv_s": 1e-4 + 1e-5 * (t - 1), "embed_s": 1e-5}
                                       for t in (1, 101)])
    write(tmp_path / "seq_ops.csv", [{"seqs": s, "lm_head_s": 1e-4 + 1e-5 * (s - 1), "sampling_s": 1e-5}
                                     for s in (1, 65)])
    write(tmp_path / "decode_attention.csv", [{"seqs": s, "context_tokens": c,
                                               "time_s": 1e-5 + 1e-6 * s + 1e-8 * s * c}
                                              for s in (1, 64) for c in (0, 1000)])
    write(tmp_path / "prefill_attention.csv", [{"chunk_tokens": n, "context_tokens": c,
                                                "time_s": 2e-5 + 1e-7 * n + 1e-9 * n * c}
                                               for n in (2, 256) for c in (0, 1000)])
    # The committed CPU profile's header (versions, limits, achieved) with this test's model and overhead.
    header = replace(load_profile(CPU_TINY).header, device=DeviceInfo("cpu", "cpu", "test CPU", 1),
                     dtype="float32", dtype_bytes=4, model=ModelInfo("tiny", 1, 256, 2, 2, 1.0, None),
                     calls_per_step={"embed": 1, "qkv": 2}, per_layer_ops=("qkv",),
                     allreduce_calls_per_layer=0, overhead=Overhead(fixed_s=1e-3, per_seq_s=1e-4, kernel_factor=1.0))
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump(header.to_dict()))
    return load_profile(tmp_path)


def with_overhead(profile, **changes):
    return replace(profile, header=replace(profile.header, overhead=replace(profile.header.overhead, **changes)))


# Three decodes on 100, 200 and 300 cached tokens and a 50-token chunk on 40 cached ones.
BATCH = StepBatch.from_seqs([(1, 100), (1, 200), (1, 300), (50, 40)])


def test_split_attention_recovers_the_prefill_chunk():
    decode, decode_ctx, prefill, n, c = split_attention(BATCH)
    assert (decode, decode_ctx, prefill, n, c) == (3, 200.0, 1, 50.0, 40.0)


def test_split_attention_equal_chunks_and_one_token_chunks():
    # two 10-token chunks on 30 cached tokens each and one decode on 7: exact (equal chunks)
    assert split_attention(StepBatch.from_seqs([(10, 30), (10, 30), (1, 7)])) == (1, 7.0, 2, 10.0, 30.0)
    # a 1-token prefill chunk costs what a decode costs: it is counted as one
    one = StepBatch.from_seqs([(1, 9), (1, 5)], prefill=[True, False])
    assert split_attention(one) == (2, 7.0, 0, 0.0, 0.0)


def test_step_time_is_the_sum_of_the_tables(profile):
    model = CalibratedStepTimeModel(profile)
    # 53 new tokens: qkv 2 x (1e-4 + 52e-5) = 1.24e-3; embed 1e-5; 4 seqs: lm_head 1.3e-4,
    # sampling 1e-5; decode 2 layers x (1e-5 + 3e-6 + 1e-8 x 3 x 200) = 3.8e-5; prefill 2 x
    # (2e-5 + 5e-6 + 2e-6) = 5.4e-5; overhead 1e-3 + 4 x 1e-4 = 1.4e-3. Total 2.882e-3 s.
    parts, inside = model.breakdown(BATCH)
    assert inside
    assert parts["qkv"] == pytest.approx(1.24e-3)
    assert parts["decode_attention"] == pytest.approx(3.8e-5)
    assert parts["prefill_attention"] == pytest.approx(5.4e-5)
    assert model.step_time(BATCH) == pytest.approx(2.882e-3)
    assert model.out_of_range_steps == 0 and model.steps == 1
    assert "test CPU" in model.name


def test_a_verification_looks_the_lm_head_up_at_its_logits_rows(profile):
    # two sequences verifying 3 drafts each: 2 + 6 = 8 logits rows (vLLM's logits_indices: the draft positions and
    # the bonus tokens), lm_head 1e-4 + 1e-5 x 7 = 1.7e-4 s where 2 rows cost 1.1e-4; sampling stays by sequences
    parts, _ = CalibratedStepTimeModel(profile).breakdown(StepBatch(2, 8, 200, 2 * (4 * 100 + 10), 0, 0, 6))
    assert parts["lm_head"] == pytest.approx(1.7e-4) and parts["sampling"] == pytest.approx(1e-5)


def test_more_layers_scale_the_per_layer_parts(profile):
    # 4 layers instead of 2 double qkv (+1.24e-3), decode (+3.8e-5) and prefill (+5.4e-5)
    four = CalibratedStepTimeModel(profile, num_layers=4)
    assert four.step_time(BATCH) == pytest.approx(2.882e-3 + 1.24e-3 + 3.8e-5 + 5.4e-5)


def test_outside_the_tables_is_counted_and_extrapolated_or_handed_to_the_fallback(profile):
    big = StepBatch.from_seqs([(201, 0)])                    # 201 tokens > the 101 measured
    model = CalibratedStepTimeModel(profile)
    parts, inside = model.breakdown(big)
    assert not inside
    assert parts["qkv"] == pytest.approx(2 * (1e-4 + 200e-5))  # the last segment, extended
    model.step_time(big)
    assert model.out_of_range_steps == 1

    class Fallback:
        name = "roofline"

        def step_time(self, batch):
            return 0.5

    with_fallback = CalibratedStepTimeModel(profile, fallback=Fallback())
    assert with_fallback.step_time(big) == 0.5 and with_fallback.out_of_range_steps == 1
    assert with_fallback.step_time(BATCH) == pytest.approx(2.882e-3)


def test_bad_profiles_are_one_line_input_errors(tmp_path, profile):
    with pytest.raises(FieldError, match="no profile.yaml"):
        load_profile(tmp_path / "missing")
    path = profile.path / "profile.yaml"
    good = profile.header.to_dict()
    path.write_text(yaml.safe_dump({"schema_version": 99}))
    with pytest.raises(FieldError, match="schema_version"):
        load_profile(profile.path)
    # a missing key or a wrong type names the file and the dotted key, never a KeyError
    broken = copy.deepcopy(good)
    del broken["overhead"]["per_seq_s"]
    path.write_text(yaml.safe_dump(broken))
    with pytest.raises(FieldError) as missing:
        load_profile(profile.path)
    assert str(missing.value) == f"{path}: overhead.per_seq_s: missing; expected a number"
    broken = copy.deepcopy(good)
    broken["model"]["tp"] = "two"
    path.write_text(yaml.safe_dump(broken))
    with pytest.raises(FieldError, match=r"profile.yaml: model.tp: expected an integer, got 'two'"):
        load_profile(profile.path)


@pytest.mark.parametrize("name", sorted(p.parent.name for p in CALIBRATED_DIR.glob("*/profile.yaml")))
def test_committed_profiles_read_and_write_back_unchanged(name):
    profile = load_profile(CALIBRATED_DIR / name)
    raw = yaml.safe_load((CALIBRATED_DIR / name / "profile.yaml").read_text())
    assert ProfileHeader.from_dict(profile.header.to_dict(), "") == profile.header
    assert profile.header.to_dict() == raw


def test_kernel_factor_scales_the_tables_not_the_overhead(profile):
    # Doubling the kernels: 2 x (2.882e-3 - 1.4e-3) + 1.4e-3 = 4.364e-3 s.
    doubled = CalibratedStepTimeModel(with_overhead(profile, kernel_factor=2.0))
    assert doubled.step_time(BATCH) == pytest.approx(4.364e-3)


def test_tp_profiles_add_the_all_reduce(profile):
    # TP 2, hidden 256 in float32: 53 tokens x 256 x 4 bytes = 54,272 bytes per all-reduce;
    # the table 10 us + 1 ns per byte gives 64.272 us, x 2 per layer x 2 layers = 257.088 us.
    write(profile.path / "allreduce.csv", [{"bytes": b, "time_s": 1e-5 + 1e-9 * b} for b in (4096, 131072)])
    header = replace(profile.header, allreduce_calls_per_layer=2, model=replace(profile.header.model, tp=2))
    (profile.path / "profile.yaml").write_text(yaml.safe_dump(header.to_dict()))
    parts, inside = CalibratedStepTimeModel(load_profile(profile.path)).breakdown(BATCH)
    assert inside and parts["allreduce"] == pytest.approx(257.088e-6)


def test_decode_only_steps_use_their_own_fitted_line():
    profile = load_profile(CPU_TINY)
    o = profile.header.overhead
    assert o.decode_kernel_factor is not None and o.decode_fixed_s is not None
    doubled = with_overhead(profile, decode_kernel_factor=2 * o.decode_kernel_factor)
    base, twice = CalibratedStepTimeModel(profile), CalibratedStepTimeModel(doubled)
    decode = decode_batch(4, 300)
    kernels = base.step_time(decode) - o.decode_fixed_s - o.per_seq_s * 4
    # doubling the decode factor doubles the kernel part of a decode-only step ...
    assert twice.step_time(decode) - base.step_time(decode) == pytest.approx(kernels)
    # ... and leaves a step with a prefill chunk alone
    mixed = StepBatch.from_seqs([(1, 300), (1, 200), (64, 0)], prefill=[False, False, True])
    assert twice.step_time(mixed) == base.step_time(mixed)
