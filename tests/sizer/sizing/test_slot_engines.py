"""llama.cpp and Ollama: slot presets, their scenario fields, slots through the shared scheduler, the answers in
the user's terms, and --emit llamacpp / ollama."""

import math
import shlex
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from simulator.kv_cache import KVCacheManager
from simulator.request import Request, Status
from simulator.run import simulate
from simulator.scheduler import Scheduler
from sizer.analytic.memory import kv_value_bytes
from sizer.cli import app
from sizer.errors import InputError
from sizer.inputs.scenario import scenario_from_dict
from sizer.outputs.emit import emit, llamacpp_argv, serving_config
from sizer.sizing.plan import make_plan
from sizer.sizing.resolve import resolve
from sizer.sizing.simulate import simulation_config
from sizer.sizing.workload import workload_of
from sizer.timing.step_model import step_model_for

runner = CliRunner()
REPO = Path(__file__).resolve().parents[3]

# Llama-3.1-8B: 32 layers x 8 KV heads x 128 head dim, K and V: 65,536 values per token
LLAMA_8B_KV_VALUES = 2 * 32 * 8 * 128


def data(engine="llama.cpp", gpu="l4", rate=0.5, slo=None, **deployment):
    return {"model": "llama-3.1-8b", "hardware": gpu,
            "deployment": {"engine": engine, "quantization": deployment.pop("quantization", "q4_k_m"), **deployment},
            "workload": {"arrival": {"rate_per_s": rate},
                         "prompt_tokens": {"distribution": "fixed", "value": 800},
                         "output_tokens": {"distribution": "fixed", "value": 200}, "num_requests": 120},
            "slo": slo or {}}


def scenario(**kw):
    return scenario_from_dict(data(**kw), "s.yaml")


def refusal(**kw) -> str:
    with pytest.raises(InputError) as e:
        resolve(scenario(**kw))
    return str(e.value)


def test_cache_types_cost_ggml_block_bytes():
    # ggml block_q8_0: 32 int8 + fp16 scale = 34 B per 32 values; block_q4_0: 16 B of nibbles + fp16 scale = 18 B
    assert kv_value_bytes("q8_0") == 34 / 32 and kv_value_bytes("q4_0") == 18 / 32
    assert kv_value_bytes("q8_0/q4_0") == (34 + 18) / 64          # K and V halves of each token
    r = resolve(scenario(ctx_size=8192, cache_type_k="q8_0", cache_type_v="q4_0"))
    assert r.kv.bytes_per_token == LLAMA_8B_KV_VALUES * (34 + 18) / 64 == 53_248


def test_llama_cpp_defaults_are_auto_parallel_with_a_unified_buffer():
    r = resolve(scenario(ctx_size=16384))
    sl = r.slots
    # auto --parallel: 4 slots, --kv-unified on, so a slot may use all of -c
    assert (sl.slots, sl.kv_unified, sl.ctx_per_slot_tokens) == (4, True, 16384)
    assert (sl.batch_size, sl.ubatch_size, sl.cache_type_k) == (2048, 512, "f16")
    assert r.scheduler.max_num_seqs == 4 and r.scheduler.max_num_batched_tokens == 2048
    assert r.replica.num_blocks * r.replica.block_size == 16384 and r.scheduler.reserve_full_kv
    assert "README" in sl.sources["parallel"]


def test_explicit_parallel_splits_the_context_into_one_contiguous_block_per_slot():
    r = resolve(scenario(parallel=4, ctx_size=16384, cache_type_k="q8_0", cache_type_v="q8_0"))
    assert not r.slots.kv_unified and r.slots.ctx_per_slot_tokens == 4096
    assert (r.replica.num_blocks, r.replica.block_size, r.scheduler.max_model_len) == (4, 4096, 4096)
    # the KV the engine allocates: 16,384 cells x 65,536 values x 34/32 B
    assert r.memory.kv_cache_bytes == 16384 * LLAMA_8B_KV_VALUES * 34 / 32


