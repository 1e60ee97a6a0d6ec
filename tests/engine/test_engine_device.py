"""Naming the GPU at hand: `sizer calibrate --gpu X` must refuse any other accelerator."""

import pytest

from engine.device import gpu_matches
from sizer.inputs.hardware import load_hardware


@pytest.mark.parametrize("profile,reported,expected", [
    ("h100", "NVIDIA H100 80GB HBM3", True),          # the SXM part reports no form factor
    ("h100-pcie", "NVIDIA H100 80GB HBM3", False),
    ("h100-pcie", "NVIDIA H100 PCIe", True),
    ("h100", "NVIDIA H100 PCIe", False),
    ("h200", "NVIDIA H200", True),
    ("h200", "NVIDIA H100 80GB HBM3", False),
    ("l4", "NVIDIA L40S", False),                     # whole-word match: L4 is not L40S
    ("l40s", "NVIDIA L40S", True),
    ("a100-40gb", "NVIDIA A100-SXM4-80GB", False),    # the memory size decides between A100s
    ("a100-80gb", "NVIDIA A100-SXM4-80GB", True),
])
def test_gpu_matches(profile, reported, expected):
    assert gpu_matches(load_hardware(profile), reported) is expected
