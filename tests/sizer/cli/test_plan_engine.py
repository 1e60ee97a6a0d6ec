"""`plan --engine` and the engine a scenario that names none is planned with (issue 27, item 5): GGUF weights and
Apple GPUs or CPUs are llama.cpp's; a batching engine is refused there in one line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from sizer.cli.app import app

runner = CliRunner()


def plan(*args: str) -> dict:
    result = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.parametrize("args, engine, why", [
    (("--gpu", "m3-max", "--weights", "q4_k_m"), "llama.cpp", "default: GGUF weights (q4_k_m) are llama.cpp's format"),
    (("--gpu", "h100", "--weights", "q8_0"), "llama.cpp", "default: GGUF weights (q8_0) are llama.cpp's format"),
    (("--gpu", "m3-max"), "llama.cpp", "default on Apple M3 Max (40-core GPU) (apple-gpu): sizer models no batching "
                                       "engine there"),
    (("--gpu", "epyc-9654"), "llama.cpp", None),
    (("--gpu", "h100"), "vllm", "default: vLLM, sizer's engine for discrete GPUs"),
    (("--gpu", "h100", "--engine", "sglang"), "sglang", "--engine"),   # the flag that set it
    (("--gpu", "m3-max", "--engine", "ollama", "--weights", "q4_k_m"), "ollama", "--engine"),
])
def test_the_engine_and_why_are_stated(args, engine, why):
    p = plan(*args)
    assert p["engine"]["engine"] == engine
    stated = [a for a in p["assumptions"] if a.startswith("engine ")]
    assert stated[0].startswith(f"engine {engine} (") and (why is None or stated[0] == f"engine {engine} ({why})")


def test_a_q4_k_m_plan_on_a_mac_is_llamacpp_slots():
    """Planned as llama.cpp: its slots (auto parallel: 4 in one unified buffer), not vLLM's paged blocks."""
    p = plan("--gpu", "m3-max", "--weights", "q4_k_m")
    assert p["slots"]["engine"] == "llama.cpp" and p["slots"]["slots"] == 4 and p["slots"]["kv_unified"]


@pytest.mark.parametrize("args, says", [
    (("--gpu", "h100", "--weights", "q4_k_m", "--engine", "vllm"),
     "--engine: vllm with GGUF weights (q4_k_m): sizer plans GGUF on llama.cpp and ollama only"),
    (("--gpu", "m3-max", "--engine", "tensorrt-llm"),
     "--engine: tensorrt-llm on Apple M3 Max (40-core GPU) (apple-gpu): sizer models batching engines on discrete "
     "GPUs only"),
    (("--gpu", "h100", "--engine", "exllama"), "--engine: 'exllama' is not one of vllm, sglang"),
    # a vLLM setting on the engine chosen for GGUF weights: the refusal says why that engine was chosen
    (("--gpu", "m3-max", "--weights", "q4_k_m", "--max-model-len", "8192"),
     "--max-model-len: is a setting of vllm, sglang, tensorrt-llm, lmdeploy, tgi, not of deployment.engine "
     "llama.cpp (default: GGUF weights (q4_k_m) are llama.cpp's format; name deployment.engine to choose)"),
])
def test_engines_that_do_not_serve_there_are_refused_in_one_line(args, says):
    result = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", *args])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and says in result.output


