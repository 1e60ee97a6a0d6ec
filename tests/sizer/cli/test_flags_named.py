"""A value a flag gives is refused naming the flag, even when the refusal comes from the scenario's
own rules (the flag's value is set on the scenario read from the file, and the scenario's rules run again);
a value the scenario file gives is still refused naming the file and the field, even where a flag would
replace it."""

import shutil
from pathlib import Path

from typer.testing import CliRunner

from sizer.cli import app
from sizer.inputs.model_spec import CATALOG_DIR

REPO = Path(__file__).resolve().parents[3]
CHAT = REPO / "scenarios" / "llama-3.1-8b-chat-h100.yaml"
runner = CliRunner()


def refusal(*args: str) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    return line


def test_a_split_the_model_cannot_take_names_the_flag():
    # Llama 3.1 8B has 32 layers: 894 pipeline stages would leave most of them empty
    assert refusal("plan", CHAT, "--pp", "894") == ("error: --pp: 894 stages for 32 layers; expected at most one "
                                                     "stage per layer (as deployment.pipeline_parallel_size)")
    # and 3 does not divide its 32 attention heads
    assert refusal("plan", CHAT, "--tp", "3").startswith("error: --tp: 3 does not divide the 32 attention heads")


def test_the_same_value_in_the_file_names_the_file(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(CHAT.read_text().replace("deployment:\n", "deployment:\n  pipeline_parallel_size: 894\n", 1))
    assert refusal("plan", path).startswith(f"error: {path}: deployment.pipeline_parallel_size: 894 stages")


def test_a_model_path_flag_is_read_from_the_working_directory(tmp_path, monkeypatch):
    """`--model config.json` is the caller's file, not one beside the scenario (scenarios/config.json)."""
    shutil.copyfile(CATALOG_DIR / "llama-3.1-8b.json", tmp_path / "config.json")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["plan", str(CHAT), "--model", "config.json", "--json"])
    assert result.exit_code == 0, result.output
    monkeypatch.chdir(REPO)
    assert refusal("plan", CHAT, "--model", "config.json") == "error: --model: config file 'config.json' does not exist"


def test_another_files_field_of_the_same_name_is_not_blamed_on_the_flag(tmp_path):
    """A calibrated profile's profile.yaml has a `model.name` too: its error names that file, even
    with a --model flag (which sets the scenario's model.name)."""
    folder = tmp_path / "profile"
    shutil.copytree(REPO / "hardware_profiles" / "calibrated" / "h200-llama-3.1-8b-tp1", folder)
    text = (folder / "profile.yaml").read_text()
    (folder / "profile.yaml").write_text(text.replace("  name: llama-3.1-8b\n", "  name: [llama]\n", 1))
    line = refusal("plan", "--model", "llama-3.1-8b", "--gpu", "h200", "--profile", folder)
    assert line.startswith(f"error: {folder / 'profile.yaml'}: model.name: expected a string"), line


def test_a_model_name_no_file_system_takes_is_one_line():
    # 5,000 characters: longer than any file name may be (255 bytes), so the lookup as a path fails
    # with the OS's own error, which is bad input, quoted as an excerpt
    line = refusal("plan", CHAT, "--model", "9" * 5000)
    assert line.startswith("error: --model: cannot look up model '999") and line.endswith(": File name too long")
    assert len(line) < 200


def test_a_files_invalid_value_is_refused_even_with_a_flag_that_would_replace_it(tmp_path):
    """Flags change the scenario read from the file (docs/scenario.md): the file's own tensor_parallel_size: 0 is
    refused as the file is read, naming the file, not blamed on --tp."""
    path = tmp_path / "s.yaml"
    path.write_text(CHAT.read_text().replace("tensor_parallel_size: 1\n", "tensor_parallel_size: 0\n", 1))
    assert refusal("plan", path, "--tp", "1") == (f"error: {path}: deployment.tensor_parallel_size: expected a value "
                                                  ">= 1, got 0")
