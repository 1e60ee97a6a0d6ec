"""What the corpus (tests/bad_inputs/manifest/) cannot say: the manifests and command lines that must still be
accepted beside the refusals, and the note a flag given twice gets."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sizer.inputs.manifest import read_check_input
from sizer.inputs.manifests.commands import engine_number, parse_server_args, parse_vllm_args
from sizer.inputs.manifests.commands import tokens as _tokens
from sizer.inputs.manifests.pod_fields import check_object_fields
from validation.errors import FieldError

ROOT = Path(__file__).resolve().parents[3]
PASS = ROOT / "scenarios" / "deploy" / "pass-llama-8b-h100.yaml"


def _deployment(tmp_path: Path, change) -> Path:
    docs = list(yaml.safe_load_all(PASS.read_text()))
    change(docs[0], docs[0]["spec"]["template"]["spec"], docs[0]["spec"]["template"]["spec"]["containers"][0])
    path = tmp_path / "deploy.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


@pytest.mark.parametrize("name, change", [
    # a GPU count as a Kubernetes quantity's text, other resources as quantities
    ("gpu text", lambda d, pod, c: c["resources"]["limits"].update({"nvidia.com/gpu": "1", "cpu": "500m",
                                                                     "memory": "64Gi", "ephemeral-storage": 1e10})),
    # a probe's port by name (IntOrString), its numbers as integers
    ("probe", lambda d, pod, c: c.update(readinessProbe={"httpGet": {"path": "/health", "port": "http"},
                                                         "initialDelaySeconds": 30, "periodSeconds": 10})),
    # 8000.0: kubectl's YAML-to-JSON conversion writes 8000
    ("port with a point", lambda d, pod, c: c["ports"][0].update(containerPort=8000.0)),
    ("booleans", lambda d, pod, c: pod.update(hostIPC=True, enableServiceLinks=False)),
    # an int64 beyond int32, a port's name and protocol as text, a gRPC probe's port
    ("int64", lambda d, pod, c: pod.update(securityContext={"runAsUser": 2**40})),
    ("named port", lambda d, pod, c: c["ports"][0].update(name="http", protocol="TCP", hostPort=0)),
    ("grpc probe", lambda d, pod, c: c.update(livenessProbe={"grpc": {"port": 8000}})),
    # free-form maps are not typed: a label may be called priority
    ("labels", lambda d, pod, c: d["spec"]["template"]["metadata"]["labels"].update(priority="high", tty="yes")),
    ("shm", lambda d, pod, c: pod.update(volumes=[{"name": "shm", "emptyDir": {"medium": "Memory",
                                                                               "sizeLimit": "16Gi"}}])),
    # `--flag=VALUE` may hold a space (argparse splits at `=` first)
    ("value with a space", lambda d, pod, c: c["args"].append("--served-model-name=my model")),
])
def test_a_well_typed_manifest_is_still_read(tmp_path, name, change):
    inp = read_check_input(_deployment(tmp_path, change))
    assert inp.replicas == 2 and inp.gpus_per_replica == 1


# (0x and 0b integers are read as numbers by sizer's own YAML reader already: not this path)
@pytest.mark.parametrize("mode", ["0644", "0o644", "0_644"])
def test_a_volume_mode_in_another_base_is_read_as_kubectl_reads_it(tmp_path, mode):
    # review leftover: `defaultMode: 0644` is octal 420 to kubectl's YAML 1.1 reader, text to sizer's (YAML 1.2):
    # refused as "a quoted number" before; written unquoted here, as a manifest has it
    path = _deployment(tmp_path, lambda d, pod, c: pod.update(
        volumes=[{"name": "cfg", "secret": {"secretName": "s", "defaultMode": "MODE"}}]))
    path.write_text(path.read_text().replace("defaultMode: MODE", f"defaultMode: {mode}"))
    assert f"defaultMode: {mode}\n" in path.read_text()
    inp = read_check_input(path)
    assert inp.replicas == 2


@pytest.mark.parametrize("replicas, expected", [("010", 8), ("0o12", 10), ("0_10", 8)])
def test_replicas_in_another_base_are_read_as_kubectl_reads_them(tmp_path, replicas, expected):
    # kubectl's YAML 1.1 reader takes `replicas: 010` as octal 8; sizer's own reader keeps it as text
    path = _deployment(tmp_path, lambda d, pod, c: d["spec"].update(replicas="N"))
    path.write_text(path.read_text().replace("replicas: N", f"replicas: {replicas}"))
    assert read_check_input(path).replicas == expected


def _port(**fields) -> dict:
    return {"spec": {"template": {"spec": {"containers": [{"ports": [fields]}]}}}}


@pytest.mark.parametrize("value, field", [
    ({"spec": {"replicas": 1, "template": {"spec": {"containers": [{"ports": [{"containerPort": "80"}]}]}}}},
     "spec.template.spec.containers[0].ports[0].containerPort"),
    # int32: kubectl cannot unmarshal 99999999999 into ContainerPort.containerPort; the API server's port range
    (_port(containerPort=99999999999), "spec.template.spec.containers[0].ports[0].containerPort"),
    (_port(containerPort=70000), "spec.template.spec.containers[0].ports[0].containerPort"),
    (_port(containerPort=8000, hostPort=-1), "spec.template.spec.containers[0].ports[0].hostPort"),
    ({"spec": {"template": {"spec": {"containers": [{"readinessProbe": {"periodSeconds": 2**31}}]}}}},
     "spec.template.spec.containers[0].readinessProbe.periodSeconds"),
    # string fields: ContainerPort.protocol and .name are Go strings
    (_port(containerPort=8000, protocol=6), "spec.template.spec.containers[0].ports[0].protocol"),
    (_port(containerPort=8000, name=8080), "spec.template.spec.containers[0].ports[0].name"),
    # GRPCAction.port is an int32, not an IntOrString as httpGet's
    ({"spec": {"template": {"spec": {"containers": [{"readinessProbe": {"grpc": {"port": "8000"}}}]}}}},
     "spec.template.spec.containers[0].readinessProbe.grpc.port"),
    ({"spec": {"template": {"spec": {"containers": [{"tty": 1}]}}}}, "spec.template.spec.containers[0].tty"),
    ({"spec": {"template": {"spec": {"containers": [{"resources": {"requests": {"cpu": True}}}]}}}},
     "spec.template.spec.containers[0].resources.requests.cpu"),
    ({"spec": {"template": {"spec": {"containers": [{"livenessProbe": {"tcpSocket": {"port": 80.5}}}]}}}},
     "spec.template.spec.containers[0].livenessProbe.tcpSocket.port"),
])
def test_a_mistyped_field_is_named(value, field):
    with pytest.raises(FieldError) as err:
        check_object_fields(value, "f.yaml")
    assert err.value.field == field


def test_helm_values_may_give_numbers_as_arguments():
    # a chart's template quotes them into the manifest; a Kubernetes object's args must already be strings
    assert _tokens({"args": ["vllm", "serve", "m", "--max-num-seqs", 64]}, "", "f.yaml")[-1] == "64"
    with pytest.raises(FieldError) as err:
        _tokens({"args": ["vllm", "serve", "m", "--max-num-seqs", 64]}, "c", "f.yaml", {"kind": "Pod"})
    assert err.value.field == "c.args[4]"


@pytest.mark.parametrize("text, flag, expected", [
    ("32k", "--max-model-len", 32_000), ("32K", "--max-model-len", 32_768), ("25.6k", "--max_model_len", 25_600),
    ("1M", "--max-num-batched-tokens", 2**20), ("8192", "--max-num-seqs", 8192), (" 64 ", "--max-num-seqs", 64),
    ("1_000", "--max-num-seqs", 1000),           # Python's int() reads underscores, and so does argparse
    ("1.5K", "--max-model-len", "1.5K"),         # vLLM: a binary suffix on a whole number only
    ("1k", "--max-num-seqs", "1k"), ("64.0", "-tp", "64.0"), ("1e3", "--max-model-len", "1e3"),
])
def test_numbers_read_as_the_engines_parser_reads_them(text, flag, expected):
    assert engine_number(text, flag) == expected


def test_a_setting_given_twice_is_named():
    fields, _, notes = parse_vllm_args(["vllm", "serve", "m", "--max-num-seqs=128", "--max-num-seqs", "64",
                                        "--enable-prefix-caching", "--no-enable-prefix-caching"], "f.yaml")
    assert fields["max_num_seqs"] == 64 and fields["enable_prefix_caching"] is False      # the last, as argparse
    assert any("--max-num-seqs 128 and later --max-num-seqs 64" in n for n in notes), notes
    assert any("--enable-prefix-caching and later --no-enable-prefix-caching" in n for n in notes), notes
    # the same value twice, or two spellings of one value, say nothing
    *_, notes = parse_server_args(["python", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "2",
                                  "--tp-size", "2"], "f.yaml")
    assert not any("later" in n for n in notes), notes


def test_an_empty_value_is_not_taken_from_the_next_argument():
    with pytest.raises(FieldError) as err:
        parse_vllm_args(["vllm", "serve", "m", "--max-model-len=", "8192"], "f.yaml")
    assert err.value.field == "--max-model-len"


@pytest.mark.parametrize("method, noted", [("gptq", True), ("awq", True), ("gptq_marlin", False),
                                           ("awq_marlin", False)])
def test_an_explicit_gptq_or_awq_method_names_the_kernel_it_forces(method, noted):
    # vLLM's GPTQMarlinConfig.override_quantization_method keeps `--quantization gptq` on the ExLlama kernel
    # ("forcing gptq. Use quantization=gptq_marlin for faster inference"); sizer prices Marlin
    *_, notes = parse_vllm_args(["vllm", "serve", "m", "--quantization", method], "f.yaml")
    assert any(n.startswith(f"--quantization {method}: vLLM and SGLang then run their") for n in notes) is noted, notes
