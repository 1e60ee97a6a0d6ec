"""TensorRT-LLM's published maximum-load throughput (tests/data/fidelity/saturation.csv, NVIDIA's perf-overview
page; README there) replayed on sizer's default step model: the engine's own kernel tables. Three dense rows
(a quarter of their requests), each within the 20% issue 23 allows any dense row; benchmarks/saturation.py
replays all 59 (dense median 3.6%, MoE 3.1%, docs/fidelity.md). Every row runs with the page's CUDA-graph padding
and trtllm-bench's max_batch_size (benchmarks/published/replay_saturation.py). MoE rows replay as the page ran
them, attention DP + EP 8 (DEP8, docs/moe.md): decode-bound rows, whole (their batch is the KV cache's, or the
ranks' max_num_seqs, at their full request count)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from benchmarks.published.replay_saturation import predicted_tokens_per_s

DATA = Path(__file__).resolve().parents[1] / "data" / "fidelity" / "saturation.csv"
ROWS = {(r["model_hf_id"], r["gpu"], r["isl"], r["osl"]): r for r in csv.DictReader(DATA.open())}


def replayed(key: tuple[str, str, str, str], scale: float = 1.0) -> tuple[float, str, tuple[float, float]]:
    """The row's relative throughput error (predicted - published) / published, what priced its steps, and the
    predicted and published tokens/s for the failure message."""
    row = ROWS[key]
    tokens_per_s, priced_by = predicted_tokens_per_s(row, scale=scale)
    published = float(row["total_output_tok_s"])
    return (tokens_per_s - published) / published, priced_by, (tokens_per_s, published)


@pytest.mark.parametrize("key", [
    ("meta-llama/Llama-3.1-8B-Instruct", "h100-sxm", "2048", "128"),       # published 3,450 tokens/s
    ("meta-llama/Llama-3.1-8B-Instruct", "h200", "1000", "2000"),          # 16,828
    ("meta-llama/Llama-3.3-70B-Instruct", "h100-sxm", "5000", "500"),      # 898, TP 2
])
def test_a_dense_max_load_row_is_within_20_percent_on_its_engines_tables(key):
    error, priced_by, numbers = replayed(key, scale=0.25)
    assert priced_by.startswith(f"{key[1]} tensorrt-llm tables")
    assert abs(error) < 0.20, numbers


@pytest.mark.slow
@pytest.mark.parametrize("key", [
    ("Qwen/Qwen3-235B-A22B", "h200", "128", "2048"),                                # published 42,821 tokens/s
    ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "h100-sxm", "2048", "2048"),  # 6,916
    # 12,447: KV-bound on the H100 (about two waves); +35.6% before TensorRT-LLM's KV cache left out the fused-MoE
    # workspace its profiling pass reaches for all 8 ranks' 8,192 tokens (8 GiB a GPU, docs/moe.md)
    ("Qwen/Qwen3-235B-A22B", "h100-sxm", "128", "4096"),
    # 63,994: 30,000 x 128/128, decode steps of 16,384 sequences (2,048 a rank, about 90 ms on the GPU); -43.5% while
    # one scheduler's CPU (20 us a sequence) was charged for all 16,384 (328 ms a step) instead of each rank's 2,048
    ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "h200", "128", "128"),
    # 28,026: 3,000 x 500/2000, 375 sequences of 79 blocks a rank; +37.5% (one wave, 377 a rank) before the KV cache
    # did without the fused-MoE op's gathered rows under attention DP (0.95 GiB a GPU: 373 a rank, two waves)
    ("Qwen/Qwen3-235B-A22B", "h200", "500", "2000"),
])
def test_a_moe_max_load_row_replays_as_dep8_within_20_percent(key):
    error, priced_by, numbers = replayed(key)
    assert priced_by.startswith(f"{key[1]} tensorrt-llm tables")
    assert abs(error) < 0.20, numbers


def test_a_prefill_bound_moe_row_waits_for_the_busiest_rank():
    # Qwen3-235B-A22B FP8, H200 DEP8, 3,000 x 2,048-token prompts and 128 outputs: published 3,331 tokens/s, about
    # 115 s of mostly prefill. Each TensorRT-LLM rank schedules its own prompts (54.11% balance, presets'
    # ATTENTION_DP_CONTEXT_BALANCE): with the prompts spread evenly the replay ran 50% fast (5,007 tokens/s)
    error, _, numbers = replayed(("Qwen/Qwen3-235B-A22B", "h200", "2048", "128"))
    assert abs(error) < 0.10, numbers


@pytest.mark.slow
def test_llama4s_chunked_layers_hold_their_whole_context_in_tensorrt_llms_kv_cache():
    # Llama-4-Maverick FP8, H200 DEP8, 1,000 x 20,000-token prompts and 2,000 outputs: published 4,106 tokens/s, a
    # KV-bound row. TensorRT-LLM 1.0 caches every token of the 36 chunked-attention layers (presets'
    # KEEPS_CHUNKED_KV): 98,304 B a token on a GPU instead of 24,576 beyond the 8,192-token chunk, so fewer
    # 22,000-token sequences run at once. Replayed with the chunked layers capped at their chunk: +17.4% (4,819)
    error, _, numbers = replayed(("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "h200", "20000", "2000"))
    assert abs(error) < 0.10, numbers


@pytest.mark.slow
def test_moe_decode_steps_run_at_the_cuda_graph_sizes_the_page_captured():
    # Qwen3-235B-A22B FP8, H200 DEP8, 1,500 x 1,000/2,000: published 22,061 tokens/s, decode-bound (187 sequences a
    # rank). TensorRT-LLM runs each all-decode step as the captured graph of the next listed size (the page's
    # cuda_graph_config, enable_padding; 187 -> 256 a rank, and every rank's padded tokens through the MoE layers
    # and their exchange). Replayed unpadded: +14.3% (25,217); padded +5.1% (23,186; +1.7% before the routers' own
    # bfloat16 rows and TensorRT-LLM's fused rotary, cache write and norms, docs/fidelity.md)
    error, _, numbers = replayed(("Qwen/Qwen3-235B-A22B", "h200", "1000", "2000"))
    assert abs(error) < 0.08, numbers
