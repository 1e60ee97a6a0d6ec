"""Format x hardware: native where the GPU has the datapath and vLLM the kernels, weight-only where vLLM
has such a kernel (the stored bytes stay quantised, the GEMMs run in 16 bits), refused where it has
none. The sources are cited in sizer/analytic/format_support.py: vLLM's Supported Hardware table,
its Marlin FP8/FP4 fallbacks, its ROCm platform's quantisation methods."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.analytic.format_support import execution
from sizer.analytic.formats import FORMATS, checkpoint_format
from sizer.cli import app
from sizer.inputs.hardware import load_hardware
from sizer.inputs.model_spec import CATALOG_DIR
from sizer.inputs.quantization import parse_hf_quant_config, parse_quantization, parse_sidecar
from validation.errors import FieldError

MODELS = Path(__file__).resolve().parents[2] / "data" / "models"
NVFP4 = parse_hf_quant_config(json.loads((MODELS / "qwen3-30b-a3b-nvfp4" / "hf_quant_config.json").read_text()), "h")
MODELOPT_FP8 = parse_hf_quant_config({"quantization": {"quant_algo": "FP8", "exclude_modules": ["lm_head"]}}, "h")
W8A16 = parse_quantization({"quant_method": "compressed-tensors", "config_groups": {
    "g": {"weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}}}, "c")
W4A16 = parse_quantization({"quant_method": "compressed-tensors", "config_groups": {
    "g": {"weights": {"num_bits": 4, "type": "int", "group_size": 128}}}}, "c")


@pytest.mark.parametrize(("fmt", "gpu", "compute", "native", "kernel"), [
    (checkpoint_format(NVFP4), "h100", "bf16", False, "NVFP4 Marlin"),      # no FP4 tensor cores on Hopper
    (checkpoint_format(NVFP4), "b200", "fp4", True, "NVFP4 W4A4"),
    (checkpoint_format(NVFP4), "mi300x", "bf16", False, "Petit NVFP4"),      # ROCm takes ModelOpt NVFP4 via Petit
    (FORMATS["fp8"], "a100", "bf16", False, "FP8 Marlin"),                   # Ampere: no FP8 W8A8
    (FORMATS["fp8"], "h100", "fp8", True, "CUTLASS FP8 W8A8"),
    (FORMATS["fp8"], "l4", "fp8", True, "CUTLASS FP8 W8A8"),                 # Ada has FP8
    (FORMATS["fp8"], "b200", "fp8", True, "CUTLASS FP8 W8A8"),
    (FORMATS["fp8"], "mi300x", "fp8", True, "FP8 W8A8"),
    (FORMATS["int8"], "a100", "int8", True, "CUTLASS INT8 W8A8"),
    (checkpoint_format(W8A16), "h100", "bf16", True, "FP8 Marlin"),          # weight-only by design
    (checkpoint_format(W4A16), "a100", "bf16", True, "GPTQ Marlin"),
    (FORMATS["awq"], "mi300x", "bf16", True, "Triton AWQ"),
    (FORMATS["mxfp4"], "h100", "bf16", False, "MXFP4 Marlin"),
    (FORMATS["mxfp4"], "mi355x", "fp4", True, "MXFP4 W4A4"),
    (FORMATS["bf16"], "h100", "bf16", True, "bf16 GEMMs"),
])
def test_how_vllm_runs_each_format(fmt, gpu, compute, native, kernel):
    run = execution(fmt, load_hardware(gpu))
    assert (run.compute_format, run.native) == (compute, native)
    assert kernel in run.kernel


GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}


@pytest.mark.parametrize("stated, kernel", [
    # vLLM's is_gptq_marlin_compatible: (bits, sym) in {(4, True), (8, True)}, group_size -1, 32, 64 or 128
    ({}, "GPTQ Marlin"),
    ({"bits": 8, "group_size": -1}, "GPTQ Marlin"),
    ({"sym": False}, "GPTQ ExLlama"),
    ({"sym": None}, "GPTQ ExLlama"),          # GPTQConfig reads no sym; Marlin's check wants it true
    ({"bits": 3}, "GPTQ ExLlama"),
    ({"group_size": 256}, "GPTQ ExLlama"),
    # is_awq_marlin_compatible: 4 or 8 bits, the same group sizes
    ({"quant_method": "awq", "zero_point": True, "sym": None}, "AWQ Marlin"),
    ({"quant_method": "awq", "zero_point": True, "sym": None, "group_size": 256}, "AWQ GEMM"),
    ({"quant_method": "awq", "zero_point": False, "sym": None}, "AWQ GEMM"),      # Marlin's uint4 needs the zeros
])
def test_gptq_and_awq_run_by_marlin_only_where_its_check_passes(stated, kernel):
    q = parse_quantization({k: v for k, v in {**GPTQ, **stated}.items() if v is not None}, "config.json")
    assert kernel in execution(checkpoint_format(q), load_hardware("h100")).kernel


@pytest.mark.parametrize(("fmt", "gpu", "why"), [
    (checkpoint_format(MODELOPT_FP8), "mi300x", "modelopt is not among its ROCm platform's quantisation methods"),
    (FORMATS["int8"], "mi300x", "no vLLM kernel runs int8 weights with int8 activations"),
    (checkpoint_format(W8A16), "mi300x", "no vLLM kernel runs fp8 weights with 16-bit activations"),
])
def test_no_engine_runs_it(fmt, gpu, why):
    with pytest.raises(FieldError, match=why) as err:
        execution(fmt, load_hardware(gpu), "s.yaml")
    assert err.value.field == "deployment.quantization"


def test_a_family_the_table_lacks_follows_the_datasheet_and_says_so():
    run = execution(FORMATS["fp8"], load_hardware("tpu-v6e"))          # no FP8 datapath in the profile
    assert (run.compute_format, run.native) == ("bf16", False) and "no entry" in run.note
    assert execution(FORMATS["fp8"], load_hardware("gaudi3")).compute_format == "fp8"


def test_nvfp4_checkpoint_on_h100_plan_says_how_vllm_runs_it(tmp_path):
    # nvidia/Qwen3-30B-A3B-NVFP4's hf_quant_config.json beside Qwen3-30B-A3B's config (the catalog's)
    (tmp_path / "config.json").write_text((CATALOG_DIR / "qwen3-30b-a3b.json").read_text())
    sidecar = MODELS / "qwen3-30b-a3b-nvfp4" / "hf_quant_config.json"
    (tmp_path / "hf_quant_config.json").write_text(sidecar.read_text())
    result = CliRunner().invoke(app, ["plan", "--model", str(tmp_path), "--gpu", "h100", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    run = plan["weight_execution"]
    assert (plan["weights"]["format"], run["compute_format"], run["native"]) == ("nvfp4", "bf16", False)
    assert "weight-only: NVFP4 Marlin" in run["note"]
    assert plan["step_times"]["gemm_compute_format"] == "bf16"          # the roofline prices 16-bit GEMMs
    assert any(a.startswith("weights run as: ") and "Marlin" in a for a in plan["assumptions"])
    on_b200 = CliRunner().invoke(app, ["plan", "--model", str(tmp_path), "--gpu", "b200", "--json"])
    assert json.loads(on_b200.stdout)["weight_execution"]["compute_format"] == "fp4"


def test_a_refused_format_is_one_line():
    result = CliRunner().invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpu", "mi300x", "--weights", "int8"])
    assert result.exit_code == 2
    # the format came from --weights, so the refusal names the flag (and the scenario field it set)
    assert result.stderr.strip().splitlines() == [
        "error: --weights: no vLLM kernel runs int8 weights with int8 activations on AMD Instinct "
        "MI300X 192GB (OAM) (CDNA3, gfx942) (format table: sizer/analytic/format_support.py); name another format "
        "or GPU (as deployment.quantization)"]



def test_llama_70b_fp8_checkpoint_fits_two_h100_and_runs_weight_only_on_a100():
    folder = str(MODELS / "llama-3.1-70b-instruct-fp8")      # ModelOpt FP8 (hf_quant_config.json)
    h100 = json.loads(CliRunner().invoke(app, ["plan", "--model", folder, "--gpu", "h100", "--tp", "2",
                                               "--json"]).stdout)
    assert h100["fits"] and h100["weights"]["total_bytes"] == 72_656_375_552    # test_formats.py derives it
    assert h100["step_times"]["gemm_compute_format"] == "fp8"
    a100 = json.loads(CliRunner().invoke(app, ["plan", "--model", folder, "--gpu", "a100", "--tp", "2",
                                               "--json"]).stdout)
    assert (a100["weight_execution"]["kernel"], a100["step_times"]["gemm_compute_format"]) == (
        "FP8 Marlin [VLLM-FP8-MARLIN]", "bf16")


def test_an_awq_sidecar_runs_awqs_own_kernel():
    # AutoAWQ's quant_config.json is read only by --quantization awq (AWQConfig's file names and w_bit / q_group_size
    # spellings; AWQMarlinConfig reads quantize_config.json's bits), and with no quantization_config to convert
    # from, vLLM keeps AWQConfig's awq_gemm
    q = parse_sidecar({"zero_point": True, "q_group_size": 128, "w_bit": 4, "version": "GEMM"}, "m/quant_config.json")
    assert "AWQ GEMM" in execution(checkpoint_format(q), load_hardware("h100")).kernel
