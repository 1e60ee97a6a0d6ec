"""Engine presets: each engine's documented scheduling defaults, as data with their sources.

`deployment.engine` picks one; explicit scenario fields override it. docs/engines.md lists
every value with its source; a value whose source says "not confirmed" is this project's
assumption, kept until someone checks it against the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simulator.engine_loop import EngineLoop


@dataclass(frozen=True)
class EnginePreset:
    engine: str
    block_size: int                     # KV block (page) tokens as simulated
    max_num_batched_tokens: int         # token budget per step
    max_num_seqs: int                   # running sequences cap
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    prefix_cache_kind: str              # 'hashed-blocks' | 'radix-tree' (simulated alike, per block)
    preemption_mode: str                # 'recompute' | 'swap'
    reserve_full_kv: bool = False       # admit only with blocks for the whole output (never preempt)
    sources: tuple[tuple[str, str], ...] = ()

    def source(self, name: str) -> str:
        """Where the default for `name` comes from (docs/engines.md has the full citations)."""
        return dict(self.sources).get(name, "not confirmed")


_VLLM_SRC = (("block_size", "vLLM CacheConfig.DEFAULT_BLOCK_SIZE"),
             ("max_num_batched_tokens", "vllm/engine/arg_utils.py, API server on a GPU under 70 GiB or an A100"),
             ("max_num_seqs", "vllm/engine/arg_utils.py, API server on a GPU under 70 GiB or an A100"),
             ("enable_chunked_prefill", "vLLM V1: chunked prefill always on"),
             ("enable_prefix_caching", "vLLM V1: prefix caching on by default"),
             ("preemption_mode", "vLLM optimization guide: preempted requests are recomputed"),
             ("reserve_full_kv", "vLLM V1 scheduler: blocks are allocated as tokens come, "
                                 "preempting when they run out"))

# The block sizes vLLM takes (vllm/config/cache.py BlockSize, the choices of --block-size)
VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)
# vLLM forces the KV block size of an MLA model to its MLA backend's page (vllm/platforms/cuda.py,
# check_and_update_config: a block size not a multiple of 64, "Forcing kv cache block size to 64 for FlashMLA
# backend", on Hopper; of 128 for CUTLASS MLA on Blackwell); other GPUs keep the default. DeepSeek sparse attention
# (FlashMLA sparse) takes exactly 64 on both ("if use_sparse and cache_config.block_size != 64")
VLLM_MLA_BLOCK_SIZES = {"hopper": 64, "blackwell": 128}
VLLM_SPARSE_MLA_BLOCK_SIZE = 64

PRESETS: dict[str, EnginePreset] = {p.engine: p for p in (
    EnginePreset("vllm", 16, 2048, 256, True, True, "hashed-blocks", "recompute", sources=_VLLM_SRC),
    # SGLang pages are 1 token; simulated at 16-token blocks (docs/engines.md says why).
    EnginePreset("sglang", 16, 8192, 256, True, True, "radix-tree", "recompute",
                 sources=(("max_num_batched_tokens",
                           "SGLang chunked_prefill_size 8192 (not confirmed in SGLang's own docs)"),
                          ("enable_prefix_caching", "SGLang RadixAttention, on unless disabled"))),
    EnginePreset("tensorrt-llm", 32, 8192, 2048, False, True, "radix-tree", "recompute", reserve_full_kv=True,
                 sources=(("block_size", "TensorRT-LLM KvCacheConfig.tokens_per_block = 32"),
                          ("enable_prefix_caching", "TensorRT-LLM KvCacheConfig.enable_block_reuse = True"),
                          ("preemption_mode", "TensorRT-LLM GUARANTEED_NO_EVICT scheduler: never paused"),
                          ("reserve_full_kv", "TensorRT-LLM GUARANTEED_NO_EVICT scheduler: admits a request only "
                                              "with KV for its whole output"))),
    EnginePreset("lmdeploy", 128, 8192, 64, True, False, "hashed-blocks", "recompute",
                 sources=(("block_size", "LMDeploy TurboMind config doc example: cache_block_seq_len = 128"),
                          ("max_num_seqs", "LMDeploy TurboMind config doc example: max_batch_size = 64"))),
    EnginePreset("tgi", 16, 4096, 128, True, True, "radix-tree", "recompute",
                 sources=(("enable_prefix_caching", "TGI v3: prefix caching and chunking on by default"),
                          ("enable_chunked_prefill", "TGI v3: prefix caching and chunking on by default"))),
)}


@dataclass(frozen=True)
class SlotPreset:
    """llama.cpp's server and Ollama (which runs llama.cpp underneath): a fixed number of slots, each a
    running sequence with its own contiguous KV (or one unified buffer), no paged blocks, no preemption."""
    engine: str
    parallel: int                       # slots (llama.cpp --parallel; Ollama OLLAMA_NUM_PARALLEL)
    kv_unified: bool                    # one KV buffer shared by the slots, each up to the whole context
    ctx_per_slot: int | None            # Ollama num_ctx: context per slot; None: llama.cpp splits -c across slots
    batch_size: int                     # logical batch: tokens one step (llama_decode) takes
    ubatch_size: int                    # physical batch: sizes the compute buffer
    cache_type: str                     # K and V cache element type
    flash_attn: bool | None             # None: auto (on where the backend supports it)
    keep_alive_s: float | None          # Ollama: idle seconds before a model is unloaded
    max_loaded_models_per_gpu: int | None
    load_bytes_per_s: float | None      # Ollama: model file read speed on a cold load (an assumption)
    sources: tuple[tuple[str, str], ...] = ()

    def source(self, name: str) -> str:
        return dict(self.sources).get(name, "not confirmed")


_LLAMA_SERVER = "llama.cpp tools/server/README.md"
# llama.cpp pads the context: n_ctx = GGML_PAD(n_ctx, 256), then, with a KV stream per sequence (not unified),
# n_ctx_seq = GGML_PAD(n_ctx / n_seq_max, 256) and n_ctx = n_ctx_seq x n_seq_max (src/llama-context.cpp,
# llama_context::llama_context; unified: n_ctx_seq = n_ctx). Ollama launches llama-server with -c num_ctx x
# num_parallel -np num_parallel (llm/llama_server.go), so its slots are padded the same way.
LLAMACPP_CTX_PAD = 256
LLAMACPP_CTX_PAD_SOURCE = "GGML_PAD to 256, src/llama-context.cpp"
_OLLAMA_FAQ = "Ollama FAQ (docs.ollama.com/faq)"
SLOT_PRESETS: dict[str, SlotPreset] = {p.engine: p for p in (
    # -np -1 (auto) becomes 4 slots with a unified KV buffer (llama-server logs "n_parallel is set to auto,
    # using n_parallel = 4 and kv_unified = true"); -c 0 takes the model's training context.
    SlotPreset("llama.cpp", 4, True, None, 2048, 512, "f16", None, None, None, None, sources=(
        ("parallel", f"{_LLAMA_SERVER}: -np, --parallel N, default -1 = auto, which starts 4 slots"),
        ("kv_unified", f"{_LLAMA_SERVER}: --kv-unified; auto parallel turns it on (server start-up log)"),
        ("ctx_size", f"{_LLAMA_SERVER}: -c, --ctx-size N, default 0 = loaded from the model"),
        ("batch_size", f"{_LLAMA_SERVER}: -b, --batch-size N, default 2048"),
        ("ubatch_size", f"{_LLAMA_SERVER}: -ub, --ubatch-size N, default 512"),
        ("cache_type", f"{_LLAMA_SERVER}: -ctk/-ctv, --cache-type-k/v, default f16"),
        ("flash_attn", f"{_LLAMA_SERVER}: -fa, --flash-attn on|off|auto, default auto"))),
    # Ollama's runner batch is num_batch 512 (Ollama api/types.go DefaultOptions, not confirmed in its docs).
    SlotPreset("ollama", 1, False, 4096, 512, 512, "f16", False, 300.0, 3, 2e9, sources=(
        ("parallel", f"{_OLLAMA_FAQ}: OLLAMA_NUM_PARALLEL, the parallel requests each model processes, default 1"),
        ("ctx_per_slot", "Ollama docs, Context length (docs.ollama.com/context-length): default 4096 tokens "
                         "(older releases 2048; the newest choose by VRAM)"),
        ("keep_alive_s", f"{_OLLAMA_FAQ}: models stay in memory 5 minutes by default (OLLAMA_KEEP_ALIVE)"),
        ("max_loaded_models_per_gpu", f"{_OLLAMA_FAQ}: OLLAMA_MAX_LOADED_MODELS default 3 x the number of GPUs "
                                      "or 3 for CPU inference"),
        ("cache_type", f"{_OLLAMA_FAQ}: OLLAMA_KV_CACHE_TYPE default f16"),
        ("flash_attn", f"{_OLLAMA_FAQ}: OLLAMA_FLASH_ATTENTION off unless set (newer releases enable it per model)"),
        ("load_bytes_per_s", "assumption: 2 GB/s, a PCIe 3/4 NVMe SSD's sequential read; "
                             "state load_bytes_per_s for your disk"),
        ("batch_size", "Ollama num_batch 512 (api/types.go DefaultOptions; not confirmed in its docs)"))),
)}


def slot_preset(engine: str) -> SlotPreset | None:
    """The slot engine's preset, None for the batching engines (vLLM and the like)."""
    return SLOT_PRESETS.get(engine)