@pytest.mark.parametrize("kw, slot, total", [
    # llama.cpp src/llama-context.cpp (llama_context::llama_context): n_ctx = GGML_PAD(n_ctx, 256); not unified:
    # n_ctx_seq = GGML_PAD(n_ctx / n_seq_max, 256), n_ctx = n_ctx_seq x n_seq_max
    (dict(parallel=3, ctx_size=10000), 3584, 3 * 3584),    # pad 10,240; 10,240 // 3 = 3,413 -> 3,584
    (dict(parallel=8, ctx_size=8000), 1024, 8192),         # pad 8,192; / 8 = 1,024
    (dict(parallel=1, ctx_size=4000), 4096, 4096),         # pad 4,096
    (dict(ctx_size=10000), 10240, 10240),                  # auto parallel, unified: n_ctx_seq = n_ctx = 10,240
])
def test_llama_cpp_pads_each_slots_context_to_256(kw, slot, total):
    r = resolve(scenario(cache_type_k="q8_0", cache_type_v="q8_0", **kw))
    sl = r.slots
    assert (sl.ctx_per_slot_tokens, sl.slot_cells, sl.ctx_total_tokens) == (slot, slot, total)
    assert r.scheduler.max_model_len == slot
    # every padded cell is allocated: n_ctx cells x 65,536 values x 34/32 B (q8_0)
    assert r.memory.kv_cache_bytes == total * LLAMA_8B_KV_VALUES * 34 / 32


def test_the_plan_says_when_llama_cpp_padded_the_context():
    notes = " ".join(make_plan(resolve(scenario(parallel=3, ctx_size=10000))).assumptions)
    assert "ctx_size 10,000 over 3 slots: llama.cpp pads each slot's context to 3,584 tokens (GGML_PAD to 256" in notes
    assert "pads" not in " ".join(make_plan(resolve(scenario(parallel=4, ctx_size=16384))).assumptions)


def test_ollama_slots_are_padded_by_the_llama_server_it_starts():
    # Ollama: -c num_ctx x num_parallel -np num_parallel (llm/llama_server.go); llama.cpp pads 12,000 to 12,288,
    # / 3 = 4,096 cells a slot; Ollama still truncates a prompt to num_ctx 4,000 (s.options.NumCtx)
    r = resolve(scenario(engine="ollama", num_ctx=4000, num_parallel=3))
    sl = r.slots
    assert (sl.ctx_per_slot_tokens, sl.slot_cells, sl.ctx_total_tokens) == (4000, 4096, 12288)
    assert r.memory.kv_cache_bytes == 12288 * LLAMA_8B_KV_VALUES * 2        # f16
    assert "num_ctx 4,000: llama.cpp pads each slot's KV to 4,096 tokens" in " ".join(make_plan(r).assumptions)


def test_ollama_allocates_num_ctx_for_each_parallel_request():
    r = resolve(scenario(engine="ollama", num_parallel=2))
    sl = r.slots
    # num_ctx default 4096 per request (docs.ollama.com/context-length) x OLLAMA_NUM_PARALLEL 2
    assert (sl.ctx_per_slot_tokens, sl.ctx_total_tokens, sl.kv_unified) == (4096, 8192, False)
    assert (sl.keep_alive_s, sl.max_loaded_models, sl.batch_size) == (300.0, 3, 512)


def test_ollama_with_flash_attention_auto_and_a_quantised_cache_is_emitted_with_it_on():
    # review finding: flash_attn auto left OLLAMA_FLASH_ATTENTION unset beside OLLAMA_KV_CACHE_TYPE=q8_0, which an
    # Ollama before 0.12.4 (flash attention off unless set) serves as f16, twice the KV the plan sized: set it on
    r = resolve(scenario(engine="ollama", cache_type_k="q8_0", cache_type_v="q8_0", flash_attn="auto"))
    plan = make_plan(r)
    text = emit("ollama", serving_config(r, plan.cost, plan.verdict))
    assert "OLLAMA_KV_CACHE_TYPE=q8_0" in text and "OLLAMA_FLASH_ATTENTION=1" in text
    plain = resolve(scenario(engine="ollama", flash_attn="auto"))          # f16: auto stays Ollama's to choose
    plan = make_plan(plain)
    assert "OLLAMA_FLASH_ATTENTION" not in emit("ollama", serving_config(plain, plan.cost, plan.verdict))


