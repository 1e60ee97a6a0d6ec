"""The scenario: what a user asks sizer about, loaded and validated from YAML.

Deployment fields use vLLM's engine-argument names so a deployment can be copied in. Fields
left out take the engine's documented defaults (see `resolve`); docs/scenario.md lists every
field and is generated from these dataclasses (`python -m sizer.inputs.scenario_docs`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, Protocol

from sizer.errors import InputError
from sizer.inputs import preloaded
from sizer.inputs.config_keys import MAX_LAYERS
from sizer.inputs.gguf_types import PRESETS
from sizer.inputs.hardware import HOST_CPU, LLAMACPP_ONLY_DEVICES, HardwareOverrides, scenario_hardware
from sizer.inputs.schedule import AutoscalingSection, EnergySection, ScheduleSection, check_schedule
from validation.errors import FieldError, excerpt
from validation.input_files import file_kind
from validation.safe_yaml import load_yaml
from validation.schema import build, field, join
from validation.trace_limits import MAX_REQUEST_TOKENS, MAX_TIMESTAMP_S, MAX_TRACE_REQUESTS

WeightFormat = Literal["auto", "bf16", "fp16", "fp32", "fp8", "int8", "awq", "gptq", "nvfp4", "mxfp4",
                       # llama.cpp's GGUF presets, lower-cased (sizer.inputs.gguf_types.PRESETS)
                       "f16", "q8_0", "q6_k", "q5_1", "q5_0", "q4_1", "q4_0", "q5_k_s", "q5_k_m", "q4_k_s", "q4_k_m",
                       "q3_k_s", "q3_k_m", "q3_k_l", "q2_k", "iq4_nl", "iq4_xs"]
KVCacheDtype = Literal["auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2"]
Engine = Literal["vllm", "sglang", "tensorrt-llm", "lmdeploy", "tgi", "llama.cpp", "ollama"]
# each engine as its project writes its name (plan notes, check notes, refusals)
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "tensorrt-llm": "TensorRT-LLM", "lmdeploy": "LMDeploy",
                "tgi": "TGI", "llama.cpp": "llama.cpp", "ollama": "Ollama"}
# llama.cpp KV cache element types sizer prices (`--cache-type-k/-v`; Ollama's OLLAMA_KV_CACHE_TYPE)
# Ollama's OLLAMA_KV_CACHE_TYPE (docs.ollama.com/faq: f16, q8_0, q4_0)
OLLAMA_CACHE_TYPES = ("f16", "q8_0", "q4_0")
LlamaCacheType = Literal["f16", "bf16", "f32", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"]

# -- Resource bounds: every number that sizes an allocation or a loop is bounded here, so a
# -- scenario is refused (one line, exit 2) before numpy, the planner or the simulator see it.
#
# Tokens of one request (any length, prefix, clip or mean): the trace reader's bound, 10 x 2^20
# = 10,485,760, the longest context any released model advertises (validation/trace_limits.py says why).
# It caps the analytic prefill loop (sizer/timing/roofline.py prefill_time_s: one step per
# chunk of the mean prompt) and keeps every length far inside float64's exact integers and int64.
MAX_TOKENS = MAX_REQUEST_TOKENS
# Requests one run simulates: the trace reader's bound, 1,000,000. The simulator replays a few
# hundred requests a second, so a million is an hour or more of one run, and the columnar
# workload holds ~40 bytes a request (40 MB) before each Request is made.
MAX_REQUESTS = MAX_TRACE_REQUESTS
# Replicas (and prefill or decode pools, and each parallel degree: TP, PP, DP): 10,000, a hundred times
# the largest fleets sizer is asked about; the simulator holds a scheduler and a KV pool for each.
MAX_REPLICAS = 10_000
# Clients of a closed loop: as many as requests in flight could be.
MAX_CONCURRENCY = 10_000_000
# Arrival rate: at most 1,000,000 requests a second (a million-request run then spans one second,
# a thousand times any single deployment's rate); at least 1e-5, so that the largest run,
# MAX_REQUESTS / rate, spans no more than the trace reader's timestamp bound (1e11 s) and every
# arrival stays resolvable to microseconds in float64 seconds (beyond it the clock could stall).
MAX_RATE_PER_S = 1e6
MIN_RATE_PER_S = MAX_TRACE_REQUESTS / MAX_TIMESTAMP_S
# Gamma burstiness: cv from 0.05 (shape 400, nearly constant gaps) to 20 (shape 1/400); beyond,
# numpy's gamma draws underflow to 0 gaps or a few huge ones: not a workload, a float artefact.
MIN_CV, MAX_CV = 0.05, 20.0
# Lognormal sigma of log length at most 5: the std the simulator is handed, mean x sqrt(e^(sigma^2)
# - 1), is then at most 2.7e5 x mean (finite; sigma 30 overflows to inf), and a million draws stay
# below 2^63 before clipping.
MAX_SIGMA = 5.0
# Distinct shared prefixes and tenants: at most one per request, 1,000,000 (more can never all be
# drawn; numpy's integer draws and the per-tenant caches stay within int64 and memory).
MAX_PREFIXES = MAX_TENANTS = MAX_REQUESTS
# Prices: at most $1,000,000 per GPU-hour, so that every cost figure (x GPUs x replicas, per
# million tokens) stays a finite float that JSON can write (no Infinity).
MAX_PRICE_USD_PER_GPU_HOUR = 1e6
# Model size: at most 1e14 parameters (100 trillion, ~150x the largest open model), so weight
# bytes stay finite through every format's arithmetic.
MAX_PARAMETERS = 1e14
# KV transfer bandwidth between pools: from 1 MB/s (a request's KV then takes hours, not 1e300 s)
# to 1e15 B/s (1 PB/s, a thousand times NVLink 5).
MIN_LINK_BYTES_PER_S, MAX_LINK_BYTES_PER_S = 1e6, 1e15
# Sequences in a batch or held in KV: at most 10,000,000 (the simulator's per-step lists and the
# memory check's arithmetic; no engine batches more than a few thousand).
MAX_SEQUENCES = 10_000_000
# Tokens in one step's budget (max_num_batched_tokens): at most 2^30, so activation memory and
# step arithmetic stay finite; 100x MAX_TOKENS.
MAX_BATCH_TOKENS = 2 ** 30
# Whole numbers: no field takes one of 2^63 or more (every bound here is far below; the seed is
# numpy's 64 bits), and YAML's integers are unbounded: 10^400 cannot even become a float. Refused
# before any conversion (`_refuse_huge_integers`); model.overrides are config.json keys, checked
# by the model layer.
MAX_INTEGER = 2 ** 63 - 1
# LoRA: vLLM's largest max_lora_rank is 512 (vllm/config/lora.py MaxLoRARanks); adapter slots at most
# 1,024 (vLLM preallocates each; far beyond any GPU's memory at rank 16 for an 8B model); adapters and
# schemas in a workload at most 100,000 (Zipf weights are one float each); Zipf exponent at most 10.
MAX_LORA_RANK = 512
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)      # vllm/config/lora.py MaxLoRARanks: the ranks vLLM takes
MAX_LORAS = 1024
MAX_ADAPTERS = 100_000
MAX_ZIPF_S = 10.0
# Seconds: SLO targets and Little's-law time in system at most the trace timestamp bound, 1e11 s.
MAX_SECONDS = MAX_TIMESTAMP_S
# llama.cpp server slots: at most LLAMA_MAX_SEQ = 256 sequences per context (llama.cpp src/llama-cparams.h);
# Ollama's runner is llama.cpp, so OLLAMA_NUM_PARALLEL has the same ceiling.
MAX_SLOTS = 256
# vLLM's default gpu_memory_utilization (vllm/config/cache.py CacheConfig.gpu_memory_utilization = 0.9)
VLLM_GPU_MEMORY_UTILIZATION = 0.9


@dataclass(frozen=True)
class ModelSection:
    name: str = field(doc="catalog name (`sizer models`), a path to a config.json or a checkpoint folder "
                          "(relative to the scenario file), or a Hugging Face id (org/name) in the local cache")
    num_parameters: float | None = field(None, gt=0, le=MAX_PARAMETERS,
                                         doc="stated parameter count; overrides the count derived from "
                                             "the architecture (e.g. a hypothetical 7e9-parameter model)")
    overrides: dict | None = field(None, doc="config.json keys to override (e.g. num_hidden_layers) "
                                             "for what-if questions")


# Own hardware: a profile's figures a scenario may replace. At most 1,000,000 GB of memory and GB/s of
# bandwidth (a thousand times the largest accelerator), so bytes stay exact integers in float64's range.
MAX_HARDWARE_GB = 1e6


@dataclass(frozen=True)
class HardwareSection:
    gpu: str = field(doc="accelerator profile id or alias (`sizer gpus`; the user's folder $SIZER_HOME/profiles "
                         "first), or a profile YAML file (relative to the scenario file); `base:` is the same key, "
                         "read where the overrides below follow it")
    memory_gb: float | None = field(None, ge=1e-3, le=MAX_HARDWARE_GB,      # at least --memory-gb's least
                                    doc="override: the device's whole memory as the vendor prints it (a 64 GB "
                                        "M3 Max: 64; GB as the profile counts them: Apple's are GiB)")
    # at least 0.1 GB/s, a profile's own least (sizer/inputs/hardware.py PROFILE_NUMBERS)
    memory_bandwidth_gb_per_s: float | None = field(None, ge=0.1, le=MAX_HARDWARE_GB,
                                                    doc="override: peak memory bandwidth, decimal GB/s")
    gpu_working_set_fraction: float | None = field(None, gt=0, le=1,
                                                   doc="override: share of unified memory the GPU may use (Apple: "
                                                       "Metal's recommendedMaxWorkingSetSize, 0.75 by default; "
                                                       "raised with sudo sysctl iogpu.wired_limit_mb)")
    calibrated_profile: str | None = field(None, doc="folder written by `sizer calibrate` (relative to the scenario "
                                                     "file): step times from kernels measured on the device "
                                                     "instead of the roofline")
    step_model: Literal["auto", "kernel_tables", "roofline"] = field(
        "auto", doc="what prices a step without a calibrated_profile or kernel_tables: auto (the default) the "
                    "operator latencies measured on the GPU in the engine where tables are bundled (vLLM, SGLang "
                    "and TensorRT-LLM on the GPUs hardware_profiles/kernels/README.md lists), the roofline for what "
                    "they lack and where none are; kernel_tables the same, refused where none are bundled; roofline "
                    "the roofline alone; the plan names the source of each operator family; docs/fidelity.md "
                    "compares them")
    kernel_tables: str | None = field(None, doc="a kernel-tables folder measured on this GPU (`tables.yaml` and gzip "
                                                "CSVs, as `sizer calibrate` or `sizer import-kernels --out` write "
                                                "them; relative to the scenario file): step times from its tables, "
                                                "the roofline for what they lack. It sets the step model, so "
                                                "step_model is not read (a search or sweep point on another GPU "
                                                "drops the folder and reads step_model); not with "
                                                "calibrated_profile")


@dataclass(frozen=True)
class SpeculativeSection:
    method: Literal["draft_model", "ngram", "eagle", "eagle3", "medusa", "mtp"] = field(doc="proposer kind")
    num_speculative_tokens: int = field(ge=1, le=16, doc="gamma, 1 to 16: tokens proposed per step")
    acceptance_rate: float = field(ge=0.0, le=0.999, doc=(
        "alpha, 0 to 0.999: the probability that each proposed token is accepted, the same for every token and "
        "independent of the others, so a verification yields E = (1 - alpha^(gamma+1)) / (1 - alpha) tokens. Not "
        "vLLM's logged 'Avg Draft acceptance rate' (accepted / proposed tokens, (E - 1) / gamma: 44% at alpha 0.7, "
        "gamma 4): take vLLM's logged 'Mean acceptance length' L (1 + accepted tokens per verification) and solve "
        "(1 - alpha^(gamma+1)) / (1 - alpha) = L for alpha (L 2.77 at gamma 4 is alpha 0.7)"))
    model: str | None = field(None, doc="draft model for method draft_model; the head for eagle, eagle3 and medusa, "
                                        "whose own config sizes its memory (else an EAGLE head is estimated from "
                                        "the model's shapes, a Medusa one not counted): a catalog name, a "
                                        "config.json or checkpoint folder (relative to the scenario file), or a "
                                        "Hugging Face id in the local cache")
    proposer_cost_fraction: float | None = field(None, ge=0.0, le=1.0,
                                                 doc="cost of one drafting pass as a fraction of the target's "
                                                     "step over the same tokens (eagle, eagle3, mtp and "
                                                     "draft_model: a first pass over every token of the step, "
                                                     "prefill chunks too, then one token a sequence); default by "
                                                     "method")


@dataclass(frozen=True)
class DisaggregatedSection:
    prefill_replicas: int = field(ge=1, le=MAX_REPLICAS,
                                  doc="replicas that only prefill: a request leaves them at its first token")
    decode_replicas: int = field(ge=1, le=MAX_REPLICAS,
                                 doc="replicas that decode, each request's KV sent over from a prefill replica")
    kv_transfer_bytes_per_s: float | None = field(None, ge=MIN_LINK_BYTES_PER_S, le=MAX_LINK_BYTES_PER_S,
                                                  doc="KV transfer bandwidth per GPU, one direction; "
                                                      "default the GPU's interconnect (else its PCIe link), "
                                                      "as the plan states")


@dataclass(frozen=True)
class DeploymentSection:
    engine: Engine = field("vllm", doc="serving engine whose scheduling defaults apply to fields left out; left "
                                       "out: llama.cpp for GGUF weights or an Apple GPU or CPU, else vllm (the "
                                       "plan says which); vllm and the other batching engines are refused with "
                                       "GGUF weights and on those devices")
    tensor_parallel_size: int = field(1, ge=1, le=MAX_REPLICAS, doc="GPUs each layer's matrices are split across")
    pipeline_parallel_size: int = field(1, ge=1, le=MAX_REPLICAS, doc="pipeline stages (layers split across GPUs)")
    data_parallel_size: int = field(1, ge=1, le=MAX_REPLICAS, doc="engine-level data-parallel ranks inside one replica")
    enable_expert_parallel: bool = field(False, doc="shard MoE experts whole across TP x DP ranks "
                                                    "instead of slicing each")
    enable_attention_dp: bool = field(False, doc="MoE models: attention and the dense layers run data-parallel on "
                                                 "each of the tensor_parallel_size GPUs (each its own sequences and "
                                                 "KV cache), the experts spread whole over them with an all-to-all "
                                                 "per MoE layer: TensorRT-LLM's enable_attention_dp (DEP), SGLang's "
                                                 "--enable-dp-attention; vLLM runs it as data_parallel_size with "
                                                 "enable_expert_parallel")
    replicas: int | None = field(None, ge=1, le=MAX_REPLICAS,
                                 doc="independent replicas; default: the fewest whose simulated operating "
                                     "point meets the SLO; without targets, enough KV for the "
                                     "Little's-law requests in flight")
    quantization: WeightFormat = field("auto", doc="weight format; auto = the checkpoint's "
                                                   "(quantization_config, else torch_dtype)")
    quantization_group_size: int = field(128, ge=1, le=MAX_TOKENS,
                                         doc="group size of AWQ/GPTQ scales and zeros; each GPU must hold whole "
                                             "groups of every matrix's inputs (as vLLM loads them)")
    kv_cache_dtype: KVCacheDtype = field("auto", doc="KV cache element type; auto = the model dtype")
    max_model_len: int | None = field(None, ge=1, le=MAX_TOKENS, doc="longest context (prompt + output) per sequence; "
                                                                     "default the model's max_position_embeddings "
                                                                     "(vLLM: as the config's rope_scaling scales it; "
                                                                     "LongRoPE's original length)")
    gpu_memory_utilization: float = field(VLLM_GPU_MEMORY_UTILIZATION, gt=0.0, le=1.0,
                                          doc="share of GPU memory the engine may use (vLLM default 0.9); under "
                                              "engine `tensorrt-llm` the KV cache's share of what weights, the "
                                              "activation peak (its fused-MoE workspace and gathered rows "
                                              "included) and the CUDA context leave (its "
                                              "`kv_cache_free_gpu_mem_fraction`)")
    block_size: int | None = field(None, ge=1, le=MAX_TOKENS, doc="KV tokens per paged block (vLLM 16)")
    max_num_seqs: int | None = field(None, ge=1, le=MAX_SEQUENCES, doc="sequences per step at most")
    max_num_batched_tokens: int | None = field(None, ge=1, le=MAX_BATCH_TOKENS, doc="token budget per step")
    cuda_graph_batch_sizes: list[int] | None = field(None, ge=1, le=MAX_SEQUENCES,
                                                    doc="batch sizes the engine captured CUDA graphs for, with "
                                                        "padding on (TensorRT-LLM's cuda_graph_config.batch_sizes and "
                                                        "enable_padding): a step in which every attention-DP rank only "
                                                        "decodes runs at the smallest listed size at least its busiest "
                                                        "rank's sequences (sizes above max_num_seqs or the token "
                                                        "budget are not captured); left out: steps run unpadded")
    enable_chunked_prefill: bool | None = field(None, doc="split long prompts into chunks mixed with decodes")
    stream_interval: int | None = field(None, ge=1, le=MAX_TOKENS,
                                        doc="tokens per streamed message after the first, which goes alone "
                                            "(vLLM, SGLang --stream-interval; TensorRT-LLM stream_interval); "
                                            "left out: 1, every token its own message")
    scheduler_recv_interval: int | None = field(None, ge=1, le=MAX_TOKENS,
                                                doc="SGLang's --scheduler-recv-interval: the scheduler polls for new "
                                                    "requests after that many decode-only steps (at once after a "
                                                    "step with prompt tokens, or when idle); left out: 1, every step")
    moe_backend: Literal["auto", "marlin"] | None = field(None, doc="vLLM's MoE kernel (--moe-backend; "
                                                                   "VLLM_MXFP4_USE_MARLIN=1 before it): marlin runs "
                                                                   "MXFP4 experts by Marlin (W4A16) where vLLM would "
                                                                   "pick another kernel; left out or auto: vLLM's "
                                                                   "choice (docs/checkpoints.md)")
    enable_prefix_caching: bool | None = field(None, doc="reuse KV blocks of shared prompt prefixes")
    prefix_cache_tenant_isolation: bool = field(False, doc="scope the prefix cache per tenant")
    preemption_mode: Literal["recompute", "swap"] | None = field(None, doc="what happens to a sequence "
                                                                           "when KV blocks run out")
    speculative_config: SpeculativeSection | None = field(None, doc="speculative decoding")
    disaggregated: DisaggregatedSection | None = field(None,
                                                       doc="separate prefill and decode pools (replaces replicas)")
    # llama.cpp server (`llama-server` flags) and Ollama (environment and model options); docs/engines.md
    parallel: int | None = field(None, ge=1, le=MAX_SLOTS, doc="llama.cpp: server slots (`--parallel`); default 4 "
                                                                "(auto), with kv_unified on")
    ctx_size: int | None = field(None, ge=1, le=MAX_TOKENS, doc="llama.cpp: total context of all slots (`-c`); "
                                                                 "default the model's max_position_embeddings")
    kv_unified: bool | None = field(None, doc="llama.cpp: one KV buffer shared by every slot (`--kv-unified`); "
                                              "default on only when parallel is left to auto")
    batch_size: int | None = field(None, ge=1, le=MAX_BATCH_TOKENS, doc="llama.cpp: logical batch, tokens per "
                                                                         "step (`-b`, default 2048)")
    ubatch_size: int | None = field(None, ge=1, le=MAX_BATCH_TOKENS, doc="llama.cpp: physical batch, which sizes "
                                                                          "the compute buffer (`-ub`, default 512)")
    cache_type_k: LlamaCacheType | None = field(None, doc="llama.cpp/Ollama: K cache type (`-ctk`, default f16)")
    cache_type_v: LlamaCacheType | None = field(None, doc="llama.cpp/Ollama: V cache type (`-ctv`, default f16; "
                                                          "a quantised V needs flash_attn)")
    flash_attn: bool | Literal["auto"] | None = field(None, doc="llama.cpp/Ollama: flash attention (`-fa` on, off "
                                                                 "or auto; llama.cpp default auto)")
    num_ctx: int | None = field(None, ge=1, le=MAX_TOKENS, doc="Ollama: context per request (`num_ctx`, "
                                                                "default 4096)")
    num_parallel: int | None = field(None, ge=1, le=MAX_SLOTS, doc="Ollama: requests one model serves at once "
                                                                    "(OLLAMA_NUM_PARALLEL, default 1)")
    keep_alive_s: float | None = field(None, ge=0, le=MAX_SECONDS, doc="Ollama: seconds an idle model stays "
                                                                        "loaded (OLLAMA_KEEP_ALIVE, default 300)")
    max_loaded_models: int | None = field(None, ge=1, le=MAX_REPLICAS,
                                          doc="Ollama: models resident at once (OLLAMA_MAX_LOADED_MODELS, "
                                              "default 3 per GPU)")
    load_bytes_per_s: float | None = field(None, ge=MIN_LINK_BYTES_PER_S, le=MAX_LINK_BYTES_PER_S,
                                           doc="Ollama: read speed of the model file when it is not resident "
                                               "(default 2e9, an NVMe SSD)")
    n_gpu_layers: int | None = field(None, ge=0, le=MAX_LAYERS + 1,
                                     doc="llama.cpp -ngl: the last N layers on the GPU, the rest in host memory "
                                         "(the output layer too at layers + 1); default all (0 on a CPU device, "
                                         "which takes only 0)")
    # Multi-LoRA serving: vLLM's engine arguments and their defaults (vllm/config/lora.py LoRAConfig:
    # max_loras 1, max_lora_rank 16, max_cpu_loras None = max_loras, lora_dtype "auto").
    enable_lora: bool = field(False, doc="serve LoRA adapters on the base model (docs/lora.md)")
    max_loras: int = field(1, ge=1, le=MAX_LORAS, doc="adapters one step may run: GPU adapter slots (vLLM default 1)")
    max_lora_rank: int = field(16, ge=1, le=MAX_LORA_RANK,
                               doc="rank each GPU slot is sized for; a larger adapter is refused (vLLM default 16)")
    max_cpu_loras: int | None = field(None, ge=1, le=MAX_ADAPTERS,
                                      doc="adapters the host cache holds; default max_loras")
    lora_target_modules: list[str] | None = field(None, doc="modules adapters apply to (q_proj, k_proj, v_proj, "
                                                            "o_proj, gate_proj, up_proj, down_proj); default every "
                                                            "linear layer of the decoder, as vLLM")
    lora_dtype: Literal["auto", "bfloat16", "float16", "bf16", "fp16"] = field(
        "auto", doc="adapter weight type; auto = the model dtype")


@dataclass(frozen=True)
class Distribution:
    distribution: Literal["fixed", "uniform", "normal", "lognormal", "empirical"] = field(doc="length distribution")
    value: float | None = field(None, ge=1, le=MAX_TOKENS, doc="fixed: the length")
    min: float | None = field(None, ge=1, le=MAX_TOKENS, doc="uniform: lower bound; normal, lognormal: clip; fixed, "
                                                             "empirical: a bound the stated lengths must keep "
                                                             "(one outside is refused, not clipped)")
    max: float | None = field(None, ge=1, le=MAX_TOKENS, doc="uniform: upper bound; normal, lognormal: clip; fixed, "
                                                             "empirical: a bound the stated lengths must keep "
                                                             "(one outside is refused, not clipped)")
    mean: float | None = field(None, ge=1, le=MAX_TOKENS,
                               doc="normal/lognormal: mean length before rounding and the clip (the plan sizes for "
                                   "the mean as drawn)")
    std: float | None = field(None, ge=0, le=MAX_TOKENS, doc="normal: standard deviation")
    sigma: float | None = field(None, gt=0, le=MAX_SIGMA, doc="lognormal: sigma of log length")
    values: list[float] | None = field(None, doc="empirical: observed lengths")
    weights: list[float] | None = field(None, doc="empirical: weights of `values` (default equal)")


@dataclass(frozen=True)
class ArrivalSection:
    process: Literal["poisson", "gamma", "constant", "closed", "trace"] = field(
        "poisson", doc="arrival process; closed: `concurrency` clients, each sending its next request when the "
                       "answer to its last arrives (vllm bench serve --max-concurrency)")
    rate_per_s: float | None = field(None, ge=MIN_RATE_PER_S, le=MAX_RATE_PER_S,
                                     doc="mean requests per second (not for trace or closed)")
    concurrency: int | None = field(None, ge=1, le=MAX_CONCURRENCY,
                                    doc="closed: clients, each with one request in flight")
    think_time_s: float | None = field(None, ge=0.0, le=MAX_SECONDS,
                                       doc="closed: seconds a client waits after an answer before its next "
                                           "request (default 0)")
    cv: float | None = field(None, ge=MIN_CV, le=MAX_CV,
                             doc="gamma: coefficient of variation of inter-arrival times (burstiness)")


@dataclass(frozen=True)
class SharedPrefixSection:
    share: float = field(ge=0.0, le=1.0, doc="share of requests that start with a shared prefix")
    tokens: int = field(ge=1, le=MAX_TOKENS, doc="prefix length in tokens")
    num_prefixes: int = field(1, ge=1, le=MAX_PREFIXES, doc="distinct prefixes (e.g. system prompts)")
    num_tenants: int = field(1, ge=1, le=MAX_TENANTS, doc="tenants requests are spread over")


@dataclass(frozen=True)
class TraceSection:
    path: str = field(doc="trace file, relative to the scenario file")
    format: Literal["mooncake", "csv"] = field(doc="mooncake JSONL (hash_ids of 512-token blocks) "
                                                   "or CSV (timestamp, input, output tokens); any other key or "
                                                   "column is read past and named by plan and simulate as not "
                                                   "modelled")
    time_scale: float = field(1.0, gt=0, doc="multiply inter-arrival times (0.5 = twice the rate)")
    max_requests: int | None = field(None, ge=1, le=MAX_REQUESTS,
                                     doc="replay only the first N requests (with a stated workload.num_requests, the "
                                         "smaller of the two; left out, the whole trace)")


@dataclass(frozen=True)
class LoraWorkloadSection:
    adapters: int = field(ge=1, le=MAX_ADAPTERS, doc="distinct LoRA adapters requests ask for")
    popularity: Literal["zipf", "uniform", "trace"] = field(
        "zipf", doc="how often each adapter is asked for; trace: the trace's Adapter column (CSV) or adapter key "
                    "(Mooncake), ids from 0 to adapters - 1")
    zipf_s: float = field(1.0, ge=0.0, le=MAX_ZIPF_S, doc="zipf: adapter k (from 1) is asked for in proportion to "
                                                          "1 / k^zipf_s")
    rank: int = field(16, ge=1, le=MAX_LORA_RANK, doc="the adapters' rank (at most deployment.max_lora_rank)")


@dataclass(frozen=True)
class StructuredOutputSection:
    share: float = field(ge=0.0, le=1.0, doc="share of requests that ask for structured output (a JSON schema)")
    schemas: int = field(1, ge=1, le=MAX_ADAPTERS, doc="distinct schemas, drawn uniformly")
    backend: Literal["xgrammar", "outlines", "guidance"] = field(
        "xgrammar", doc="grammar backend; prices compilation and the per-token mask (sizer/sizing/presets.py)")


@dataclass(frozen=True)
class WorkloadSection:
    arrival: ArrivalSection = field(default_factory=ArrivalSection, doc="arrival process")
    prompt_tokens: Distribution | None = field(None, doc="prompt length distribution")
    output_tokens: Distribution | None = field(None, doc="output length distribution")
    shared_prefix: SharedPrefixSection | None = field(None, doc="shared prompt prefixes")
    trace: TraceSection | None = field(None, doc="replay a request trace instead of synthetic arrivals and lengths "
                                                 "(prompt_tokens, output_tokens, shared_prefix and the arrival's "
                                                 "process, rate_per_s, cv, concurrency and think_time_s are then "
                                                 "refused; arrival.process may say trace)")
    schedule: ScheduleSection | None = field(None, doc="the rate through a day or week (docs/capacity-over-time.md); "
                                                       "plan --simulate then sizes the day")
    lora: LoraWorkloadSection | None = field(None, doc="LoRA adapters requests ask for (needs deployment.enable_lora)")
    structured_output: StructuredOutputSection | None = field(None, doc="requests with a JSON schema")
    num_requests: int = field(2000, ge=1, le=MAX_REQUESTS,
                              doc="requests to simulate; a trace replays whole unless it is stated (by the scenario or "
                                  "`simulate --num-requests`): then its first N (with trace.max_requests, the smaller "
                                  "of the two); plan and simulate name the cut")
    time_in_system_s: float | None = field(None, gt=0, le=MAX_SECONDS,
                                           doc="Little's law: seconds a request spends in the system; "
                                               "default estimated from step times")
    kv_tokens_per_request: int | None = field(None, ge=1, le=MAX_TOKENS,
                                              doc="Little's law: KV tokens each request may hold; "
                                                  "default max_model_len")
    concurrent_sequences: int | None = field(None, ge=1, le=MAX_SEQUENCES,
                                             doc="sequences to hold in KV at once for the memory check; "
                                                 "default from Little's law")
    seed: int = field(0, ge=0, le=MAX_INTEGER, doc="random seed")


@dataclass(frozen=True)
class SLOSection:
    ttft_ms: float | None = field(None, gt=0, le=MAX_SECONDS * 1e3, doc="time to first token target per request")
    itl_ms: float | None = field(None, gt=0, le=MAX_SECONDS * 1e3,
                                 doc="inter-token latency target: the gaps between a request's consecutive tokens, "
                                     "pooled over requests as vllm bench serve reports ITL; required_share of the "
                                     "gaps must be within it")
    tpot_ms: float | None = field(None, gt=0, le=MAX_SECONDS * 1e3,
                                  doc="time-per-output-token target, checked against each request's TPOT "
                                      "((E2E - TTFT) / (output tokens - 1))")
    e2e_ms: float | None = field(None, gt=0, le=MAX_SECONDS * 1e3, doc="end-to-end latency target per request")
    required_share: float = field(0.95, gt=0.0, le=1.0, doc="share of requests that must meet every target (goodput)")


# The SLO's latency targets in the order every line states them: (the metric's name, SLOSection's field).
SLO_TARGETS = (("TTFT", "ttft_ms"), ("ITL", "itl_ms"), ("TPOT", "tpot_ms"), ("E2E", "e2e_ms"))


def targets_text(slo: SLOSection, number: Callable[[float], str] = "{:g}".format, relation: str = " <= ",
                 source: Callable[[str], str] | None = None) -> str:
    """The stated latency targets, "TTFT <= 500 ms, ITL <= 50 ms" ("" when none), in SLO_TARGETS' order: each
    number written by `number` (the plan's `significant` writes 2,000 and 12,500), `relation` between a name and
    its number (a sweep's group label: " "), and each target's source in brackets where `source` (a field's path ->
    where its value came from) is given. The required share's words are the caller's, as each sentence puts it."""
    parts = []
    for name, key in SLO_TARGETS:
        target = getattr(slo, key)
        if target is not None:
            said = f" ({source('slo.' + key)})" if source is not None else ""
            parts.append(f"{name}{relation}{number(target)} ms{said}")
    return ", ".join(parts)


@dataclass(frozen=True)
class CostSection:
    price_usd_per_gpu_hour: float | None = field(None, ge=0, le=MAX_PRICE_USD_PER_GPU_HOUR,
                                                 doc="default: the hardware profile's price; a stated price is the "
                                                     "scenario GPU's only (on another GPU, named by `plan --gpu`, "
                                                     "a search or a sweep, that GPU's profile price applies)")


@dataclass(frozen=True)
class Scenario:
    model: ModelSection = field(doc="the model")
    hardware: HardwareSection = field(doc="the accelerator")
    name: str | None = field(None, doc="a title for reports; default the file name")
    description: str | None = field(None, doc="free text")
    deployment: DeploymentSection = field(default_factory=DeploymentSection, doc="how the model is served")
    workload: WorkloadSection = field(default_factory=WorkloadSection, doc="the traffic")
    slo: SLOSection = field(default_factory=SLOSection, doc="latency targets")
    cost: CostSection = field(default_factory=CostSection, doc="prices")
    autoscaling: AutoscalingSection | None = field(None, doc="how replicas follow workload.schedule "
                                                            "(default: these defaults, with a schedule)")
    energy: EnergySection = field(default_factory=EnergySection, doc="PUE and grid carbon intensity")
    file: str | None = dataclasses.field(default=None, metadata={"internal": True})  # where it was loaded from
    # why deployment.engine is what it is: "scenario" (or a flag), else the default's reason (`default_engine`)
    engine_source: str = dataclasses.field(default="scenario", metadata={"internal": True})
    # where each workload and SLO value a plan states among its assumptions, and each setting a flag may set, came
    # from (ASSUMED_FIELDS and SETTABLE -> "scenario", "default" or the flag that set it)
    sources: tuple[tuple[str, str], ...] = dataclasses.field(default=(), metadata={"internal": True})

    def source_of(self, path: str) -> str:
        """Where the value at `path` came from: a flag, "scenario", or "default"."""
        return dict(self.sources).get(path, "default")


# The workload and SLO values a plan lists among its assumptions, each with where it came from.
ASSUMED_FIELDS = ("workload.arrival.process", "workload.arrival.rate_per_s", "workload.arrival.concurrency",
                  "workload.prompt_tokens", "workload.output_tokens", "workload.num_requests", "slo.ttft_ms",
                  "slo.itl_ms", "slo.tpot_ms", "slo.e2e_ms", "slo.required_share")
# The settings a variant (sizer/inputs/variant.py: a CLI flag, a search candidate, check's fix, a sweep point) may
# set: Variant field -> the scenario field it sets. Each keeps its source, as the assumptions do.
SETTABLE = {
    "model": "model.name",
    "gpu": "hardware.gpu",
    "calibrated_profile": "hardware.calibrated_profile",
    "memory_gb": "hardware.memory_gb",
    "tensor_parallel_size": "deployment.tensor_parallel_size",
    "pipeline_parallel_size": "deployment.pipeline_parallel_size",
    "quantization": "deployment.quantization",
    "kv_cache_dtype": "deployment.kv_cache_dtype",
    "max_model_len": "deployment.max_model_len",
    "replicas": "deployment.replicas",
    "rate_per_s": "workload.arrival.rate_per_s",
    "num_requests": "workload.num_requests",
    "arrival_process": "workload.arrival.process",
    "concurrency": "workload.arrival.concurrency",
    # sweep axes (sizer/sizing/sweep.py)
    "engine": "deployment.engine",
    "data_parallel_size": "deployment.data_parallel_size",
    "enable_expert_parallel": "deployment.enable_expert_parallel",
    "enable_attention_dp": "deployment.enable_attention_dp",
    "max_num_seqs": "deployment.max_num_seqs",
    "max_num_batched_tokens": "deployment.max_num_batched_tokens",
    "num_speculative_tokens": "deployment.speculative_config.num_speculative_tokens",
    "ttft_ms": "slo.ttft_ms",
    "itl_ms": "slo.itl_ms",
    "e2e_ms": "slo.e2e_ms",
    # the workload and SLO flags of plan and simulate (sizer/inputs/traffic.py): fixed lengths, a TPOT target
    "prompt_tokens": "workload.prompt_tokens",
    "output_tokens": "workload.output_tokens",
    "tpot_ms": "slo.tpot_ms",
    "seed": "workload.seed",
    "trace_time_scale": "workload.trace.time_scale",     # a sweep's rate axis on a trace
    # slot engines' slots (search): llama.cpp's --parallel and total context, Ollama's OLLAMA_NUM_PARALLEL
    "parallel": "deployment.parallel",
    "ctx_size": "deployment.ctx_size",
    "num_parallel": "deployment.num_parallel",
}
# Every path whose source a scenario keeps, in the order `sources` lists them.
SOURCED_PATHS = tuple(dict.fromkeys(ASSUMED_FIELDS + tuple(SETTABLE.values())))


def stated_sources(data: dict, source: str = "scenario") -> tuple[tuple[str, str], ...]:
    """`source` for each of ASSUMED_FIELDS and of the settings a variant may set (SETTABLE) that `data` states
    (the rest are defaults)."""
    out = []
    for path in SOURCED_PATHS:
        node: object = data
        for key in path.split("."):
            node = node.get(key) if isinstance(node, dict) else None
        if node is not None:
            out.append((path, source))
    return tuple(out)


def in_source_order(sources: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """`sources` as a scenario keeps them: SOURCED_PATHS' order, then any other path in its own."""
    return (tuple((path, sources[path]) for path in SOURCED_PATHS if path in sources)
            + tuple((path, source) for path, source in sources.items() if path not in SOURCED_PATHS))


def with_sources(scenario: Scenario, sources: dict[str, str]) -> Scenario:
    """`scenario` with some values' sources replaced (a flag that set one, a command's own default)."""
    return replace(scenario, sources=tuple({**dict(scenario.sources), **sources}.items()))


def is_gateway(path: str | Path) -> bool:
    """Does this YAML file hold a gateway document (a top-level `gateway:`, read by sizer/inputs/gateway.py)? A
    file that cannot be read is not one: the command's own reading reports it, in its usual order (flags first)."""
    try:
        data = load_yaml(Path(path))
    except FieldError:
        return False
    return isinstance(data, dict) and "gateway" in data


class Change(Protocol):
    """What `scenario_from_dict` takes of a variant (sizer/inputs/variant.py `Variant`): the required inputs it
    names, which a scenario from flags alone is made of, and its changes to the typed scenario."""
    def required_inputs(self) -> dict[str, dict[str, str]]: ...

    def apply(self, scenario: Scenario) -> Scenario: ...


class StatedValueError(InputError):
    """A value the scenario file itself states, refused as it is read, before any change (a flag, a search
    candidate) applies: the file's error, never blamed on a flag that would have replaced the value."""


# engine_source of a scenario just read whose file names no engine: `checked_scenario` chooses it
ENGINE_UNSTATED = "unstated"


def load_scenario(path: str | Path, variant: Change | None = None) -> Scenario:
    """Read, type-check and sanity-check a scenario YAML file; `variant`'s changes (CLI flags,
    search candidates) are made to it before its cross-field checks."""
    path = Path(path)
    return scenario_from_dict(load_yaml(path), str(path), variant, default_name=path.stem)


def scenario_from_dict(data: object, file: str | None, variant: Change | None = None,
                       default_name: str | None = None) -> Scenario:
    """A validated Scenario from a mapping; unnamed, it is named after its file (else "scenario"). The mapping is
    read as it is (a value it states is refused even where `variant` would replace it), `variant`'s changes are
    made to the typed scenario, and the cross-field rules are checked on the result."""
    try:
        scenario = _read(data, file, default_name, variant.required_inputs() if variant is not None else {})
    except FieldError as error:
        raise StatedValueError(error.file, error.field, error.message) from None
    return variant.apply(scenario) if variant is not None else checked_scenario(scenario)


def _read(data: object, file: str | None, default_name: str | None,
          required: dict[str, dict[str, str]]) -> Scenario:
    """The mapping's typed sections, each field checked against its declaration; `required` fills the required
    inputs (model.name, hardware.gpu) the mapping lacks. Not yet checked across fields, its engine not yet chosen."""
    if not isinstance(data, dict):
        got = "an empty file (no YAML document, or null)" if data is None else type(data).__name__
        raise InputError(file, "(top level)", f"expected a mapping of sections, got {got}")
    if "gateway" in data:
        raise InputError(file, "gateway", "a gateway document (several pools, docs/gateway.md): "
                                          "`sizer plan` and `sizer simulate` read it, this command reads one scenario")
    data = {**data}
    for key, inner in (("model", "name"), ("hardware", "gpu")):   # shorthands: `model: llama-3.1-8b`
        if isinstance(data.get(key), str):
            data[key] = {inner: data[key]}
    hardware = data.get("hardware")
    if isinstance(hardware, dict) and "base" in hardware:       # `hardware: {base: m3-max, memory_gb: 64}`
        if "gpu" in hardware:
            raise InputError(file, "hardware.base", "the same key as hardware.gpu; expected one of the two")
        data["hardware"] = {("gpu" if k == "base" else k): v for k, v in hardware.items()}
    for key, inputs in required.items():                       # `plan --model X --gpu Y` without a file
        section = data.get(key)
        if section is None or isinstance(section, dict):
            data[key] = {**(section or {}), **{k: v for k, v in inputs.items() if (section or {}).get(k) is None}}
    _refuse_huge_integers(data, "", file)
    scenario = build(Scenario, data, "", file)
    stated_engine = isinstance(data.get("deployment"), dict) and data["deployment"].get("engine") is not None
    return replace(scenario, file=file, name=scenario.name or default_name or (Path(file).stem if file else "scenario"),
                   sources=stated_sources(data), engine_source="scenario" if stated_engine else ENGINE_UNSTATED)


def checked_scenario(s: Scenario) -> Scenario:
    """`s` with its engine chosen where no one named one (`default_engine`), checked by the cross-field rules the
    types cannot express (`check_scenario`): the last step of making any scenario, read or changed."""
    if s.engine_source != "scenario":
        engine, why = default_engine(s)
        s = replace(s, deployment=replace(s.deployment, engine=engine), engine_source=why)
    check_scenario(s)
    return s


def default_engine(s: Scenario) -> tuple[str, str]:
    """The engine of a scenario that names none, and why: llama.cpp for GGUF weights (its format) and on an
    Apple GPU or a CPU (the devices sizer models no batching engine on), else vLLM."""
    d = s.deployment
    if d.quantization in PRESETS or str(s.model.name).lower().endswith(".gguf"):
        return "llama.cpp", f"default: GGUF weights ({d.quantization}) are llama.cpp's format"
    if str(s.hardware.gpu).lower() != HOST_CPU:
        overrides = HardwareOverrides(s.hardware.memory_gb, s.hardware.memory_bandwidth_gb_per_s,
                                      s.hardware.gpu_working_set_fraction)
        try:
            hw = scenario_hardware(s.hardware.gpu, s.file, "hardware.gpu", overrides)
        except FieldError:      # an unknown device: resolving the scenario refuses it, after its own checks
            return "vllm", "default: vLLM, sizer's engine for discrete GPUs"
        if hw.device_kind in LLAMACPP_ONLY_DEVICES:
            return "llama.cpp", f"default on {hw.name} ({hw.device_kind}): sizer models no batching engine there"
    return "vllm", "default: vLLM, sizer's engine for discrete GPUs"


def _refuse_huge_integers(data: object, path: str, file: str | None) -> None:
    if isinstance(data, dict):
        for key, value in data.items():
            sub = join(path, key)
            if sub != "model.overrides":
                _refuse_huge_integers(value, sub, file)
    elif isinstance(data, list):
        for i, value in enumerate(data):
            _refuse_huge_integers(value, f"{path}[{i}]", file)
    elif isinstance(data, int) and not isinstance(data, bool) and abs(data) > MAX_INTEGER:
        raise InputError(file, path or "(top level)", f"expected a value within +-2^63, got {excerpt(data)}")


class StatedWorkload(Protocol):
    """What the workload's readers take of a scenario: its file (its relative paths start beside it), its
    workload section and where each workload value came from (a stated workload.num_requests cuts a trace). A
    `Scenario` is one, and so is the deployment description built from it (sizer/sizing/resolve.py `Resolved`)."""
    @property
    def file(self) -> str | None: ...

    @property
    def workload(self) -> WorkloadSection: ...

    def source_of(self, path: str) -> str: ...


def scenario_dir(scenario: StatedWorkload) -> Path:
    return Path(scenario.file).parent if scenario.file else Path.cwd()


# Arrival fields that one process reads (any other ignores them): field -> that process.
ARRIVAL_FIELDS = {"concurrency": "closed", "think_time_s": "closed", "cv": "gamma"}
# The speculative methods whose engine loads no model of its own beside the target: method -> what proposes.
UNDRAFTED_METHODS = {"ngram": "n-grams of the prompt itself", "mtp": "the model's own multi-token-prediction layers"}


# DeploymentSection's LoRA settings: a value other than the field's default (vLLM's LoRAConfig's) needs enable_lora
LORA_FIELDS = ("max_loras", "max_lora_rank", "max_cpu_loras", "lora_target_modules", "lora_dtype")


class Arrivals(Protocol):
    """What check_arrival_fields reads: a scenario's ArrivalSection, a gateway's ArrivalRate."""
    process: str
    cv: float | None


def check_arrival_fields(arrival: Arrivals, at: str, f: str | None) -> None:
    """A field one arrival process reads (ARRIVAL_FIELDS) given to another is refused, and gamma needs its cv: a
    scenario's arrivals (`at` workload.arrival) and a gateway's alike."""
    for key, process in ARRIVAL_FIELDS.items():
        if getattr(arrival, key, None) is not None and arrival.process != process:
            raise InputError(f, f"{at}.{key}", f"only for process: {process}, not {arrival.process}")
    if arrival.process == "gamma" and arrival.cv is None:
        raise InputError(f, f"{at}.cv", "missing; gamma arrivals need a coefficient of variation > 0")


def check_scenario(s: Scenario) -> None:
    """Cross-field rules the types cannot express."""
    f = s.file
    w = s.workload
    if w.trace is not None:
        _check_trace_replay(s)
    check_arrival_fields(w.arrival, "workload.arrival", f)
    if w.trace is None:
        if w.prompt_tokens is None:
            raise InputError(f, "workload.prompt_tokens", "missing; expected a length distribution (or workload.trace)")
        if w.output_tokens is None:
            raise InputError(f, "workload.output_tokens", "missing; expected a length distribution (or workload.trace)")
        if w.arrival.process == "trace":
            raise InputError(f, "workload.arrival.process", "'trace' needs workload.trace")
        if w.arrival.process == "closed":
            if w.arrival.concurrency is None:
                raise InputError(f, "workload.arrival.concurrency", "missing; a closed loop needs its clients >= 1")
            if w.arrival.rate_per_s is not None:
                raise InputError(f, "workload.arrival.rate_per_s", "not for process: closed; its clients send "
                                 "requests as answers come, so the rate follows from concurrency")
        elif w.arrival.rate_per_s is None:
            raise InputError(f, "workload.arrival.rate_per_s", "missing; expected requests per second > 0")
        for name in ("prompt_tokens", "output_tokens"):
            _check_distribution(getattr(w, name), f"workload.{name}", f)
        check_prefix(w.shared_prefix, w.prompt_tokens, "workload", f)
    elif not preloaded.has_trace(str(scenario_dir(s) / w.trace.path)):       # a sweep worker: shipped
        check_trace_file(scenario_dir(s) / w.trace.path, f, "workload.trace.path")
    d = s.deployment
    if d.disaggregated is not None and (d.replicas or 1) > 1:     # the simulator runs one pair of pools
        raise InputError(f, "deployment.replicas", f"expected 1 (or none) with deployment.disaggregated, whose "
                                                   f"prefill_replicas and decode_replicas are the replicas, "
                                                   f"got {d.replicas}")
    if not d.enable_lora:               # a LoRA setting is vLLM's only with --enable-lora: stated without it, a mistake
        defaults = {f.name: f.default for f in dataclasses.fields(DeploymentSection)}
        stated = next((key for key in LORA_FIELDS if getattr(d, key) != defaults[key]), None)
        if stated is not None:
            raise InputError(f, f"deployment.{stated}", "applies to LoRA adapters; expected deployment.enable_lora: "
                                                        "true with it, or leave it out")
    if d.prefix_cache_tenant_isolation and d.enable_prefix_caching is False:
        raise InputError(f, "deployment.prefix_cache_tenant_isolation", "scopes the prefix cache, which "
                                                                       "deployment.enable_prefix_caching: false turns "
                                                                       "off; expected one of them")
    if w.kv_tokens_per_request is not None and d.max_model_len and w.kv_tokens_per_request > d.max_model_len:
        raise InputError(f, "workload.kv_tokens_per_request", f"{w.kv_tokens_per_request:,} exceeds "
                                                              f"deployment.max_model_len {d.max_model_len:,}, the "
                                                              "most one request holds")
    if w.lora is not None:
        if w.lora.popularity != "zipf" and w.lora.zipf_s != 1.0:
            raise InputError(f, "workload.lora.zipf_s", f"only for popularity: zipf, not {w.lora.popularity}")
        if not d.enable_lora:
            raise InputError(f, "workload.lora", "requests ask for LoRA adapters; "
                             "expected deployment.enable_lora: true")
        if w.lora.popularity == "trace" and w.trace is None:
            raise InputError(f, "workload.lora.popularity", "'trace' needs workload.trace (with an adapter column)")
        if w.lora.rank > d.max_lora_rank:
            raise InputError(f, "workload.lora.rank", f"{w.lora.rank} exceeds deployment.max_lora_rank "
                             f"{d.max_lora_rank}; vLLM refuses such adapters")
    if d.max_lora_rank not in LORA_RANKS:
        raise InputError(f, "deployment.max_lora_rank", f"expected one of vLLM's {', '.join(map(str, LORA_RANKS))}, "
                         f"got {d.max_lora_rank}")
    if d.max_cpu_loras is not None and d.max_cpu_loras < d.max_loras:
        raise InputError(f, "deployment.max_cpu_loras", f"expected at least max_loras ({d.max_loras}), "
                         f"got {d.max_cpu_loras}")
    if (d.stream_interval or 1) > 1 and d.speculative_config:
        raise InputError(f, "deployment.stream_interval", "with deployment.speculative_config is not modelled: the "
                                                          "server counts the interval in tokens, several a step "
                                                          "under speculative decoding; leave one of them out")
    if d.cuda_graph_batch_sizes == []:   # TensorRT-LLM's CudaGraphConfig generates its own sizes for an empty list
        raise InputError(f, "deployment.cuda_graph_batch_sizes", "expected at least one batch size, got []; "
                                                                  "leave the field out for steps run unpadded")
    spec = d.speculative_config
    if spec and spec.method == "draft_model" and not spec.model:
        raise InputError(f, "deployment.speculative_config.model", "missing; method draft_model needs a draft model")
    if spec and spec.model and spec.method in UNDRAFTED_METHODS:
        raise InputError(f, "deployment.speculative_config.model", f"not for method {spec.method}, which proposes "
                                                                   f"with {UNDRAFTED_METHODS[spec.method]}")
    _check_engine_fields(d, f, s.engine_source)
    if d.engine in SLOT_ENGINES and s.workload.structured_output is not None:
        raise InputError(f, "workload.structured_output", f"priced as vLLM's guided decoding (xgrammar); "
                                                          f"{ENGINE_NAMES[d.engine]}'s grammar sampling is not "
                                                          "modelled: expected none")
    _check_over_time(s, f)


def _check_trace_replay(s: Scenario) -> None:
    """A trace replays its own arrivals, lengths and prompts: the synthetic workload's fields do not apply."""
    w, f = s.workload, s.file
    if w.arrival.process != "trace" and s.source_of("workload.arrival.process") != "default":
        raise InputError(f, "workload.arrival.process", f"{excerpt(w.arrival.process)} is for synthetic arrivals; "
                                                        "a trace replays its own (expected trace, or leave it out)")
    for key in ("rate_per_s", *ARRIVAL_FIELDS):
        if getattr(w.arrival, key) is not None:
            raise InputError(f, f"workload.arrival.{key}", "not with workload.trace, which replays its own arrivals "
                                                           "(workload.trace.time_scale scales them)")
    for key, what in (("prompt_tokens", "lengths"), ("output_tokens", "lengths"), ("shared_prefix", "prompts")):
        if getattr(w, key) is not None:
            raise InputError(f, f"workload.{key}", f"not with workload.trace, which replays its own {what}")


def check_trace_file(path: Path, f: str | None, field_path: str) -> None:
    """A trace file the scenario names exists and is a regular file (a directory, a FIFO or a device is named as
    what it is: the trace reader would refuse it, or block on it)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise InputError(f, field_path, f"trace file {excerpt(str(path))} not found") from None
    except OSError as exc:
        raise InputError(f, field_path, f"trace file {excerpt(str(path))}: cannot read it "
                                        f"({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f, field_path, f"trace file {excerpt(str(path))} is {file_kind(info.st_mode)}, not a regular "
                                        "file; expected a trace file")


def check_prefix(sp: SharedPrefixSection | None, prompt: Distribution, path: str, f: str | None) -> None:
    """A shared prefix is the start of a prompt: at most the longest prompt the distribution draws."""
    if sp is None:
        return
    longest = length_bounds(prompt)[1]
    if longest is not None and sp.tokens > longest:
        raise InputError(f, f"{path}.shared_prefix.tokens", f"expected at most the longest prompt, {longest:,} "
                                                            f"tokens ({path}.prompt_tokens), got {sp.tokens:,}")


def _check_over_time(s: Scenario, f: str | None) -> None:
    """workload.schedule and autoscaling: what sizer models of capacity over time, the rest named."""
    w, a = s.workload, s.autoscaling
    if w.schedule is None:
        if a is not None:
            raise InputError(f, "autoscaling", "needs workload.schedule (the rate replicas follow)")
        return
    check_schedule(w.schedule, f)
    if w.schedule.trace is not None:        # read by plan --simulate; a plan, or simulate, refuses it as it would
        check_trace_file(scenario_dir(s) / w.schedule.trace.path, f, "workload.schedule.trace.path")
    if w.arrival.process == "closed":       # named as the process (which --concurrency may have set)
        raise InputError(f, "workload.arrival.process", "'closed': not with workload.schedule, which sets the rate")
    for wrong, why in ((w.trace is not None, "workload.trace: replay or schedule, not both (a trace as the time "
                                             "profile is workload.schedule.trace)"),
                       (s.deployment.replicas is not None, "deployment.replicas: autoscaling sizes the replicas"),
                       (s.deployment.disaggregated is not None,
                        "deployment.disaggregated: sizer does not model autoscaling of separate pools"),
                       (s.deployment.engine in SLOT_ENGINES,
                        f"deployment.engine {s.deployment.engine}: one local server, which sizer does not autoscale")):
        if wrong:
            raise InputError(f, "workload.schedule", f"not with {why}")
    if all(t is None for t in (s.slo.ttft_ms, s.slo.itl_ms, s.slo.tpot_ms, s.slo.e2e_ms)):
        raise InputError(f, "slo", "missing targets; workload.schedule sizes replicas to the SLO: expected ttft_ms, "
                                   "itl_ms, tpot_ms or e2e_ms")
    if a is not None and a.target_utilisation is not None and a.target != "utilisation":
        raise InputError(f, "autoscaling.target_utilisation", f"applies only with target: utilisation (target is "
                                                              f"{a.target}, the SLO rate per replica itself)")
    if a is not None and a.min_replicas > a.max_replicas:
        raise InputError(f, "autoscaling.min_replicas", f"expected at most max_replicas ({a.max_replicas}), "
                                                        f"got {a.min_replicas}")
    if a is not None and a.reserved_replicas is not None and a.reserved_replicas > a.max_replicas:
        raise InputError(f, "autoscaling.reserved_replicas", f"expected at most autoscaling.max_replicas "
                                                             f"({a.max_replicas}), got {a.reserved_replicas}")


# Deployment fields that only some engines have (every other field applies to all of them). llama.cpp and
# Ollama serve from slots of contiguous KV on one device: they have no paged blocks, token budget, chunking
# switch, prefix cache, preemption, speculative or disaggregated serving sizer could set, and no split.
SLOT_ENGINES = ("llama.cpp", "ollama")
BATCHING_ENGINES = ("vllm", "sglang", "tensorrt-llm", "lmdeploy", "tgi")
ENGINE_FIELDS = {
    **dict.fromkeys(("max_model_len", "block_size", "max_num_seqs", "max_num_batched_tokens", "enable_chunked_prefill",
                     "enable_prefix_caching", "preemption_mode", "speculative_config", "disaggregated",
                     "cuda_graph_batch_sizes"),
                    BATCHING_ENGINES),
    "stream_interval": ("vllm", "sglang", "tensorrt-llm"),
    "moe_backend": ("vllm",),
    "scheduler_recv_interval": ("sglang",),
    **dict.fromkeys(("parallel", "ctx_size", "kv_unified", "batch_size", "ubatch_size"), ("llama.cpp",)),
    **dict.fromkeys(("cache_type_k", "cache_type_v", "flash_attn"), SLOT_ENGINES),
    **dict.fromkeys(("num_ctx", "num_parallel", "keep_alive_s", "max_loaded_models", "load_bytes_per_s"), ("ollama",)),
}


def _check_engine_fields(d: DeploymentSection, f: str | None, engine_source: str = "scenario") -> None:
    for name, engines in ENGINE_FIELDS.items():
        if getattr(d, name) is not None and d.engine not in engines:
            raise InputError(f, f"deployment.{name}", f"is a setting of {', '.join(engines)}, "
                                                      f"not of deployment.engine {d.engine}"
                                                      + ("" if engine_source == "scenario" else
                                                         f" ({engine_source}; name deployment.engine to choose)"))
    if d.engine not in SLOT_ENGINES:
        return
    if d.gpu_memory_utilization != VLLM_GPU_MEMORY_UTILIZATION:
        raise InputError(f, "deployment.gpu_memory_utilization", f"is vLLM's share of GPU memory; {d.engine} takes "
                                                                 "none (it allocates what it needs up to the device's "
                                                                 "limit: hardware.memory_gb, "
                                                                 "hardware.gpu_working_set_fraction)")
    for name, value, plain in (("tensor_parallel_size", d.tensor_parallel_size, 1),
                               ("pipeline_parallel_size", d.pipeline_parallel_size, 1),
                               ("data_parallel_size", d.data_parallel_size, 1),
                               ("enable_expert_parallel", d.enable_expert_parallel, False),
                               ("enable_attention_dp", d.enable_attention_dp, False),
                               ("kv_cache_dtype", d.kv_cache_dtype, "auto")):
        if value != plain:
            raise InputError(f, f"deployment.{name}", f"expected {plain} for {d.engine} (sizer models one device "
                                                      "per server; its KV types are cache_type_k/cache_type_v)")
    if d.enable_lora:       # LoRA is priced as vLLM serves it (adapter slots in GPU memory, punica kernels)
        raise InputError(f, "deployment.enable_lora", f"vLLM's adapter slots; {ENGINE_NAMES[d.engine]}'s LoRA "
                                                      "adapters are not modelled: expected false")
    if d.engine == "ollama" and (d.cache_type_k or "f16") not in OLLAMA_CACHE_TYPES:
        raise InputError(f, "deployment.cache_type_k", f"expected one of {', '.join(OLLAMA_CACHE_TYPES)}: Ollama's "
                                                       f"OLLAMA_KV_CACHE_TYPE takes no {d.cache_type_k}")
    if d.engine == "ollama" and (d.cache_type_k or "f16") != (d.cache_type_v or "f16"):
        raise InputError(f, "deployment.cache_type_v", "expected the same type as cache_type_k: Ollama sets both "
                                                       "with one OLLAMA_KV_CACHE_TYPE")
    if d.batch_size is not None and d.ubatch_size is not None and d.ubatch_size > d.batch_size:
        raise InputError(f, "deployment.ubatch_size", f"{d.ubatch_size} exceeds batch_size {d.batch_size} "
                                                      "(a physical batch is part of a logical one)")


# What each length distribution reads: its parameters (each required but empirical's weights), and min and max,
# which clip any of them (uniform's bounds).
LENGTH_PARAMETERS = {"fixed": ("value",), "uniform": ("min", "max"), "normal": ("mean", "std"),
                     "lognormal": ("mean", "sigma"), "empirical": ("values", "weights")}


def _check_distribution(d: Distribution, path: str, f: str | None) -> None:
    reads = LENGTH_PARAMETERS[d.distribution]
    for key in ("value", "mean", "std", "sigma", "values", "weights"):
        if getattr(d, key) is not None and key not in reads:
            kinds = [kind for kind, keys in LENGTH_PARAMETERS.items() if key in keys]
            raise InputError(f, f"{path}.{key}", f"only for distribution: {', '.join(kinds)}, not {d.distribution}")
    needs = tuple(key for key in reads if key != "weights")
    for key in needs:
        if getattr(d, key) is None:
            raise InputError(f, f"{path}.{key}", f"missing; a {d.distribution} distribution needs {', '.join(needs)}")
    if d.min is not None and d.max is not None and d.min > d.max:
        raise InputError(f, f"{path}.min", f"expected min <= max, got {d.min:g} > {d.max:g}")
    # a mean outside the clip is never drawn near: the plan's mean length would be one the simulation never sends
    if d.distribution in ("normal", "lognormal") and d.mean is not None and not (
            (d.min is None or d.mean >= d.min) and (d.max is None or d.mean <= d.max)):
        bounds = f"[{d.min if d.min is not None else 1:g}, {f'{d.max:g}' if d.max is not None else 'inf'}]"
        raise InputError(f, f"{path}.mean", f"expected a mean within min and max {bounds}, got {d.mean:g}")
    if d.distribution == "empirical":
        if not d.values or any(not 1 <= v <= MAX_TOKENS for v in d.values):
            raise InputError(f, f"{path}.values", f"expected a non-empty list of lengths from 1 to {MAX_TOKENS:,}")
        if d.weights is not None:
            _check_weights(d.weights, len(d.values), f"{path}.weights", f)
    _check_within_clip(d, path, f)


def _check_within_clip(d: Distribution, path: str, f: str | None) -> None:
    """A fixed length, and every empirical value, within the distribution's own min and max: the clip would send
    another length than the one stated (fixed 1,000 with max 500 sends 500), so the plan's lengths would not be the
    ones the simulation sends. Each as the simulator takes it: a fixed value rounded (np.rint, half to even), an
    empirical one cut to whole tokens. One outside is refused, even of weight 0: a list the clip changes is not the
    list the user meant."""
    if d.distribution not in ("fixed", "empirical") or (d.min is None and d.max is None):
        return
    lo, hi = _clip(d)
    bounds = f"[{lo:,}, {f'{hi:,}' if hi is not None else 'inf'}]"
    stated = [("value", round(d.value), d.value)] if d.distribution == "fixed" else \
        [(f"values[{i}]", int(v), v) for i, v in enumerate(d.values)]
    for key, length, value in stated:
        if length < lo or (hi is not None and length > hi):
            sent = lo if length < lo else hi
            raise InputError(f, f"{path}.{key}", f"expected a length within min and max {bounds}, got {value:,g}: "
                                                 f"the clip would send {sent:,} tokens, not the length stated")


def _check_weights(weights: list[float], values: int, path: str, f: str | None) -> None:
    """An empirical distribution's weights: one a value, none negative, summing to a number above 0 that is finite
    (the simulator draws value i with chance weight i / sum: a sum past float's largest, 1.8e308, is inf and every
    chance 0)."""
    if len(weights) != values or any(x < 0 for x in weights):
        raise InputError(f, path, f"expected one non-negative weight per value ({values}), got "
                                  f"{excerpt(weights)}")
    total = sum(weights)
    if total == 0:
        raise InputError(f, path, "expected weights that are not all zero (each value is drawn with chance weight / "
                                  "sum of weights)")
    if not math.isfinite(total):
        raise InputError(f, path, f"expected weights that sum to a finite number (at most {sys.float_info.max:.3g}: "
                                  f"each value is drawn with chance weight / sum of weights), got a sum past it: "
                                  f"{excerpt(weights)}")


def length_bounds(d: Distribution) -> tuple[int, int | None]:
    """The shortest and longest length `d` draws (None: no longest), as the simulator draws it (sizer/sizing/
    workload.py `_lengths`, simulator/workload.py `Lengths.draw`): uniform's whole bounds, normal's and lognormal's
    clip (they reach any length within it), the others' atoms (`length_atoms`)."""
    atoms = length_atoms(d)
    return _clip(d) if atoms is None else (min(atoms), max(atoms))


def length_atoms(d: Distribution) -> dict[int, float] | None:
    """Length -> weight of a distribution of a few lengths (fixed, empirical, normal without spread), as the
    simulator draws them: rounded to whole tokens (empirical values cut to them), then clipped to [min, max], at
    least 1; lengths of weight 0 left out. None for the others (uniform, normal, lognormal)."""
    if d.distribution == "empirical":
        drawn = zip((int(v) for v in d.values), d.weights or [1.0] * len(d.values), strict=True)
    elif d.distribution == "fixed" or (d.distribution == "normal" and not d.std):
        drawn = [(round(d.value if d.distribution == "fixed" else d.mean), 1.0)]
    else:
        return None
    lo, hi = _clip(d)
    atoms: dict[int, float] = {}
    for x, weight in drawn:
        if weight > 0:
            x = max(lo, x) if hi is None else min(max(lo, x), hi)
            atoms[x] = atoms.get(x, 0.0) + weight
    return atoms


def _clip(d: Distribution) -> tuple[int, int | None]:
    """A length distribution's clip: [min, max], at least 1 (None: no max)."""
    return max(int(d.min or 1), 1), int(d.max) if d.max else None
