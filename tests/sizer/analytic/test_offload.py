"""Partial offload (llama.cpp's n_gpu_layers) and the llama.cpp refusals: layers beyond the model, a context
the device cannot hold."""

from __future__ import annotations

import pytest

from sizer.analytic.formats import FORMATS
from sizer.analytic.memory import weight_memory
from sizer.analytic.offload import HOST_BANDWIDTH_EFFICIENCY, offload
from sizer.analytic.parallel import ParallelConfig
from sizer.errors import InputError
from sizer.inputs.hardware import load_hardware
from sizer.inputs.model_spec import load_model
from sizer.inputs.scenario import load_scenario
from sizer.sizing.resolve import resolve
from sizer.timing.roofline import decode_batch
from sizer.timing.step_model import roofline_for

SCENARIO = """
model: {model}
hardware: rtx-4090
deployment: {{engine: llama.cpp, quantization: {weights}, ctx_size: {context}, parallel: 1, n_gpu_layers: {ngl}}}
workload:
  arrival: {{process: poisson, rate_per_s: 0.05}}
  prompt_tokens: {{distribution: fixed, value: 512}}
  output_tokens: {{distribution: fixed, value: 128}}
"""


def scenario(tmp_path, model="llama-3.1-70b", context=8192, ngl=35, weights="q4_k_m"):
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(model=model, context=context, ngl=ngl, weights=weights))
    return load_scenario(path)


def test_split_conserves_the_weights_and_keeps_the_embedding_on_the_host():
    """70B in Q4_K_M (80 layers), 35 on a 4090: GPU + host bytes = the whole file; the token embedding
    (128256 x 8192 values in Q4_K, 144 bytes per 256) and the output matrix stay on the host."""
    m, fmt = load_model("llama-3.1-70b"), FORMATS["q4_k_m"]
    o = offload(m, fmt, load_hardware("rtx-4090"), 35, 128)
    total = weight_memory(m, fmt, ParallelConfig()).total_bytes
    vectors = (2 * 80 + 1) * 8192 * 4                    # norms in F32: not layer matrices
    assert o.gpu_weight_bytes + o.host_weight_bytes + vectors == pytest.approx(total, rel=1e-9)
    assert o.host_weight_bytes - o.host_layer_bytes == pytest.approx(128256 * 8192 / 256 * 144)
    assert 35 / 80 * 0.95 < o.gpu_weight_bytes / (o.gpu_weight_bytes + o.host_layer_bytes) < 35 / 80 * 1.05


def test_decode_reads_the_host_layers_at_host_bandwidth(tmp_path):
    """A decode step cannot beat the host part over the host's achievable bandwidth (89.6 GB/s x 0.68)."""
    r = resolve(scenario(tmp_path))
    step = roofline_for(r).step_time(decode_batch(1, 512))
    assert step > r.offload.host_layer_bytes / (89.6e9 * HOST_BANDWIDTH_EFFICIENCY)
    assert r.memory.weights_bytes == pytest.approx(r.offload.gpu_weight_bytes)


def test_all_layers_and_the_output_is_no_offload():
    assert offload(load_model("llama-3.1-8b"), FORMATS["q4_k_m"], load_hardware("rtx-4090"), 33, 128) is None


def test_more_gpu_layers_than_the_model_has_is_all_of_them(tmp_path):
    """-ngl 99, the usual spelling of "all": llama.cpp takes min(n_gpu_layers, n_layer + 1) (llama-model.cpp
    load_tensors, act_gpu_layers): 80 layers + the output layer = 81, no offload, and the plan says so."""
    r = resolve(scenario(tmp_path, ngl=99))
    assert r.offload is None
    assert any("n_gpu_layers 99" in note and "so 81" in note for note in r.link_notes)


def test_a_context_larger_than_memory_is_refused(tmp_path):
    """On a 4090 (24 GiB; llama.cpp takes no utilisation share): 8B Q8_0 (7.95 GiB) with 65536 tokens x 128 KiB =
    8 GiB of KV fits; 131072 tokens = 16 GiB does not, after the weights, the compute buffer and 1 GiB of CUDA
    context (16 + 7.95 + 1 > 24)."""
    assert resolve(scenario(tmp_path, model="llama-3.1-8b", context=65536, ngl=33, weights="q8_0")).memory.fits
    with pytest.raises(InputError) as err:
        resolve(scenario(tmp_path, model="llama-3.1-8b", context=131072, ngl=33, weights="q8_0"))
    assert err.value.field == "deployment.ctx_size" and "16.00 GiB" in str(err.value)


def test_the_host_layers_kv_is_counted_in_host_memory(tmp_path):
    """llama.cpp keeps each layer's K and V with the layer (src/llama-kv-cache.cpp: buft of model.dev_layer(il)).
    70B (80 layers, 320 KiB of f16 KV a token) with 4 layers on a 4090: 76/80 of 131072 x 320 KiB = 38 GiB of KV in
    host memory besides 37.56 GiB of weights: more than the profile's 64 GiB host. At 32768 tokens: 9.5 GiB."""
    with pytest.raises(InputError) as err:
        resolve(scenario(tmp_path, context=131072, ngl=4))
    assert err.value.field == "deployment.n_gpu_layers" and "38.00 GiB of their KV" in str(err.value)
    o = resolve(scenario(tmp_path, context=32768, ngl=4)).offload
    assert o.host_kv_bytes == pytest.approx(76 / 80 * 32768 * 327680)


def test_a_prompt_step_uploads_the_host_layers_once_per_ubatch(tmp_path):
    """llama_decode runs each ubatch (n_ubatch, default 512: tools/server -ub) as its own graph, and ggml's op offload
    copies the host weights to the GPU for each of 32 tokens or more (ggml-cuda.cu offload_op, min_batch_size 32).
    2048 tokens: 4 uploads; 2058: 4 and a ubatch of 10 the CPU runs (one host read); 100: 1 upload."""
    r = resolve(scenario(tmp_path))
    o, model = r.offload, roofline_for(r)
    upload, read = o.host_layer_bytes / o.host_link_bytes_per_s, o.host_layer_bytes / o.host_read_bytes_per_s
    assert o.ubatch_tokens == 512
    assert model._host_layers_s(2048) == pytest.approx(4 * upload)
    assert model._host_layers_s(2058) == pytest.approx(4 * upload + read)
    assert model._host_layers_s(100) == pytest.approx(upload)
    assert model._host_layers_s(1) == pytest.approx(read)