@pytest.mark.parametrize("kw, field", [
    # 16 GiB of f16 KV + 14.96 GiB of bf16 weights > the L4's 24 GiB (llama.cpp takes no utilisation share)
    (dict(ctx_size=131072, quantization="bf16"), "deployment.ctx_size"),
    (dict(ctx_size=262144), "deployment.ctx_size"),                        # beyond max_position_embeddings 131072
    (dict(engine="ollama", num_ctx=131072, num_parallel=2), "deployment.num_ctx"),
    (dict(parallel=8, batch_size=4, ubatch_size=4, ctx_size=8192), "deployment.batch_size"),
    (dict(ctx_size=8192, cache_type_k="q8_0", cache_type_v="q8_0", flash_attn=False), "deployment.cache_type_v"),
    # Ollama's flash attention is off unless set: its quantised KV cache needs OLLAMA_FLASH_ATTENTION=1
    (dict(engine="ollama", cache_type_k="q8_0", cache_type_v="q8_0"), "deployment.cache_type_v"),
])
def test_contexts_that_cannot_be_served_name_their_field(kw, field):
    assert refusal(**kw).startswith(f"s.yaml: {field}:")


@pytest.mark.parametrize("kw, field", [
    (dict(engine="vllm", parallel=4), "deployment.parallel"),
    (dict(max_num_seqs=8), "deployment.max_num_seqs"),
    (dict(enable_prefix_caching=True), "deployment.enable_prefix_caching"),
    (dict(engine="ollama", ctx_size=8192), "deployment.ctx_size"),
    (dict(num_ctx=8192), "deployment.num_ctx"),
    (dict(tensor_parallel_size=2), "deployment.tensor_parallel_size"),
    (dict(kv_cache_dtype="fp8"), "deployment.kv_cache_dtype"),
    (dict(engine="ollama", cache_type_k="q8_0"), "deployment.cache_type_v"),   # one OLLAMA_KV_CACHE_TYPE
    (dict(batch_size=256, ubatch_size=512), "deployment.ubatch_size"),
])
def test_fields_of_another_engine_are_refused_in_one_line(kw, field):
    with pytest.raises(InputError) as e:
        scenario(**kw)
    assert str(e.value).startswith(f"s.yaml: {field}:") and "\n" not in str(e.value)


def test_the_cli_exits_2_naming_the_field(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data(ctx_size=262144)))           # beyond max_position_embeddings 131072
    result = runner.invoke(app, ["plan", str(path)])
    assert result.exit_code == 2 and "deployment.ctx_size" in result.output


def test_a_slot_is_taken_whole_and_a_request_longer_than_it_is_refused():
    r = resolve(scenario(parallel=4, ctx_size=16384))
    kv = KVCacheManager(r.replica.num_blocks, r.replica.block_size, r.replica.enable_prefix_caching)
    sched = Scheduler(r.scheduler, kv)
    reqs = [Request(i, 0.0, 1000, 100) for i in range(6)]
    for q in reqs:
        assert sched.add_request(q)
    too_long = Request(99, 0.0, 4000, 200)                  # 4,200 tokens > the slot's 16384 / 4 = 4,096
    assert not sched.add_request(too_long) and too_long.status is Status.REJECTED
    assert "4096" in too_long.reject_reason
    step = sched.schedule(0.0)
    # prompts go batch_size (2,048) tokens a step: 1,000 + 1,000 + the first 48 of the third
    assert step.batch.new_tokens == 2048 and len(sched.running) == 3
    sched.update(step, 0.1)
    sched.schedule(0.1)
    running = sched.running
    # four slots, each request in exactly one (its block is the slot's 4,096 cells); two wait
    assert len(running) == 4 and len(sched.waiting) == 2 and kv.num_free_blocks == 0
    assert all(len(q.block_ids) == 1 for q in running)


