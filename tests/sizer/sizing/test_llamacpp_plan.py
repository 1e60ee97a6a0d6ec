"""A llama.cpp plan checked line by line against llama.cpp's own arithmetic (issue 27, item 6), and the
contradictions the issue found: KV demand at 7x its tokens, slots against "such sequences", replicas of a laptop,
"no format reaches" beside a faster format, CUDA and gpu_memory_utilization rows on an Apple plan.

llama.cpp's KV cache (src/llama-kv-cache.cpp, the llama_kv_cache constructor): per layer one K and one V tensor,
ggml_new_tensor_3d(type_k, n_embd_k_gqa, kv_size, n_stream), so bytes = ggml_row_size(type, n_embd_k_gqa) x kv_size x
n_stream; n_stream = 1 with a unified buffer, else n_seq_max (one stream per slot, kv_size = n_ctx / n_seq_max); a
layer's tensors sit on its device when offloaded (-ngl), else in host memory. ggml's blocks: q8_0 is 32 values in
34 B (fp16 scale + 32 int8), q4_0 32 values in 18 B (fp16 scale + 16 B of nibbles), f16 2 B a value."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from sizer.cli.render import render_plan
from sizer.inputs.scenario import load_scenario, scenario_from_dict
from sizer.outputs.emit import emit, serving_config
from sizer.sizing.pipeline import add_simulation
from sizer.sizing.plan import make_plan
from sizer.sizing.resolve import resolve
from validation.errors import FieldError

REPO = Path(__file__).resolve().parents[3]
GiB = 2 ** 30
# Llama-3.1-8B: 32 layers, 8 KV heads x 128 = n_embd_k_gqa 1024 values per layer per token
LAYERS, N_EMBD_K_GQA = 32, 8 * 128


def data(model="llama-3.1-8b", hardware="m3-max", rate=0.1, prompt=1000, output=100, slo=None, **deployment):
    return {"model": model, "hardware": hardware,
            "deployment": {"engine": "llama.cpp", "quantization": "q4_k_m", **deployment},
            "workload": {"arrival": {"rate_per_s": rate},
                         "prompt_tokens": {"distribution": "fixed", "value": prompt},
                         "output_tokens": {"distribution": "fixed", "value": output}},
            "slo": slo or {}}


def planned(**kw):
    r = resolve(scenario_from_dict(data(**kw), "s.yaml"))
    return r, make_plan(r)


@pytest.mark.parametrize("cache, row_bytes", [
    ("f16", 1024 * 2),              # 2,048 B per layer per token
    ("q8_0", 1024 // 32 * 34),      # 1,088 B
    ("q4_0", 1024 // 32 * 18),      # 576 B
])
def test_kv_per_token_is_ggml_row_size_of_k_and_v_over_the_layers(cache, row_bytes):
    """K and V rows of every layer: q8_0 2 x 32 x 1,088 = 69,632 B; f16 131,072 B; q4_0 36,864 B per token."""
    r, _ = planned(ctx_size=8192, parallel=1, cache_type_k=cache, cache_type_v=cache, flash_attn=True)
    assert r.kv.bytes_per_token == 2 * LAYERS * row_bytes


def test_the_laptop_scenario_line_by_line():
    """scenarios/llamacpp-laptop-m4-pro.yaml: -c 32768 -np 4, q8_0 K and V, kv_unified off (-np given).
    n_stream 4 x kv_size 8,192 = 32,768 cells x 69,632 B = 2,281,701,376 B of KV (2.125 GiB), allocated at start;
    0.1 req/s x 8.88 s in the system = 0.9 requests: one request, holding its slot's 8,192 cells = 570,425,344 B
    (the 0.57 GB the plan used to print beside "1,100 tokens": 8,192 / 1,100 = 7.4x). The M4 Pro's 48 GB (GiB)
    of unified memory x Metal's working-set share 0.75 = 36 GiB, all of it llama.cpp's (no utilisation share)."""
    r = resolve(load_scenario(REPO / "scenarios" / "llamacpp-laptop-m4-pro.yaml"))
    p = make_plan(r)
    assert p.memory.kv_cache_bytes == 32_768 * 69_632 == 2_281_701_376
    d = p.kv_demand
    assert (d.sequences, d.tokens_per_sequence, d.tokens) == (1, 8192, 8192)
    assert d.bytes == d.tokens * p.kv.bytes_per_token == 570_425_344
    assert p.capacity.requests_held_per_replica == 4            # one request a slot
    assert p.cost.replicas == 1 and p.verdict == "fits"
    assert p.memory.gpu_memory_utilization == 1.0 and p.memory.usable_bytes == 36 * GiB


def test_a_unified_buffer_holds_requests_of_their_own_length():
    """auto parallel: 4 slots share one buffer of -c cells; a request of 1,000 + 100 tokens holds 1,100 of them
    (llama.cpp's cells are per token; sizer simulates them in 16-token blocks: 1,104)."""
    _, p = planned(ctx_size=8192)
    assert p.slots.kv_unified and p.capacity.requests_held_per_replica == 4       # min(4 slots, 8192 // 1100 = 7)
    assert p.kv_demand.tokens_per_sequence == 1100
    _, p = planned(ctx_size=2048)
    assert p.capacity.requests_held_per_replica == 1                              # 2048 // 1100


def test_a_laptop_is_one_server_and_the_verdict_says_requests_queue():
    """Llama-3.1-70B Q4_K_M on a 64 GB M3 Max, 4 slots of 4,096 tokens, at 1 req/s: each answer takes tens of
    seconds, so Little's law puts far more than 4 requests in flight. The plan keeps one server (the laptop) and
    says requests queue, at about 4 / time in system req/s, instead of sizing "replicas" of a laptop."""
    _, p = planned(model="llama-3.1-70b", hardware={"base": "m3-max", "memory_gb": 64}, rate=1.0,
                   ctx_size=16384, parallel=4)
    assert p.cost.replicas == 1
    assert p.capacity.requests_in_flight > 4 and p.capacity.requests_held_per_replica == 4
    assert "requests queue" in p.verdict and "1 server with 4 slots holds 4 at once" in p.verdict
    assert p.capacity.max_arrival_rate_for_memory_per_s == pytest.approx(4 / p.capacity.time_in_system_s)


def test_an_offloaded_server_still_holds_one_request_a_slot():
    """70B on a 4090 with 35 of 80 layers on the GPU: the GPU holds 35/80 of each slot's KV. The plan used to divide
    that share by a whole request's KV and print "fits; but 3 sequences ... (0 such sequences each)"; a slot holds
    its request wherever its layers' KV lives, so one slot holds one."""
    _, p = planned(model="llama-3.1-70b", hardware="rtx-4090", rate=0.05, prompt=512, output=128, ctx_size=8192,
                   parallel=1, n_gpu_layers=35)
    assert p.capacity.requests_held_per_replica == 1
    assert "0 such sequences" not in p.verdict and "1 server with 1 slot holds 1 at once" in p.verdict


def test_gpu_memory_utilization_is_not_llamacpp_s():
    with pytest.raises(FieldError) as e:
        planned(ctx_size=8192, gpu_memory_utilization=0.8)
    assert e.value.field == "deployment.gpu_memory_utilization"


def test_format_options_agree_with_the_recommendation():
    """Each format that fits a slot and is fast enough for one user serves at least that one user; the
    recommendation names a format that fits."""
    _, p = planned(model="llama-3.1-70b", hardware={"base": "m3-max", "memory_gb": 64}, ctx_size=8192, parallel=2,
                   slo={"itl_ms": 150})
    a = p.slots
    target = a.target_tokens_per_s_per_user
    assert target == pytest.approx(1000 / 150)
    for o in a.options:
        if o.fits and o.tokens_per_s_at_one_user >= target:
            assert o.users_at_target >= 1
    fitting = {o.format for o in a.options if o.fits}
    assert {"f16", "q8_0"}.isdisjoint(fitting)          # 131 GiB and 70 GiB of weights > 48 GiB
    assert a.recommendation.split(":")[0].split(" ")[0] in fitting


def test_no_format_fitting_is_said_so_not_as_a_speed(tmp_path):
    """70B on a 4090 with 35 of 80 layers offloaded: no format fits all its weights in 24 GiB, so none is
    recommended by speed (the old answer: "no format reaches 6.7 tokens/s; fastest 74.3" - a format that fits
    nowhere)."""
    _, p = planned(model="llama-3.1-70b", hardware="rtx-4090", rate=0.05, prompt=512, output=128, ctx_size=8192,
                   parallel=1, n_gpu_layers=35, slo={"itl_ms": 150})
    assert not any(o.fits for o in p.slots.options)
    assert p.slots.recommendation.startswith("no format fits its weights and one slot of 8,192 tokens")


def test_an_apple_plan_prints_memory_in_its_own_terms():
    _, p = planned(hardware={"base": "m3-max", "memory_gb": 64}, ctx_size=8192)
    console = Console(width=200, record=True, file=io.StringIO())
    render_plan(p, console)
    before = console.export_text().split("Assumptions")[0]
    assert "gpu_memory_utilization" not in before and "CUDA" not in before
    assert "working-set limit of 68.72 GB  (64.00 GiB) unified memory" in before
    assert "Metal runtime, buffers (assumption)" in before


@pytest.mark.slow
def test_the_simulated_sizing_keeps_one_server():
    """plan --simulate of the laptop scenario at 20x its rate (2 req/s for 4 slots at ~40 tokens/s each): the SLO
    is missed, and the answer is the rate one server meets it up to (its goodput), not "N replicas" of a laptop;
    the fix points at `sizer search` (other formats, slots, devices)."""
    data = load_scenario(REPO / "scenarios" / "llamacpp-laptop-m4-pro.yaml")
    s = scenario_from_dict({"model": "llama-3.1-8b", "hardware": "apple-m4-pro",
                            "deployment": {"engine": "llama.cpp", "quantization": "q4_k_m", "parallel": 4,
                                           "ctx_size": 32768, "cache_type_k": "q8_0", "cache_type_v": "q8_0",
                                           "flash_attn": True},
                            "workload": {"arrival": {"rate_per_s": 2.0}, "num_requests": 200,
                                         "prompt_tokens": {"distribution": "fixed", "value": 800},
                                         "output_tokens": {"distribution": "fixed", "value": 300}},
                            "slo": {"ttft_ms": data.slo.ttft_ms, "itl_ms": data.slo.itl_ms}}, "s.yaml")
    r = resolve(s)
    sizing = add_simulation(make_plan(r), r).simulation
    assert sizing.replicas == 1 and sizing.cost.replicas == 1 and sizing.replicas_for_slo is None
    assert sizing.slo_met is False
    assert sizing.verdict.endswith(f"one server meets it up to {sizing.goodput_per_replica_per_s:.3g} req/s")
    assert 0 < sizing.goodput_per_replica_per_s < 2.0
    assert sizing.suggestion == "`sizer search` finds faster configurations"


def test_the_compute_buffer_holds_logits_for_every_ubatch_token():
    """llama.cpp reserves its worst-case graph with n_outputs = n_tokens = min(n_ctx, n_ubatch) (src/llama-context.cpp:
    graph_reserve(n_tokens, n_seqs, n_tokens)): 512 rows of 128,256 fp32 logits = 262,668,288 B whatever -np is (a
    public log of Llama-3.1-8B at -ub 512: "CUDA0 compute buffer size = 258.50 MiB"). Beside them the hidden terms
    of one ubatch: 512 x (3 x 4096 + 6144 (q, k, v) + 2 x 14336) x 2 B = 48,234,496 B."""
    for parallel in (1, 4):
        r, _ = planned(ctx_size=8192, parallel=parallel)
        assert r.memory.activation_bytes == 512 * 128256 * 4 + 512 * (3 * 4096 + 6144 + 2 * 14336) * 2


def test_the_token_embedding_stays_in_host_memory():
    """llama.cpp keeps the input layer on the CPU (src/llama-model.cpp load_tensors: dev_input = cpu_dev): 8B Q4_K_M's
    token embedding, 128,256 x 4,096 values in Q4_K (144 B a 256), is 295,501,824 B = 281.81 MiB off the GPU (a public
    Metal log: "CPU_Mapped model buffer size = 281.81 MiB", "Metal_Mapped model buffer size = 4403.49 MiB")."""
    r, plan = planned(ctx_size=8192, parallel=1)
    embedding = 128256 * 4096 // 256 * 144
    assert r.host_weight_bytes == embedding
    assert r.memory.weights_bytes == pytest.approx(r.weights.per_gpu_bytes - embedding)
    assert r.memory.weights_bytes / 2**20 == pytest.approx(4403.49, rel=0.003)
    # unified memory (m3-max): the host's part takes the same memory
    assert plan.slots.engine_bytes == pytest.approx(r.memory.weights_bytes + embedding + r.memory.activation_bytes
                                                    + r.memory.non_torch_bytes + r.memory.kv_cache_bytes)


def test_on_a_cpu_the_embedding_is_the_devices_like_every_weight():
    # review finding: on a CPU device the embedding was taken off the device's weights and counted in a host memory
    # the plan subtracts from nothing (the CPU's memory is the host's): every weight is the device's
    r, _ = planned(hardware="epyc-9654", ctx_size=8192, parallel=1)
    assert r.host_weight_bytes == 0 and r.memory.weights_bytes == pytest.approx(r.weights.per_gpu_bytes)
    # and n_gpu_layers on a CPU is refused however many layers it names (no GPU to put them on)
    with pytest.raises(FieldError, match="is a CPU"):
        planned(hardware="epyc-9654", ctx_size=8192, parallel=1, n_gpu_layers=99)


def test_a_cpu_takes_zero_gpu_layers_and_emits_zero():
    # audit: n_gpu_layers 0 on a CPU was refused, though 0 layers on a GPU is exactly what a CPU runs; and a CPU plan
    # emitted --n-gpu-layers 33 (Llama-3.1-8B's 32 layers + the output layer), putting every layer on a GPU wherever
    # a llama.cpp built with a GPU backend runs it
    zero, _ = planned(hardware="epyc-9654", ctx_size=8192, parallel=1, n_gpu_layers=0)
    unset, _ = planned(hardware="epyc-9654", ctx_size=8192, parallel=1)
    assert zero.offload is None and zero.memory == unset.memory       # the same plan as leaving it out
    for r in (zero, unset):
        assert "--n-gpu-layers 0 " in emit("llamacpp", serving_config(r, None, "fits"))
    # Ollama's Modelfile: num_gpu is its layer count on the GPU (api/types.go Runner.NumGPU)
    assert "PARAMETER num_gpu 0" in emit("ollama", serving_config(planned(
        hardware="epyc-9654", engine="ollama", num_parallel=1)[0], None, "fits"))
    # on a GPU, left out, every layer and the output: 32 + 1
    assert "--n-gpu-layers 33 " in emit("llamacpp", serving_config(planned(ctx_size=8192, parallel=1)[0], None, "fits"))


def test_a_tied_embedding_is_on_both():
    """Llama-3.2-1B ties its output to the embedding: llama.cpp loads the output as a second tensor of the same data
    (llama-model-loader.cpp TENSOR_DUPLICATED), placed with the output layer on the GPU, while token_embd stays on
    the CPU: the GPU keeps every weight and the host holds the embedding besides."""
    r, _ = planned(model="llama-3.2-1b", ctx_size=8192, parallel=1)
    assert r.memory.weights_bytes == pytest.approx(r.weights.per_gpu_bytes)
    # 128,256 x 2,048 values in Q6_K (210 B a 256: a tied embedding takes the output rule, llama-quant.cpp)
    assert r.host_weight_bytes == 128256 * 2048 // 256 * 210


@pytest.mark.parametrize("cache, row_bytes", [
    ("q4_1", 1024 // 32 * 20),      # fp16 scale + fp16 min + 16 B of nibbles (ggml-common.h block_q4_1)
    ("q5_0", 1024 // 32 * 22),      # fp16 scale + 4 B of fifth bits + 16 B (block_q5_0)
    ("q5_1", 1024 // 32 * 24),      # block_q5_1: q5_0 + an fp16 min
    ("iq4_nl", 1024 // 32 * 18),    # fp16 scale + 16 B of 4-bit indices (block_iq4_nl)
])
def test_the_other_llamacpp_cache_types(cache, row_bytes):
    """llama.cpp's -ctk/-ctv take q4_1, q5_0, q5_1 and iq4_nl too (common/arg.cpp kv_cache_types)."""
    r, _ = planned(ctx_size=8192, parallel=1, cache_type_k=cache, cache_type_v=cache, flash_attn=True)
    assert r.kv.bytes_per_token == 2 * LAYERS * row_bytes


def test_flash_attn_auto_is_llamacpp_s_default():
    """`flash_attn: auto` is -fa auto, llama.cpp's default: a quantised V is accepted and the plan says why."""
    r, _ = planned(ctx_size=8192, parallel=1, cache_type_k="q8_0", cache_type_v="q8_0", flash_attn="auto")
    assert r.slots.flash_attn is None and "auto" in r.slots.sources["flash_attn"]
