"""What a speculative proposer loads beside the target, per GPU: a draft model (method draft_model), the model's own
multi-token-prediction layers (mtp), an EAGLE or EAGLE-3 head, or Medusa's heads; each with what the plan says its
memory is taken as. A proposer's attention layers keep their KV in the target's blocks (vLLM's drafter registers
them in the one KV cache); its weights load beside the target's (sizer.analytic.memory.memory_budget).

vllm/v1/spec_decode/eagle.py load_model: an MTP or EAGLE drafter shares the target's embedding at pipeline-parallel
size 1 (else loads its own) and the target's output head unless it has its own (EAGLE-3's draft vocabulary). The
heads sit with the last pipeline stage, split over TP as the target (draft_tensor_parallel_size: the target's TP).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sizer.analytic.formats import FORMATS, WeightFormat
from sizer.analytic.memory import KVLayout, WeightMemory, kv_layout, kv_value_bytes, weight_memory
from sizer.analytic.parallel import ParallelConfig, tp_ways
from sizer.inputs.config_keys import DTYPE_BYTES
from sizer.inputs.model_spec import ModelSpec
from sizer.inputs.spec_head import EagleHead, MedusaHead

# vLLM's draft_id_to_target_id (EAGLE-3): one int64 a draft token
D2T_BYTES = 8


@dataclass(frozen=True)
class DraftModel:
    """A draft model's own description, which its roofline prices (method draft_model)."""
    model: ModelSpec
    weight_format: WeightFormat
    group_size: int


@dataclass(frozen=True)
class DraftMemory:
    what: str                          # "draft model", "MTP layers", "eagle3 head": as the plan names it
    basis: str                         # what its memory is taken as, and from where: the plan says it
    weights: WeightMemory              # split as the target (vLLM's draft_tensor_parallel_size: the target's TP)
    kv: KVLayout                       # in the target's KV dtype, in the same blocks
    own: DraftModel | None = None      # method draft_model: the model, priced by its own roofline


def draft_model_memory(m: ModelSpec, fmt: WeightFormat, group_size: int, kv_dtype: str,
                       parallel: ParallelConfig) -> DraftMemory:
    """A draft model (speculative_config.model, method draft_model): its own checkpoint, split as the target."""
    return DraftMemory("draft model", "the draft model's weights and KV counted (Memory per GPU)",
                       weight_memory(m, fmt, parallel, group_size), kv_layout(m, kv_dtype, parallel),
                       DraftModel(m, fmt, group_size))


def mtp_memory(m: ModelSpec, fmt: WeightFormat, group_size: int, kv_dtype: str,
               parallel: ParallelConfig) -> DraftMemory:
    """The MTP layers vLLM loads to draft (DeepSeekMTP and its kin, run by its EAGLE proposer): each a decoder layer
    shaped as the model's last, in the checkpoint's format, with its attention's KV in the target's blocks, plus
    enorm, hnorm and eh_proj, an unsharded nn.Linear(2 x hidden -> hidden) in the model's dtype
    (vllm/model_executor/models/deepseek_mtp.py); the embedding and the output head the target's."""
    module = replace(m, name=f"{m.name} MTP", layers=(m.layers[-1],) * m.mtp_layers, vocab_size=0, towers=(),
                     tie_word_embeddings=False, mtp_layers=0, params_official_total=None,
                     params_official_active=None)
    stage = replace(parallel, pp=1)
    h, dtype = m.hidden_size, DTYPE_BYTES[m.torch_dtype]
    fuse = m.mtp_layers * (2 * h * h + 2 * h)           # eh_proj, enorm and hnorm a layer, on every GPU
    weights = _plus_unconverted(weight_memory(module, fmt, stage, group_size), fmt, fuse, fuse, dtype)
    return DraftMemory("MTP layers", "the model's multi-token-prediction layers, which vLLM loads to draft: their "
                                     "weights and KV counted (Memory per GPU; the embedding and output head the "
                                     "target's)", weights, kv_layout(module, kv_dtype, stage))