def test_a_scenario_file_engine_is_kept_and_the_flag_replaces_it(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("model: llama-3.1-8b\nhardware: h100\ndeployment: {engine: sglang}\n"
                    "workload:\n  arrival: {rate_per_s: 1}\n  prompt_tokens: {distribution: fixed, value: 512}\n"
                    "  output_tokens: {distribution: fixed, value: 128}\n")
    result = runner.invoke(app, ["plan", str(path), "--json"])
    assert json.loads(result.output)["engine"]["engine"] == "sglang"
    result = runner.invoke(app, ["plan", str(path), "--engine", "vllm", "--json"])
    assert json.loads(result.output)["engine"]["engine"] == "vllm"


def test_a_stream_interval_is_a_batching_servers_setting_and_spaces_the_clients_messages(tmp_path):
    # vLLM and SGLang --stream-interval, TensorRT-LLM stream_interval: the first token alone, then `interval` tokens a
    # message (docs/fidelity.md: InferenceMAX's SGLang points at 10 measure a median ITL 9.7x their TPOT)
    path = tmp_path / "s.yaml"
    body = ("model: llama-3.1-8b\nhardware: h100\ndeployment: {{engine: {engine}, stream_interval: {n}}}\n"
            "workload:\n  arrival: {{process: closed, concurrency: 4}}\n  num_requests: 40\n"
            "  prompt_tokens: {{distribution: fixed, value: 512}}\n"
            "  output_tokens: {{distribution: fixed, value: 257}}\n")
    sims = {}
    for n in (1, 8):
        path.write_text(body.format(engine="sglang", n=n))
        result = runner.invoke(app, ["simulate", str(path), "--json"])
        assert result.exit_code == 0, result.output
        sims[n] = json.loads(result.output)
    one, eight = sims[1], sims[8]
    # the same steps: TPOT and E2E unchanged; each message eight steps apart, so the median gap eight TPOTs
    assert eight["tpot"]["mean_ms"] == one["tpot"]["mean_ms"] and eight["e2e"]["mean_ms"] == one["e2e"]["mean_ms"]
    assert eight["itl"]["p50_ms"] == pytest.approx(8 * one["itl"]["p50_ms"], rel=0.05)
    # under speculative decoding the server counts the interval in tokens, several a step: not modelled, refused
    spec = "speculative_config: {method: ngram, num_speculative_tokens: 3, acceptance_rate: 0.5}"
    path.write_text(body.format(engine="vllm", n=8).replace("stream_interval: 8}", f"stream_interval: 8, {spec}}}"))
    result = runner.invoke(app, ["simulate", str(path)])
    assert result.exit_code == 2 and "deployment.stream_interval: with deployment.speculative_config" in result.output
    path.write_text(body.format(engine="llama.cpp", n=8).replace("hardware: h100", "hardware: m3-max"))
    result = runner.invoke(app, ["simulate", str(path)])
    assert result.exit_code == 2
    assert "deployment.stream_interval: is a setting of vllm, sglang, tensorrt-llm" in result.output


def test_tensorrt_llm_at_its_defaults_says_where_each_number_came_from_and_the_ways_out():
    # audit: `plan scenarios/llama-3.1-8b-chat-h100.yaml --engine tensorrt-llm` was refused as "deployment.
    # max_num_batched_tokens: 8192 is below max_model_len ...": a field the file does not have, at a default the
    # user never wrote. TensorRT-LLM's defaults (sizer/sizing/presets.py): max_num_tokens 8,192, chunking off; a
    # prompt longer than one step cannot run, so exit 2 stays, with where each number came from and what to set
    result = runner.invoke(app, ["plan", "scenarios/llama-3.1-8b-chat-h100.yaml", "--engine", "tensorrt-llm"])
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    line = " ".join(line.split())
    # the scenario states max_model_len 16,384; the engine came from --engine
    assert ("deployment.max_num_batched_tokens: 8,192 (TensorRT-LLM's default) is below max_model_len 16,384 "
            "(stated) with chunked prefill off (TensorRT-LLM's default): TensorRT-LLM (--engine tensorrt-llm) takes "
            "no prompt longer than one step; set deployment.enable_chunked_prefill: true, raise "
            "deployment.max_num_batched_tokens to 16,384, or lower deployment.max_model_len to 8,192 "
            "(--max-model-len 8192)") in line
    # from flags alone the length is the model's: Llama-3.1-8B's max_position_embeddings 131,072
    alone = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--engine", "tensorrt-llm"])
    assert alone.exit_code == 2 and "below max_model_len 131,072 (the model's context: max_position_embeddings)" in \
        " ".join(alone.stderr.split())
    # and a way out passes: the length within the step
    assert plan("--gpu", "h100", "--engine", "tensorrt-llm", "--max-model-len", "8192")["engine"]["engine"] == \
        "tensorrt-llm"