# Cost of one drafting pass, as a fraction of the target's step over the same tokens
# (simulator/speculative.py `SpeculativeConfig.draft_time_s`), when the scenario states none
# (`speculative_config.proposer_cost_fraction`). Modelling
# assumptions, not measurements: n-gram lookup is a table search on the CPU; EAGLE/Medusa/MTP
# heads are one small layer on the target's hidden state; a draft model is a separate small model
# (about a tenth of the target's weights is typical; a named draft model is priced by its own roofline).
PROPOSER_COST_FRACTION = {"ngram": 0.0, "medusa": 0.03, "eagle": 0.05, "eagle3": 0.05, "mtp": 0.05,
                          "draft_model": 0.1}


# The engine loop around each step (simulator/engine_loop.py): which engine schedules ahead of
# the GPU, and what its CPU and API server cost. The costs are host-CPU constants fitted once on
# the public vLLM 0.15.1 H100 runs (benchmarks/fidelity_vllm.py, docs/fidelity.md), not per
# model or experiment; engines not measured take vLLM V1's costs until someone measures them.
# Sources of the behaviour:
# - vLLM V1: the engine core runs in its own process and, by default, keeps a batch queue of two
#   (vllm/v1/engine/core.py, EngineCore.step_with_batch_queue; vllm/v1/core/sched/async_scheduler.py):
#   step k + 1 is scheduled and launched before step k's output is applied, so a request that
#   arrives during step k joins step k + 2. The API server tokenises prompts and detokenises and
#   streams outputs in another process (vllm/v1/engine/async_llm.py output_handler,
#   vllm/v1/engine/output_processor.py): it handles the engine core's outputs as they come and a
#   request's outputs merge while its stream lags (RequestOutputCollector), so the API server's
#   fixed cost is paid per pass over whatever has accumulated, not per step. Each token otherwise
#   reaches the client in its own message: with `vllm bench serve`, median ITL is 0.95 x median
#   TPOT and mean ITL = mean TPOT (tests/data/fidelity/README.md, caveat 2). No engine here is
#   modelled as streaming several tokens per message (none is confirmed to by default).
# - vLLM V0: one process; each step is scheduled, run, and its output processed (detokenised)
#   before the next (vllm/engine/llm_engine.py LLMEngine.step), so all CPU work adds to the step.
# - SGLang: the overlap scheduler (default since v0.4; `--disable-overlap-schedule` turns it off)
#   schedules batch k + 1 while batch k runs; detokenisation runs in its own process.
# - TensorRT-LLM (PyTorch backend): the overlap scheduler is on unless `disable_overlap_scheduler`.
# - LMDeploy, TGI: synchronous loops (not confirmed).
# Measured: the API server tokenises each prompt's text before the engine sees it (vLLM's serving_engine.py in a
# one-thread executor, SGLang's TokenizerManager, trtllm-serve; all call a Hugging Face fast tokenizer), a cost per
# prompt token. `python benchmarks/tokenize_cost.py` (its own venv; docs/fidelity.md "The input path"): a 131k-token
# byte-level BPE (Mistral's Tekken, the tiktoken family gpt-oss's o200k belongs to) through transformers'
# PreTrainedTokenizerFast, on the text `vllm bench serve`'s random dataset sends, 1.9-2.5 us a token here
# (2026-12-03); public figures agree: vllm-project/vllm#10635 "a few hundred milliseconds" for 256K tokens, #45759
# ~0.8 us a token on plain text. Not modelled: requests queueing for that one thread (vLLM tokenises one prompt at a
# time), which matters only when prompts' tokens arrive at about 400,000 a second.
INPUT_S_PER_PROMPT_TOKEN = 2e-6       # API server per prompt token: tokenise its text
# Fitted (TTFT of the 15 runs; E2E and ITL barely move with them), with the tokenising above and the kernel
# tables' step overhead (roofline.TABLES_STEP_OVERHEAD_S) and the collectives' wait (roofline.COLLECTIVE_SKEW_S): the
# median measured - predicted TTFT mean of the 12 runs without KV offload is 0 (docs/fidelity.md, "The step overhead
# beside the tables", "The wait at each collective")
INPUT_S = 3.3e-3                     # client send to engine queue, per request: HTTP, hand-off
OUTPUT_S_PER_PASS = 2e-3              # API server per pass over the step outputs waiting (hand-off, ZMQ)
OUTPUT_S_PER_TOKEN = 30e-6            # API server per token (detokenise, stream)
# Assumptions: with asynchronous scheduling they hide behind the GPU in every public run, so
# those runs cannot fit them (they decide V0-style synchronous loops and CPU-bound steps):
SCHEDULE_S = 0.5e-3                   # engine-core CPU per step, fixed
SCHEDULE_S_PER_SEQ = 20e-6            # ... per sequence in the step


