"""What the bundled kernel tables say about the roofline's efficiencies, per GPU, engine and format.

    python3 benchmarks/roofline_efficiencies.py [--gpus h100-sxm h200 ...] [--engines vllm tensorrt-llm sglang]

For every bundled folder (hardware_profiles/kernels/), against the GPU profile's datasheet peaks:

  GEMM weight streaming   n x k x bytes per weight / latency / peak bandwidth, at m = 1, 16 and 64
                          (memory-bound: the weights read once)
  GEMM compute            2 m n k / latency / the format's peak FLOP/s, at m = 512 and 8,192
  decode attention        KV bytes read (batch x KV length x 2 x KV heads x head dim x bytes) / latency /
                          peak bandwidth, Llama-3.1-8B's heads (32 query, 8 KV, dim 128), bf16 KV, at
                          batch x KV length 1 x 1,024, 64 x 1,024, 256 x 2,048 and 512 x 1,536

Each GEMM figure is the median over the measured (n, k) grid points with n, k >= 4,096 (the matrices of
7B-and-larger models; smaller ones are launch-bound). Nothing here is fitted: the roofline's figures for a
GPU without tables are its own profile's; docs/fidelity.md compares them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

GEMM_BYTES = {"bfloat16": 2, "fp8": 1}
PEAK_FORMAT = {"bfloat16": "bf16", "fp8": "fp8"}
STREAM_M = (1, 16, 64)
COMPUTE_M = (512, 8192)
ATTENTION = (32, 8, 128)          # Llama-3.1-8B per GPU at TP 1: heads, KV heads, head dim
ATTENTION_POINTS = ((1, 1024), (64, 1024), (256, 2048), (512, 1536))
MIN_DIM = 4096


def gemm_figures(tables, hw, dtype: str) -> dict[str, float]:
    from sizer.timing.kernel_step import Curve

    shapes = [(n, k, Curve(rows)) for (d, n, k), rows in tables.gemm.items()
              if d == dtype and n >= MIN_DIM and k >= MIN_DIM]
    if not shapes:
        return {}
    out = {}
    for m in STREAM_M:
        out[f"stream m={m}"] = statistics.median(n * k * GEMM_BYTES[dtype] / c(m) / hw.memory_bandwidth_bytes_per_s
                                                 for n, k, c in shapes)
    peak = hw.peak_flops(PEAK_FORMAT[dtype])
    for m in COMPUTE_M:
        out[f"compute m={m}"] = statistics.median(2 * m * n * k / c(m) / peak for n, k, c in shapes)
    return out


def attention_figures(tables, hw) -> dict[str, float]:
    from sizer.timing.kernel_step import attention_rows

    heads, kv_heads, dim = ATTENTION
    rows = attention_rows(tables.generation_attention, ("bfloat16", heads, kv_heads, dim))
    if rows is None:
        return {}
    return {f"attn {b}x{n}": b * n * 2 * kv_heads * dim * 2 / rows(b, n) / hw.memory_bandwidth_bytes_per_s
            for b, n in ATTENTION_POINTS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", nargs="*", default=["h100-sxm", "h200", "a100-80gb", "l40s", "b200", "gb200"])
    ap.add_argument("--engines", nargs="*", default=["vllm", "tensorrt-llm", "sglang"])
    args = ap.parse_args()

    from sizer.inputs.hardware import load_hardware
    from sizer.timing.kernel_tables import bundled_tables_dir, cached_kernel_tables

    columns = [f"stream m={m}" for m in STREAM_M] + [f"compute m={m}" for m in COMPUTE_M]
    attention = [f"attn {b}x{n}" for b, n in ATTENTION_POINTS]
    print("share of the datasheet peak (bandwidth for streaming and attention, the format's FLOP/s for compute)")
    print(f"{'gpu':<10}{'engine':<14}{'dtype':<10}" + "".join(f"{c:>15}" for c in columns))
    attention_rows_out = []
    for gpu in args.gpus:
        hw = load_hardware(gpu)
        for engine in args.engines:
            folder = bundled_tables_dir(gpu, engine)
            if folder is None:
                continue
            tables = cached_kernel_tables(folder)
            for dtype in GEMM_BYTES:
                figures = gemm_figures(tables, hw, dtype)
                if figures:
                    print(f"{gpu:<10}{engine:<14}{dtype:<10}" + "".join(f"{figures[c]:>15.0%}" for c in columns))
            figures = attention_figures(tables, hw)
            if figures:
                attention_rows_out.append(f"{gpu:<10}{engine:<14}" + "".join(f"{figures[c]:>15.0%}"
                                                                             for c in attention))
    print(f"\ndecode attention, bf16 KV, heads {ATTENTION} (batch x KV length)")
    print(f"{'gpu':<10}{'engine':<14}" + "".join(f"{c:>15}" for c in attention))
    print("\n".join(attention_rows_out))


if __name__ == "__main__":
    main()
