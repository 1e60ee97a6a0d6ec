"""`--emit` is safe by construction (issue 25): for any string in a name or path field, every emitter's
output is read by a shell or a YAML parser as exactly the intended command and objects (one document,
no extra command, no Kubernetes variable expansion), or the value is refused in one line."""

from __future__ import annotations

import dataclasses
import functools
import re
import shlex
import shutil
import subprocess
import unicodedata
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sizer.errors import InputError
from sizer.inputs.manifests.commands import expand
from sizer.inputs.scenario import load_scenario, scenario_from_dict
from sizer.outputs.emit import (
    Speculative,
    as_model_word,
    emit,
    gguf_file,
    k8s_name,
    llamacpp_argv,
    modelfile_path,
    modelfile_reads_back,
    serving_config,
    sglang_argv,
    vllm_argv,
)
from sizer.sizing.plan import make_plan
from sizer.sizing.resolve import resolve

ROOT = Path(__file__).resolve().parents[3]
# what breaks out of a shell comment, a heredoc, a YAML document or a Kubernetes value
HOSTILE = ["--trust-remote-code", "-x", "/abs/model.gguf",
           "x\n---\nkind: Secret", "x\r\nrm -rf ~", "a\u2028b", "a\u2029b", "a\x85b", "$(LWS_LEADER_ADDRESS)",
           "$$(X)", "'; rm -rf / #", '"; touch /tmp/pwned; "', "`id`", "EOF", "x\nEOF\nrm -rf ~\ncat <<EOF",
           "--- !!python/object:os.system", "a\\", "\\\n", "#", "model name with spaces", "ü/ñ@main", "",
           "\x00", "*", "~", "a b\tc"]
FIELDS = ("name", "model", "draft")
texts = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=40),
                  st.text(alphabet=st.sampled_from("$()'\"`\\;&|<>\n\r-# EOF:{}[]!*"), max_size=30))


def _scenario(**deployment):
    return scenario_from_dict({"model": deployment.pop("model", "llama-3.1-8b"), "hardware": "h100",
                               "deployment": {"max_model_len": 8192, **deployment},
                               "workload": {"arrival": {"rate_per_s": 1},
                                            "prompt_tokens": {"distribution": "fixed", "value": 500},
                                            "output_tokens": {"distribution": "fixed", "value": 100}}}, None)


@functools.cache
def base(kind: str):
    s = {"vllm": lambda: _scenario(speculative_config={"method": "draft_model", "model": "llama-3.2-1b",
                                                       "num_speculative_tokens": 3, "acceptance_rate": 0.7}),
         "lws": lambda: _scenario(model="llama-3.1-405b", tensor_parallel_size=8, pipeline_parallel_size=2),
         "llamacpp": lambda: load_scenario(ROOT / "scenarios" / "llamacpp-rtx4090-slots.yaml"),
         "ollama": lambda: load_scenario(ROOT / "scenarios" / "ollama-jetson-orin-edge.yaml")}[kind]()
    r = resolve(s)
    plan = make_plan(r)
    return serving_config(r, plan.cost, plan.verdict)


def with_value(c, field: str, value: str):
    if field == "name":
        return dataclasses.replace(c, name=value)
    if field == "model":
        return dataclasses.replace(c, model=value)
    spec = c.speculative or Speculative("draft_model", 3, None)
    return dataclasses.replace(c, speculative=dataclasses.replace(spec, model=value))


def refused(value: str) -> bool:
    return any(unicodedata.category(ch) in ("Cc", "Zl", "Zp") for ch in value)


def comments_and_command(text: str) -> tuple[list[str], list[str]]:
    """The script's lines, split only where a shell or YAML parser splits them (LF), checked to hold no other
    line break (CR, NEL, U+2028, U+2029, VT, FF, FS, GS, RS)."""
    assert text.endswith("\n")
    lines = text[:-1].split("\n")
    assert text.splitlines() == lines, "a line break other than LF"
    comments = [line for line in lines if line.startswith("#")]
    assert lines[:len(comments)] == comments, "comments come first"
    return comments, lines[len(comments):]


def shell_words(lines: list[str]) -> list[str]:
    """A command written one flag per line: each line but the last ends with the continuation " \\"."""
    assert all(line.endswith(" \\") for line in lines[:-1])
    return shlex.split(" ".join(line.removesuffix(" \\") for line in lines))


