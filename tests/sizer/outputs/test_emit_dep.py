"""Attention DP + EP (DEP) emitted in each engine's own flags (docs/moe.md): vLLM runs it as 8 data-parallel engines
of TP 1 with expert parallelism; SGLang as one TP group of 8 with its attention split into 8 DP ranks."""

from __future__ import annotations

from sizer.inputs.scenario import scenario_from_dict
from sizer.outputs.emit import serving_config, sglang_argv, vllm_argv
from sizer.sizing.resolve import resolve


def dep8(engine: str):
    data = {"name": "r1", "model": "deepseek-v3", "hardware": {"gpu": "h200"},
            "deployment": {"engine": engine, "tensor_parallel_size": 8, "quantization": "fp8", "max_model_len": 4096,
                           "enable_attention_dp": True},
            "workload": {"arrival": {"process": "poisson", "rate_per_s": 1},
                         "prompt_tokens": {"distribution": "fixed", "value": 1000},
                         "output_tokens": {"distribution": "fixed", "value": 1000}, "num_requests": 10}}
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
