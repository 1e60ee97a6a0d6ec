"""Attention DP + EP (DEP) emitted in each engine's own flags (docs/moe.md): vLLM runs it as 8 data-parallel engines
of TP 1 with expert parallelism; SGLang as one TP group of 8 with its attention split into 8 DP ranks."""

from __future__ import annotations

import json

import pytest

from sizer.errors import InputError
from sizer.inputs.manifest import read_check_input
from sizer.inputs.manifests.commands import parse_server_args
from sizer.inputs.scenario import scenario_from_dict
from sizer.outputs.emit import serving_config, sglang_argv, vllm_argv
from sizer.sizing.resolve import resolve

DEP8 = {"name": "r1", "model": "deepseek-v3", "hardware": {"gpu": "h200"},
        "deployment": {"tensor_parallel_size": 8, "quantization": "fp8", "max_model_len": 4096,
                       "enable_attention_dp": True},
        "workload": {"arrival": {"process": "poisson", "rate_per_s": 1},
                     "prompt_tokens": {"distribution": "fixed", "value": 1000},
                     "output_tokens": {"distribution": "fixed", "value": 1000}, "num_requests": 10}}


def dep8(engine: str):
    data = DEP8 | {"deployment": DEP8["deployment"] | {"engine": engine}}
    return serving_config(resolve(scenario_from_dict(data, None)), None, "fits")


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_vllm_runs_dep8_as_eight_data_parallel_engines_with_expert_parallelism():
    argv = vllm_argv(dep8("vllm"))
    assert (flag(argv, "--tensor-parallel-size"), flag(argv, "--data-parallel-size")) == ("1", "8")
    assert "--enable-expert-parallel" in argv


def test_sglang_runs_dep8_as_one_tp_group_with_dp_attention():
    c = dep8("sglang")
    argv = sglang_argv(c)
    assert (flag(argv, "--tp-size"), flag(argv, "--dp-size"), flag(argv, "--ep-size")) == ("8", "8", "8")
    assert "--enable-dp-attention" in argv and c.gpus_per_replica == 8


# ---- SGLang's whole-server limits under attention DP ----------------------------------------------------------------
# SGLang v0.5.23 divides --max-running-requests and --chunked-prefill-size by its attention-DP ranks
# (sizer/inputs/manifests/commands.py SGLANG_SERVER_WIDE cites parallel_hook.py and kv_cache_configurator.py), while
# sizer's max_num_seqs and max_num_batched_tokens are one rank's (resolve.replica_config multiplies them by the ranks).

SGLANG_DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {name: dep8}
spec:
  replicas: 1
  selector: {matchLabels: {app: dep8}}
  template:
    metadata: {labels: {app: dep8}}
    spec:
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-H200}
      containers:
        - name: sglang
          image: lmsysorg/sglang:latest
          command: COMMAND
          resources: {limits: {nvidia.com/gpu: 8}}
"""


def _read_back(tmp_path, argv: list[str]):
    """The Resolved `sizer check` makes of a Deployment running `argv`."""
    path = tmp_path / "deploy.yaml"
    path.write_text(SGLANG_DEPLOYMENT.replace("COMMAND", json.dumps(argv)))
    inp = read_check_input(str(path))
    return resolve(scenario_from_dict(inp.scenario_data, inp.file))


def test_sglang_dep8_writes_whole_server_limits_and_check_reads_one_ranks_back(tmp_path):
    c = dep8("sglang")
    argv = sglang_argv(c)
    # the plan's per-rank limits: SGLang's preset 256 sequences and 8,192-token chunks (sizer/sizing/presets.py)
    assert (c.max_num_seqs, c.max_num_batched_tokens, c.data_parallel_size) == (256, 8192, 8)
    # written for the whole server, 8 ranks: 256 x 8 = 2,048 sequences, 8,192 x 8 = 65,536-token chunks; each
    # rank's scheduler takes --max-prefill-tokens whole, so it stays one rank's 8,192
    assert (flag(argv, "--max-running-requests"), flag(argv, "--chunked-prefill-size"),
            flag(argv, "--max-prefill-tokens")) == ("2048", "65536", "8192")
    planned = resolve(scenario_from_dict(DEP8 | {"deployment": DEP8["deployment"] | {"engine": "sglang"}}, None))
    back = _read_back(tmp_path, argv)
    # check reads back the plan's deployment: 8 attention-DP ranks of one GPU, 256 sequences and 8,192 tokens a rank
    assert back.parallel == planned.parallel and back.parallel.dp == 8 and back.parallel.experts_span_dp
    assert (back.engine.max_num_seqs, back.engine.max_num_batched_tokens, back.engine.enable_chunked_prefill) == (
        256, 8192, True)


def test_sglang_attention_dp_with_tp_inside_each_rank_is_read_as_dp_with_expert_parallelism(tmp_path):
    # --tp-size 8 --dp-size 4: 4 ranks of 8 / 4 = 2 GPUs (SGLang's attn_tp_size), the experts over all 8;
    # --max-running-requests 1000 is 1000 // 4 = 250 a rank, --chunked-prefill-size 16384 is 4,096 a rank
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", "deepseek-ai/DeepSeek-V3", "--tp-size", "8",
            "--dp-size", "4", "--enable-dp-attention", "--context-length", "4096", "--max-running-requests", "1000",
            "--chunked-prefill-size", "16384"]
    back = _read_back(tmp_path, argv)
    assert (back.parallel.tp, back.parallel.dp, back.parallel.experts_span_dp) == (2, 4, True)
    assert (back.engine.max_num_seqs, back.engine.max_num_batched_tokens) == (250, 4096)


def test_sglang_attention_dp_ranks_that_do_not_divide_the_gpus_are_refused_naming_the_flag():
    # SGLang asserts tp_size % dp_size == 0 (parallel_hook.py); 8 GPUs do not split into 3 ranks
    with pytest.raises(InputError) as e:
        parse_server_args(["python3", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "8", "--dp", "3",
                           "--enable-dp-attention"], "deploy.yaml")
    assert e.value.field == "--dp" and "expected a divisor of 8" in str(e.value)


def test_sglang_attention_dp_with_one_rank_is_off_and_a_chunk_below_the_ranks_turns_chunking_off():
    server = ["python3", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "4"]
    # one rank: SGLang v0.5.23 turns --enable-dp-attention into --attn-dp-size 1, which runs no attention DP
    # (parallel_hook.py handle_deprecated_dp_attention, runtime_context.py attn_dp_enabled_of: attn_dp_size > 1)
    _, fields, _, notes = parse_server_args(server + ["--enable-dp-attention"], "deploy.yaml")
    assert "enable_attention_dp" not in fields and fields["tensor_parallel_size"] == 4
    assert "--enable-dp-attention with one data-parallel rank: SGLang runs no attention DP" in notes
    # 4 ranks: --chunked-prefill-size 2 is 2 // 4 = 0 tokens a rank, which SGLang's scheduler reads as chunking off
    # (scheduler.py init_chunked_prefill: a size <= 0 is None); --max-running-requests 2 is max(1, 2 // 4) = 1 a rank
    _, fields, _, notes = parse_server_args(server + ["--dp", "4", "--enable-dp-attention", "--chunked-prefill-size",
                                                      "2", "--max-running-requests", "2"], "deploy.yaml")
    assert (fields["enable_chunked_prefill"], fields["max_num_seqs"], fields["enable_attention_dp"]) == (False, 1, True)
    assert any("gives each of 4 ranks 2 // 4 = 0 tokens" in n for n in notes)