def _loop(name: str, async_scheduling: bool) -> EngineLoop:
    return EngineLoop(name, async_scheduling, SCHEDULE_S, SCHEDULE_S_PER_SEQ, INPUT_S, OUTPUT_S_PER_PASS,
                      OUTPUT_S_PER_TOKEN, scheduler_ranks=1, input_s_per_prompt_token=INPUT_S_PER_PROMPT_TOKEN)


ENGINE_LOOPS: dict[str, EngineLoop] = {
    "vllm": _loop("vLLM V1 (asynchronous scheduling, separate API server)", True),
    "vllm-v0": _loop("vLLM V0 (synchronous: schedule, run, detokenise)", False),
    "sglang": _loop("SGLang (overlap scheduler)", True),
    "tensorrt-llm": _loop("TensorRT-LLM (overlap scheduler)", True),
    "lmdeploy": _loop("LMDeploy (synchronous, not confirmed)", False),
    "tgi": _loop("TGI (synchronous, not confirmed)", False),
    # llama-server: one thread runs update_slots, which batches every slot's tokens, decodes and samples,
    # then streams; nothing is scheduled ahead (tools/server/server.cpp). Ollama proxies to the same loop.
    "llama.cpp": _loop("llama.cpp server (synchronous: batch the slots, decode, sample)", False),
    "ollama": _loop("Ollama (llama.cpp runner behind Ollama's proxy, synchronous)", False),
}


