"""The bounds of `sizer validate --num-blocks` and `sizer calibrate --max-model-len` / `--seed`: refused below (or
above) them with one line naming the flag and the bound, before the engine starts; taken at them (the engine is
replaced by a stand-in here: no measuring, no torch)."""

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

import sizer.cli.calibrate
from sizer.cli import app
from sizer.cli.calibrate import MAX_SEED, MIN_MAX_MODEL_LEN

SCENARIO = "engine/scenarios/tiny-cpu.yaml"
PROFILE = "hardware_profiles/calibrated/cpu-tiny-tp1"
cli = CliRunner()


class Started(Exception):
    """The stand-in engine ran: every flag was taken."""


def start(*_args, **_kwargs):
    raise Started


@pytest.fixture(autouse=True)
def no_engine(monkeypatch):
    for module, name in ((sizer.cli.calibrate, "calibrate_profile"), (sizer.cli.calibrate, "calibrate_device_tables")):
        monkeypatch.setattr(module, name, start)
    # validate reads the scenario and checks its flags, then imports the engine (torch): a stand-in here
    for module in ("engine.device", "engine.validate"):
        monkeypatch.setitem(sys.modules, module, SimpleNamespace(cpu_device=start, gpu_device=start, validate=start))


def refusal(args: list[str]) -> str:
    result = cli.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, Started)
    [line] = result.stderr.strip().splitlines()
    return line


def started(args: list[str]) -> bool:
    return isinstance(cli.invoke(app, args).exception, Started)


# The first 2 requests of tiny-cpu.yaml: the longer has 346 tokens of prompt and output, 345 of them in the KV
# cache at its end: 22 blocks of 16. All 64: 429 tokens, 27 blocks. Fewer blocks and the scheduler refused
# every request (max() arg is an empty sequence).
@pytest.mark.parametrize("requests,minimum", [(["--num-requests", "2"], 22), ([], 27)])
def test_validate_num_blocks_at_least_the_longest_request(requests, minimum):
    args = ["validate", SCENARIO, "--profile", PROFILE, *requests, "--num-blocks"]
    for too_few in (1, minimum - 1):
        assert refusal([*args, str(too_few)]) == (
            f"error: --num-blocks: expected at least {minimum}: the longest of the {2 if requests else 64} requests "
            f"replayed within max_model_len has {346 if requests else 429} tokens of prompt and output, {minimum} "
            "blocks of 16; "
            f"got {too_few}")
    assert started([*args, str(minimum)])
    assert started(["validate", SCENARIO, "--profile", PROFILE, *requests])     # the memory budget's pool


def test_validate_num_blocks_counts_only_requests_max_model_len_admits(tmp_path):
    # tiny-cpu.yaml with max_model_len 400: its longest request (429 tokens, 27 blocks) is refused for its length
    # whatever the pool; the longest it admits has 395 tokens, 394 in the cache: 25 blocks of 16
    text = Path(SCENARIO).read_text()
    short = tmp_path / "short.yaml"
    short.write_text(text.replace("max_model_len: 2048", "max_model_len: 400"))
    args = ["validate", str(short), "--profile", PROFILE, "--num-blocks"]
    assert refusal([*args, "24"]) == ("error: --num-blocks: expected at least 25: the longest of the 64 requests "
                                      "replayed within max_model_len has 395 tokens of prompt and output, 25 blocks "
                                      "of 16; got 24")
    assert started([*args, "25"])


def test_calibrate_max_model_len_from_3(tmp_path):
    args = ["calibrate", "--model", "tiny", "--device", "cpu", "--out", str(tmp_path), "--max-model-len"]
    line = refusal([*args, str(MIN_MAX_MODEL_LEN - 1)])
    assert line.startswith("error: --max-model-len: ") and "at least 3" in line
    for length in (MIN_MAX_MODEL_LEN, 16, 256):     # at most max_num_batched_tokens (CPU 256): the warm-up crashed
        assert started([*args, str(length)])


@pytest.mark.parametrize("model", [["--model", "tiny"], ["--shapes-of", "tiny"]])
def test_calibrate_seed_within_64_bits(model, tmp_path):
    args = ["calibrate", *model, "--device", "cpu", "--out", str(tmp_path), "--seed"]
    for seed in (-1, MAX_SEED + 1, 10 ** 23):
        assert refusal([*args, str(seed)]) == (
            f"error: --seed: expected a whole number from 0 to 18446744073709551615 (2^64 - 1: torch's generators "
            f"take 64 bits), got {seed}")
    for seed in (0, MAX_SEED):
        assert started([*args, str(seed)])
