"""Safe loading (issue 9, item 2): every YAML and JSON input is read under bounds, and every
refusal is one line naming the file (and the line or field), exit 2, quickly, without a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from timing import fastest
from typer.testing import CliRunner

from sizer.cli import app
from validation import safe_load
from validation.errors import EXCERPT_CHARS, FieldError, excerpt
from validation.safe_load import loads_json
from validation.safe_yaml import MAX_ALIASES, MAX_DEPTH, MAX_YAML_BYTES, load_yaml, loads_yaml, loads_yaml_all

ROOT = Path(__file__).resolve().parents[3]
CHAT = ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml"
PASS = ROOT / "scenarios" / "deploy" / "pass-llama-8b-h100.yaml"
runner = CliRunner()


def refused(*args: str) -> str:
    """Run the CLI; assert exit 2 with exactly one line on stderr and no traceback; return that line."""
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def scenario(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def one_line_file(tmp_path: Path) -> Path:
    """A scenario refused at its first line (an undefined alias): the time a refusal takes, to compare with."""
    return scenario(tmp_path, "model: *nope\n", "one-line.yaml")


BILLION_LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8))


# ---- YAML structure ------------------------------------------------------------------------------


def test_duplicate_key_names_the_file_line_and_key(tmp_path):
    path = scenario(tmp_path, "model: llama-3.1-8b\nhardware: h100\nmodel: llama-3.1-70b\n")
    line = refused("plan", path)
    assert line == f"error: {path}: line 3: duplicate key 'model' (first at line 1)"


def test_duplicate_key_nested(tmp_path):
    path = scenario(tmp_path, CHAT.read_text().replace("  ttft_ms: 500\n", "  ttft_ms: 500\n  ttft_ms: 900\n"))
    line = refused("plan", path)
    assert str(path) in line and "duplicate key 'ttft_ms'" in line and "line " in line


def test_billion_laughs_is_refused_quickly_without_expanding(tmp_path):
    path = scenario(tmp_path, BILLION_LAUGHS + "model: llama-3.1-8b\nhardware: h100\n")
    line = refused("plan", path)
    # expanding 9^9 = 387 million nodes would take minutes; refusing them, about what refusing a one-line
    # file takes (tens of milliseconds each here)
    assert fastest(lambda: refused("plan", path)) < 10 * fastest(lambda: refused("plan", one_line_file(tmp_path)))
    assert str(path) in line and "aliases expand it to more than 1,000,000 nodes" in line
    assert len(line) < 200


def test_too_many_aliases(tmp_path):
    path = scenario(tmp_path, "a: &x 1\nb: [" + ", ".join(["*x"] * (MAX_ALIASES + 1)) + "]\n")
    line = refused("plan", path)
    assert str(path) in line and f"more than {MAX_ALIASES} aliases" in line


def test_recursive_and_undefined_aliases(tmp_path):
    assert "contains it" in refused("plan", scenario(tmp_path, "model: &m [*m]\n"))
    assert "*nope is not defined" in refused("plan", scenario(tmp_path, "model: *nope\n"))


def test_anchors_and_merge_keys_still_work():
    # Helm values use anchors and `<<:` merges; a key may override one merged in
    data = loads_yaml("base: &b {cpu: 1, gpu: 1}\npod:\n  <<: *b\n  gpu: 2\nlist: [*b, *b]\n", "v.yaml")
    assert data["pod"] == {"cpu": 1, "gpu": 2} and data["list"] == [{"cpu": 1, "gpu": 1}] * 2


@pytest.mark.parametrize("text", [
    "[" * 10_000 + "]" * 10_000,
    "a:\n" + "".join(" " * i + "- \n" for i in range(1, 200)),
    "{a: " * 10_000 + "1" + "}" * 10_000,
], ids=["flow-lists", "block-lists", "flow-maps"])
def test_deep_nesting_is_one_line_not_a_recursion_error(tmp_path, text):
    path = scenario(tmp_path, text)
    line = refused("plan", path)
    # about what refusing a one-line file takes (tens of milliseconds each here): the depth is refused as it is read
    assert fastest(lambda: refused("plan", path)) < 10 * fastest(lambda: refused("plan", one_line_file(tmp_path)))
    # our bound's words, or (PyYAML 6.0.4 on, whose scanner limits flow nesting itself, before our bound sees the
    # events) PyYAML's own in our frame: either way one line naming the file and the line
    assert line.startswith(f"error: {path}: line ")
    assert f"nested deeper than {MAX_DEPTH} levels" in line or "not valid YAML (" in line, line


def test_nesting_at_the_bound_is_read():
    assert loads_yaml("[" * MAX_DEPTH + "]" * MAX_DEPTH, "x.yaml") is not None
    with pytest.raises(FieldError, match="nested deeper"):
        loads_yaml("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "x.yaml")


def test_oversized_file_is_refused_before_reading(tmp_path):
    path = scenario(tmp_path, "model: llama-3.1-8b\nhardware: h100\n# " + "x" * MAX_YAML_BYTES + "\n")
    line = refused("plan", path)
    assert line == f"error: {path}: larger than 1 MiB, the most a YAML file may be"


def test_not_utf8(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_bytes(b"model: llama-3.1-8b\nname: \xff\xfe\n")
    assert refused("plan", path) == f"error: {path}: line 2: not UTF-8 text"


# Our words, not the parser's: PyYAML's and Python's own messages (quoted in the parentheses) change between
# versions (PyYAML 6.0.4 reworded the python-tag one), so only the line's prefix is ours to assert.
@pytest.mark.parametrize("text, expected", [
    ("model: [unclosed\n", "line 2: not valid YAML ("),              # the end of the file, where the ] was due
    ("model: !!python/object/apply:os.system [ls]\n", "line 1: not valid YAML ("),   # refused, never run
    ("model: 1" + "0" * 5000 + "\n", "not valid YAML ("),             # past Python's 4,300-digit int limit
    ("a: 1\n---\nb: 2\n", "expected one YAML document, found 2"),
], ids=["unclosed", "python-tag", "huge-int", "two-documents"])
def test_other_bad_yaml_is_one_short_line(tmp_path, text, expected):
    path = scenario(tmp_path, text)
    line = refused("plan", path)
    assert line.startswith(f"error: {path}: {expected}") and len(line) < 250, line


def test_bundled_yaml_reads_as_pyyaml_reads_it():
    import yaml

    files = [*ROOT.glob("scenarios/**/*.yaml"), *ROOT.glob("hardware_profiles/*.yaml"),
             *ROOT.glob("tests/data/**/*.yaml")]
    assert len(files) > 20
    for path in files:
        assert loads_yaml_all(path.read_text(), str(path)) == list(yaml.safe_load_all(path.read_text())), path


# ---- what is not a regular file ------------------------------------------------------------------


@pytest.mark.parametrize("command", ["plan", "simulate", "search", "check"])
def test_dev_zero_is_refused_by_name(command):
    assert refused(command, "/dev/zero") == "error: /dev/zero: a character device, not a regular file"


def test_directory_as_the_scenario(tmp_path):
    assert refused("plan", tmp_path) == f"error: {tmp_path}: a directory, not a regular file"
    assert refused("check", tmp_path) == f"error: {tmp_path}: a directory, not a regular file"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "scenario.yaml"
    os.mkfifo(fifo)
    # a real process with a timeout: reading a FIFO with no writer would block forever
    proc = subprocess.run([sys.executable, "-m", "sizer", "plan", str(fifo)], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == f"error: {fifo}: a FIFO, not a regular file"
    with pytest.raises(FieldError, match="a FIFO, not a regular file"):
        load_yaml(fifo)


def test_missing_file():
    assert refused("plan", "/nonexistent/s.yaml") == "error: /nonexistent/s.yaml: file not found"


# ---- JSON: config.json ---------------------------------------------------------------------------

GOOD_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
               "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
               "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192,
               "torch_dtype": "bfloat16"}


def test_config_json_nested_too_deep(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(GOOD_CONFIG)[:-1] + ', "extra": ' + "[" * 10_000 + "]" * 10_000 + "}")
    line = refused("plan", "--model", str(config), "--gpu", "h100")
    assert line == f"error: {config}: line 1: nested deeper than {MAX_DEPTH} levels"
    # the same through a scenario's model.name
    path = scenario(tmp_path, CHAT.read_text().replace("model: llama-3.1-8b", f"model: {{name: {config}}}"))
    assert refused("plan", path) == line


def test_config_json_duplicate_key_and_bad_json(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(GOOD_CONFIG)[:-1] + ', "hidden_size": 8192}')
    assert refused("plan", "--model", str(config), "--gpu", "h100") == f"error: {config}: duplicate key 'hidden_size'"
    config.write_text('{"hidden_size": ')
    line = refused("plan", "--model", str(config), "--gpu", "h100")
    assert line.startswith(f"error: {config}: line 1: not valid JSON")


def test_config_json_as_a_device_or_oversized(tmp_path):
    assert refused("plan", "--model", "/dev/zero", "--gpu", "h100") == \
        "error: /dev/zero: a character device, not a regular file"
    config = tmp_path / "config.json"
    with open(config, "wb") as f:
        f.truncate(safe_load.MAX_JSON_BYTES + 1)      # sparse: no 16 MiB written
    assert refused("plan", "--model", str(config), "--gpu", "h100") == \
        f"error: {config}: larger than 16 MiB, the most a JSON file may be"


def test_json_depth_scan_skips_brackets_in_strings():
    assert loads_json('{"a": "' + "[" * 200 + '\\"]"}', "x.json") == {"a": "[" * 200 + '"]'}
    assert loads_json("[" * MAX_DEPTH + "]" * MAX_DEPTH, "x.json") is not None
    # an escaped backslash before the closing quote ends the string: the brackets after it count again
    with pytest.raises(FieldError, match="nested deeper"):
        loads_json('{"a": "x\\\\", "b": ' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}", "x.json")
    # an escaped quote after an escaped backslash stays inside the string with its brackets
    assert loads_json('{"a": "\\\\\\"' + "[" * 200 + '"}', "x.json") == {"a": '\\"' + "[" * 200}


# ---- manifests -----------------------------------------------------------------------------------


def test_manifest_duplicate_key_and_billion_laughs(tmp_path):
    text = PASS.read_text()
    dup = scenario(tmp_path, text.replace("  replicas: 2\n", "  replicas: 2\n  replicas: 3\n"), "dup.yaml")
    line = refused("check", dup)
    assert str(dup) in line and "duplicate key 'replicas'" in line
    bomb = scenario(tmp_path, BILLION_LAUGHS + "---\n" + text, "bomb.yaml")
    assert "aliases expand it" in refused("check", bomb)


def test_manifest_annotation_is_read_safely(tmp_path):
    text = PASS.read_text().replace("      kv_share: 0.25\n", "      kv_share: 0.25\n      kv_share: 0.5\n")
    path = scenario(tmp_path, text)
    line = refused("check", path)
    assert line.startswith(f"error: {path}: metadata.annotations.sizer.dev/check line ")
    assert "duplicate key 'kv_share'" in line


def test_speculative_config_json_is_read_safely(tmp_path):
    text = PASS.read_text().replace("- --port=8000", "- --speculative-config=" + "[" * 1000 + "]" * 1000)
    path = scenario(tmp_path, text)
    line = refused("check", path)
    assert str(path) in line and "--speculative-config" in line and "nested deeper" in line


# ---- short excerpts in error messages ------------------------------------------------------------


def test_excerpt_is_short():
    assert excerpt("h100") == "'h100'"
    assert excerpt(5) == "5"
    assert len(excerpt("x" * 10**6)) <= EXCERPT_CHARS
    assert "..." in excerpt("x" * 10**6)
    big = [[["y" * 1000] * 1000] * 1000] * 1000            # 10^9 leaves, shared: never walked whole
    assert len(excerpt(big)) <= EXCERPT_CHARS
    # walking 10^9 leaves would take minutes; the excerpt costs about 60 times one of a list of 1,000 (0.8 ms
    # against 12 us here)
    assert fastest(lambda: excerpt(big)) < 1000 * fastest(lambda: excerpt(["y" * 1000] * 1000))
    assert len(excerpt("z" * 500, quote=False)) == EXCERPT_CHARS


@pytest.mark.parametrize("text", [
    "model: llama-3.1-8b\nhardware: {gpu: " + "x" * 100_000 + "}\n",                 # unknown GPU
    "model: {name: [" + ", ".join(["abc"] * 50_000) + "]}\nhardware: h100\n",        # a list where a string goes
    "model: llama-3.1-8b\nhardware: h100\nslo: {ttft_ms: {" +                        # a mapping bomb
    ", ".join(f"k{i}: [{', '.join(['v'] * 20)}]" for i in range(1000)) + "}}\n",
    "model: llama-3.1-8b\nhardware: h100\n" + "k" * 100_000 + ": 1\n",                # a huge unknown key
], ids=["unknown-gpu", "list-for-string", "mapping-bomb", "huge-key"])
def test_error_messages_quote_a_short_excerpt(tmp_path, text):
    path = scenario(tmp_path, text)
    line = refused("plan", path)
    assert len(line) < len(str(path)) + 400, line[:500]


def test_bad_flag_values_are_excerpted():
    line = refused("search", str(CHAT), "--tp", "x" * 100_000)
    assert "--tp" in line and len(line) < 200