@pytest.mark.parametrize("engine, deployment, says", [
    # 4 slots of 16,384 / 4 = 4,096 tokens, prompts of 800 or 4,000 tokens (1 in 4) + 200: 4,200 > 4,096
    ("llama.cpp", {"parallel": 4, "ctx_size": 16384}, "llama.cpp refuses a prompt that fills the context"),
    ("ollama", {"num_parallel": 4, "num_ctx": 4096}, "Ollama truncates a prompt to num_ctx"),
])
def test_requests_longer_than_a_slot_are_stated_with_what_the_engine_does(engine, deployment, says):
    d = data(engine=engine, **deployment)
    d["workload"]["prompt_tokens"] = {"distribution": "empirical", "values": [800, 4000], "weights": [3, 1]}
    r = resolve(scenario_from_dict(d, "s.yaml"))
    assert r.too_long_share == pytest.approx(0.25)
    [note] = [n for n in r.link_notes if "a slot's context of 4,096 tokens" in n]
    assert note.startswith("25.00% of requests have prompt + output above") and says in note
    # Little's law sizes the 3 in 4 the simulation serves, at their 800 + 200 tokens
    capacity = make_plan(r).capacity
    assert (capacity.arrival_rate_per_s, capacity.kv_tokens_per_request) == (0.375, 1000)


def test_simulation_loses_no_request_and_no_kv():
    # 2 slots of 4,096 / 2 = 2,048 tokens; a mix of 1,000-token requests (800 + 200) and 2,400-token ones
    # (which no slot holds: refused, as llama-server answers them with an error)
    r = resolve(scenario(parallel=2, ctx_size=4096))
    reqs = [Request(i, 0.3 * i, 2000 if i % 5 == 0 else 800, 400 if i % 5 == 0 else 200) for i in range(60)]
    config = replace(simulation_config(r), check_invariants=True)    # KV conservation after every event
    result = simulate(config, step_model_for(r), reqs)
    c = result.columns
    assert len(c["rejected"]) == 60                          # every request is accounted for
    assert int(c["rejected"].sum()) == 12 == len(result.reject_reasons)
    assert all("2048" in why for why in result.reject_reasons.values())
    assert result.num_preemptions == 0
    # at most two requests run at once: the KV in use never exceeds the two slots
    assert result.timeline.kv_usage.max() <= 1.0


def test_answers_in_the_users_terms():
    s = scenario(parallel=4, ctx_size=16384, cache_type_k="q8_0", cache_type_v="q8_0", slo={"itl_ms": 50},
                 quantization="q4_k_m")
    plan = make_plan(resolve(s))
    a = plan.slots
    m = plan.memory
    # what the engine takes: weights + compute buffer + runtime context + 16,384 cells of q8_0 KV
    assert a.engine_bytes == pytest.approx(m.weights_bytes + m.activation_bytes + m.non_torch_bytes
                                           + 16384 * LLAMA_8B_KV_VALUES * 34 / 32)
    assert a.left_bytes == pytest.approx(plan.gpu_memory_bytes - a.engine_bytes)
    # per-user speed falls as users share each step; 4 users, one figure each
    speeds = [x.tokens_per_s_per_user for x in a.speeds]
    assert len(speeds) == 4 and speeds == sorted(speeds, reverse=True)
    # one user can never beat the bandwidth bound: every weight byte read once per token
    assert speeds[0] < 1e3 / plan.step_times.decode_bandwidth_bound_ms
    # target 1000 / 50 ms = 20 tokens/s. F16 weights (16.06 GB) on the L4's 300 GB/s allow at most
    # 300 / 16.06 = 18.7 tokens/s, so f16 cannot be recommended; q8_0 (8.53 GB, <= 35 tokens/s) can.
    assert a.target_tokens_per_s_per_user == 20
    f16 = next(o for o in a.options if o.format == "f16")
    assert f16.users_at_target == 0 and f16.tokens_per_s_at_one_user < 300e9 / f16.weights_bytes
    assert a.recommendation.startswith("q8_0")
    assert a.largest_context_per_slot_tokens >= 4096
    assert a.ttft_s > 0 and a.load_s is None


def test_ollama_cold_starts_follow_poisson_gaps_longer_than_keep_alive():
    plan = make_plan(resolve(scenario(engine="ollama", rate=0.01, keep_alive_s=60)))
    a = plan.slots
    # P(gap > 60 s) at 0.01 req/s = exp(-0.6); load = whole weights / 2 GB/s (the stated assumption)
    assert a.cold_start_share == pytest.approx(math.exp(-0.6))
    assert a.load_s == pytest.approx(plan.weights.total_bytes / 2e9)