def kubernetes_expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' expansion of a container's command and args: `$$` -> `$`, `$(VAR)` -> its value when VAR
    is defined (k8s.io/kubernetes third_party/forked/golang/expansion)."""
    out, i = [], 0
    while i < len(value):
        if value[i] == "$" and i + 1 < len(value):
            if value[i + 1] == "$":
                out.append("$")
                i += 2
                continue
            m = re.match(r"\(([^)]*)\)", value[i + 1:])
            if m and m.group(1) in env:
                out.append(env[m.group(1)])
                i += 1 + m.end()
                continue
        out.append(value[i])
        i += 1
    return "".join(out)


ENV = {"LWS_GROUP_SIZE": "2", "LWS_LEADER_ADDRESS": "leader", "X": "EXPANDED", "HOME": "/root", "VAR": "V"}


def ungated(comments: list[str]) -> list[str]:
    return [line for line in comments if "is gated on Hugging Face" not in line]


def ollama_drops(c) -> bool:
    """The Modelfile's FROM would not read back as written (Ollama drops U+00A0, U+200B, trims spaces): refused."""
    gguf = gguf_file(c)
    return not modelfile_reads_back(gguf if gguf.startswith(("/", "./", "../")) else f"./{gguf}")


def check_one(fmt: str, kind: str, field: str, value: str) -> None:
    c = with_value(base(kind), field, value)
    if field != "name" and (refused(value) or (fmt == "ollama" and field == "model" and ollama_drops(c))):
        with pytest.raises(InputError) as caught:
            emit(fmt, c)
        assert "\n" not in str(caught.value) and "\r" not in str(caught.value)
        assert caught.value.field == "--emit"
        return
    text = emit(fmt, c)
    comments, body = comments_and_command(text)
    # as many comment lines as for a plain value, but for those a gated model's id adds (hypothesis found
    # "google/gemma": emit says to accept its licence and give HF_TOKEN)
    plain = comments_and_command(emit(fmt, with_value(base(kind), field, "x")))[0]
    assert len(ungated(comments)) == len(ungated(plain))
    if fmt in ("vllm", "sglang", "llamacpp"):
        words = shell_words(body)
        assert words == {"vllm": vllm_argv, "sglang": sglang_argv, "llamacpp": llamacpp_argv}[fmt](c)
        # the model (and an SGLang draft) is read as a model, never as a flag: `vllm serve` takes it positionally
        flags = ("--model-path", "--model", "--speculative-draft-model-path")
        models = [words[2]] if fmt == "vllm" else [words[i + 1] for i, w in enumerate(words) if w in flags]
        assert models and not any(m.startswith("-") for m in models), models
    elif fmt == "ollama":
        printf, *env, create = body
        words = shlex.split(printf)
        assert words[:3] == ["printf", "%s\\n", f"FROM {modelfile_path(c)}"] and words[-2:] == [">", "Modelfile"]
        assert modelfile_path(c).startswith(("/", "./", "../"))     # a file, not a model name Ollama would pull
        assert len(words) == 8 and all(w.startswith("PARAMETER ") for w in words[3:-2])
        words = shell_words(env)
        assert words[-2:] == ["serve", "&"] and all(re.fullmatch(r"OLLAMA_[A-Z_]+=.*", w) for w in words[:-3])
        assert shlex.split(create) == ["ollama", "create", k8s_name(c.name), "-f", "Modelfile"]
    else:
        docs = list(yaml.safe_load_all("\n".join(body)))
        assert len(docs) == 1
        (doc,) = docs
        assert doc["metadata"]["name"] == k8s_name(c.name)
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", doc["metadata"]["name"])
        if doc["kind"] == "Deployment":
            (container,) = doc["spec"]["template"]["spec"]["containers"]
            argv = [kubernetes_expand(w, ENV) for w in container["command"] + container["args"]]
            assert argv == vllm_argv(c)
        else:
            (leader,) = doc["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"]
            sh, dash_c, script = (kubernetes_expand(w, ENV) for w in leader["command"])
            prefix, command = script.split("; ", 1)
            assert (sh, dash_c) == ("sh", "-c") and prefix.endswith("--ray_cluster_size=2")
            assert shlex.split(command) == vllm_argv(c)


