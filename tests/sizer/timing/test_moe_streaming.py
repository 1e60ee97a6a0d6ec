"""The roofline's expert-streaming shares (MOE_STREAMING) as benchmarks/moe_efficiencies.py derives them from the
bundled MoE tables: the experts a table row reads are counted as its balanced routing reads them (issue 23)."""

from __future__ import annotations

import importlib.util
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from sizer.inputs.hardware import load_hardware
from sizer.timing.kernel_tables import KERNELS_DIR, load_kernel_tables
from sizer.timing.roofline import MOE_STREAMING

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "moe_efficiencies.py"


@pytest.fixture(scope="module")
def derivation():
    spec = importlib.util.spec_from_file_location("moe_efficiencies", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_balanced_row_reads_every_expert_once_its_choices_reach_them(derivation):
    # Llama-4-Scout's 16 experts, top-1, sliced over TP 2: 16 tokens send one token to each expert, so all 16 are
    # read (random routing would touch 16 x (1 - (15/16)^16) = 10.3 of them); 4 tokens read 4
    assert derivation.balanced_touched(16, 1, 16, 1) == 16
    assert derivation.balanced_touched(4, 1, 16, 1) == 4
    # Qwen3-235B's 128 experts, top-8, spread over EP 8: 2 tokens make 16 choices, two per GPU; 64 tokens make
    # 512 choices, every one of a GPU's 16 experts read
    assert derivation.balanced_touched(2, 8, 128, 8) == 2
    assert derivation.balanced_touched(64, 8, 128, 8) == 16


def test_the_fp8_streaming_share_is_what_the_h100_and_h200_tables_give(derivation):
    # the per-tensor FP8 MoE rows bundled for H100 SXM and H200 (TensorRT-LLM 1.3.0rc20's; vLLM's are not
    # converted): the median share over their memory-bound points is the roofline's figure, to its two digits
    shares = []
    for folder in sorted(KERNELS_DIR.iterdir()):
        if not (folder / "moe.csv.gz").is_file() or not folder.name.startswith(("h100-sxm-", "h200-")):
            continue
        tables = load_kernel_tables(folder)
        fp8 = replace(tables, moe={k: v for k, v in tables.moe.items() if k[0] == "fp8"})
        shares += derivation.figures(fp8, load_hardware(tables.header.gpu, None))[2]
    assert len(shares) > 1000
    assert round(statistics.median(shares), 2) == MOE_STREAMING["fp8"] == 1.13
