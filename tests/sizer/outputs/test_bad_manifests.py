"""`sizer check` on the malformed-manifest corpus (tests/bad_inputs/manifest/): exit 2, one line
naming the file and the field; and the arguments that must still be accepted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sizer.cli import app
from sizer.inputs.manifest import read_check_input
from sizer.inputs.manifests.commands import parse_vllm_args
from sizer.inputs.manifests.commands import tokens as _tokens
from validation.errors import FieldError

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "tests" / "bad_inputs" / "manifest"
PASS = ROOT / "scenarios" / "deploy" / "pass-llama-8b-h100.yaml"
runner = CliRunner()


def readme_table(folder: Path) -> dict[str, str]:
    """file -> expected field, from the folder's README.md table (first and last columns)."""
    rows = {}
    for line in (folder / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[-1].strip("`")
    return rows


TABLE = readme_table(CORPUS)


def test_the_readme_lists_every_file_and_enough_of_them():
    files = {p.name for p in CORPUS.iterdir() if p.name != "README.md"}
    assert files == set(TABLE)
    assert len(files) >= 35


@pytest.mark.parametrize("name", sorted(TABLE))
def test_check_refuses_a_bad_manifest_in_one_line(name):
    path = CORPUS / name
    result = runner.invoke(app, ["check", str(path)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"{path}: {TABLE[name]}" in lines[0], lines[0]
    assert len(lines[0]) < 400, lines[0]


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "deploy.yaml"
    p.write_text(text)
    return p


SPEC = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}'


def test_a_list_item_with_spaces_is_one_argument(tmp_path):
    """vLLM's docs write --speculative-config JSON with spaces: a list item is passed as is."""
    text = PASS.read_text().replace("            - --port=8000\n",
                                    f"            - --port=8000\n            - --speculative-config\n"
                                    f"            - '{SPEC}'\n")
    text = text.replace("      kv_share: 0.25\n", "      kv_share: 0.25\n      speculative_acceptance_rate: 0.6\n")
    inp = read_check_input(_write(tmp_path, text))
    assert inp.scenario_data["deployment"]["speculative_config"] == {
        "method": "ngram", "num_speculative_tokens": 4, "acceptance_rate": 0.6}


def test_only_a_shell_script_is_split():
    script = f"pip list && vllm serve m --max-model-len 4096 --speculative-config '{SPEC}'"
    c = {"command": ["sh", "-c"], "args": [script]}
    argv = _tokens(c, "", "f.yaml")
    assert argv[:4] == ["sh", "-c", "pip", "list"] and argv[-1] == SPEC
    fields, model, _ = parse_vllm_args(argv, "f.yaml")
    assert model == "m" and fields["max_model_len"] == 4096
    # bash -ec: flags before c; the script after them
    argv = _tokens({"command": ["/bin/bash", "-ec", "vllm serve m -tp 2; sleep 1"]}, "", "f.yaml")
    assert parse_vllm_args(argv, "f.yaml")[0] == {"tensor_parallel_size": 2}
    # an item that is not a shell script keeps its spaces
    assert _tokens({"args": ["vllm", "serve", "m", "--x", "a b"]}, "", "f.yaml")[-1] == "a b"


def test_an_unbalanced_quote_names_the_script_item():
    with pytest.raises(FieldError) as err:
        _tokens({"command": ["sh", "-c", "vllm serve 'm"]}, "c[0]", "f.yaml")
    assert err.value.field == "c[0].command[2]"
    assert re.search("shell command line", err.value.message)


# A flag is checked against the scenario field it sets (sizer/inputs/scenario.py): parallel sizes
# at most MAX_REPLICAS = 10,000, max_model_len at most MAX_TOKENS = 10 Mi = 10,485,760 (11M is above).
@pytest.mark.parametrize("value, field", [
    ("inf", "--tensor-parallel-size"), ("nan", "--tensor-parallel-size"), ("1e400", "--max-model-len"),
    ("11M", "--max-model-len"), ("10001", "--pipeline-parallel-size"), ("-1", "--max-num-seqs"),
])
def test_numeric_flags_are_finite_and_bounded(value, field):
    with pytest.raises(FieldError) as err:
        parse_vllm_args(["vllm", "serve", "m", f"{field}={value}"], "f.yaml")
    assert err.value.field == field


def test_bounds_admit_the_extremes():
    fields, _, _ = parse_vllm_args(["vllm", "serve", "m", "-tp", "10000", "--max-model-len", "10M",
                                    "--gpu-memory-utilization", "1"], "f.yaml")
    assert fields == {"tensor_parallel_size": 10000, "max_model_len": 10 * 2**20, "gpu_memory_utilization": 1.0}


# Keys are quoted through excerpt() wherever a manifest path is named, so a control character in a
# key never splits the message: in the sizer block (the schema's unknown key), on the way to the
# container (the path of its args) and on the way to a node selector (the label that names no GPU).
@pytest.mark.parametrize("key", ["a\nb", "\x1b[31mred", "cr\r"])
@pytest.mark.parametrize("case", ["sizer block", "container path", "node selector path"])
def test_a_key_with_a_control_character_is_one_line(tmp_path, key, case):
    docs = list(yaml.safe_load_all(PASS.read_text()))
    pod = docs[0]["spec"]["template"]["spec"]
    if case == "sizer block":
        docs[0]["metadata"]["annotations"]["sizer.dev/check"] += yaml.safe_dump({key: 1})
        expected = "sizer."
    elif case == "container path":
        pod[key] = {"containers": pod.pop("containers")}
        pod[key]["containers"][0]["args"] = {"x": 1}
        expected = "spec.template.spec."
    else:
        pod.pop("nodeSelector")
        pod[key] = {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-Nonesuch"}}
        expected = "spec.template.spec."
    path = _write(tmp_path, yaml.safe_dump_all(docs))
    result = runner.invoke(app, ["check", str(path)])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.isprintable(), line                     # no escape sequence reaches the terminal
    assert f"{path}: {expected}" in line, line


@pytest.mark.parametrize("script, fields", [
    # a redirection's file descriptor is no argument: `2>&1` ends the command line, after a value or a switch
    ("vllm serve m --tensor-parallel-size 2 2>&1 | tee log", {"tensor_parallel_size": 2}),
    ("vllm serve m --enable-prefix-caching 2>&1", {"enable_prefix_caching": True}),
    ("vllm serve m > log 2>&1", {}),
    ("vllm serve m --max-model-len 8192 &>log", {"max_model_len": 8192}),
])
def test_a_shell_redirection_ends_the_command_line(script, fields):
    argv = _tokens({"command": ["sh", "-c", script]}, "", "f.yaml")
    assert parse_vllm_args(argv, "f.yaml")[:2] == (fields, "m")


def test_vllm_serves_its_positional_model_over_model():
    # vllm/entrypoints/cli/serve.py: the positional model_tag replaces --model
    fields, model, _ = parse_vllm_args(["vllm", "serve", "A/a", "--model", "B/b", "-tp", "2"], "f.yaml")
    assert (model, fields) == ("A/a", {"tensor_parallel_size": 2})