CASES = [("vllm", "vllm"), ("sglang", "vllm"), ("k8s", "vllm"), ("k8s", "lws"), ("llamacpp", "llamacpp"),
         ("ollama", "ollama")]


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize(("fmt", "kind"), CASES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=texts)
@example(value="x\n---\nkind: Secret")
@example(value="$(HOME)")
def test_any_string_in_a_name_or_path_is_emitted_as_exactly_what_was_meant(fmt, kind, field, value):
    if field == "draft" and fmt in ("llamacpp", "ollama"):
        return                      # slot engines run no draft model
    check_one(fmt, kind, field, value)


def test_hostile_values_are_refused_or_quoted():
    assert refused("a\nb") and refused("a\u2028b") and refused("a\x85b") and not refused("$(X); rm -rf ~")
    for value in HOSTILE:
        for fmt, kind in CASES:
            for field in FIELDS[:2]:
                check_one(fmt, kind, field, value)
    text = emit("k8s", with_value(base("vllm"), "model", "$(HOME)"))
    assert "$$(HOME)" in text and "$(HOME)" not in text.replace("$$(HOME)", "")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.text(alphabet=st.sampled_from("$()abc-/_ "), min_size=1, max_size=20))
def test_the_manifest_reader_undoes_kubernetes_escaping(value):
    """`sizer check` reads the emitted Deployment's command line back to the model as planned."""
    (doc,) = yaml.safe_load_all(emit("k8s", with_value(base("vllm"), "model", value)))
    (container,) = doc["spec"]["template"]["spec"]["containers"]
    # a value that begins with '-' is the same path written './-...' (emit.as_model_word: never read as a flag)
    assert [expand(w, {}, shell=False) for w in container["args"]][0] == as_model_word(value)


# Plain scalars that kubectl's YAML reader (go-yaml v2) types as a boolean or a number, each checked with kubectl
# 1.32 (`kubectl create --dry-run=client -f`: "cannot unmarshal bool into Go struct field ObjectMeta.metadata.labels
# of type string"), though PyYAML, and so `sizer check`, reads them as text
KUBERNETES_TYPED = ["y", "Y", "n", "N", "0o17", "0x10", "0b101", "1_000", "1e3", "1e-05", "012", "2024-1-2", ".5"]


@pytest.mark.parametrize("value", KUBERNETES_TYPED)
def test_names_kubernetes_would_read_as_booleans_or_numbers_are_quoted(value):
    # a scenario named `y` or `1e3` was emitted as `metadata.name: y`, which kubectl refused to decode; a model
    # folder of that name as a plain `- y` argument
    text = emit("k8s", with_value(with_value(base("vllm"), "name", value), "model", value))
    name = k8s_name(value)             # 1_000 is named 1-000, which is text to both
    if name == value.lower():
        assert f"  name: '{name}'" in text and f"app.kubernetes.io/name: '{name}'" in text
    assert f"- '{value}'" in text
    (doc,) = yaml.safe_load_all(text)
    assert doc["metadata"]["name"] == name and doc["spec"]["template"]["spec"]["containers"][0]["args"][0] == value
    assert "--tensor-parallel-size" in text.split()        # flags stay plain: only what would be typed is quoted


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_kubectl_decodes_the_manifest_of_an_awkward_name(tmp_path):
    # kubectl decodes the object's metadata before it asks a server anything: an unquoted `y` fails there, offline
    for value in ("y", "0o17", "1e3"):
        path = tmp_path / "m.yaml"
        path.write_text(emit("k8s", with_value(base("vllm"), "name", value)))
        run = subprocess.run(["kubectl", "create", "--dry-run=client", "--validate=false", "-o", "name", "-f",
                              str(path)], capture_output=True, text=True, timeout=60)
        assert "unable to decode" not in run.stderr, run.stderr


@pytest.mark.parametrize("value", ["a\u00a0b", "a\u200bb", "\ufeffmodel", "x\u2003y", "/m/x\u3000y.gguf"])
def test_an_ollama_path_the_modelfile_would_change_is_refused(value):
    # Ollama's parser drops what Go's strconv.IsPrint rejects and trims the value: FROM ./a<NBSP>b-Q4_K_M.gguf was
    # read as ./ab-Q4_K_M.gguf, a file not there, which Ollama then tries to pull as a model name
    with pytest.raises(InputError) as caught:
        emit("ollama", with_value(base("ollama"), "model", value))
    assert caught.value.field == "--emit" and "Ollama Modelfile drops" in caught.value.message
    assert emit("llamacpp", with_value(base("llamacpp"), "model", value))    # argv: llama-server reads it as given
