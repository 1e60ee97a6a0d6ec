"""GGUF presets sized tensor by tensor with llama.cpp's quantizer rules (sizer.inputs.gguf_types).

Published sizes are llama-bench's "size" column: the sum of the model's tensor bytes (ggml_nbytes),
printed in GiB with two decimals, so a figure is exact to +-0.005 GiB. Rows quoted from public
llama-bench tables (model | size | params | backend ...):
- llama 7B (Llama-2-7B / CodeLlama-7B, 6.74 B) F16 12.55 GiB, Q8_0 6.67 GiB, Q4_0 3.56 GiB:
  ggml-org/llama.cpp PR #4766 (RTX 4090 run of codellama-7b f16, q8_0, q4_0) and PR #4812 (Q4_0).
- llama 7B Q4_K - Medium 3.80 GiB: llama-bench rows "llama 7B Q4_K - Medium | 3.80 GiB | 6.74 B" in public
  llama.cpp CUDA and ROCm threads.
- llama 8B (Llama-3.1-8B, 8.03 B) Q4_K - Medium 4.58 GiB and Q8_0 7.95 GiB: llama-bench rows in public
  llama.cpp SYCL, Vulkan and Metal threads ("llama 8B Q8_0 | 7.95 GiB | 8.03 B | SYCL").
- llama 3B (Llama-3.2-3B, 3.21 B) Q4_K - Medium 1.87 GiB: geerlingguy/ai-benchmarks issue #48 (M1 Ultra,
  Llama-3.2-3B-Instruct-Q4_K_M.gguf).
Model-card file sizes agree for Llama-2-7B (TheBloke/Llama-2-7B-GGUF: Q4_0 3.83 GB, Q4_K_M 4.08 GB, Q5_K_M
4.78 GB, Q6_K 5.53 GB, Q8_0 7.16 GB; sizer 3.825, 4.080, 4.782, 5.528, 7.160 GB) but include the
tokenizer's metadata, so the tests hold llama-bench's tensor bytes.
"""

from __future__ import annotations

import pytest

from sizer.analytic.formats import FORMATS
from sizer.analytic.memory import weight_memory
from sizer.analytic.parallel import ParallelConfig
from sizer.inputs import gguf_types as gg
from sizer.inputs.model_spec import load_model
from sizer.inputs.scenario import WeightFormat

GiB = 2**30
PUBLISHED_GIB = [
    ("llama-2-7b", "f16", 12.55),
    ("llama-2-7b", "q8_0", 6.67),
    ("llama-2-7b", "q4_0", 3.56),
    ("llama-2-7b", "q4_k_m", 3.80),
    ("llama-3.1-8b", "q4_k_m", 4.58),
    ("llama-3.1-8b", "q8_0", 7.95),
    ("llama-3.2-3b", "q4_k_m", 1.87),
]


@pytest.mark.parametrize(("model", "fmt", "gib"), PUBLISHED_GIB)
def test_weight_bytes_match_published_llama_bench_sizes(model, fmt, gib):
    w = weight_memory(load_model(model), FORMATS[fmt], ParallelConfig())
    assert w.total_bytes / GiB == pytest.approx(gib, rel=0.01)
    assert abs(w.total_bytes / GiB - gib) <= 0.0051        # in fact within llama-bench's rounding


def test_type_table_matches_gguf_py():
    """Our block table is our own data; gguf-py's GGML_QUANT_SIZES is the reference it must agree with."""
    gguf = pytest.importorskip("gguf")
    for t in gg.TYPES.values():
        ref = gguf.GGMLQuantizationType(t.type_id)
        assert ref.name == t.name
        assert gguf.GGML_QUANT_SIZES[ref] == (t.block_values, t.block_bytes)


def test_q4_k_m_keeps_half_of_attn_v_and_ffn_down_at_q6_k():
    """use_more_bits over 32 layers: the first 4 (i < 32/8), the last 4 (i >= 28) and i = 6, 9, ..., 27
    ((i - 4) % 3 == 2, 8 of them): 16 of 32 at Q6_K, the rest Q4_K."""
    facts, p = gg.ModelFacts(1, 0, False), gg.PRESETS["q4_k_m"]
    types = [gg.tensor_type(p, gg.FFN_DOWN, i, 32, 11008, facts).name for i in range(32)]
    assert types.count("Q6_K") == 16 and types.count("Q4_K") == 16
    assert types[:4] == ["Q6_K"] * 4 and types[4:6] == ["Q4_K"] * 2 and types[6] == "Q6_K"
    assert gg.tensor_type(p, gg.OUTPUT, 0, 1, 4096, facts).name == "Q6_K"
    assert gg.tensor_type(p, gg.TOKEN_EMBD, 0, 1, 4096, facts).name == "Q4_K"
    assert gg.tensor_type(p, gg.TOKEN_EMBD, 0, 1, 4096, facts, tied=True).name == "Q6_K"   # tied: output's type
    assert gg.tensor_type(gg.PRESETS["q8_0"], gg.OUTPUT, 0, 1, 4096, facts).name == "Q8_0"


def test_grouped_kv_and_70b_rules():
    """Q2_K: attn_v Q4_K with >= 4 query heads per KV head, else Q3_K; the 70B bump turns Q3_K/Q4_K V into Q5_K;
    eight experts (Mixtral) keep attn_v and attn_k at Q8_0."""
    p = gg.PRESETS["q2_k"]
    assert gg.tensor_type(p, gg.ATTN_V, 0, 32, 4096, gg.ModelFacts(4, 0, False)).name == "Q4_K"
    assert gg.tensor_type(p, gg.ATTN_V, 0, 32, 4096, gg.ModelFacts(1, 0, False)).name == "Q3_K"
    assert gg.tensor_type(p, gg.ATTN_V, 0, 80, 8192, gg.ModelFacts(8, 0, True)).name == "Q5_K"
    assert gg.tensor_type(p, gg.ATTN_K, 0, 32, 4096, gg.ModelFacts(4, 8, False)).name == "Q8_0"


def test_rows_the_block_does_not_divide_fall_back():
    """tensor_type_fallback: Q4_K (256) on a row of 96 values -> Q5_0 (32); on 100 values nothing fits -> F16."""
    facts, p = gg.ModelFacts(1, 0, False), gg.PRESETS["q4_k_s"]
    assert gg.tensor_type(p, gg.ATTN_Q, 0, 1, 96, facts).name == "Q5_0"
    assert gg.tensor_type(p, gg.ATTN_Q, 0, 1, 100, facts).name == "F16"


def test_presets_are_selectable_weight_formats():
    """Every preset but BF16 (sizer's bf16, the same 2 bytes) is a scenario weight format under its lower-case name."""
    assert set(gg.PRESETS) <= set(WeightFormat.__args__)
    assert FORMATS["q4_k_m"].gguf is gg.PRESETS["q4_k_m"] and FORMATS["q4_k_m"].bits == 4
