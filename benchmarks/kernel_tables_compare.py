"""Two kernel-table folders of one GPU, point by point: how far a device's own calibration (`sizer calibrate
--gpu NAME`, the bundled engine's kernels) is from the tables imported for that GPU (vLLM's kernels), or any
two folders.

    python3 benchmarks/kernel_tables_compare.py A B      # e.g. A = <calibrated>/h200-sizer-engine-0.1.0,
                                                         #      B = hardware_profiles/kernels/h200-vllm-0.24.0

Prints, per table, the points of A that B prices (inside its measured range, interpolated as the step
model reads it) and the 10th, 50th and 90th percentile of A / B; the points B cannot price; and the
element-wise cost's bandwidth and fixed-latency ratios. engine/gpu_check.sh runs it on the GPU it is lent.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sizer.timing.kernel_compare import compare, elementwise_ratios  # noqa: E402
from sizer.timing.kernel_tables import load_kernel_tables  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    args = ap.parse_args()
    a, b = load_kernel_tables(args.a), load_kernel_tables(args.b)
    print(f"A: {a.header.description}\nB: {b.header.description}")
    if a.header.gpu != b.header.gpu:
        print(f"note: A was measured on {a.header.gpu}, B on {b.header.gpu}")
    print(f"{'table':22} {'points':>7} {'not in B':>9} {'A/B p10':>8} {'A/B p50':>8} {'A/B p90':>8}")
    for c in compare(a, b):
        cells = [f"{v:8.2f}" if v is not None else f"{'-':>8}" for v in (c.ratio_p10, c.ratio_median, c.ratio_p90)]
        print(f"{c.table:22} {c.points:7d} {c.uncovered:9d} {' '.join(cells)}")
    bandwidth, latency = elementwise_ratios(a, b)
    print(f"element-wise: effective bandwidth A/B {bandwidth:.2f}, fixed latency A/B {latency:.2f}")


if __name__ == "__main__":
    main()