def engine_loop(engine: str, data_parallel_ranks: int = 1, stream_interval: int = 1,
                recv_interval: int = 1) -> EngineLoop:
    """The loop around `engine`'s steps; ValueError naming the known ones. A replica's data-parallel ranks each
    schedule their own sequences side by side: TensorRT-LLM's attention-DP ranks are one PyExecutor each, new
    requests routed to them (tensorrt_llm/_torch/pyexecutor/executor_request_queue.py,
    `_balance_requests_across_ranks`) and each rank scheduling its own active requests; SGLang's
    `--enable-dp-attention` runs a scheduler process per DP rank (its data_parallel_controller.py); vLLM's
    `--data-parallel-size` an engine core per rank (vllm/v1/engine/core.py, DPEngineCoreProc). So the per-sequence
    CPU cost is paid on the busiest rank's share, not on the whole step's sequences. `stream_interval`: the server's
    tokens per streamed message after the first (vLLM's and SGLang's --stream-interval, TensorRT-LLM's
    stream_interval: vllm/v1/engine/output_processor.py RequestState.make_request_output sends the first token, then
    once `stream_interval` tokens wait, and at the finish; SGLang's scheduler_output_processor_mixin.py when
    len(output_ids) % interval == 1). `recv_interval`: SGLang's --scheduler-recv-interval, its scheduler polling for new
    requests after that many decode-only batches only, at once after any other (srt/managers/
    scheduler_recv_skipper.py: a counter adds 1 for a decode batch, 1,000 for any other, and the scheduler receives
    once it reaches the interval)."""
    try:
        loop = ENGINE_LOOPS[engine]
    except KeyError:
        raise ValueError(f"no engine loop for {engine!r}; known: {', '.join(ENGINE_LOOPS)}") from None
    if data_parallel_ranks != 1:
        loop = replace(loop, scheduler_ranks=data_parallel_ranks)
    if stream_interval != 1:
        loop = replace(loop, stream_interval=stream_interval)
    return loop if recv_interval == 1 else replace(loop, recv_interval=recv_interval)


