"""`sizer validate` resolves the scenario exactly as `sizer simulate` does: the same
SchedulerConfig and ReplicaConfig objects (engine defaults, KV blocks, reserve_full_kv)."""

import dataclasses
from pathlib import Path

import pytest
import yaml

from engine.profile import ProfileHeader, read_header
from hardware_profiles import CALIBRATED_DIR
from simulator.engine_loop import BARE
from sizer.inputs.scenario import Scenario, load_scenario, scenario_from_dict
from sizer.sizing.resolve import resolve
from sizer.sizing.simulate import simulation_config
from sizer.sizing.validate import profile_pricing, validation_config
from validation.errors import FieldError

REPO = Path(__file__).resolve().parents[3]
TINY_CPU = REPO / "engine" / "scenarios" / "tiny-cpu.yaml"
H200 = REPO / "engine" / "scenarios" / "llama-3.1-8b-h200.yaml"
# the committed calibrated profiles' headers (measured on this repo's CPU and on an H200)
TINY_ON_CPU = read_header(CALIBRATED_DIR / "cpu-tiny-tp1")
LLAMA_ON_H200 = read_header(CALIBRATED_DIR / "h200-llama-3.1-8b-tp1")
# the scheduling fields the H200 scenario states, left out so that the engine's defaults apply
SCHEDULING = ("block_size", "max_num_seqs", "max_num_batched_tokens", "enable_chunked_prefill",
              "enable_prefix_caching", "preemption_mode")


def defaults_apply(path: Path, engine: str | None = None) -> Scenario:
    """The scenario without its scheduling fields (and on `engine`), so that the engine's defaults apply."""
    data = yaml.safe_load(path.read_text())
    deployment = {k: v for k, v in data["deployment"].items() if k not in SCHEDULING}
    return scenario_from_dict({**data, "deployment": {**deployment, **({"engine": engine} if engine else {})}},
                              str(path))


def both(scenario: Scenario, header: ProfileHeader):
    """(validate's replica configuration, simulate's) for the same scenario file; they differ only
    in the loop around the steps: the bundled engine's is bare (no API server, steps back to back)."""
    _, validated = validation_config(scenario, profile_pricing(header, CALIBRATED_DIR / header.model.name))
    simulated = simulation_config(resolve(scenario))
    assert validated.replica.engine_loop == BARE and simulated.replica.engine_loop != BARE
    return validated.replica, dataclasses.replace(simulated.replica, engine_loop=BARE)


def test_tiny_cpu_resolves_the_same_for_validate_and_simulate():
    validated, simulated = both(load_scenario(TINY_CPU), TINY_ON_CPU)
    assert validated == simulated and validated.scheduler == simulated.scheduler
    # the scenario's own settings; the pool from the memory budget of the host's RAM
    s = validated.scheduler
    assert (s.max_num_seqs, s.max_num_batched_tokens, s.max_model_len, validated.block_size) == (16, 256, 2048, 16)
    assert validated.num_blocks == resolve(load_scenario(TINY_CPU)).memory.kv_blocks > 0


def test_h200_without_a_token_budget_takes_vllms_device_rule_in_both():
    validated, simulated = both(defaults_apply(H200), LLAMA_ON_H200)
    assert validated == simulated
    # vllm/engine/arg_utils.py: a GPU of 70 GiB or more, not an A100 -> 8192 tokens, 1024 sequences
    # (validate once built its own settings from the plain preset: 2048 and 256)
    assert (validated.scheduler.max_num_batched_tokens, validated.scheduler.max_num_seqs) == (8192, 1024)
    assert validated.num_blocks > 10_000        # ~100 GiB of 2 MiB blocks (16 tokens x 128 KiB), not a fixed share


def test_validate_keeps_reserve_full_kv():
    validated, simulated = both(defaults_apply(H200, "tensorrt-llm"), LLAMA_ON_H200)
    assert validated == simulated and validated.scheduler.reserve_full_kv


def test_validate_refuses_a_profile_measured_on_another_device():
    with pytest.raises(FieldError, match="hardware.gpu: 'h200', but the profile was measured on 'cpu'"):
        validation_config(load_scenario(H200), profile_pricing(
            dataclasses.replace(LLAMA_ON_H200, device=TINY_ON_CPU.device), CALIBRATED_DIR / "moved"))
