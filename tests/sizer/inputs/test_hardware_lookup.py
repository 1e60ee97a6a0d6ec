"""Finding a GPU profile by id or alias (sizer/inputs/hardware.py load_hardware): by id from its one file,
by alias from all of them, the same profile either way."""

from __future__ import annotations

import pytest

from sizer.inputs import hardware
from sizer.inputs.hardware import all_profiles, load_hardware
from validation.errors import FieldError


def test_every_id_and_alias_finds_the_profile_the_full_scan_finds():
    # the one-file path by id relies on each file being named by its id and on no alias shadowing an id
    # (tests/sizer/inputs/test_catalog_data.py): here, every profile, data-centre and local
    for spec in all_profiles().values():
        assert load_hardware(spec.id) == spec and load_hardware(spec.id.upper()) == spec
        for alias in spec.aliases:
            assert load_hardware(alias) == spec


def test_a_gpu_named_by_id_reads_one_profile_file(monkeypatch):
    # issue 21: a plan read all 34 profiles to find one (7% of its time under cProfile)
    read = []
    real = hardware.load_yaml
    monkeypatch.setattr(hardware, "load_yaml", lambda path: read.append(path.name) or real(path))
    hardware._read_profile.cache_clear()
    assert load_hardware("a100-80gb").id == "a100-80gb"
    assert read == ["a100-80gb.yaml"]


@pytest.mark.parametrize("gpu, slices", [
    # NVIDIA MIG user guide, "Supported MIG Profiles": each part's profiles
    ("h100-sxm", "1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb"),
    ("a100-40gb", "1g.5gb, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb"),
    ("h200", "1g.18gb, 1g.35gb, 2g.35gb, 3g.71gb, 4g.71gb, 7g.141gb"),
])
def test_only_a_parts_own_mig_slices_are_read(gpu, slices):
    for name in slices.split(", "):
        assert load_hardware(f"{gpu}/mig-{name}").mig_slice == name
    for wrong in ("1g.80gb", "5g.40gb", "1g.1gb"):     # all the memory on one compute slice; no 5g profile
        with pytest.raises(FieldError) as err:
            load_hardware(f"{gpu}/mig-{wrong}")
        assert err.value.message.endswith(f"expected one of {slices}")
    # 3g.40gb on an H100: 3 of 7 compute slices, 4 of 8 memory slices
    part, whole = load_hardware("h100-sxm/mig-3g.40gb"), load_hardware("h100-sxm")
    assert part.memory_bytes == whole.memory_bytes // 2
    assert part.peak_flops("bf16") == pytest.approx(whole.peak_flops("bf16") * 3 / 7)


def test_a_replica_does_not_span_mig_slices():
    from sizer.inputs.scenario import scenario_from_dict
    from sizer.sizing.resolve import resolve
    data = {"model": "llama-3.1-8b", "hardware": "h100-sxm/mig-3g.40gb",
            "deployment": {"tensor_parallel_size": 2, "max_model_len": 4096},
            "workload": {"arrival": {"rate_per_s": 1}, "prompt_tokens": {"distribution": "fixed", "value": 100},
                         "output_tokens": {"distribution": "fixed", "value": 10}}}
    with pytest.raises(FieldError) as err:
        resolve(scenario_from_dict(data, "s.yaml"))
    assert err.value.field == "deployment.tensor_parallel_size" and "MIG slices" in err.value.message
