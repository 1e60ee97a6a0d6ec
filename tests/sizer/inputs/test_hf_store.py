"""sizer's bundled Hugging Face configs (sizer/inputs/catalog/hf, sizer.inputs.hf_store): every entry
resolves by its HF id, offline, to a model or to a one-line refusal naming what sizer does not model;
published parameter counts of a few families; `plan` and `check` with an empty Hugging Face cache.

The store is package data (configs copied verbatim from the aiconfigurator-core 0.12.0 wheel, listed
with source and licence in sizer/inputs/catalog/hf/README.md); the tests read only the repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sizer.analytic.memory import kv_layout
from sizer.analytic.parallel import ParallelConfig
from sizer.analytic.weights import parameter_count
from sizer.errors import InputError
from sizer.inputs.hf_store import BUNDLED, STORE_DIR, bundled, bundled_ids
from sizer.inputs.model_spec import checkpoint_model, from_hf_config, load_config
from validation.errors import FieldError

ROOT = Path(__file__).resolve().parents[3]
INDEX = json.loads((STORE_DIR / "index.json").read_text())
ENTRIES = {e["hf_id"]: e for e in INDEX["entries"]}


@pytest.fixture
def empty_hf_cache(tmp_path, monkeypatch):
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_the_store_holds_at_least_sixty_models_each_with_source_and_licence():
    # issue 26 item 4: "at least 60 current models and their common quantised checkpoints"
    assert len(bundled_ids()) == len(ENTRIES) >= 60
    for e in ENTRIES.values():
        assert e["source"] in INDEX["sources"] and e["licence"] and e["source_files"], e["hf_id"]
    quantised = [e for e in ENTRIES.values()
                 if "folder" in e and (STORE_DIR / e["folder"] / "hf_quant_config.json").exists()]
    assert len(quantised) >= 20                    # ModelOpt FP8/NVFP4 checkpoints with their hf_quant_config.json
    size = sum(f.stat().st_size for f in STORE_DIR.rglob("*") if f.is_file())
    assert size < 2_000_000, size                  # configs only: ~1.1 MB


@pytest.mark.parametrize("hf_id", sorted(ENTRIES))
def test_every_entry_resolves_offline_as_the_index_says(hf_id, empty_hf_cache):
    e = ENTRIES[hf_id]
    try:
        ckpt = load_config(hf_id)
        checkpoint_model(ckpt)
        outcome = "yes"
    except (InputError, FieldError) as exc:
        line = str(exc)
        assert "\n" not in line and line.startswith(str(bundled(hf_id).config_path)), line
        outcome = "refused: " + line.split(": ", 1)[1][:160]
    assert outcome == e["reads"]
    if outcome == "yes" and "folder" in e:         # a copied folder reads as the HF id and says where it came from
        assert ckpt.name == hf_id
        assert ckpt.found_as.startswith(f"{BUNDLED} {hf_id} (source: aiconfigurator-core 0.12.0 wheel; licence: ")
    if "catalog" in e:                             # a catalog model by its _sizer.hf_repo reads as that model
        assert load_config(hf_id).name == e["catalog"]


def test_the_refused_entries_name_a_feature_sizer_does_not_model():
    refused = {h: e["reads"] for h, e in ENTRIES.items() if e["reads"] != "yes"}
    # DeepSeek-V4 (expert_dtype, o_lora_rank), MiniMax-M3 (dense_intermediate_size, then its sparse attention),
    # MiMo-V2-Flash (value heads narrower than its query heads, then its sliding layers' own heads), Step-3.7
    # (share_expert_dim), Kimi-K3; MiniMax-M2.5 and M2.7 (and their NVFP4 checkpoints) read
    assert {h.split("/")[1].split("-")[0] for h in refused} <= {"DeepSeek", "MiniMax", "MiMo", "Step", "Kimi"}
    assert all("not modelled" in r or "moe_layer_freq" in r or "num_experts_per_tok" in r for r in refused.values())


@pytest.mark.parametrize(("hf_id", "total", "active"), [
    # Qwen3-32B model card (huggingface.co/Qwen/Qwen3-32B): "Number of Parameters: 32.8B"
    ("Qwen/Qwen3-32B", 32.8e9, None),
    # Qwen3-Coder-480B-A35B-Instruct model card: "480B-parameter Mixture-of-Experts model with 35B active"
    ("Qwen/Qwen3-Coder-480B-A35B-Instruct", 480e9, 35e9),
    # DeepSeek-R1 model card, model table: "#Total Params 671B, #Activated Params 37B" (MTP module not counted)
    ("deepseek-ai/DeepSeek-R1", 671e9, 37e9),
    # Kimi-K2 model card summary: "Total Parameters 1T, Activated Parameters 32B"
    ("moonshotai/Kimi-K2-Instruct", 1e12, 32e9),
    # Llama 3.1 model card (meta-llama/llama-models MODEL_CARD.md): 70B
    ("nvidia/Llama-3.1-70B-Instruct-FP8", 70e9, None),
    # vllm-project/recipes MiniMax/MiniMax-M2.md: "10B activated parameters (230B total)"; the active figure is held
    # below without the embedding and lm_head
    ("MiniMaxAI/MiniMax-M2.5", 230e9, None),
    ("MiniMaxAI/MiniMax-M2.7", 230e9, None),
])
def test_published_parameter_counts_within_three_percent(hf_id, total, active, empty_hf_cache):
    counts = parameter_count(checkpoint_model(load_config(hf_id)))
    assert counts.total == pytest.approx(total, rel=0.03)
    if active:
        assert counts.active == pytest.approx(active, rel=0.03)


@pytest.mark.parametrize(("hf_id", "fmt"), [
    ("nvidia/Llama-3.1-70B-Instruct-FP8", "fp8"),           # its hf_quant_config.json: quant_algo FP8
    ("nvidia/Gemma-4-31B-IT-NVFP4", "nvfp4"),               # quant_algo NVFP4
    ("Qwen/Qwen3-32B-FP8", "fp8"),                          # config.json quantization_config (128x128 blocks)
])
def test_quantised_checkpoints_read_their_quantisation(hf_id, fmt, empty_hf_cache):
    assert checkpoint_model(load_config(hf_id)).quantization.format == fmt


def offline(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE")}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "empty-hf-home"), PYTHONPATH=str(ROOT), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "sizer", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


def test_plan_of_a_bundled_hf_id_with_an_empty_cache(tmp_path):
    r = offline("plan", "--model", "Qwen/Qwen3-32B-FP8", "--gpu", "h100", "--json", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["checkpoint"]["found_as"].startswith("sizer's bundled copy of Qwen/Qwen3-32B-FP8 (source: ")
    assert plan["weights"]["format"] == "fp8"
    # 64 layers x 8 KV heads x 128 head dim x 2 (K and V) x 2 bytes (bf16 KV) = 262,144 bytes per token
    assert plan["kv"]["bytes_per_token"] == 262_144


def test_check_of_a_manifest_naming_a_bundled_hf_id_with_an_empty_cache(tmp_path):
    # ai-dynamo's published agg example serves Qwen/Qwen3-0.6B (tests/data/manifests/README.md)
    manifest = ROOT / "tests" / "data" / "manifests" / "dynamo-vllm-agg.yaml"
    r = offline("check", str(manifest), "--gpu", "h100", tmp_path=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Qwen/Qwen3-0.6B on 1 replica" in r.stdout and "PASS" in r.stdout


def test_an_id_in_neither_the_cache_nor_the_store_names_both(tmp_path):
    r = offline("plan", "--model", "org/not-bundled", "--gpu", "h100", tmp_path=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "not in the local Hugging Face cache" in r.stderr and "nor in sizer's bundled HF configs" in r.stderr


def test_minimax_m2_is_read_with_its_multi_token_prediction_modules_left_out(empty_hf_cache):
    m = checkpoint_model(load_config("MiniMaxAI/MiniMax-M2.5"))
    # rotary_dim 64 (RoPE's width) and shared_intermediate_size 0 (no shared expert) change no count; the 3 MTP
    # modules of 1 layer each are not counted, as num_nextn_predict_layers' are (vLLM's MiniMaxM2ForCausalLM skips
    # their weights), and no speculative mtp is offered for them
    assert "shared_intermediate_size = 0 (switched off)" in m.unread_keys and m.mtp_layers == 0
    assert "3 multi-token-prediction layer(s) in the checkpoint (num_mtp_modules 3 x mtp_transformer_layers 1) are " \
           "not counted: vLLM does not load them (it has no mtp draft for this model)" in m.notes
    # a layer: q 3,072 x 6,144, k and v 3,072 x 1,024 each, o 6,144 x 3,072 (44,040,192), q / k norms over all 48 and
    # 8 heads (7,168: vLLM's MiniMaxText01RMSNormTP over head_dim x heads), 256 experts of 3 x 3,072 x 1,536
    # (3,623,878,656), router 3,072 x 256 and its correction bias 256 (use_routing_bias), 2 norms (6,144):
    # 3,668,718,848; x 62 = 227,460,568,576; the final norm 3,072; embedding + lm_head 2 x 200,064 x 3,072 =
    # 1,229,193,216: 228,689,764,864 (230B published). Active, 8 experts of the 256: 11,030,553,088, of which
    # 9,801,359,872 are neither the embedding nor the lm_head (10B published)
    counts = parameter_count(m)
    assert (counts.total, counts.active) == (228_689_764_864, 11_030_553_088)
    assert counts.active - 2 * 200_064 * 3_072 == pytest.approx(10e9, rel=0.03)
    # KV per token: 2 (K, V) x 62 layers x 8 KV heads x 128 head dim x 2 bytes = 253,952 B
    assert kv_layout(m, "bf16", ParallelConfig()).bytes_per_token == 253_952
    # MiniMax-M2.7 states attn_type_list, all 1 (softmax attention); a 0 (MiniMax's lightning attention) is refused
    assert checkpoint_model(load_config("MiniMaxAI/MiniMax-M2.7")).num_sliding_layers == 0
    config = {**load_config("MiniMaxAI/MiniMax-M2.7").config}
    config["attn_type_list"] = [0] + config["attn_type_list"][1:]
    with pytest.raises(FieldError, match="attn_type_list\\[0\\]: attention type 0 is not modelled"):
        from_hf_config(config, "x")
