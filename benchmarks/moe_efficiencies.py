"""What the bundled MoE tables say about a MoE layer's fixed cost and its grouped GEMMs' efficiency.

    python3 benchmarks/moe_efficiencies.py [--gpus h100-sxm h200 ...] [--engines vllm tensorrt-llm sglang]

For every bundled folder's moe table (hardware_profiles/kernels/<gpu>-<engine>-<version>/moe.csv.gz:
aiconfigurator-core's measurements of one MoE layer's routed experts, balanced routing), every expert
shape and split (experts sliced over TP, or spread whole over EP), against the GPU profile's datasheet:

  fixed cost     latency at 1 token - the weights of its top-k experts (their share on this GPU) read at
                 the roofline's weight-streaming bandwidth (peak x profile efficiency x 0.80): the router's
                 top-k, the token permutation, the grouped GEMMs' launches and the combine, which no byte or
                 FLOP accounts for
  grouped GEMM   2 x 3 x hidden x expert width x tokens x top-k / GPUs (the gated up, gate and down
  efficiency     projections of every routed token, this GPU's share) / (latency - fixed cost) / the
                 format's peak, by tokens per expert (tokens x top-k / experts, within a factor 2 of
                 each figure's), where the layer is compute-bound (its FLOPs at the peak take longer than
                 its weights' read) and takes longer than its fixed cost and that read; where no point is
                 (few tokens per expert: the weights' read and the fixed cost set the time), nothing

  expert         where the layer is memory-bound (its FLOPs at the peak take less than its weights'
  streaming      read): that read at the roofline's weight-streaming bandwidth / (latency - fixed cost),
                 the share of it the grouped GEMMs reach reading the experts their tokens touch (under the
                 tables' balanced routing every expert once the tokens' top-k choices reach the experts; the
                 roofline then counts the experts random routing touches, roofline.py expert_gemm_s)

Medians over shapes and splits, per folder and then pooled over the H100 SXM and H200 folders per expert format
and for all formats; sizer/timing/roofline.py carries the pooled figures (MOE_LAYER_S, MOE_GROUPED_EFFICIENCY)
for GPUs and formats without a table.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# bytes per expert weight and the peak each format's grouped GEMMs run at
BYTES = {"bfloat16": 2.0, "fp8": 1.0, "fp8_block": 1.0 + 4 / 128 ** 2, "w4a16_mxfp4": 0.5 + 1 / 32,
         "w4a16_mxfp4_marlin": 0.5 + 1 / 32, "nvfp4": 0.5 + 1 / 16}
PEAK = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "w4a16_mxfp4": "bf16", "w4a16_mxfp4_marlin": "bf16",
        "nvfp4": "fp4"}
# the "all formats" figures (the roofline's for unmeasured formats) pool the engines' own kernels; vLLM's Marlin
# MoE, which an engine runs only where asked or where nothing else runs, is kept to its own figures
OWN_FIGURES_ONLY = ("w4a16_mxfp4_marlin",)
TOKENS_PER_EXPERT = (0.25, 1, 4, 16, 64, 256, 1024)
POOLED = ("h100-sxm", "h200")     # the GPUs whose folders the roofline's figures pool


def figures(tables, hw) -> tuple[list[float], dict[float, list[float]], list[float]]:
    """(fixed costs, grouped-GEMM efficiencies by tokens per expert, expert-streaming shares) of a folder."""
    from sizer.timing.roofline import WEIGHT_STREAM_EFFICIENCY, random_routing_share

    fixed, eff, streaming = [], {t: [] for t in TOKENS_PER_EXPERT}, []
    stream = hw.memory_bandwidth_bytes_per_s * hw.bandwidth_efficiency * WEIGHT_STREAM_EFFICIENCY
    for (dtype, h, w, k, e, tp, ep), rows in tables.moe.items():
        if dtype not in BYTES or not hw.peak_flops(PEAK[dtype]):
            continue
        gpus = tp * ep
        expert_bytes = 3 * h * w / tp * BYTES[dtype]
        one = min(rows)
        touched = (e / ep) * random_routing_share(one, k, e)
        fixed_s = rows[one] - touched * expert_bytes / stream
        fixed.append(fixed_s)
        peak = hw.peak_flops(PEAK[dtype])
        for tokens, seconds in rows.items():
            t = tokens * k / e
            flops = 2 * 3 * h * w * tokens * k / gpus
            read = balanced_touched(tokens, k, e, ep) * expert_bytes / stream
            bucket = min(TOKENS_PER_EXPERT, key=lambda b: abs(math.log(t / b)))
            if abs(math.log(t / bucket)) < math.log(2) and flops / peak > read and seconds > fixed_s + read:
                eff[bucket].append(flops / (seconds - fixed_s) / peak)
            elif flops / peak <= read and tokens > one and seconds > fixed_s:
                streaming.append(read / (seconds - fixed_s))
    return fixed, eff, streaming


def pooled(table_dtype: str, figure: str) -> bool:
    """Whether a row of `table_dtype` counts towards the pooled `figure` (a format, or "all formats")."""
    return table_dtype == figure or (figure == "all formats" and table_dtype not in OWN_FIGURES_ONLY)


def balanced_touched(tokens: int, top_k: int, experts: int, ep: int) -> float:
    """Experts one GPU reads for `tokens` under the tables' balanced routing: the tokens' top-k choices spread
    evenly over the experts, so every expert of the GPU is read once there are as many choices as experts."""
    from sizer.timing.roofline import balanced_routing_share

    return experts / ep * balanced_routing_share(tokens, top_k, experts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", nargs="*", default=[])
    ap.add_argument("--engines", nargs="*", default=[])
    args = ap.parse_args()

    from sizer.inputs.hardware import load_hardware
    from sizer.timing.kernel_tables import KERNELS_DIR, load_kernel_tables

    print(f"{'folder':<34}{'shapes':>7}{'fixed us':>10}{'streaming':>10}" + "".join(f"{'eff t=' + f'{t:g}':>10}"
                                                              for t in TOKENS_PER_EXPERT))
    pooled_fixed: dict[str, list[float]] = {}
    pooled_eff: dict[str, dict[float, list[float]]] = {}
    pooled_streaming: dict[str, list[float]] = {}
    for folder in sorted(p for p in KERNELS_DIR.iterdir() if (p / "moe.csv.gz").is_file()):
        tables = load_kernel_tables(folder)
        gpu, engine = tables.header.gpu, tables.header.engine
        if (args.gpus and gpu not in args.gpus) or (args.engines and engine not in args.engines):
            continue
        fixed, eff, streaming = figures(tables, load_hardware(gpu, None))
        if not fixed:
            continue
        show(folder.name, fixed, eff, streaming)
        if gpu in POOLED:
            for dtype in (*BYTES, "all formats"):
                only = replace(tables, moe={k: v for k, v in tables.moe.items() if pooled(k[0], dtype)})
                fixed, eff, streaming = figures(only, load_hardware(gpu, None))
                pooled_fixed.setdefault(dtype, []).extend(fixed)
                pooled_streaming.setdefault(dtype, []).extend(streaming)
                for t, values in eff.items():
                    pooled_eff.setdefault(dtype, {b: [] for b in TOKENS_PER_EXPERT})[t] += values
    for dtype, fixed in pooled_fixed.items():
        if fixed:
            show(f"{'+'.join(POOLED)} {dtype}", fixed, pooled_eff[dtype], pooled_streaming[dtype])


def show(name: str, fixed: list[float], eff: dict[float, list[float]], streaming: list[float]) -> None:
    print(f"{name:<34}{len(fixed):>7}{statistics.median(fixed) * 1e6:>10.1f}"
          + (f"{statistics.median(streaming):>10.2f}" if streaming else f"{'-':>10}")
          + "".join(f"{statistics.median(v):>10.2%}" if v else f"{'-':>10}" for v in eff.values()))


if __name__ == "__main__":
    main()
