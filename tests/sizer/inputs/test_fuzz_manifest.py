"""Property: `sizer check` on a manifest with any declared field, any field of its `sizer:` block or
any vLLM argument set to a hostile value answers (exit 0 or the exit-1 verdict, as JSON without NaN)
or refuses it in one line naming the file (exit 2); never a traceback, another exit code or a hang.

Three shapes of document: a Kubernetes Deployment (scenarios/deploy/pass-llama-8b-h100.yaml, its
sizer block in an annotation), Helm values (scenarios/deploy/fail-memory-llama-70b-h100.yaml, the
block at top level, the command line as one `sh -c` string) and a docker-compose-style service.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from fuzzhelp import HOSTILE, HOSTILE_TEXT, answered_or_refused, json_answer, wall_clock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sizer.cli import app
from sizer.inputs.manifest import ANNOTATION, SizerBlock
from sizer.inputs.manifests.commands import VALUE_FLAGS
from validation.schema import describe

REPO = Path(__file__).resolve().parents[3]
PER_EXAMPLE_S = 30            # a check of these documents takes well under a second


def _deployment() -> dict:
    doc = yaml.safe_load_all((REPO / "scenarios" / "deploy" / "pass-llama-8b-h100.yaml").read_text()).__next__()
    block = yaml.safe_load(doc["metadata"]["annotations"][ANNOTATION])
    block["workload"]["num_requests"] = 40                      # short goodput simulations
    doc["metadata"]["annotations"][ANNOTATION] = block
    return doc


def _helm() -> dict:
    return yaml.safe_load((REPO / "scenarios" / "deploy" / "fail-memory-llama-70b-h100.yaml").read_text())


COMPOSE = {
    "services": {"vllm": {
        "image": "vllm/vllm-openai:v0.11.0",
        "command": ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"],
        "resources": {"limits": {"nvidia.com/gpu": 1}},
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}},
    "sizer": {"workload": {"arrival": {"rate_per_s": 1},
                           "prompt_tokens": {"distribution": "fixed", "value": 512},
                           "output_tokens": {"distribution": "fixed", "value": 64}, "num_requests": 40},
              "slo": {"ttft_ms": 2000}},
}
C = ("spec", "template", "spec", "containers", 0)
BASES = {"deployment": _deployment(), "helm": _helm(), "compose": COMPOSE}
CONTAINER = {"deployment": C, "helm": (), "compose": ("services", "vllm")}
# The fields manifest.py reads (MANIFEST_FIELDS), where each document has them.
DOC_PATHS = {
    "deployment": [("metadata",), ("metadata", "annotations"), ("metadata", "name"), ("spec",), ("spec", "replicas"),
                   ("spec", "template", "spec", "nodeSelector"),
                   ("spec", "template", "spec", "nodeSelector", "nvidia.com/gpu.product")],
    "helm": [("replicaCount",), ("replicas",), ("nodeSelector",), ("nodeSelector", "nvidia.com/gpu.product")],
    "compose": [("services",), ("services", "vllm", "nodeSelector")],
}
CONTAINER_PATHS = [("command",), ("args",), ("resources",), ("resources", "limits"), ("resources", "requests"),
                   ("resources", "limits", "nvidia.com/gpu"), ("resources", "limits", "amd.com/gpu"),
                   ("command", 0), ("args", 0)]
BLOCK_PATHS = [tuple(row[0].split(".")) for row in describe(SizerBlock) if row[1] != "section"]


def set_path(data, path: tuple, value) -> None:
    for key in path[:-1]:
        if isinstance(data, list):
            data = data[key] if isinstance(key, int) and key < len(data) else data
            continue
        if not isinstance(data.get(key), (dict, list)):
            data[key] = {}
        data = data[key]
    if isinstance(data, list):
        data[:1] = [value]
    else:
        data[path[-1]] = value


def sizer_block(doc: dict) -> dict:
    if "sizer" in doc:
        return doc["sizer"]
    return doc["metadata"]["annotations"][ANNOTATION]


def argv_of(doc: dict, base: str) -> list:
    container = doc
    for key in CONTAINER[base]:
        container = container[key]
    return container["args"] if base != "compose" else container["command"]


def write(doc: dict, base: str, path: Path) -> None:
    doc = copy.deepcopy(doc)
    annotations = doc.get("metadata", {}).get("annotations") if isinstance(doc.get("metadata"), dict) else None
    if base == "deployment" and isinstance(annotations, dict) and isinstance(annotations.get(ANNOTATION), dict):
        annotations[ANNOTATION] = yaml.safe_dump(annotations[ANNOTATION])     # the annotation is YAML text
    path.write_text(yaml.safe_dump(doc))


@st.composite
def mutated(draw):
    base = draw(st.sampled_from(sorted(BASES)))
    doc = copy.deepcopy(BASES[base])
    where = draw(st.sampled_from(["document", "container", "sizer block", "vllm flag"]))
    if where == "document":
        set_path(doc, draw(st.sampled_from(DOC_PATHS[base])), draw(HOSTILE))
    elif where == "container":
        set_path(doc, CONTAINER[base] + draw(st.sampled_from(CONTAINER_PATHS)), draw(HOSTILE))
    elif where == "sizer block":
        set_path(sizer_block(doc), draw(st.sampled_from(BLOCK_PATHS)), draw(HOSTILE))
    else:
        flag, value = draw(st.sampled_from(sorted(VALUE_FLAGS))), draw(HOSTILE_TEXT)
        argv = argv_of(doc, base)
        if base == "helm":      # one `sh -c` script: the flag is written into it, quoted or not
            argv[0] += f" {flag} {value}" if draw(st.booleans()) else f" {flag}='{value}'"
        else:
            argv.append(f"{flag}={value}" if draw(st.booleans()) else flag)
            argv.append(value)
    return base, where, doc


@settings(max_examples=90, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(case=mutated())
def test_check_answers_or_refuses_in_one_line(tmp_path, case):
    base, where, doc = case
    path = tmp_path / "deploy.yaml"
    write(doc, base, path)
    with wall_clock(PER_EXAMPLE_S):
        result = CliRunner().invoke(app, ["check", str(path), "--json"])
    line = answered_or_refused(result, (base, where, doc), answers=(0, 1))
    if line is None:
        verdict = json_answer(result.stdout)
        assert verdict["rules"], verdict
    else:
        assert line.startswith(f"error: {path}"), line


@pytest.mark.parametrize("base", sorted(BASES))
def test_the_unmutated_documents_are_answered(tmp_path, base):
    """The bases themselves are read: a refusal of every mutation would prove nothing."""
    path = tmp_path / "deploy.yaml"
    write(BASES[base], base, path)
    result = CliRunner().invoke(app, ["check", str(path), "--json"])
    assert result.exit_code in (0, 1), result.output
    assert json_answer(result.stdout)["rules"]