def preset(engine: str) -> EnginePreset:
    """The device-independent preset for `engine`; ValueError naming the known engines."""
    try:
        return PRESETS[engine]
    except KeyError:
        raise ValueError(f"unknown engine {engine!r}; known: {', '.join(PRESETS)}") from None


def engine_defaults(engine: str, gpu_memory_gib: float, gpu_name: str) -> EnginePreset:
    """The preset with any device-dependent defaults applied. vLLM's API server doubles its
    token budget to 8192 and lifts max_num_seqs to 1024 on GPUs of 70 GiB or more that are
    not A100s (vllm/engine/arg_utils.py)."""
    p = preset(engine)
    if engine == "vllm" and gpu_memory_gib >= 70 and "a100" not in gpu_name.lower():
        rule = "vllm/engine/arg_utils.py, API server on a GPU of 70 GiB or more, not an A100"
        sources = dict(p.sources, max_num_batched_tokens=rule, max_num_seqs=rule)
        return replace(p, max_num_batched_tokens=8192, max_num_seqs=1024, sources=tuple(sources.items()))
    return p


# Multi-LoRA serving (docs/lora.md). An adapter not in a GPU slot is copied from the host cache over
# the GPU's host link (sizer/inputs/hardware.py host_link); one not in the host cache is first read
# from local disk. Assumption: 2 GB/s, a datacenter NVMe SSD's sequential read (PCIe 4.0 drives state
# 3-7 GB/s) less safetensors parsing; a network file system is slower.
LORA_DISK_BYTES_PER_S = 2e9

# Structured outputs (docs/lora.md): per backend, (seconds to compile one JSON schema, seconds of CPU
# per sampled token for its mask). Sourced assumptions, not measurements:
# - xgrammar: its paper (Dong et al., "XGrammar", MLSys 2025, arXiv:2411.15100) reports per-token mask
#   generation under 40 us for JSON schemas on Llama-3's 128k vocabulary and grammar preprocessing of
#   tens of milliseconds for a JSON schema (taken: 50 ms).
# - outlines: builds a regex FSM index over the vocabulary per schema, seconds for a modest JSON schema
#   (the XGrammar paper's comparison; taken: 1 s); masks are then table look-ups (taken: 20 us).
# - guidance (llguidance): no ahead-of-time compilation (taken: 1 ms to build the parser), about 50 us
#   of CPU per token for a 128k vocabulary (the llguidance README).
# vLLM computes the masks in the engine core before each step; sizer adds them to the step (no overlap).
GRAMMAR_BACKENDS = {"xgrammar": (50e-3, 40e-6), "outlines": (1.0, 20e-6), "guidance": (1e-3, 50e-6)}
# Compiled grammars kept per engine (vLLM's xgrammar compiler cache is bounded by bytes,
# VLLM_XGRAMMAR_CACHE_MB = 512; taken as room for 1,000 schemas).
GRAMMAR_CACHE_ENTRIES = 1000


# Attention DP with experts spread over the ranks: each rank schedules its own prompts (TensorRT-LLM without its ADP
# balance strategy, attention_dp_config.enable_balance, off by default), so a step's prompts land unevenly and every
# rank waits for the busiest at the MoE layers. TensorRT-LLM's measurement of that baseline scheduling: average
# balance ratio (mean over most tokens per rank per iteration) 54.11%, DeepSeek-V3 at attention DP 8 + EP 8 on
# 8 GB200, 16,000 requests (NVIDIA/TensorRT-LLM docs/source/blogs/tech_blog/blog10_ADP_Balance_Strategy.md at
# 011cfc2cc18a24a95603f91dc53f8fc60bc80189, "Performance Summary"). Other engines: assumed balanced (no
# measurement in reach).
ATTENTION_DP_CONTEXT_BALANCE = {"tensorrt-llm": 0.5411}

# Engines that cache every token of chunked-local attention layers (Llama-4's attention_chunk_size), attending within
# the chunk: TensorRT-LLM's PyTorch backend (1.0) builds one KVCacheManager over all num_hidden_layers with a single
# attention window (max_seq_len) unless kv_cache_config.max_attention_window lists several (its VSWA path), and
# KvCacheCreator._get_cache_size_per_token sizes the cache by every layer's full KV heads
# (tensorrt_llm/_torch/pyexecutor/_util.py, `_create_kv_cache_manager`); the chunk is only the attention kernel's
# mask (`attention_chunk_size`). vLLM's hybrid KV cache frees what leaves the chunk (ChunkedLocalAttentionSpec).
KEEPS_CHUNKED_KV = frozenset({"tensorrt-llm"})
