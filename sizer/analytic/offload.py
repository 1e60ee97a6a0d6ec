"""Partial offload (llama.cpp's `--n-gpu-layers`): some layers on the GPU, the rest in host memory.

llama.cpp (src/llama-model.cpp, load_tensors) keeps the token embedding on the CPU always, puts the
last `n_gpu_layers` repeating layers on the GPU, and the output layer (final norm and output matrix)
there too once n_gpu_layers exceeds the layer count; each layer's KV cache sits with the layer.
So the GPU holds those layers' weights and KV, the host the rest, and a decode step reads each part
at its own memory's bandwidth: the GPU's, and the host's at the CPU's achievable share. A prompt
step computes the host layers on the GPU, their weights copied over the host link (ggml's op
offload for batches of at least OP_OFFLOAD_MIN_BATCH tokens), else on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sizer.analytic.formats import WeightFormat, embedding_bytes_per_value, group_bytes, layer_bytes
from sizer.analytic.memory import KVLayout, WeightMemory
from sizer.analytic.weights import linear_groups, parameter_count
from sizer.errors import InputError
from sizer.inputs.hardware import HardwareSpec, host_link
from sizer.inputs.layers import LM_HEAD, VISION
from sizer.inputs.model_spec import ModelSpec

OP_OFFLOAD_MIN_BATCH = 32          # ggml-backend: ops on host weights move to the GPU from this batch size up
# The CPU's achievable share of host memory bandwidth in token generation: 13900K, DDR5-6400 (102.4 GB/s),
# llama 7B Q4_0 (3.83 GB) at 18.27 t/s = 70 GB/s = 0.68 (ggml-org/llama.cpp issue #34); as the CPU profiles.
HOST_BANDWIDTH_EFFICIENCY = 0.68


@dataclass(frozen=True)
class Offload:
    gpu_layers: int                    # repeating layers on the GPU (the last ones)
    layers: int
    output_on_gpu: bool
    gpu_weight_bytes: float
    host_weight_bytes: float           # embedding, the first layers, and the output layer unless offloaded
    host_layer_bytes: float            # what a step reads on the host: its layers and the output matrix if there
    gpu_kv_share: float                # share of the KV cache on the GPU (its layers' share)
    host_kv_bytes: float               # the host layers' KV: each layer's K and V sit with the layer
    host_memory_bytes: int
    host_read_bytes_per_s: float       # host bandwidth x HOST_BANDWIDTH_EFFICIENCY
    host_link_bytes_per_s: float       # prompt steps copy host weights to the GPU over this link
    ubatch_tokens: int                 # a step runs as graphs of this many tokens (llama.cpp's n_ubatch) each
    source: str

    @property
    def note(self) -> str:
        return (f"partial offload: {self.gpu_layers} of {self.layers} layers on the GPU"
                f"{' with the output layer' if self.output_on_gpu else ''} ({self.gpu_weight_bytes / 1e9:.2f} GB); "
                f"{self.host_weight_bytes / 1e9:.2f} GB of weights and {self.host_kv_bytes / 1e9:.2f} GB of KV "
                f"in host memory ({self.host_memory_bytes / 1e9:.2f} GB), the weights read at "
                f"{self.host_read_bytes_per_s / 1e9:.0f} GB/s ({self.source})")


def offload(m: ModelSpec, fmt: WeightFormat, hw: HardwareSpec, n_gpu_layers: int, group_size: int,
            file: str | None = None, gpus: int = 1, kv_bytes: float = 0.0,
            ubatch_tokens: int = 512) -> Offload | None:
    """The split llama.cpp makes with `n_gpu_layers`; None when every layer and the output are on the GPU.
    `kv_bytes`: the KV cache the server allocates, every layer's; the host layers' share of it stays in host memory
    (llama-kv-cache.cpp: each layer's K and V in the buffer of model.dev_layer(il)); `ubatch_tokens`: llama.cpp's
    n_ubatch (llama_decode runs each ubatch as its own graph, uploading the host weights for each)."""
    n = m.num_layers
    if hw.device_kind == "cpu":         # 0 layers on a GPU is what a CPU runs: every layer where it is
        if n_gpu_layers:
            raise InputError(file, "deployment.n_gpu_layers", f"{n_gpu_layers}: {hw.id} is a CPU: there is no GPU to "
                                                              "put layers on; expected 0 (every layer on the CPU) "
                                                              "or leave it out")
        return None
    if n_gpu_layers >= n + 1:           # llama.cpp takes min(n_gpu_layers, n_layer + 1) (llama-model.cpp load_tensors)
        return None
    if gpus > 1:
        raise InputError(file, "deployment.n_gpu_layers", f"partial offload across {gpus} GPUs (llama.cpp's "
                                                          "--tensor-split) is not modelled; one GPU per replica")
    if hw.host_memory_bytes is None or hw.host_memory_bandwidth_bytes_per_s is None:
        raise InputError(file, "deployment.n_gpu_layers", f"partial offload needs the host's memory; the {hw.id} "
                                                          "profile states none (host.memory_bytes, "
                                                          "host.memory_bandwidth_bytes_per_s)")
    first_gpu = n - n_gpu_layers
    per_layer = [0.0] * n
    output = 0.0
    for g in linear_groups(m):
        if g.kind == VISION:
            continue
        if g.kind == LM_HEAD:
            values, scales, _ = group_bytes(g, fmt, group_size, m)
            output += values + scales
            continue
        for i, nbytes in layer_bytes(g, fmt, group_size, m).items():     # GGUF: each layer's own bytes
            per_layer[i] += nbytes
    embedding = input_layer_bytes(m, fmt)
    if m.tie_word_embeddings:           # the output matrix is the embedding, kept where the output layer runs
        output += embedding
    gpu = sum(per_layer[first_gpu:])
    host_layers = sum(per_layer[:first_gpu]) + output
    host = host_layers + (0.0 if m.tie_word_embeddings else embedding)
    share = n_gpu_layers / n
    host_kv = kv_bytes * (1 - share)
    if host + host_kv > hw.host_memory_bytes:
        raise InputError(file, "deployment.n_gpu_layers", f"{n - n_gpu_layers} layers left on the host need "
                                                          f"{host / 2**30:.2f} GiB of weights and "
                                                          f"{host_kv / 2**30:.2f} GiB of their KV; the host has "
                                                          f"{hw.host_memory_bytes / 2**30:.2f} GiB ({hw.host_source})")
    link = host_link(hw)
    return Offload(n_gpu_layers, n, False, gpu, host, host_layers, share, host_kv, hw.host_memory_bytes,
                   hw.host_memory_bandwidth_bytes_per_s * HOST_BANDWIDTH_EFFICIENCY, link.bytes_per_s_per_direction,
                   ubatch_tokens, hw.host_source)


def all_gpu_layers(m: ModelSpec, hw: HardwareSpec) -> int:
    """llama.cpp's --n-gpu-layers (Ollama's num_gpu) for the plan sizer makes when the scenario names none: every
    repeating layer and the output layer on a GPU (layers + 1), none on a CPU device (there is no GPU: 0 keeps a
    llama.cpp built with a GPU backend from putting them on one)."""
    return 0 if hw.device_kind == "cpu" else m.num_layers + 1


def input_layer_bytes(m: ModelSpec, fmt: WeightFormat) -> float:
    """The token embedding: llama.cpp keeps it in host memory whatever n_gpu_layers (src/llama-model.cpp
    load_tensors: dev_input = cpu_dev, "very little benefit to offloading the input layer"), as Ollama's own
    engine does (ml/backend/ggml/ggml.go: "inputs always use cpu")."""
    return parameter_count(m).embedding * embedding_bytes_per_value(fmt, m)


def all_layers_on_gpu(m: ModelSpec, fmt: WeightFormat, weights: WeightMemory) -> WeightMemory:
    """The GPU's weights with every layer and the output there: all but the input layer; a tied embedding stays,
    as the output layer's own copy (llama-model-loader.cpp: TENSOR_DUPLICATED, placed with dev_output)."""
    if m.tie_word_embeddings:
        return weights
    return replace(weights, per_gpu_bytes=weights.per_gpu_bytes - input_layer_bytes(m, fmt))


def on_gpu(kv: KVLayout, share: float) -> KVLayout:
    """The part of the KV cache (and recurrent state) on the GPU: its layers' `share`."""
    return replace(kv, bytes_per_token_per_gpu=kv.bytes_per_token_per_gpu * share,
                   state_bytes_per_seq_per_gpu=kv.state_bytes_per_seq_per_gpu * share,
                   groups=tuple(replace(g, bytes_per_token_per_gpu=g.bytes_per_token_per_gpu * share)
                                for g in kv.groups))
