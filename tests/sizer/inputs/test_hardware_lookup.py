"""Finding a GPU profile by id or alias (sizer/inputs/hardware.py load_hardware): by id from its one file,
by alias from all of them, the same profile either way."""

from __future__ import annotations

from sizer.inputs import hardware
from sizer.inputs.hardware import all_profiles, load_hardware


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
