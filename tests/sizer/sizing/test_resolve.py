"""resolve(): the executors' configuration (disaggregated pools, swap and transfer links) and
the assumptions a plan states when a hardware profile lacks a link figure."""

import json
from pathlib import Path

import pytest

from simulator.step_batch import StepBatch, attention_pairs
from sizer.errors import InputError
from sizer.inputs.hardware import host_link, load_hardware, scale_up_link
from sizer.inputs.scenario import load_scenario, scenario_from_dict
from sizer.sizing.goodput import cached_prefill_share, probe_slo, rate_bound_per_s
from sizer.sizing.plan import make_plan
from sizer.sizing.resolve import resolve
from sizer.sizing.simulate import simulation_config
from sizer.timing.roofline import RooflineStepTimeModel
from sizer.timing.step_model import roofline_for, step_model_for


def scenario(gpu="h100-sxm", model_name="llama-3.1-8b", **deployment):
    return scenario_from_dict({
        "model": model_name, "hardware": gpu, "deployment": {"max_model_len": 8192, **deployment},
        "workload": {"arrival": {"rate_per_s": 1}, "prompt_tokens": {"distribution": "fixed", "value": 1000},
                     "output_tokens": {"distribution": "fixed", "value": 100}}}, None)


def test_disaggregated_pools_transfer_at_the_interconnect_unless_stated():
    r = resolve(scenario(disaggregated={"prefill_replicas": 2, "decode_replicas": 3}))
    d = simulation_config(r).disaggregation
    # Llama-3.1-8B at bf16: 2 x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B per token; H100 NVLink 450 GB/s
    assert (d.num_prefill_replicas, d.num_decode_replicas) == (2, 3)
    assert (d.kv_bytes_per_token, d.interconnect_bytes_per_s, d.transfer_latency_s) == (131_072, 450e9, 0.0)
    stated = resolve(scenario(disaggregated={"prefill_replicas": 1, "decode_replicas": 1,
                                             "kv_transfer_bytes_per_s": 5e10}))
    assert stated.disaggregation.interconnect_bytes_per_s == 5e10


def test_link_fallbacks_are_sourced_and_stated_in_the_plan():
    # L4 has no NVLink: TP collectives go over its PCIe Gen 4 x16 (32 GB/s per direction, its profile)
    l4 = load_hardware("l4")
    assert scale_up_link(l4).bytes_per_s_per_direction == 32e9 and scale_up_link(l4).assumed
    plan = make_plan(resolve(scenario("l4", tensor_parallel_size=2, max_model_len=2048)))
    assert any(a.startswith("link between GPUs (collectives, KV transfer): 32 GB/s") for a in plan.assumptions)
    # H100 SXM has both figures: nothing assumed, nothing stated
    assert not resolve(scenario(tensor_parallel_size=2, preemption_mode="swap")).link_notes
    # MI300X gives PCIe Gen 5 but no figure: PCI-SIG's x16 Gen 5, 64 GB/s per direction, prices swap
    r = resolve(scenario("mi300x", preemption_mode="swap"))
    assert r.replica.swap.bytes_per_s == 64e9 == host_link(r.hardware).bytes_per_s_per_direction
    assert r.link_notes == ("host link (swap): 64 GB/s per direction, PCIe Gen 5 x16, 64 GB/s per direction per "
                            "PCI-SIG (the profile gives its PCIe generation but no figure)",)
    # H20 gives no PCIe generation either: Gen 4, 32 GB/s, stated
    assert resolve(scenario("h20", preemption_mode="swap")).replica.swap.bytes_per_s == 32e9


def test_mi325x_collectives_run_at_its_infinity_fabric_like_mi300x():
    # 7 x 64 GB/s peer links, 448 GB/s per direction: the same as MI300X (its profile has no figure before)
    mi325x, mi300x = (roofline_for(resolve(scenario(g, tensor_parallel_size=8))) for g in ("mi325x", "mi300x"))
    assert mi325x.link_bytes_per_s == mi300x.link_bytes_per_s == 448e9
    assert not resolve(scenario("mi325x", tensor_parallel_size=8)).link_notes