def test_emit_llamacpp_writes_every_flag_the_plan_relied_on():
    r = resolve(scenario(parallel=4, ctx_size=16384, cache_type_k="q8_0", cache_type_v="q8_0", ubatch_size=256))
    plan = make_plan(r)
    c = serving_config(r, plan.cost, plan.verdict)
    argv = llamacpp_argv(c)
    flags = {a: (argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else True)
             for i, a in enumerate(argv) if a.startswith("--")}
    assert (flags["--ctx-size"], flags["--parallel"], flags["--ubatch-size"]) == ("16384", "4", "256")
    assert (flags["--cache-type-k"], flags["--cache-type-v"], flags["--batch-size"]) == ("q8_0", "q8_0", "2048")
    assert flags["--no-kv-unified"] is True and argv[:2] == ["llama-server", "--model"]
    text = emit("llamacpp", c)
    command = [line for line in text.splitlines() if not line.startswith("#")]
    assert shlex.split(" ".join(command).replace("\\", " ")) == argv     # the script is that command
    with pytest.raises(InputError, match="--emit"):
        emit("vllm", c)


def test_emit_ollama_writes_the_environment_and_modelfile():
    r = resolve(scenario(engine="ollama", num_parallel=2, num_ctx=8192, keep_alive_s=600))
    plan = make_plan(r)
    text = emit("ollama", serving_config(r, plan.cost, plan.verdict))
    for line in ("OLLAMA_NUM_PARALLEL=2", "OLLAMA_KEEP_ALIVE=600s", "PARAMETER num_ctx 8192",
                 "OLLAMA_MAX_LOADED_MODELS=3"):
        assert line in text


@pytest.mark.parametrize("scenario_file, fmt", [("llamacpp-rtx4090-slots.yaml", "llamacpp"),
                                                ("llamacpp-laptop-m4-pro.yaml", "llamacpp"),
                                                ("ollama-jetson-orin-edge.yaml", "ollama")])
def test_slot_engine_comments_are_only_those_that_apply(scenario_file, fmt):
    # audit: llama.cpp and Ollama scripts said "--block-size left to the engine (it aligns a hybrid model's block
    # ...)", a flag llama-server does not have, for a plain Llama, and that meta-llama/Llama-3.1-8B "is gated on Hugging
    # Face ... give the server HF_TOKEN", though the server loads a local GGUF file and downloads nothing
    result = runner.invoke(app, ["plan", str(REPO / "scenarios" / scenario_file), "--emit", fmt])
    assert result.exit_code == 0, result.output
    comments = [line for line in result.stdout.splitlines() if line.startswith("#")]
    assert not [line for line in comments if "block-size" in line or "HF_TOKEN" in line or "gated" in line]
    # the one on the weights stays: the GGUF file to put in place of the name sizer made up
    assert ("# weights: q4_k_m; point the model at a GGUF file in that format (Llama-3.1-8B-Q4_K_M.gguf here)"
            in comments)


def test_a_scenarios_own_gguf_file_is_named_as_the_weights_not_as_a_file_to_find():
    r = resolve(scenario())
    c = replace(serving_config(r, None, "fits"), model="/models/llama-8b-q4.gguf")
    comments = [line for line in emit("llamacpp", c).splitlines() if line.startswith("#")]
    assert "# weights: q4_k_m, the GGUF file /models/llama-8b-q4.gguf" in comments
    assert not [line for line in comments if "point the model at" in line]


def test_plan_prints_the_answers_and_emit_refuses_another_engine():
    laptop = REPO / "scenarios" / "llamacpp-laptop-m4-pro.yaml"
    result = runner.invoke(app, ["plan", str(laptop)])
    assert result.exit_code == 0
    # the M4 Pro profile: 48 GiB of unified memory, of which Metal lets the GPU use 0.75 = 36 GiB
    assert "In short (llama.cpp)" in result.output and "of unified memory" in result.output
    assert "36.00 GiB" in result.output
    emitted = runner.invoke(app, ["plan", str(laptop), "--emit", "llamacpp"])
    assert emitted.exit_code == 0 and "--parallel 4" in emitted.stdout and "--ctx-size 32768" in emitted.stdout
    wrong = runner.invoke(app, ["plan", str(laptop), "--emit", "vllm"])
    assert wrong.exit_code == 2 and "--emit" in wrong.output
    vllm = runner.invoke(app, ["plan", str(REPO / "scenarios" / "llama-3.1-8b-chat-h100.yaml"), "--emit", "ollama"])
    assert vllm.exit_code == 2 and "--emit" in vllm.output


