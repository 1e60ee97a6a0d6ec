"""Issue 27's three questions, asked as a new user would from the README ("Three questions") and `--help`:
each command runs, answers, and names every default it used among its printed assumptions.

  (a) a 32B FP8 model at 50 req/s on H100s
  (b) a 70B deployment on 4 x A100 at 8k context
  (c) what runs on a 64 GB M3 Max with llama.cpp
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.cli.app import app

runner = CliRunner()
REPO = Path(__file__).resolve().parents[3]
PROFILES = REPO / "hardware_profiles"

# The README's commands (README.md, "Three questions"), word for word
QUESTION_A = "plan --model qwen2.5-32b --gpu h100 --weights fp8 --rate 50 --ttft-ms 2000 --itl-ms 50 --simulate"
QUESTION_B = "plan --model llama-3.1-70b --gpu a100-80gb --tp 4 --max-model-len 8192"
QUESTION_C = ("plan --model llama-3.1-70b --gpu m3-max --memory-gb 64 --engine llama.cpp --weights q4_k_m "
              "--ctx-size 16384 --rate 0.1 --itl-ms 100")


def ask(command: str) -> str:
    """The command's terminal output with its line wrapping and table borders undone (rich wraps at the terminal's
    width)."""
    result = runner.invoke(app, command.split())
    assert result.exit_code == 0, result.output
    return " ".join(re.sub(r"[\u2500-\u257f]", " ", result.output).split())


def assumptions(text: str) -> str:
    return text.split("Assumptions", 1)[1]


def test_the_readme_shows_the_three_commands():
    readme = " ".join((REPO / "README.md").read_text().split())
    for command in (QUESTION_A, QUESTION_B, QUESTION_C):
        assert f"sizer {command}" in readme


@pytest.mark.slow
def test_a_32b_fp8_model_at_50_requests_a_second_on_h100s():
    """Qwen2.5-32B in FP8: 34.32 GB of weights (32.76 B parameters, a byte each, plus the BF16 embedding and
    output matrices) fit one 80 GiB H100; the simulated goodput per replica sets the replicas at 50 req/s, and the
    cost line counts the same replicas as the verdict."""
    out = ask(QUESTION_A)
    # the verdict names the targets it was judged against (the flags' TTFT 2 s and ITL 50 ms, 95% by default)
    verdict = re.search(r"SLO met: [\d.]+% of requests meet every target \(TTFT <= 2,000 ms, ITL <= 50 ms; 95% of "
                        r"requests required\) at [\d.]+ req/s per replica on (\d+) replicas", out)
    assert verdict, out[:400]
    replicas = int(verdict.group(1))
    assert f"Cost: {replicas} replicas x 1 GPU = {replicas} GPUs" in out
    assert "fp8: 34.32 GB" in out
    said = assumptions(out)
    for default in (f"hardware profile h100-sxm: {PROFILES / 'h100-sxm.yaml'} (bundled with sizer)",
                    "engine vllm (default: vLLM, sizer's engine for discrete GPUs)",
                    "workload: prompt 1,024 tokens, fixed (default: no scenario file), output 256 tokens, fixed "
                    "(default: no scenario file)",
                    "KV cache type bf16 (kv_cache_dtype auto: the model's serving dtype)",
                    "gpu_memory_utilization 0.9 (vLLM's default",
                    "max_model_len from model (max_position_embeddings)",
                    "block_size from vllm default", "max_num_seqs from vllm default",
                    "price: hardware profile h100-sxm (median of listed prices)"):
        assert default in said, default
    assert "(default: no scenario file), poisson" not in said and "(--rate)" in said     # the rate was given


def test_a_70b_deployment_on_four_a100s_at_8k_context():
    """Llama-3.1-70B in BF16 over TP 4: 141.1 GB of weights, 32.86 GiB per GPU, fits the A100 80GB; each GPU holds
    2 of the 8 KV heads; the 8,192-token context is the scenario's (the flag), not the model's 131,072."""
    out = ask(QUESTION_B)
    assert out.startswith("command-line: llama-3.1-70b on 4 x NVIDIA A100 SXM4 80GB — fits")
    assert "4 x 1 x 1 = 4 GPUs per replica" in out and "2 KV heads per GPU" in out
    assert "at max_model_len 8,192" in out
    said = assumptions(out)
    for default in (f"hardware profile a100-80gb: {PROFILES / 'a100-80gb.yaml'} (bundled with sizer)",
                    "engine vllm (default: vLLM, sizer's engine for discrete GPUs)",
                    "workload: 1 req/s (default: no scenario file), poisson arrivals (default)",
                    "workload: prompt 1,024 tokens, fixed (default: no scenario file), output 256 tokens, fixed "
                    "(default: no scenario file)",
                    "SLO: no targets stated",
                    "KV cache type bf16 (kv_cache_dtype auto: the model's serving dtype)",
                    "gpu_memory_utilization 0.9 (vLLM's default",
                    "max_model_len from scenario",
                    "NCCL buffers 0.50 GiB when TP or PP > 1 or attention-DP ranks share experts (DEP) (assumption)",
                    "price: hardware profile a100-80gb (median of listed prices)"):
        assert default in said, default


def test_what_runs_on_a_64_gb_m3_max_with_llamacpp():
    """A 64 GB M3 Max: Metal lets the GPU use 0.75 of it, 48 GiB. Llama-3.1-70B's Q4_K_M weights (39.59 GiB) and
    16,384 tokens of f16 KV (16,384 x 320 KiB = 5 GiB: 80 layers x 8 KV heads x 128 x 2 B x K and V) fit; Q8_0
    (69.82 GiB) and F16 do not; no 70B format reaches 10 tokens/s per user at 409.6 GB/s, so the fastest that fits
    is named."""
    out = ask(QUESTION_C)
    assert out.startswith("command-line: llama-3.1-70b on 1 x Apple M3 Max (40-core GPU), 64 GB — fits")
    assert "KV cache (one buffer of 16,384 tokens, f16) 5.37 5.00" in out
    assert "q8_0 weights 74.97 GB (69.82 GiB); does not fit with one slot" in out
    assert "recommendation no format that fits reaches 10.0 tokens/s per user on this device; fastest: q3_k_m" in out
    said = assumptions(out)
    for default in (f"hardware profile apple-m3-max: {PROFILES / 'local' / 'apple-m3-max.yaml'} (bundled with "
                    "sizer); the scenario overrides memory_gb 64 (68,719,476,736 B)",
                    "engine llama.cpp (--engine)",
                    "workload: prompt 1,024 tokens, fixed (default: no scenario file), output 256 tokens, fixed "
                    "(default: no scenario file)",
                    "the GPU may use 48.0 GiB of its 64 GiB unified memory (Metal's recommendedMaxWorkingSetSize",
                    "llama.cpp takes no share of the device (no gpu_memory_utilization)",
                    "K cache f16, V cache f16; cache_type_k from llama.cpp default",
                    "parallel from llama.cpp default", "kv_unified from llama.cpp default",
                    "ctx_size from scenario",
                    "price: none: the apple-m3-max profile lists no price"):
        assert default in said, default
    assert "CUDA" not in out.split("Assumptions")[0] and "usable at gpu_memory_utilization" not in out