def test_recompute_needs_no_swap_link_and_the_host_cpu_has_no_roofline():
    assert resolve(scenario()).replica.swap is None
    r = resolve(scenario_from_dict({"model": "tiny", "hardware": "cpu", "deployment": {"max_model_len": 2048},
                                    "workload": {"arrival": {"rate_per_s": 1},
                                                 "prompt_tokens": {"distribution": "fixed", "value": 100},
                                                 "output_tokens": {"distribution": "fixed", "value": 10}}}, None))
    assert r.hardware.id == "cpu" and r.replica.num_blocks > 0
    # the host is not a GPU: vLLM's plain preset, not its >= 70 GiB GPU rule
    assert (r.engine.max_num_batched_tokens, r.engine.max_num_seqs) == (2048, 256)
    with pytest.raises(ValueError, match="no datasheet figures"):
        RooflineStepTimeModel(r.model, r.hardware, r.weight_format, r.weights, r.kv, r.parallel)


def test_a_draft_model_loads_beside_the_target_and_shares_its_kv_blocks():
    # Llama-3.1-8B drafted by Llama-3.2-1B (bf16, TP 1): the draft's weights, 1.236e9 parameters x 2 B = 2.47 GB,
    # come out of the KV cache's room, and each block keeps both models' KV (vLLM's drafter registers its
    # attention layers in the one KV cache): 2 x 32 x 8 x 128 x 2 B = 131,072 B a token for the target plus
    # 2 x 16 x 8 x 64 x 2 B = 32,768 for the draft
    spec = {"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 4, "acceptance_rate": 0.7}
    alone = resolve(scenario()).memory
    drafted = resolve(scenario(speculative_config=spec)).memory
    assert drafted.draft_weights_bytes == pytest.approx(2.47e9, rel=0.01)
    assert alone.kv_cache_bytes - drafted.kv_cache_bytes == pytest.approx(drafted.draft_weights_bytes)
    assert drafted.kv_blocks == int(drafted.kv_cache_bytes // ((131_072 + 32_768) * 16))
    assert alone.kv_blocks == int(alone.kv_cache_bytes // (131_072 * 16))
    # a draft too large for the GPU: the plan does not fit, naming it
    too_big = resolve(scenario(speculative_config={**spec, "model": "llama-3.1-70b"})).memory
    assert not too_big.fits and "(the draft model, 131.42 GiB, included)" in too_big.reasons[0]


def test_mtp_loads_the_models_own_prediction_layer_beside_it():
    # DeepSeek-R1 (FP8, 128x128 blocks) on 8 x H200, method mtp: vLLM loads its one MTP layer, shaped as the last
    # decoder layer, its embedding and output head the target's (vllm/v1/spec_decode/eagle.py load_model).
    # By hand, per GPU at TP 8: 257 experts (256 routed + 1 shared) x 3 x 7,168 x 2,048 = 11,318,329,344 FP8
    # values / 8 = 1.4148 GB; MLA's q_b (1,536 x 24,576), kv_b (512 x 32,768) and o (16,384 x 7,168) split, 171.9 M
    # / 8 = 21.5 MB, its q_a (7,168 x 1,536) and kv_a (7,168 x 576) whole, 15.1 MB; the router 256 x 7,168 in bf16,
    # 3.7 MB; eh_proj 2 x 7,168 x 7,168 in bf16 on every GPU, 205.5 MB: 1.6606 GB (block scales add 0.02%)
    mtp = {"method": "mtp", "num_speculative_tokens": 1, "acceptance_rate": 0.8}
    base = {"model": "deepseek-ai/DeepSeek-R1", "hardware": "h200",
            "deployment": {"tensor_parallel_size": 8, "max_model_len": 32768},
            "workload": {"arrival": {"rate_per_s": 1}, "prompt_tokens": {"distribution": "fixed", "value": 1000},
                         "output_tokens": {"distribution": "fixed", "value": 200}}}
    alone = resolve(scenario_from_dict(base, None)).memory
    drafted = resolve(scenario_from_dict({**base, "deployment": {**base["deployment"], "speculative_config": mtp}},
                                         None)).memory
    assert drafted.draft_weights_bytes == pytest.approx(1.6606e9, rel=0.005)
    assert drafted.draft_what == "MTP layers"
    assert alone.kv_cache_bytes - drafted.kv_cache_bytes == pytest.approx(drafted.draft_weights_bytes)
    # its MLA layer caches 576 values a token like each of the 61 target layers: every block holds 62 layers' KV
    per_token_target = alone.kv_cache_bytes / alone.kv_tokens
    assert drafted.kv_cache_bytes / drafted.kv_tokens == pytest.approx(per_token_target * 62 / 61, rel=1e-3)


@pytest.mark.parametrize("method, nbytes", [
    # Llama-3.1-8B's layer: q and o 4,096 x 4,096 each, k and v 4,096 x 1,024 each, gate_up 4,096 x 28,672, down
    # 14,336 x 4,096 = 218,103,808. EAGLE (vllm/model_executor/models/llama_eagle.py): that layer without its input
    # norm, no final norm (post-attention norm 4,096) and fc 2 x 4,096 x 4,096 = 33,554,432: 251,662,336 in bf16
    ("eagle", 2 * 251_662_336),
    # EAGLE-3 (llama_eagle3.py): the layer with three norms and a final one (16,384), its qkv reading 2 x hidden
    # (+ 4,096 x 6,144 = 25,165,824), fc 3 x 4,096 x 4,096 = 50,331,648 and its own output head over the target's
    # 128,256 tokens (525,336,576): 818,954,240 in bf16, and draft_id_to_target_id, 128,256 x 8 B
    ("eagle3", 2 * 818_954_240 + 8 * 128_256),
])
def test_an_eagle_head_without_its_config_is_one_layer_of_the_targets_shapes(method, nbytes):
    spec = {"method": method, "num_speculative_tokens": 3, "acceptance_rate": 0.7}
    alone = resolve(scenario()).memory
    r = resolve(scenario(speculative_config=spec))
    drafted = r.memory
    assert drafted.draft_weights_bytes == nbytes
    assert drafted.draft_what == f"{method} head"
    assert alone.kv_cache_bytes - drafted.kv_cache_bytes == pytest.approx(drafted.draft_weights_bytes)
    # its one attention layer caches as each of the target's 32: 131,072 B a token becomes 33/32 of it
    assert drafted.kv_blocks == int(drafted.kv_cache_bytes // (131_072 * 33 / 32 * 16))
    assert r.proposer_memory.startswith("one decoder layer of the target's shapes")
    assert r.proposer_memory.endswith("An estimate: speculative_config.model names no head config")


HEADS = Path(__file__).resolve().parents[2] / "data" / "spec_heads"       # published heads' configs (README there)
EAGLE3_8B = {"method": "eagle3", "num_speculative_tokens": 3, "acceptance_rate": 0.7,
             "model": str(HEADS / "eagle3-llama3.1-instruct-8b")}


@pytest.mark.parametrize("folder, method, tp, nbytes", [
    # EAGLE-LLaMA3-Instruct-8B's config: one layer of Llama-3-8B's shapes (hidden 4,096, 32 heads, 8 KV heads,
    # intermediate 14,336), so 251,662,336 as the estimate above: the layer 218,103,808 + its one norm 4,096 + fc
    # 2 x 4,096 x 4,096
    ("eagle-llama3-instruct-8b", "eagle", 1, 2 * 251_662_336),
    # EAGLE3-LLaMA3.1-Instruct-8B's: the layer 218,103,808, three norms and the final one 16,384, its qkv once more
    # for the embedding beside the hidden state 4,096 x 6,144 = 25,165,824, fc 12,288 x 4,096 = 50,331,648, its
    # output head over draft_vocab_size 32,000: 131,072,000 = 424,689,664 in bf16; d2t 32,000 x 8 B
    ("eagle3-llama3.1-instruct-8b", "eagle3", 1, 2 * 424_689_664 + 8 * 32_000),
    # at TP 2 the layer, its extra qkv and the output head split in two (109,051,904 + 12,582,912 + 65,536,000); the
    # norms, fc (nn.Linear / ReplicatedLinear) and d2t stay whole: 237,518,848 in bf16 + 256,000 B
    ("eagle3-llama3.1-instruct-8b", "eagle3", 2, 2 * 237_518_848 + 8 * 32_000),
])
def test_an_eagle_head_is_counted_from_its_own_config(folder, method, tp, nbytes):
    spec = {"method": method, "num_speculative_tokens": 3, "acceptance_rate": 0.7, "model": str(HEADS / folder)}
    alone = resolve(scenario(tensor_parallel_size=tp)).memory
    r = resolve(scenario(speculative_config=spec, tensor_parallel_size=tp))
    assert r.memory.draft_weights_bytes == nbytes and r.memory.draft_what == f"{method} head"
    assert alone.kv_cache_bytes - r.memory.kv_cache_bytes == pytest.approx(nbytes)
    # its one layer's KV (8 KV heads of 128, as the target's layers) joins the target's 32 in every block
    assert r.memory.kv_blocks == int(r.memory.kv_cache_bytes // (131_072 / tp * 33 / 32 * 16))
    assert r.proposer_memory.startswith(f"the head's own config ({HEADS / folder / 'config.json'}) as vLLM's llama_")
    assert "estimate" not in r.proposer_memory


@pytest.mark.parametrize("folder, method", [("eagle-llama3-instruct-8b", "eagle"),
                                            ("eagle3-llama3.1-instruct-8b", "eagle3")])
def test_a_heads_bias_key_puts_biases_on_its_attention(tmp_path, folder, method):
    # review leftover: both heads' layers are vLLM's LlamaDecoderLayer, which reads `bias` as attention_bias: q, k, v
    # and o biases of 4,096 + 1,024 + 1,024 + 4,096 = 10,240 values (EAGLE-3 counted o_proj's alone), in bf16
    head = tmp_path / folder
    head.mkdir()
    head.joinpath("config.json").write_text(json.dumps(
        {**json.loads((HEADS / folder / "config.json").read_text()), "bias": True}))
    spec = {**EAGLE3_8B, "method": method}
    plain = resolve(scenario(speculative_config={**spec, "model": str(HEADS / folder)})).memory
    biased = resolve(scenario(speculative_config={**spec, "model": str(head)})).memory
    assert biased.draft_weights_bytes - plain.draft_weights_bytes == 2 * 10_240


def test_an_eagle_head_loads_its_own_embedding_under_pipeline_parallelism():
    # vllm/v1/spec_decode/eagle.py load_model shares the target's embedding only at PP 1: at PP 2 the head keeps its
    # own, 128,256 x 4,096 = 525,336,576 values in bf16
    spec = {**EAGLE3_8B, "method": "eagle", "model": str(HEADS / "eagle-llama3-instruct-8b")}
    r = resolve(scenario(speculative_config=spec, pipeline_parallel_size=2))
    assert r.memory.draft_weights_bytes == 2 * (251_662_336 + 525_336_576)
    assert "its own embedding: vLLM shares the target's only at pipeline_parallel_size 1" in r.proposer_memory


def test_an_eagle3_head_of_another_vocabulary_loads_its_own_embedding(tmp_path):
    # review finding: vLLM's eagle.py load_model shares the target's embed_tokens only where the shapes match, the
    # vocabulary included; a head of 32,000 rows keeps its own, split over TP as the target's: 32,000 x 4,096 =
    # 131,072,000 values in bf16 more than the published head (vocab_size 128,256, the target's)
    head = tmp_path / "eagle3-small-vocab"
    head.mkdir()
    published = HEADS / "eagle3-llama3.1-instruct-8b"
    head.joinpath("config.json").write_text(json.dumps(
        {**json.loads((published / "config.json").read_text()), "vocab_size": 32_000}))
    shared = resolve(scenario(speculative_config={**EAGLE3_8B, "model": str(published)}))
    own = resolve(scenario(speculative_config={**EAGLE3_8B, "model": str(head)}))
    assert own.memory.draft_weights_bytes - shared.memory.draft_weights_bytes == 2 * 131_072_000
    assert "its own embedding (32,000 x 4,096: not the target's shape, so not shared)" in own.proposer_memory
    assert "the embedding the target's" in shared.proposer_memory


@pytest.mark.parametrize("folder, method, change, field", [
    # an EAGLE-3 head given as method eagle: vLLM's llama_eagle.py builds none of its draft vocabulary, fc over the
    # target's hidden states or auxiliary states (and its checkpoint would not load), so its keys are refused
    ("eagle3-llama3.1-instruct-8b", "eagle", {}, "draft_vocab_size"),
    ("eagle3-llama3.1-instruct-8b", "eagle", {"draft_vocab_size": None, "target_hidden_size": 4096},
     "target_hidden_size"),
    ("eagle-llama3-instruct-8b", "eagle", {"eagle_config": {"use_aux_hidden_state": True}}, "eagle_config"),
    # the draft vocabulary is a subset of the vocabulary (d2t maps it back)
    ("eagle3-llama3.1-instruct-8b", "eagle3", {"draft_vocab_size": 1_000_000}, "draft_vocab_size"),
    # a quantised head is not modelled, Medusa's as EAGLE's
    ("medusa-vicuna-7b-v1.3", "medusa", {"hidden_size": 4096, "quantization_config": {"quant_method": "fp8"}},
     "quantization_config"),
])
def test_a_head_config_the_method_does_not_build_is_refused(tmp_path, folder, method, change, field):
    head = tmp_path / folder
    head.mkdir()
    config = {k: v for k, v in {**json.loads((HEADS / folder / "config.json").read_text()), **change}.items()
              if v is not None}
    head.joinpath("config.json").write_text(json.dumps(config))
    with pytest.raises(InputError) as err:
        resolve(scenario(speculative_config={**EAGLE3_8B, "method": method, "model": str(head)}))
    assert (err.value.file, err.value.field) == (str(head / "config.json"), field)


def test_a_head_named_by_its_hugging_face_id_is_read_from_the_local_cache_or_estimated(tmp_path, monkeypatch):
    hf_id = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    spec = {**EAGLE3_8B, "model": hf_id}
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    # not in the cache: sizer never downloads; the head is estimated from the target's shapes, and the plan says so
    estimated = resolve(scenario(speculative_config=spec))
    assert estimated.memory.draft_weights_bytes == 2 * 818_954_240 + 8 * 128_256
    assert estimated.proposer_memory.endswith(f"An estimate: {hf_id} is not in the local Hugging Face cache "
                                              f"({tmp_path}; sizer never downloads)")
    # in the cache (the snapshot refs/main names): its own config, as the same file given as a path
    snapshot = tmp_path / "models--yuhuili--EAGLE3-LLaMA3.1-Instruct-8B" / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_bytes((HEADS / "eagle3-llama3.1-instruct-8b" / "config.json").read_bytes())
    (tmp_path / "models--yuhuili--EAGLE3-LLaMA3.1-Instruct-8B" / "refs").mkdir()
    (tmp_path / "models--yuhuili--EAGLE3-LLaMA3.1-Instruct-8B" / "refs" / "main").write_text("0123abc")
    cached = resolve(scenario(speculative_config=spec))
    assert cached.memory.draft_weights_bytes == 2 * 424_689_664 + 8 * 32_000
    assert cached.proposer_memory.startswith(f"the head's own config ({snapshot / 'config.json'})")


@pytest.mark.parametrize("model, nbytes, rows", [
    # FasterDecoding/medusa-vicuna-7b-v1.3's config (medusa_num_layers 1; no hidden_size: MedusaConfig's 4,096) beside
    # Llama-2-7B (vicuna-7b's shapes): vLLM builds num_speculative_tokens = 3 heads, each a residual 4,096 x 4,096
    # (no bias: medusa_fc_bias is false) and an output head over the 32,000 tokens (the config states no vocab_size;
    # vLLM takes the target's): 3 x (16,777,216 + 131,072,000) = 443,547,648 in fp16 (Llama-2-7B's dtype)
    ("llama-2-7b", 2 * 443_547_648, "32,000"),
    # beside Llama-3.1-8B the output heads cover its 128,256 tokens: 3 x (16,777,216 + 525,336,576) = 1,626,341,376
    ("llama-3.1-8b", 2 * 1_626_341_376, "128,256"),
])
def test_medusa_heads_are_counted_from_their_config(model, nbytes, rows):
    spec = {"method": "medusa", "num_speculative_tokens": 3, "acceptance_rate": 0.7,
            "model": str(HEADS / "medusa-vicuna-7b-v1.3")}
    base = {"model": model, "hardware": "h100-sxm", "deployment": {"max_model_len": 4096},
            "workload": {"arrival": {"rate_per_s": 1}, "prompt_tokens": {"distribution": "fixed", "value": 1000},
                         "output_tokens": {"distribution": "fixed", "value": 100}}}
    alone = resolve(scenario_from_dict(base, None))
    r = resolve(scenario_from_dict({**base, "deployment": {"max_model_len": 4096, "speculative_config": spec}}, None))
    assert r.memory.draft_weights_bytes == nbytes and r.memory.draft_what == "medusa heads"
    # no KV of their own: the blocks are the target's alone, fewer by the heads' bytes
    per_block = alone.memory.kv_cache_bytes / alone.memory.kv_blocks
    assert alone.memory.kv_cache_bytes - r.memory.kv_cache_bytes == pytest.approx(nbytes)
    assert r.memory.kv_blocks == int(r.memory.kv_cache_bytes // per_block)
    assert f"3 heads (num_speculative_tokens; the config states 2) of 1 residual layer (hidden x hidden) and an " \
           f"output head each over {rows} tokens" in r.proposer_memory
    assert make_plan(r).speculative.proposer_memory == r.proposer_memory


def test_a_head_sizer_has_no_shapes_for_is_said_not_counted(tmp_path, monkeypatch):
    # Medusa's heads without their config, and an EAGLE head beside an MoE target whose config is not found here: no
    # memory is set aside, and the plan says why
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    spec = {"method": "medusa", "num_speculative_tokens": 3, "acceptance_rate": 0.7}
    r = resolve(scenario(speculative_config=spec))
    assert r.memory.draft_weights_bytes == 0.0
    assert make_plan(r).speculative.proposer_memory == ("the medusa heads' weights are not counted in memory: "
                                                        "speculative_config.model names no head config")
    moe = resolve(scenario_from_dict({
        "model": "mixtral-8x7b", "hardware": "h100-sxm",
        "deployment": {"max_model_len": 8192, "tensor_parallel_size": 2,
                       "speculative_config": {**spec, "method": "eagle", "model": "org/eagle-head"}},
        "workload": {"arrival": {"rate_per_s": 1}, "prompt_tokens": {"distribution": "fixed", "value": 1000},
                     "output_tokens": {"distribution": "fixed", "value": 100}}}, None))
    assert moe.memory.draft_weights_bytes == 0.0
    assert moe.proposer_memory.startswith("the eagle head's weights and KV are not counted in memory: org/eagle-head "
                                          "is not in the local Hugging Face cache")


def test_a_head_that_cannot_serve_beside_the_target_is_refused_naming_its_field(tmp_path):
    # EAGLE3-LLaMA3.1-Instruct-8B reads hidden states of 4,096 values; Llama-3.1-70B's are 8,192
    with pytest.raises(InputError) as err:
        resolve(scenario(speculative_config=EAGLE3_8B, model_name="llama-3.1-70b", tensor_parallel_size=4))
    assert err.value.file == str(HEADS / "eagle3-llama3.1-instruct-8b" / "config.json")
    assert err.value.field == "hidden_size" and "expected 8192" in err.value.message
    # FasterDecoding's Medusa config states no hidden_size: MedusaConfig's 4,096, not Llama-3.1-70B's 8,192
    medusa = {"method": "medusa", "num_speculative_tokens": 3, "acceptance_rate": 0.7,
              "model": str(HEADS / "medusa-vicuna-7b-v1.3")}
    with pytest.raises(InputError, match=r"hidden_size: 4096 \(not stated: MedusaConfig takes 4096\)"):
        resolve(scenario(speculative_config=medusa, model_name="llama-3.1-70b", tensor_parallel_size=4))
    # a Medusa config that does not say how many layers a head has
    (tmp_path / "config.json").write_text('{"medusa_num_heads": 3, "hidden_size": 4096}')
    with pytest.raises(InputError) as err:
        resolve(scenario(speculative_config={**medusa, "model": str(tmp_path)}))
    assert (err.value.file, err.value.field) == (str(tmp_path / "config.json"), "medusa_num_layers")
    # the served model named as its own head: 32 decoder layers, a whole model (it was sized as a 14 GB head)
    with pytest.raises(InputError) as err:
        resolve(scenario(speculative_config={**EAGLE3_8B, "model": "llama-3.1-8b"}))
    assert err.value.field == "num_hidden_layers" and "as many decoder layers as" in err.value.message


def test_a_disaggregated_replica_is_all_its_pools():
    # 2 prefill + 3 decode pools of one H100 each: 5 GPUs a replica (what the cost counts), the plan's headline
    # and its split say so, with the KV a prompt sends: 131,072 B a token at NVLink's 450 GB/s
    plan = make_plan(resolve(scenario(disaggregated={"prefill_replicas": 2, "decode_replicas": 3})))
    assert (plan.parallel.gpus_per_replica, plan.parallel.replica_gpus) == (1, 5)
    assert plan.parallel.disaggregated == ("2 prefill + 3 decode pools of 1 GPU each; a prompt's KV (131,072 B a "
                                           "token) moves to decode at 450 GB/s")
    assert make_plan(resolve(scenario())).parallel.disaggregated == ""


@pytest.mark.parametrize("gpu, engine, stated, expected", [
    ("h200", "vllm", None, 64),       # FlashMLA's page: vLLM forces it on Hopper
    ("b200", "vllm", None, 128),      # CUTLASS MLA's on Blackwell
    ("a100", "vllm", None, 16),       # Triton MLA: the default
    ("h200", "vllm", 128, 128),       # a stated multiple of the page is kept
    ("h200", "vllm", 16, 64),         # another is forced to the page ("block_size % 64 != 0")
])
def test_vllm_runs_an_mla_model_in_its_mla_backends_blocks(gpu, engine, stated, expected):
    _check_block("deepseek-v3", gpu, engine, stated, expected)


@pytest.mark.parametrize("gpu, stated", [("b200", None), ("h200", 128), ("h200", None)])
def test_vllm_runs_sparse_mla_in_blocks_of_exactly_64(gpu, stated):
    # FlashMLA sparse: "if use_sparse and cache_config.block_size != 64", on Blackwell too and over a stated 128
    _check_block("deepseek-v3.2", gpu, "vllm", stated, 64)


def _check_block(model, gpu, engine, stated, expected):
    # review finding: vllm/platforms/cuda.py check_and_update_config forces an MLA model's KV block size to its MLA
    # backend's page ("Forcing kv cache block size to 64 for FlashMLA backend"); sizer kept 16
    deployment = {"engine": engine, "tensor_parallel_size": 8, "max_model_len": 32768}
    if stated:
        deployment["block_size"] = stated
    r = resolve(scenario_from_dict({"model": model, "hardware": gpu, "deployment": deployment,
                                    "workload": {"arrival": {"rate_per_s": 1},
                                                 "prompt_tokens": {"distribution": "fixed", "value": 1000},
                                                 "output_tokens": {"distribution": "fixed", "value": 200}}}, None))
    assert r.engine.block_size == expected == r.memory.block_size


def test_the_rate_memory_allows_is_at_the_batch_memory_holds_and_counts_every_decode_pool():
    # review finding: the rate memory allows was the requests memory holds over the time in system at the stated
    # rate's batch (1 req/s: a few sequences), where holding them makes every decode step the memory-limited
    # batch's: Llama-3.1-70B at TP 4 said 88 req/s at 1 req/s and 34 at 88 req/s. Now both say
    # held / (prefill + outputs x the memory-limited batch's decode step)
    plans = [make_plan(resolve(scenario_from_dict(
        {"model": "llama-3.1-70b", "hardware": "h100", "deployment": {"tensor_parallel_size": 4},
         "workload": {"arrival": {"rate_per_s": rate}, "prompt_tokens": {"distribution": "fixed", "value": 1024},
                      "output_tokens": {"distribution": "fixed", "value": 256}}}, None))) for rate in (1, 88)]
    for plan in plans:
        c, st = plan.capacity, plan.step_times
        full_s = (st.prefill_ms + 256 * st.decode_memory_limited_batch_ms) / 1e3
        assert c.max_arrival_rate_for_memory_per_s == pytest.approx(c.requests_held_per_replica / full_s)
    assert plans[0].capacity.max_arrival_rate_for_memory_per_s == plans[1].capacity.max_arrival_rate_for_memory_per_s
    # a disaggregated replica's requests hold their KV on each of its decode pools: 3 of them hold 3 x one's
    one = make_plan(resolve(scenario()))
    three = make_plan(resolve(scenario(disaggregated={"prefill_replicas": 2, "decode_replicas": 3})))
    assert three.capacity.requests_held_per_replica == 3 * one.capacity.requests_held_per_replica
    assert three.capacity.kv_capacity_tokens == 3 * one.capacity.kv_capacity_tokens


def test_the_rate_bound_prunes_only_what_no_cache_hit_could_save():
    # review finding: a sweep pruned an H100 point as needing 2 replicas "at the analytic rate bound" when one met
    # the SLO: the bound priced the whole prompt's prefill where a shared 1,000-token system prompt is served from
    # the prefix cache. The bound takes the cached share as saved: prefill x (1 - share x prefix / prompt)
    base = {"model": "llama-3.1-8b", "hardware": "h100",
            "workload": {"arrival": {"rate_per_s": 1}, "prompt_tokens": {"distribution": "fixed", "value": 2000},
                         "output_tokens": {"distribution": "fixed", "value": 100}}}
    plain = resolve(scenario_from_dict(base, None))
    cached = resolve(scenario_from_dict({**base, "workload": {**base["workload"], "shared_prefix": {
        "share": 1.0, "tokens": 1000}}}, None))
    plain_plan, cached_plan = make_plan(plain), make_plan(cached)
    st = plain_plan.step_times
    decode_s = st.output_tokens_mean / st.decode_memory_limited_tokens_per_s
    assert cached_prefill_share(plain, plain_plan) == 0.0 and cached_prefill_share(cached, cached_plan) == 0.5
    assert rate_bound_per_s(plain_plan) == pytest.approx(1.5 / (st.prefill_ms / 1e3 + decode_s))
    assert rate_bound_per_s(cached_plan, 0.5) == pytest.approx(1.5 / (0.5 * st.prefill_ms / 1e3 + decode_s))
    # review finding: 2,000 distinct 1,000-token prefixes do not fit the KV cache at once, so none is counted as
    # cached (a bound 100x too high started the goodput bisection above every rate that met: no_rate)
    many = resolve(scenario_from_dict({**base, "workload": {**base["workload"], "shared_prefix": {
        "share": 1.0, "tokens": 1000, "num_prefixes": 2000}}}, None))
    assert cached_prefill_share(many, make_plan(many)) == 0.0


def test_the_rate_bound_stays_above_a_rate_speculation_meets():
    # audit finding: with speculation the bound took one token per decode step, 1.5 / (7.2 ms + 4,000 / 589
    # tokens/s) = 0.22 req/s, yet one replica meets the SLO at 0.5: goodput reported 0.22 ("the bound itself meets
    # it") and a sweep pruned the point. A verification yields E = (1 - 0.9^5) / (1 - 0.9) = 4.0951 tokens on
    # average and costs no less than a one-token step, so the decode rate is at most 589 x 4.0951 tokens/s:
    # 1.5 / (7.2 ms + 4,000 / 2,411) = 0.90 req/s
    s = scenario_from_dict({
        "model": "llama-3.1-8b", "hardware": "h100-sxm",
        "deployment": {"max_model_len": 4200, "gpu_memory_utilization": 0.25, "speculative_config": {
            "method": "eagle", "num_speculative_tokens": 4, "acceptance_rate": 0.9}},
        "workload": {"arrival": {"rate_per_s": 0.5}, "prompt_tokens": {"distribution": "fixed", "value": 100},
                     "output_tokens": {"distribution": "fixed", "value": 4000}},
        "slo": {"ttft_ms": 60000, "e2e_ms": 600000}}, None)
    r = resolve(s)
    plan = make_plan(r)
    st = plan.step_times
    assert rate_bound_per_s(plan) == pytest.approx(
        1.5 / (st.prefill_ms / 1e3 + st.output_tokens_mean / (st.decode_memory_limited_tokens_per_s * 4.0951)))
    assert rate_bound_per_s(plan) > 0.5 and probe_slo(r, 0.5, 40).met


def test_the_plans_time_in_system_decodes_the_output_in_verification_steps():
    # audit finding: the plan priced seed-speculative's 256 output tokens at one a step, a time in system of 1.67 s
    # with speculation as without, where the simulation's E2E p50 is 0.78 s. A verification yields E = (1 - 0.7^5)
    # / (1 - 0.7) = 2.7731 tokens and costs the target's step over 1 + 4 tokens a sequence plus the EAGLE head's
    # drafting (0.05 x the target's step over the same tokens, then 3 one-token passes), as the simulator prices it
    r = resolve(load_scenario(Path(__file__).resolve().parents[3] / "scenarios" / "seed-speculative.yaml"))
    plan, target = make_plan(r), step_model_for(r)

    def drafted_s(batch, seqs, context):         # a step and its drafting: context + the step's tokens, a sequence
        one = StepBatch(seqs, seqs, seqs * context, seqs * (context + 1))
        return target.step_time(batch) + 0.05 * (target.step_time(batch._replace(draft_tokens=0))
                                                 + 3 * target.step_time(one))

    def verify_s(seqs):      # sequences at the mean context 512 + 256 / 2 = 640, each verifying 4 drafts
        return drafted_s(StepBatch(seqs, 5 * seqs, 640 * seqs, seqs * attention_pairs(5, 640), 0, 0, 4 * seqs),
                         seqs, 645)
    # the 512-token prompt in one step (the budget is 8,192), drafted over
    prefill_s = drafted_s(StepBatch(1, 512, 0, attention_pairs(512, 0), 1, 512), 1, 512)
    # at 1 req/s the fixed point holds round(1 x T) = 1 sequence
    t = plan.capacity.time_in_system_s
    assert t == pytest.approx(prefill_s + 256 / 2.7731 * verify_s(1), rel=1e-4)
    assert t == pytest.approx(0.78, rel=0.05)     # the simulated E2E p50 (tests/data/simulate_golden)
    # the rate memory allows: the requests the KV cache holds over T at the batch memory allows
    full = prefill_s + 256 / 2.7731 * verify_s(plan.step_times.memory_limited_batch)
    assert plan.capacity.max_arrival_rate_for_memory_per_s == pytest.approx(
        plan.capacity.requests_held_per_replica / full, rel=1e-4)
