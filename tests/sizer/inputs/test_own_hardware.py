"""Own hardware (issue 27, item 5): a bundled profile with the scenario's figures (`hardware: {base: m3-max,
memory_gb: 64}`), a profile file named by path (`--gpu FILE`, `plan --profile FILE`, `hardware: my.yaml`), and the
user's profile folder `$SIZER_HOME/profiles`, searched before the bundled profiles; the plan names the file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import sizer.cli.search
import sizer.cli.sweep
from sizer.cli.app import app
from sizer.inputs.hardware import load_hardware
from sizer.inputs.scenario import scenario_from_dict
from sizer.inputs.variant import Variant
from sizer.sizing.resolve import resolve
from validation.errors import FieldError

runner = CliRunner()
REPO = Path(__file__).resolve().parents[3]
M3_MAX = REPO / "hardware_profiles" / "local" / "apple-m3-max.yaml"
GiB = 2 ** 30


def scenario(hardware, **deployment) -> dict:
    return {"model": "llama-3.1-8b", "hardware": hardware,
            "deployment": {"quantization": "q4_k_m", "ctx_size": 8192, **deployment},
            "workload": {"arrival": {"rate_per_s": 0.1},
                         "prompt_tokens": {"distribution": "fixed", "value": 1000},
                         "output_tokens": {"distribution": "fixed", "value": 100}}}


def test_memory_gb_counts_gb_as_the_profile_does():
    """The bundled M3 Max is the 128 GB part: 137,438,953,472 B for "128 GB" = 2^30 B per printed GB (Apple's GB of
    LPDDR are GiB). A 64 GB M3 Max is then 64 GiB = 68,719,476,736 B of unified memory, of which Metal's default
    working set lets the GPU use 0.75 = 48 GiB = 51,539,607,552 B."""
    hw = resolve(scenario_from_dict(scenario({"base": "m3-max", "memory_gb": 64}), "s.yaml")).hardware
    assert hw.unified_memory_bytes == 68_719_476_736 == 64 * GiB
    assert hw.memory_bytes == 51_539_607_552 == 48 * GiB
    assert hw.id == "apple-m3-max" and "memory_gb 64" in hw.overrides


def test_bandwidth_and_working_set_overrides():
    """sudo sysctl iogpu.wired_limit_mb can raise the GPU's share: 0.9 of 64 GiB = 57.6 GiB; a bandwidth override
    of 300 GB/s is 3e11 B/s, and the decode bound scales with it (weights / bandwidth)."""
    base = resolve(scenario_from_dict(scenario({"base": "m3-max", "memory_gb": 64}), "s.yaml"))
    mine = resolve(scenario_from_dict(scenario({"base": "m3-max", "memory_gb": 64, "gpu_working_set_fraction": 0.9,
                                                "memory_bandwidth_gb_per_s": 300}), "s.yaml"))
    assert mine.hardware.memory_bytes == int(64 * GiB * 0.9)
    assert mine.hardware.memory_bandwidth_bytes_per_s == 3e11
    assert base.hardware.memory_bandwidth_bytes_per_s == 4.096e11        # the profile's 409.6 GB/s


@pytest.mark.parametrize("hardware, field", [
    ({"base": "m3-max", "memory_gb": 64, "colour": "silver"}, "hardware.colour"),        # unknown key
    ({"base": "m3-max", "memory_gb": 0}, "hardware.memory_gb"),                           # not > 0
    ({"base": "m3-max", "gpu": "h100"}, "hardware.base"),                                 # two names for one key
    ({"base": "h100", "gpu_working_set_fraction": 0.9}, "hardware.gpu_working_set_fraction"),   # no unified memory
])
def test_bad_overrides_name_their_field(hardware, field):
    with pytest.raises(FieldError) as e:
        resolve(scenario_from_dict(scenario(hardware, engine="llama.cpp"), "s.yaml"))
    assert e.value.field == field


def test_an_unknown_override_key_is_one_line_and_exit_2(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(scenario({"base": "m3-max", "memory_gb": 64, "colour": "silver"})))
    result = runner.invoke(app, ["plan", str(path)])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "hardware.colour: unknown key" in result.output


def test_a_search_on_another_gpu_drops_the_overrides():
    """The overrides describe the scenario's own device: a candidate on another GPU leaves them out."""
    own = scenario_from_dict(scenario({"gpu": "m3-max", "memory_gb": 64, "memory_bandwidth_gb_per_s": 300,
                                       "gpu_working_set_fraction": 0.9}), None)
    hw = Variant(gpu="m4-pro", clear_hardware_overrides=True).apply(own).hardware
    assert (hw.gpu, hw.memory_gb, hw.memory_bandwidth_gb_per_s, hw.gpu_working_set_fraction) == \
        ("m4-pro", None, None, None)
    assert own.source_of("hardware.memory_gb") == "scenario"     # stated in the scenario, a default once dropped
    assert Variant(gpu="m4-pro", clear_hardware_overrides=True).apply(own).source_of("hardware.memory_gb") == "default"


