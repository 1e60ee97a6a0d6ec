"""`sizer calibrate`'s measurements as kernel tables: the committed CPU profile of the tiny model,
re-keyed by shape, prices a step as the sum of the same measurements."""

from __future__ import annotations

import pytest

from hardware_profiles import CALIBRATED_DIR
from simulator.step_batch import StepBatch
from sizer.inputs.model_spec import load_model
from sizer.inputs.scenario import scenario_from_dict
from sizer.sizing.resolve import resolve
from sizer.timing.aiconfigurator_import import write_tables
from sizer.timing.kernel_step import KernelTableStepTimeModel
from sizer.timing.kernel_tables import load_kernel_tables
from sizer.timing.profile import load_profile
from sizer.timing.profile_kernels import kernel_tables_from_profile
from sizer.timing.roofline import STEP_OVERHEAD_S
from sizer.timing.step_model import roofline_for


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    profile = load_profile(CALIBRATED_DIR / "cpu-tiny-tp1")
    header, rows = kernel_tables_from_profile(profile, load_model("tiny"))
    folder = tmp_path_factory.mktemp("k") / "kernels"
    write_tables(folder, header, rows)
    return load_kernel_tables(folder)


def test_the_profiles_rows_become_shape_keyed_entries(converted):
    # cpu-tiny-tp1/token_ops.csv, tokens 1: qkv_s 5.383e-05 (QKV 8 x 32 + 2 x 2 x 32 = 384 outputs of 256)
    assert converted.gemm[("float32", 384, 256)][1] == pytest.approx(53.83e-6)
    # seq_ops.csv, seqs 1: lm_head_s 0.000280854 (vocabulary 4,096 of 256)
    assert converted.gemm[("float32", 4096, 256)][1] == pytest.approx(280.9e-6)
    # decode_attention.csv, seqs 1, context 0: 0.00042943 s, KV length 1
    assert converted.generation_attention[("float32", 8, 2, 32, 1)][1] == pytest.approx(429.4e-6)
    # prefill_attention.csv, chunk 2, context 0: 0.000484725 s, one sequence
    assert converted.context_attention[("float32", 8, 2, 32, 1)][2] == pytest.approx(484.7e-6)
    h = converted.header
    assert (h.gpu, h.engine, h.provenance.source) == ("cpu", "sizer-engine", "sizer calibrate")


def test_a_decode_step_from_the_converted_tables_is_the_sum_of_the_profiles_entries(converted):
    r = resolve(scenario_from_dict({
        "name": "tiny", "model": "tiny", "hardware": "h100-sxm",
        "deployment": {"engine": "vllm", "quantization": "fp32"},      # KV: the model dtype, fp32
        "workload": {"arrival": {"process": "poisson", "rate_per_s": 1},
                     "prompt_tokens": {"distribution": "fixed", "value": 16},
                     "output_tokens": {"distribution": "fixed", "value": 16}}}, None))
    model = KernelTableStepTimeModel(converted, roofline_for(r))
    assert model.roofline_parts == ()
    # token_ops.csv at 1 token: qkv 53.83 + o 35.506 + gate_up 157.864 + down 58.7 us, 4 layers; lm_head
    # 280.854 us; decode attention on an empty cache 429.43 us x 4 layers (4 significant digits kept);
    # element-wise: 4 layers x 5 kernels (2 norms, rotary, KV write, activation) x the measured rmsnorm
    # 39.735 us, plus 41,984 bytes a token (4 x (2 x 4 x 256 + 2 x (256 + 64) + 4 x 64 + 3 x 768) x 2,
    # tests/sizer/analytic/test_kernel_step.py) at the measured copy bandwidth (both kept exactly in
    # tables.yaml); the step overhead
    e = converted.header.elementwise
    expected = (4 * (53.83 + 35.51 + 157.9 + 58.7) + 280.9 + 4 * 429.4 + 20 * 39.735) * 1e-6 \
        + 41984 / e.memory_bandwidth_bytes_per_s + STEP_OVERHEAD_S
    assert model.step_time(StepBatch.from_seqs([(1, 0)])) == pytest.approx(expected, rel=1e-9)