def test_a_slot_keeps_its_last_prompt_and_the_best_matching_idle_slot_is_taken():
    kv = KVCacheManager(2, 2048, enable_prefix_caching=False, slot_prompt_reuse=True)
    a = Request(1, 0.0, 1100, 50, prefix_segments=(7, 8, 9, 10), segment_tokens=256)
    other = Request(2, 0.0, 600, 50, prefix_segments=(5,), segment_tokens=256)
    for req in (a, other):
        assert kv.claim_slot(req) == 0 and kv.allocate_slots(req, req.prompt_tokens)
    slot_a = a.block_ids[0]
    kv.free(other)
    kv.free(a)
    # segments 7, 8 in common with a: 2 x 256 = 512 tokens kept, on a's slot (not the one freed last)
    b = Request(3, 1.0, 900, 50, prefix_segments=(7, 8, 11), segment_tokens=256)
    assert kv.claim_slot(b) == 512 and kv.allocate_slots(b, 900 - 512) and b.block_ids == [slot_a]
    # nothing in common: no reuse, still one whole slot
    c = Request(4, 1.0, 700, 50, prefix_segments=(99,), segment_tokens=256)
    assert kv.claim_slot(c) == 0 and kv.allocate_slots(c, 700) and len(c.block_ids) == 1
    kv.check_invariants([b, c])


def test_slot_reuse_in_a_simulation_hits_shared_system_prompts_and_conserves_kv():
    d = data(parallel=2, ctx_size=8192, rate=1.0)
    d["workload"]["shared_prefix"] = {"share": 1.0, "tokens": 512, "num_prefixes": 1}
    r = resolve(scenario_from_dict(d, "s.yaml"))
    assert r.replica.slot_prompt_reuse and not r.replica.enable_prefix_caching
    config = replace(simulation_config(r), check_invariants=True)
    result = simulate(config, step_model_for(r), workload_of(r, 80), seed=0)
    c = result.columns
    assert not c["rejected"].any()
    # one 512-token system prompt and two slots: after each slot's first request, every request reuses it
    cached = c["cached_prompt_tokens"]
    assert (cached == 512).sum() >= 80 - 2 and set(cached.tolist()) <= {0, 512}


def test_partial_offload_keeps_only_the_gpu_layers_kv_in_device_memory_and_is_emitted():
    r = resolve(scenario(gpu="rtx-4090", quantization="q4_k_m", parallel=2, ctx_size=8192, n_gpu_layers=20))
    # 20 of Llama-3.1-8B's 32 layers on the GPU: their share of 8,192 cells x 131,072 B of f16 KV
    assert r.offload.gpu_kv_share == 20 / 32
    assert r.memory.kv_cache_bytes == pytest.approx(8192 * LLAMA_8B_KV_VALUES * 2 * 20 / 32)
    plan = make_plan(r)
    argv = llamacpp_argv(serving_config(r, plan.cost, plan.verdict))
    assert argv[argv.index("--n-gpu-layers") + 1] == "20"


def test_ollama_refuses_a_cache_type_it_does_not_take(tmp_path):
    """OLLAMA_KV_CACHE_TYPE takes f16, q8_0 and q4_0 (docs.ollama.com/faq); llama.cpp's q5_1 is not one."""
    data = {"model": "llama-3.1-8b", "hardware": "rtx-4090",
            "deployment": {"engine": "ollama", "quantization": "q4_k_m", "cache_type_k": "q5_1",
                           "cache_type_v": "q5_1", "flash_attn": True},
            "workload": {"arrival": {"rate_per_s": 0.1}, "prompt_tokens": {"distribution": "fixed", "value": 100},
                         "output_tokens": {"distribution": "fixed", "value": 10}}}
    with pytest.raises(InputError) as err:
        scenario_from_dict(data, "s.yaml")
    assert err.value.field == "deployment.cache_type_k"