def own_profile(folder: Path, profile_id: str = "my-mac", memory_bytes: int = 64 * GiB) -> Path:
    """A copy of the bundled M3 Max profile under another id (and memory): a user's own device."""
    text = M3_MAX.read_text().replace("id: apple-m3-max", f"id: {profile_id}").replace(
        "aliases: [m3-max, m3max]", "aliases: []").replace("bytes: 137438953472", f"bytes: {memory_bytes}")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{profile_id}.yaml"
    path.write_text(text)
    return path


def plan_json(*args) -> dict:
    result = runner.invoke(app, ["plan", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_gpu_and_profile_flags_read_a_profile_file(tmp_path):
    path = own_profile(tmp_path)
    by_gpu = plan_json("--model", "llama-3.1-8b", "--gpu", str(path), "--weights", "q4_k_m")
    by_profile = plan_json("--model", "llama-3.1-8b", "--profile", str(path), "--weights", "q4_k_m")
    for plan in (by_gpu, by_profile):
        assert plan["gpu_memory_bytes"] == 48 * GiB            # 0.75 of the file's 64 GiB
        assert any(a.startswith(f"hardware profile my-mac: {path} (a profile file named by path)")
                   for a in plan["assumptions"])


def test_a_scenario_names_a_profile_file_beside_it(tmp_path):
    own_profile(tmp_path)
    r = resolve(scenario_from_dict(scenario("my-mac.yaml"), str(tmp_path / "s.yaml")))
    assert r.hardware.id == "my-mac" and r.hardware.profile_file == str(tmp_path / "my-mac.yaml")


def test_a_missing_profile_file_is_refused_naming_the_flag(tmp_path):
    result = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpu", str(tmp_path / "none.yaml")])
    assert result.exit_code == 2 and "--gpu: hardware profile file" in result.output


def test_the_user_folder_is_searched_first(tmp_path, monkeypatch):
    """$SIZER_HOME/profiles: a new id is found by name, and a file with a bundled id replaces the bundled one."""
    monkeypatch.setenv("SIZER_HOME", str(tmp_path))
    folder = tmp_path / "profiles"
    mine = own_profile(folder)
    replaced = own_profile(folder, "apple-m3-max", 96 * GiB)
    assert load_hardware("my-mac").profile_file == str(mine)
    assert load_hardware("apple-m3-max").unified_memory_bytes == 96 * GiB
    plan = plan_json("--model", "llama-3.1-8b", "--gpu", "apple-m3-max", "--weights", "q4_k_m")
    assert any(a == f"hardware profile apple-m3-max: {replaced} (your profile folder)" for a in plan["assumptions"])
    monkeypatch.setenv("SIZER_HOME", str(tmp_path / "elsewhere"))
    assert load_hardware("apple-m3-max").unified_memory_bytes == 128 * GiB         # the bundled file again


def test_a_bundled_profile_says_so(tmp_path):
    plan = plan_json("--model", "llama-3.1-8b", "--gpu", "h100")
    assert f"hardware profile h100-sxm: {REPO / 'hardware_profiles' / 'h100-sxm.yaml'} (bundled with sizer)" \
        in plan["assumptions"]


def test_an_unknown_gpu_points_at_the_user_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("SIZER_HOME", str(tmp_path))
    result = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpu", "my-laptop"])
    assert result.exit_code == 2 and f"a .yaml profile file, or one in {tmp_path / 'profiles'}" in result.output


def test_a_user_profile_folder_copy_is_independent_of_the_package(tmp_path, monkeypatch):
    """The folder holds plain copies: a profile copied from the package and edited is read as the user's."""
    monkeypatch.setenv("SIZER_HOME", str(tmp_path))
    (tmp_path / "profiles").mkdir()
    shutil.copy(M3_MAX, tmp_path / "profiles" / "apple-m3-max.yaml")
    assert load_hardware("m3-max").profile_file == str(tmp_path / "profiles" / "apple-m3-max.yaml")


@pytest.mark.parametrize("edit, field", [
    ({"power": [1, 2]}, "power"),
    ({"peak_dense_flops_per_s": {"fp32": 1.0e13, "fp8": 4.0e14}}, "peak_dense_flops_per_s"),   # KeyError before
    ({"price": {"usd_per_gpu_hour": 3.0, "reserved_usd_per_gpu_hour": "cheap"}}, "price.reserved_usd_per_gpu_hour"),
    ({"price": {"usd_per_gpu_hour": 3.0, "reserved_usd_per_gpu_hour": -1}}, "price.reserved_usd_per_gpu_hour"),
])
def test_a_profile_files_power_and_reserved_price_are_checked(tmp_path, edit, field):
    # a user's profile file with power as a list, or a reserved price that is text or negative: one line naming
    # the file and the field, exit 2 (a list raised AttributeError; text broke the day's cost with TypeError)
    path = own_profile(tmp_path)
    path.write_text(yaml.safe_dump(yaml.safe_load(path.read_text()) | edit))
    result = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpu", str(path), "--weights", "q4_k_m"])
    assert result.exit_code == 2, result.output
    assert f"{path}: {field}:" in result.output and len(result.output.strip().splitlines()) == 1


def _broken_user_profile(home: Path) -> Path:
    """A profile of yours that does not read: no datasheet figures at all."""
    (home / "profiles").mkdir(parents=True)
    broken = home / "profiles" / "broken.yaml"
    broken.write_text("id: broken\n")
    return broken


def _stop(*args, **kwargs):
    raise FieldError(None, "test", "stopped before the work")


def test_a_broken_user_profile_is_skipped_by_gpus_search_and_sweep(tmp_path, monkeypatch):
    # review leftover: search, sweep and gpus read every profile (all_profiles), and one profile of yours that did
    # not read refused all three (exit 2 naming it); now each leaves it out with one warning line naming the file,
    # as plan and check do, and the broken id is offered nowhere
    monkeypatch.setenv("SIZER_HOME", str(tmp_path / "home"))
    broken = _broken_user_profile(tmp_path / "home")
    warning = f"warning: {broken}: "
    listed = runner.invoke(app, ["gpus", "--json"])
    assert listed.exit_code == 0, listed.output
    ids = [p["id"] for p in json.loads(listed.stdout)]
    assert "h100-sxm" in ids and "broken" not in ids
    assert listed.stderr.count(warning) == 1 and len(listed.stderr.splitlines()) == 1
    # search's default space is every data-centre profile; it states them, then the stub stops it
    monkeypatch.setattr(sizer.cli.search, "search", _stop)
    searched = runner.invoke(app, ["search", str(REPO / "scenarios" / "llama-3.1-70b-h200.yaml")])
    assert searched.exit_code == 2 and "stopped before the work" in searched.stderr
    assert "h100-sxm" in searched.stderr and "broken" not in searched.stderr.replace(warning, "")
    assert searched.stderr.count(warning) == 1
    # sweep's driver reads every profile once for its workers (shared_inputs), before the points run
    monkeypatch.setattr(sizer.cli.sweep, "run_sweep", _stop)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"scenario": str(REPO / "scenarios" / "llama-3.1-8b-chat-h100.yaml"),
                                     "axes": {"gpu": ["h100-sxm"]}}))
    swept = runner.invoke(app, ["sweep", str(sweep), "--results", str(tmp_path / "r.parquet")])
    assert swept.exit_code == 2 and "stopped before the work" in swept.stderr, swept.output
    assert swept.stderr.count(warning) == 1


