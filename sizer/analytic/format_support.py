"""Which weight formats each accelerator runs, and how vLLM runs the ones it has no datapath for.

A format that quantises the activations too (W8A8 FP8 and INT8, W4A4 NVFP4 and MXFP4) runs natively
only where the GPU has that datapath and vLLM has kernels for it (`NATIVE`). Elsewhere vLLM runs
the weights weight-only where it has such a kernel (`WEIGHT_ONLY`: Marlin on NVIDIA, Petit and
Triton on AMD): the stored bytes stay quantised, the GEMMs run in 16 bits. Weight-only formats
(AWQ, GPTQ, W4A16 / W8A16 schemes) need such a kernel on every GPU. Where no kernel exists, sizing
the format is refused with the reason. The table is by architecture family, read from the
hardware profile's `architecture`; a family not in it falls back to the profile's datapaths and
the plan says so.

Sources, cited in the table by key: `SOURCES`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sizer.analytic.formats import PLAIN, WeightFormat
from sizer.errors import InputError
from sizer.inputs.hardware import HardwareSpec
from sizer.inputs.scenario import ENGINE_NAMES

# The sources the table below cites by key (the report explains each key it prints).
SOURCES = {
    "VLLM-HW": 'vLLM docs, Quantization, "Supported Hardware" (https://docs.vllm.ai/en/latest/features/quantization/): '
               "Marlin (GPTQ/AWQ/FP8/FP4) on Ampere, Ada and Hopper, not on AMD GPUs; FP8 W8A8 on Ada, Hopper and "
               "AMD GPUs, not on Ampere; INT8 W8A8 on Turing to Hopper, not on AMD GPUs",
    "VLLM-FP8-MARLIN": "vllm/model_executor/layers/quantization/utils/marlin_utils_fp8.py: below sm_89 an FP8 "
                       'checkpoint runs as "Weight-only FP8 compression ... leveraging the Marlin kernel"',
    "VLLM-FP4-MARLIN": "vllm/model_executor/layers/quantization/utils/marlin_utils_fp4.py: "
                       "is_fp4_marlin_supported() is CUDA with compute capability >= 7.5; NVFP4 and MXFP4 without "
                       'FP4 tensor cores run as "Weight-only FP4 compression ... leveraging the Marlin kernel"',
    "VLLM-MARLIN-COMPAT": "vllm/model_executor/layers/quantization/gptq_marlin.py and awq_marlin.py: "
                          "is_gptq_marlin_compatible (bits 4 or 8 and sym true) and is_awq_marlin_compatible (bits 4 "
                          "or 8), both with group_size -1, 32, 64 or 128 on CUDA sm_80 and up; otherwise GPTQConfig's "
                          "ExLlama kernel (gptq_gemm) or AWQConfig's awq_gemm. override_quantization_method: a "
                          "checkpoint is upgraded to Marlin unless --quantization names gptq or awq itself "
                          "(\"forcing gptq. Use quantization=gptq_marlin for faster inference\"); SGLang's gptq.py "
                          "and awq.py alike",
    "VLLM-ROCM": "vllm/platforms/rocm.py, RocmPlatform.supported_quantization: awq, gptq, fp8, compressed-tensors, "
                 "fbgemm_fp8, gguf, quark, mxfp4, petit_nvfp4, torchao, bitsandbytes. No modelopt: a ModelOpt "
                 "checkpoint loads on ROCm only as NVFP4, which petit_nvfp4 (weight-only NVFP4 kernels for AMD GPUs) "
                 "takes over",
    "NV-BLACKWELL": "NVIDIA Blackwell architecture technical brief: fifth-generation Tensor Cores add FP4 (NVFP4 "
                    "and MXFP4) and FP6 to FP8; vLLM runs NVFP4 W4A4 with CUTLASS / FlashInfer FP4 GEMMs on sm_100",
    "AMD-CDNA4": "AMD CDNA 4 architecture white paper: MXFP4 and MXFP6 matrix instructions (MI350 series)",
    "VLLM-MXFP4": "vllm/model_executor/layers/quantization/mxfp4.py, get_mxfp4_backend (and its successor "
                  "fused_moe/oracle/mxfp4.py, select_mxfp4_moe_backend): on sm_90 OpenAI's triton_kernels "
                  "(matmul_ogs) when installed, else Marlin, bf16 activations; on sm_100 FlashInfer's TRT-LLM-gen "
                  "MXFP4 MoE, with MXFP8 activations when VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 (vLLM's gpt-oss "
                  "recipe for Blackwell sets it; without it MXFP4 x BF16)",
    "SGLANG-MXFP4": "sglang python/sglang/srt/server_args.py (gpt-oss, moe_runner_backend auto): sm_100 "
                    "flashinfer_mxfp4, else triton_kernel; srt/layers/quantization/mxfp4.py: the FlashInfer path "
                    "quantises activations to MXFP8 (mxfp8_quantize) unless its BF16 variant is asked for",
    "TRTLLM-GPT-OSS": "NVIDIA/TensorRT-LLM examples/models/core/gpt_oss/README.md, MoE Support Matrix: Hopper bf16 "
                      "activations x mxfp4 weights, moe_backend TRITON (recommended) or CUTLASS; Blackwell mxfp8 "
                      "activations x mxfp4 weights, moe_backend CUTLASS or TRTLLM",
}

# gpt-oss's MXFP4 MoE experts (quant_method mxfp4), by engine and GPU family: the kernel, and the activations the
# experts' GEMMs read. The roofline still prices them at the 16-bit rate (compute_format): the MoE kernels'
# own prices are issue 24's MoE work.
MXFP4_MOE: dict[tuple[str, str], tuple[str, str]] = {
    ("vllm", "hopper"): ("OpenAI triton_kernels MXFP4 MoE (Marlin without triton_kernels) [VLLM-MXFP4]", "bf16"),
    ("vllm", "blackwell"): ("FlashInfer TRT-LLM-gen MXFP4 MoE, W4A8 with MXFP8 activations [VLLM-MXFP4]", "mxfp8"),
    ("sglang", "hopper"): ("triton_kernel MoE runner (OpenAI triton_kernels) [SGLANG-MXFP4]", "bf16"),
    ("sglang", "blackwell"): ("flashinfer_mxfp4 MoE runner (FlashInfer TRT-LLM-gen), MXFP8 activations "
                              "[SGLANG-MXFP4]", "mxfp8"),
    ("tensorrt-llm", "hopper"): ("MoE backend TRITON (OpenAI triton_kernels) [TRTLLM-GPT-OSS]", "bf16"),
    ("tensorrt-llm", "blackwell"): ("MoE backend TRTLLM (or CUTLASS), W4A8_MXFP4_MXFP8: MXFP8 activations "
                                    "[TRTLLM-GPT-OSS]", "mxfp8"),
}

# vLLM's Marlin MXFP4 MoE (fused_marlin_moe, 16-bit activations): what vLLM runs below sm_90, and on Hopper and
# Blackwell when asked for (deployment.moe_backend: marlin; VLLM_MXFP4_USE_MARLIN=1 before vLLM named it
# --moe-backend marlin)
MXFP4_MOE_MARLIN = "Marlin MXFP4 MoE (fused_marlin_moe), W4A16 [VLLM-MXFP4]"
AMPERE_ON = ("ampere", "ada", "hopper", "blackwell")     # NVIDIA families of CUDA compute capability 8.0 and up
MARLIN_FAMILIES = AMPERE_ON                              # vLLM's Marlin kernels
TENSORRT_LLM_FAMILIES = AMPERE_ON                        # TensorRT-LLM's support matrix
MARLIN_ONLY_FAMILIES = ("ampere", "ada")     # vLLM's get_mxfp4_backend: compute capability below 9, Marlin

# architecture families, by how the hardware profile's `architecture` begins
FAMILIES = (("Ampere", "ampere"), ("Ada", "ada"), ("Hopper", "hopper"), ("Blackwell", "blackwell"),
            ("CDNA3", "cdna3"), ("CDNA4", "cdna4"))
AMD = ("cdna3", "cdna4")

_W8A8 = {"fp8": "CUTLASS FP8 W8A8 [VLLM-HW]", "int8": "CUTLASS INT8 W8A8 [VLLM-HW]"}
# formats whose quantised activations the family's kernels run (also needs the datapath in the profile)
NATIVE: dict[str, dict[str, str]] = {
    "ampere": {"int8": _W8A8["int8"]},
    "ada": _W8A8,
    "hopper": _W8A8,
    "blackwell": {**_W8A8, "nvfp4": "CUTLASS / FlashInfer NVFP4 W4A4 [NV-BLACKWELL]",
                  "mxfp4": "MXFP4 W4A4 [NV-BLACKWELL]"},
    "cdna3": {"fp8": "FP8 W8A8 [VLLM-HW]"},
    "cdna4": {"fp8": "FP8 W8A8 [VLLM-HW]", "mxfp4": "MXFP4 W4A4 [AMD-CDNA4]"},
}
MARLIN_KERNELS = {"awq": "AWQ Marlin [VLLM-HW]", "gptq": "GPTQ Marlin [VLLM-HW]", "fp8": "FP8 Marlin [VLLM-FP8-MARLIN]",
           "nvfp4": "NVFP4 Marlin [VLLM-FP4-MARLIN]", "mxfp4": "MXFP4 Marlin [VLLM-FP4-MARLIN]"}
_ROCM = {"awq": "Triton AWQ [VLLM-ROCM]", "gptq": "ROCm GPTQ [VLLM-ROCM]", "nvfp4": "Petit NVFP4 [VLLM-ROCM]",
         "mxfp4": "MXFP4 weight-only [VLLM-ROCM]"}
# GPTQ and AWQ checkpoints vLLM's Marlin kernels cannot run (marlin_ready): its own kernels instead
NOT_MARLIN = {"gptq": "GPTQ ExLlama (gptq_gemm) [VLLM-MARLIN-COMPAT]",
              "awq": "AWQ GEMM (awq_gemm) [VLLM-MARLIN-COMPAT]"}
MARLIN_GROUP_SIZES = (-1, 32, 64, 128)
# formats whose quantised weights the family's kernels read with 16-bit activations
WEIGHT_ONLY: dict[str, dict[str, str]] = {"ampere": MARLIN_KERNELS, "ada": MARLIN_KERNELS, "hopper": MARLIN_KERNELS,
                                          "blackwell": MARLIN_KERNELS,
                                          "cdna3": _ROCM, "cdna4": _ROCM}


# llama.cpp's own kernels read every GGUF type on each backend (CPU, CUDA, Metal, Vulkan): blocks are
# dequantised inside the matrix products (ggml/src/ggml-cpu, ggml-cuda mmq.cu/mmvq.cu, ggml-metal)
GGML_KERNELS = "llama.cpp (ggml) kernels dequantise the blocks in the matrix products"


@dataclass(frozen=True)
class Execution:
    """How the engine runs a weight format on a GPU."""
    weight_format: str
    compute_format: str       # the GEMMs' datapath: "fp8", "int8", "fp4", or the 16-bit one ("bf16", "fp16", ...)
    native: bool              # the format runs as its checkpoint means it (weight-only formats: their kernel exists)
    kernel: str               # what the engine runs, with its source key
    note: str                 # the plan's line
    expert_activations: str = ""   # MXFP4 MoE experts: what their GEMMs' inputs are ("mxfp8", "bf16"), "" otherwise
    moe_kernel: str = ""           # MXFP4 MoE experts run by Marlin: "marlin"; "" the engine's own choice


def mxfp4_moe_checkpoint(fmt: WeightFormat) -> bool:
    """Whether the weights are an MXFP4 MoE checkpoint (`quant_method: mxfp4`, gpt-oss's): the experts MXFP4_MOE names
    each engine's kernels for, and Marlin's MXFP4 MoE may run."""
    return fmt.scheme.method == "mxfp4" and fmt.gguf is None


def marlin_ready(fmt: WeightFormat) -> bool:
    """A GPTQ or AWQ format vLLM (and SGLang) run with Marlin on NVIDIA sm_80 and up [VLLM-MARLIN-COMPAT]: 4 or 8
    bits, a group size Marlin takes, GPTQ's weights symmetric as stated (an unstated `sym` fails the check), AWQ's
    with zero points. An AWQ sidecar is read only by `--quantization awq` (AWQMarlinConfig reads quantize_config.json
    alone, and `bits`, not AutoAWQ's `w_bit`), so AWQ's own kernel runs it. sizer's own defaults (no checkpoint) are
    taken as a Marlin-ready checkpoint of the format, and other methods storing such weights (compressed-tensors'
    W4A16) run their own Marlin path."""
    q = fmt.scheme
    if q.method not in NOT_MARLIN:
        return True
    group = -1 if q.scales == "channel" else q.group_size
    shape = q.bits in (4, 8) and group in MARLIN_GROUP_SIZES
    if q.method == "gptq":
        return shape and q.symmetric is True
    return shape and q.zero_points and q.needs_flag != "awq"


def family(hw: HardwareSpec) -> str | None:
    return next((name for prefix, name in FAMILIES if hw.architecture.startswith(prefix)), None)


def execution(fmt: WeightFormat, hw: HardwareSpec, file: str | None = None, engine: str = "vllm",
              moe_backend: str = "auto") -> Execution:
    """How `engine` runs `fmt` on `hw`; raises InputError (deployment.quantization) when no kernel can. The format
    table is vLLM's: another engine's plan names its own MXFP4 MoE kernels (MXFP4_MOE) and, for other formats,
    says that its kernels are its own rather than naming vLLM's. `moe_backend` "marlin" (vLLM's): MXFP4 experts by
    Marlin on any NVIDIA GPU, as vLLM runs them anyway below sm_90."""
    runs = _execution(fmt, hw, file)
    fam = family(hw)
    if (engine == "vllm" and mxfp4_moe_checkpoint(fmt) and fam in MARLIN_FAMILIES
            and (moe_backend == "marlin" or fam in MARLIN_ONLY_FAMILIES)):
        why = "deployment.moe_backend marlin" if moe_backend == "marlin" else "vLLM's only MXFP4 MoE kernel below sm_90"
        return replace(runs, kernel=MXFP4_MOE_MARLIN, expert_activations="bf16", moe_kernel="marlin",
                       note=f"mxfp4 MoE experts with bf16 activations on {hw.name} ({hw.architecture}) in vLLM: "
                            f"{MXFP4_MOE_MARLIN} ({why}); priced by Marlin's MXFP4 rows where the tables measured the "
                            "shape and split, else by the W4A16 rows no faster than Marlin's rows of another shape "
                            "at the same tokens per expert, else by the roofline (Marlin's own figures on Hopper); "
                            "attention and the other layers stay 16-bit")
    moe = MXFP4_MOE.get((engine, fam or "")) if mxfp4_moe_checkpoint(fmt) else None
    if moe:
        kernel, acts = moe
        name = ENGINE_NAMES.get(engine, engine)
        priced = ("" if acts == "bf16" else "; priced by the engine's W4A8 MoE rows where its tables measured the "
                  "shape and split (never by the W4A16 rows, another kernel), else by the roofline with its figures "
                  "for unmeasured expert formats, their GEMMs at the 16-bit rate")
        return replace(runs, kernel=kernel, expert_activations=acts,
                       note=f"mxfp4 MoE experts with {acts} activations on {hw.name} ({hw.architecture}) in {name}: "
                            f"{kernel}; attention and the other layers stay 16-bit{priced}")
    if engine != "vllm" and runs.kernel not in (GGML_KERNELS, "assumed") and runs.weight_format not in PLAIN:
        name = ENGINE_NAMES.get(engine, engine)
        own = f"{name}'s own kernels for {runs.weight_format} ({'native' if runs.native else 'weight-only'})"
        return replace(runs, kernel=own, note=runs.note.replace(runs.kernel, own + " (sizer's format table is vLLM's)"))
    return runs


def _execution(fmt: WeightFormat, hw: HardwareSpec, file: str | None) -> Execution:
    where = f"{hw.name} ({hw.architecture or 'architecture unknown'})"
    if fmt.gguf is not None:
        return Execution(fmt.name, fmt.compute, True, GGML_KERNELS,
                         f"GGUF {fmt.gguf.name} weights on {where}: {GGML_KERNELS}")
    if fmt.name == "bf16" and not hw.supports("bf16") and hw.supports("fp16"):
        # vllm/platforms/cuda.py: "Bfloat16 is only supported on GPUs with compute capability of at least 8.0"
        raise InputError(file, "deployment.quantization",
                         f"vLLM refuses bf16 on {where}: it has no bf16 datapath; serve the model as fp16 (vLLM "
                         "--dtype half, sizer --weights fp16)")
    if fmt.name in PLAIN:
        compute = fmt.compute if hw.supports(fmt.compute) else "bf16"
        return Execution(fmt.name, compute, compute == fmt.compute, f"{compute} GEMMs", "")
    fam = family(hw)
    scheme = fmt.scheme
    if fam is None:
        return _by_datasheet(fmt, hw, where)
    if fam in AMD and scheme.method == "modelopt" and fmt.name != "nvfp4":
        raise InputError(file, "deployment.quantization",
                         f"vLLM does not load ModelOpt {fmt.name} checkpoints on {where}: modelopt is not among its "
                         "ROCm platform's quantisation methods (vllm/platforms/rocm.py); use another checkpoint "
                         "or GPU")
    if not scheme.weight_only and fmt.name in NATIVE[fam] and hw.supports(fmt.compute):
        kernel = NATIVE[fam][fmt.name]
        return Execution(fmt.name, fmt.compute, True, kernel,
                         f"{fmt.name} weights and {fmt.compute} activations run natively on {where}: {kernel}")
    if fmt.name in WEIGHT_ONLY[fam]:
        kernel = WEIGHT_ONLY[fam][fmt.name]
        if fmt.name in NOT_MARLIN and fam in MARLIN_FAMILIES and not marlin_ready(fmt):
            kernel = NOT_MARLIN[fmt.name]
        if scheme.weight_only:
            return Execution(fmt.name, "bf16", True, kernel, f"{fmt.name} weights with 16-bit activations on "
                                                             f"{where}: {kernel}")
        return Execution(fmt.name, "bf16", False, kernel,
                         f"{where} has no kernels for {fmt.name} weights with {fmt.compute} activations; vLLM runs "
                         f"them weight-only: {kernel}. The weights stay {fmt.bits}-bit in memory, the GEMMs run in "
                         "16 bits")
    acts = "16-bit activations" if scheme.weight_only else f"{fmt.compute} activations"
    raise InputError(file, "deployment.quantization",
                     f"no vLLM kernel runs {fmt.name} weights with {acts} on {where} (format table: "
                     "sizer/analytic/format_support.py); name another format or GPU")


def _by_datasheet(fmt: WeightFormat, hw: HardwareSpec, where: str) -> Execution:
    """A GPU family the table does not list: the profile's datapaths decide, and the plan says it is assumed."""
    base = f"sizer's format table has no entry for {where}; assumed from its datasheet's formats: "
    if not fmt.scheme.weight_only and hw.supports(fmt.compute):
        return Execution(fmt.name, fmt.compute, True, "assumed", base + f"{fmt.compute} GEMMs")
    return Execution(fmt.name, "bf16", fmt.scheme.weight_only, "assumed",
                     base + f"{fmt.name} weights read by a weight-only kernel, 16-bit GEMMs")
