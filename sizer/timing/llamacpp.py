"""llama.cpp's step costs on its devices: what the roofline changes when llama.cpp runs the step.

llama.cpp runs a step where the weights are GGUF or the device is not a data-centre GPU (an Apple
GPU, a CPU). Decode then streams the quantised bytes at the profile's achievable bandwidth (its
`efficiency.memory_bandwidth` is the whole share: no separate weight-stream factor), prompt
processing runs at the profile's achievable compute times the share a quantised format keeps after
dequantising its blocks, and each layer costs a fixed launch time (llama.cpp's graph issues each
layer's dozen small kernels one by one).

Fitted once per device kind, never per device or model, on the published llama-bench runs in
tests/data/llamacpp/ (benchmarks/llamacpp_published.py prints the fit):
- RTX 4090: llama 7B F16 tg128 61.03 and Q8_0 98.13 t/s (13.48 GB and 7.16 GB of weights) solve to
  ~3.0 ms per token on top of the bytes at ~0.9 of 1008 GB/s: 0.5 ms step overhead + 32 x 80 us.
- Prompt of a quantised format vs F16 on the same GPU: 4090 Q8_0/F16 pp512 0.69, 3090 Q4_0/F16 0.81,
  Q2_K/F16 0.80: 0.78 (CUDA's MMQ int8 path vs cuBLAS F16). Apple GPUs dequantise inside the Metal
  matrix kernels at nearly F16 speed (llama.cpp discussion #4167: M-series Q4_0 pp within ~5% of F16).
- Apple GPUs: M1 Max and M4 llama 3.1 8B Q4_K_M tg128 (46.2, 20.87 t/s) bracket 0.75 of the unified
  bandwidth with ~35 us per layer.
- CPUs: an assumption (no pp512/tg128 row on a listed CPU yet): ~20 us of thread synchronisation per layer.
"""

from __future__ import annotations

from sizer.analytic.formats import WeightFormat
from sizer.inputs import gguf_types as gg
from sizer.inputs.hardware import HardwareSpec

LAYER_STEP_S = {"gpu": 80e-6, "apple-gpu": 35e-6, "cpu": 20e-6}
QUANTISED_PROMPT_SHARE = {"gpu": 0.78, "apple-gpu": 0.95, "cpu": 1.0}


def runs_llamacpp(fmt: WeightFormat, hw: HardwareSpec) -> bool:
    """Whether llama.cpp runs the step: GGUF weights, or a device only llama.cpp-class engines serve on."""
    return fmt.gguf is not None or hw.device_kind != "gpu"


def prompt_share(fmt: WeightFormat, hw: HardwareSpec) -> float:
    """Share of the achievable compute a prompt keeps in `fmt` on `hw` (1.0 unless quantised GGUF blocks)."""
    quantised = fmt.gguf is not None and gg.TYPES[fmt.gguf.base].quantized
    return QUANTISED_PROMPT_SHARE[hw.device_kind] if quantised else 1.0