def test_a_user_profile_may_end_in_yml_but_not_twice(tmp_path, monkeypatch):
    # review leftover: the folder was globbed for *.yaml alone, so my-mac.yml was not found ("unknown GPU"), though a
    # profile named by path may end in .yml (PROFILE_SUFFIXES); one id in both spellings is refused naming both
    monkeypatch.setenv("SIZER_HOME", str(tmp_path))
    folder = tmp_path / "profiles"
    mine = own_profile(folder).rename(folder / "my-mac.yml")
    assert load_hardware("my-mac").profile_file == str(mine)
    plan = plan_json("--model", "llama-3.1-8b", "--gpu", "my-mac", "--weights", "q4_k_m")
    assert f"hardware profile my-mac: {mine} (your profile folder)" in plan["assumptions"]
    listed = runner.invoke(app, ["gpus", "--json"])
    assert "my-mac" in [p["id"] for p in json.loads(listed.stdout)]
    twin = own_profile(folder)                                  # my-mac.yaml beside my-mac.yml
    refused = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpu", "my-mac", "--weights", "q4_k_m"])
    assert refused.exit_code == 2, refused.output
    assert refused.stderr == (f"error: {mine}: a second profile file for id 'my-mac' beside '{twin.name}'; keep one "
                              "of the two\n")
    # ... only where that id is asked for: elsewhere the pair is left out with a warning line, as a profile of
    # yours that does not read (review: the refusal stopped every command, `gpus` and a plan on an H100 too)
    listed = runner.invoke(app, ["gpus", "--json"])
    assert listed.exit_code == 0, listed.output
    assert "my-mac" not in [p["id"] for p in json.loads(listed.stdout)]
    assert "a second profile file for id 'my-mac'" in listed.stderr
    other = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--json"])
    assert other.exit_code == 0, other.output