def eagle_memory(head: EagleHead, target: ModelSpec, kv_dtype: str, parallel: ParallelConfig,
                 estimated: str = "") -> DraftMemory:
    """An EAGLE or EAGLE-3 head, unquantised in the target's dtype, its layers' KV in the target's blocks.

    EAGLE (vllm/model_executor/models/llama_eagle.py): its layers, the first without an input norm and none after
    the last; fc, an unsharded nn.Linear(2 x hidden -> hidden) without bias; HASS's two norms. EAGLE-3
    (llama_eagle3.py): its layers with a third norm each (hidden_norm) and a final one, the first's qkv_proj
    reading 2 x hidden; fc, a ReplicatedLinear (3 x the target's hidden -> hidden); its own output head over the
    draft vocabulary, split over TP (ParallelLMHead), and draft_id_to_target_id. Either keeps o_proj biases with
    attention biases; an embedding of its own where it cannot share the target's. `estimated`: why the head is
    estimated from the target's shapes (`target_shaped`), for the plan."""
    fmt = head_format(target)
    stage = replace(parallel, pp=1)
    h, eagle3 = head.hidden_size, head.method == "eagle3"
    norms = [3] * len(head.layers) if eagle3 else [1] + [2] * (len(head.layers) - 1)
    module = ModelSpec(f"{target.name} {head.method} head", head.method, h, 0, target.max_position_embeddings,
                       tuple(replace(layer, norms=n) for layer, n in zip(head.layers, norms, strict=True)),
                       torch_dtype=target.torch_dtype)
    # beyond what weight_memory counts (the layers and one final norm, which EAGLE lacks), on every GPU ...
    replicated = head.fc_input_size * h + (2 * h if head.input_norms else 0) - (0 if eagle3 else h)
    # ... and split over TP: EAGLE-3's first qkv_proj reading the embedding beside the hidden state (its q, k and v
    # once more, sharded as they are), its output head, an embedding of its own
    qkv = [lin for lin in head.layers[0].mixer.linears(h) if lin.module != "self_attn.o_proj"] if eagle3 else []
    own_embedding = head.vocab_size * h if head.own_embedding or parallel.pp > 1 else 0
    split = sum(lin.params for lin in qkv) + head.output_vocab * h + own_embedding
    split_per_gpu = (sum(lin.params / tp_ways(lin.kv_heads, stage.tp) for lin in qkv)
                     + (head.output_vocab * h + own_embedding) / stage.tp)
    weights = _plus_unconverted(_plus_unconverted(weight_memory(module, fmt, stage), fmt, replicated + split,
                                                  replicated + split_per_gpu, fmt.bits / 8),
                                fmt, head.output_vocab, head.output_vocab, D2T_BYTES)
    embedding = (f"its own embedding ({head.vocab_size:,} x {h:,}: not the target's shape, so not shared)"
                 if head.own_embedding else
                 "its own embedding: vLLM shares the target's only at pipeline_parallel_size 1" if own_embedding
                 else "the embedding the target's")
    if head.config_file is None:
        shapes = ("one decoder layer of the target's shapes reading 2 x hidden, fc (3 x hidden -> hidden) and its own "
                  "output head over the target's vocabulary (an upper bound: published heads often keep 32,000 "
                  "tokens)" if eagle3 else
                  "one decoder layer of the target's shapes and fc (2 x hidden -> hidden), as the published EAGLE "
                  "heads")
    else:
        layers = f"{len(head.layers)} decoder layer{'s' if len(head.layers) > 1 else ''} of hidden {h:,}"
        fc = f"fc ({head.fc_input_size:,} -> {h:,})" if head.fc_input_size else "no fc"
        shapes = (f"the head's own config ({head.config_file}) as vLLM's "
                  + (f"llama_eagle3.py builds it: {layers} (the first reading 2 x hidden), {fc} and its own output "
                     f"head over {head.output_vocab:,} draft tokens with their map to the target's vocabulary"
                     if eagle3 else
                     f"llama_eagle.py builds it: {layers} and {fc}"))
    shared = embedding if eagle3 else ("the embedding and output head the target's" if not own_embedding
                                       else f"{embedding}; the output head the target's")
    basis = (f"{shapes}, unquantised: weights and KV counted (Memory per GPU; {shared})"
             + (f". An estimate: {estimated}" if estimated else ""))
    return DraftMemory(f"{head.method} head", basis, weights, kv_layout(module, kv_dtype, stage))


