"""Local device profiles (hardware_profiles/local/): Apple Silicon, workstation and edge GPUs, server CPUs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sizer.errors import InputError
from sizer.inputs.hardware import DEVICE_KINDS, _from_yaml, all_profiles, load_hardware
from sizer.inputs.scenario import load_scenario
from sizer.sizing.resolve import resolve

LOCAL = sorted((Path(__file__).resolve().parents[3] / "hardware_profiles" / "local").glob("*.yaml"))
GiB = 2**30


def test_the_issue_s_device_families_are_there():
    kinds = {load_hardware(p.stem).device_kind for p in LOCAL}
    assert kinds == set(DEVICE_KINDS)
    for pid in ("apple-m2-ultra", "apple-m3-max", "apple-m4-pro", "apple-m4", "rtx-4090", "rtx-5090", "rtx-6000-ada",
                "jetson-agx-orin-64gb", "epyc-9654", "xeon-8480"):
        assert pid in all_profiles()


@pytest.mark.parametrize("path", LOCAL, ids=lambda p: p.stem)
def test_every_figure_has_a_source(path):
    p = yaml.safe_load(path.read_text())
    assert p["id"] == path.stem and any("http" in s for s in p["sources"])
    assert p["efficiency"]["compute_source"] and p["efficiency"]["memory_bandwidth_source"]
    assert 1e10 <= p["memory_bandwidth_bytes_per_s"] <= 2e12        # M4 120 GB/s .. RTX 5090 1.79 TB/s
    if p["device"].get("gpu_working_set_fraction", 1) < 1:
        assert p["device"]["gpu_working_set_source"]


def test_apple_gpu_plans_with_the_metal_working_set():
    """64 GiB M1 Max: Metal's default working set is 0.75 of it (51539.61 MB of 1e6 B logged on a 64 GiB M2 Max)
    = 48 GiB."""
    hw = load_hardware("m1-max")
    assert hw.unified_memory_bytes == 64 * GiB and hw.memory_bytes == 48 * GiB
    assert "recommendedMaxWorkingSetSize" in hw.memory_limit_source


def test_the_plan_names_the_working_set_limit(tmp_path):
    path = tmp_path / "mac.yaml"
    path.write_text("model: llama-3.1-8b\nhardware: m1-max\ndeployment: {quantization: q4_k_m, ctx_size: 8192}\n"
                    "workload:\n  arrival: {process: poisson, rate_per_s: 0.1}\n"
                    "  prompt_tokens: {distribution: fixed, value: 512}\n"
                    "  output_tokens: {distribution: fixed, value: 128}\n")
    notes = resolve(load_scenario(path)).link_notes
    assert any("48.0 GiB of its 64 GiB unified memory" in n for n in notes)


def test_discrete_gpu_has_a_host_for_partial_offload():
    """Dual-channel DDR5-5600: 2 channels x 5600 MT/s x 8 bytes = 89.6 GB/s."""
    hw = load_hardware("rtx-4090")
    assert hw.host_memory_bandwidth_bytes_per_s == pytest.approx(89.6e9) and hw.host_memory_bytes == 64 * GiB


@pytest.mark.parametrize(("section", "value", "field"), [
    ("kind", "npu", "device.kind"),
    ("gpu_working_set_fraction", 1.5, "device.gpu_working_set_fraction"),
    (None, "apple", "device"),
])
def test_bad_device_section_is_refused_naming_the_field(section, value, field):
    data = yaml.safe_load(LOCAL[0].read_text())
    if section is None:
        data["device"] = value
    else:
        data["device"][section] = value
    with pytest.raises(InputError) as err:
        _from_yaml(data, LOCAL[0])
    assert err.value.field == field


def test_a_16_gib_mac_plans_with_two_thirds():
    """ggml-metal logs recommendedMaxWorkingSetSize / 1e6 as MB (ggml-metal-device.m): 11453.25 MB on 16 GiB Macs
    = 11,453,250,000 B = 2/3 of 17,179,869,184 B (11,453,246,123 B), not 0.70 (which read the MB as MiB)."""
    hw = load_hardware("apple-m4")
    assert hw.unified_memory_bytes == 16 * GiB
    assert hw.memory_bytes == pytest.approx(11453.25e6, abs=5e3)