def medusa_memory(head: MedusaHead, target: ModelSpec, num_speculative_tokens: int, kv_dtype: str,
                  parallel: ParallelConfig) -> DraftMemory:
    """Medusa's heads (vllm/model_executor/models/medusa.py), unquantised in the target's dtype, caching no KV.
    vLLM builds num_speculative_tokens heads, whatever the config states (SpeculativeConfig sets the draft config's
    num_lookahead_tokens, which MedusaConfig keeps as num_heads; vllm/config/speculative.py): each a ResidualBlock
    of `layers_per_head` unsharded nn.Linear(hidden, hidden) (their biases with medusa_fc_bias), and an output head
    (ParallelLMHead, split over TP), one they all share under original_lm_head. The output heads cover the
    truncated vocabulary while the config's vocab_size is the target's; vLLM sets both to the target's otherwise
    (FasterDecoding's heads state none)."""
    fmt = head_format(target)
    h, k, tp = head.hidden_size, num_speculative_tokens, parallel.tp
    rows = head.truncated_vocab_size if head.vocab_size == target.vocab_size else target.vocab_size
    residual = k * head.layers_per_head * (h * h + (h if head.fc_bias else 0))
    outputs = (1 if head.shared_lm_head else k) * rows * h
    weights = _plus_unconverted(_no_weights(fmt), fmt, residual + outputs, residual + outputs / tp, fmt.bits / 8)
    layers = f"{head.layers_per_head} residual layer{'s' if head.layers_per_head != 1 else ''}"
    basis = (f"the heads' own config ({head.config_file}), as vLLM's medusa.py builds them: {k} heads "
             f"(num_speculative_tokens; the config states {head.stated_heads}) of {layers} (hidden x hidden"
             f"{', with biases' if head.fc_bias else ''}) and "
             f"{'one output head they share' if head.shared_lm_head else 'an output head each'} over {rows:,} "
             "tokens, unquantised: weights counted (Memory per GPU; the heads cache no KV)")
    nbytes = kv_value_bytes(kv_dtype)
    return DraftMemory("medusa heads", basis, weights,
                       KVLayout(kv_dtype, nbytes, 0, 0, (), 0, 0, 0.0, "no layer caches KV"))


def head_format(target: ModelSpec) -> WeightFormat:
    """A head's weights: unquantised, in the target's 16-bit dtype (the draft's ModelConfig takes the target's
    dtype): float16 for a float16 checkpoint, else bfloat16."""
    return FORMATS["fp16" if target.torch_dtype == "float16" else "bf16"]


def _no_weights(fmt: WeightFormat) -> WeightMemory:
    return WeightMemory(fmt.name, fmt.description, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, "architecture")


def _plus_unconverted(w: WeightMemory, fmt: WeightFormat, params: int, per_gpu_params: float,
                      value_bytes: float) -> WeightMemory:
    """`w` with `params` more parameters left unconverted (`value_bytes` each), `per_gpu_params` of them on each
    GPU: a proposer's tensors outside its decoder layers (MTP's eh_proj, EAGLE's fc, output heads, d2t)."""
    return replace(w, parameters=w.parameters + params, parameters_active=w.parameters_active + params,
                   ideal_bytes=w.ideal_bytes + params * fmt.bits / 8, total_bytes=w.total_bytes + params * value_bytes,
                   unconverted_bytes=w.unconverted_bytes + params * value_bytes,
                   per_gpu_bytes=w.per_gpu_bytes + per_gpu_params * value_bytes)
