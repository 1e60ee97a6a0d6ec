"""A speculative proposer's head (speculative_config methods eagle, eagle3 and medusa), read from its own
config.json as vLLM reads it: what the head's weights and KV depend on, and nothing else. The memory they take is
counted in sizer.analytic.proposer.

- EAGLE: vllm/model_executor/models/llama_eagle.py (EagleLlamaForCausalLM): the config's num_hidden_layers Llama
  decoder layers of its own shapes and fc (2 x hidden -> hidden). vLLM reads a head's `bias` as the attention's
  (LlamaAttention: attention_bias or bias); HASS heads (add_para_norm) add two norms.
- EAGLE-3: vllm/model_executor/models/llama_eagle3.py (Eagle3LlamaForCausalLM): its layers, the first reading
  2 x hidden (the token's embedding beside the fused hidden state), fc (3 x target_hidden_size, else 3 x hidden
  -> hidden; none when eagle_config.use_aux_hidden_state is false) and its own output head over draft_vocab_size
  (else vocab_size) tokens with draft_id_to_target_id, one int64 a draft token (d2t; t2d is skipped on load).
- Medusa: vllm/model_executor/models/medusa.py over vllm/transformers_utils/configs/medusa.py (MedusaConfig): the
  residual layers of each head (medusa_num_layers, or num_hidden_layers) and the heads' output projections;
  hidden_size and vocab_size default to MedusaConfig's 4,096 and 32,001 (FasterDecoding's heads state neither).

A head reads the target's hidden states, so one of another width cannot serve beside it: refused, naming the file
and the field, as is a Medusa config that does not say what it is.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sizer.errors import InputError
from sizer.inputs.checkpoint import Checkpoint
from sizer.inputs.config_keys import KEYS, MAX_HIDDEN, MAX_LAYERS, MAX_VOCAB
from sizer.inputs.layers import Attention, DenseFFN, Layer
from sizer.inputs.model_spec import ModelSpec, from_hf_config
from validation.schema import Key, read_key

# The target's hidden sizes an EAGLE head's fc joins: the token's embedding and the target's last hidden state
# (EAGLE), three of the target's hidden states (EAGLE-3)
EAGLE_FC_INPUTS = {"eagle": 2, "eagle3": 3}
# MedusaConfig's defaults where a config states no value (vllm/transformers_utils/configs/medusa.py)
MEDUSA_DEFAULT_HIDDEN = 4096
MEDUSA_DEFAULT_VOCAB = 32001

# An EAGLE head's own keys, read here; the rest of its config is a Llama config, read by from_hf_config
EAGLE_KEYS = {k.name: k for k in (
    Key("draft_vocab_size", int, ge=1, le=MAX_VOCAB),
    Key("target_hidden_size", int, ge=1, le=MAX_HIDDEN),
    Key("eagle_config", dict),
    Key("add_para_norm", bool, default=False),
    Key("bias", bool, default=False),
    Key("norm_before_residual", bool),      # where EAGLE-3 takes its residual: no parameter
)}
USE_AUX = Key("use_aux_hidden_state", bool, default=True)
# vLLM's MedusaConfig.from_pretrained renames a key naming "num" and "heads" (or "layers") to num_heads
# (num_hidden_layers): FasterDecoding's heads say medusa_num_heads and medusa_num_layers
MEDUSA_KEYS = {k.name: k for k in (
    Key("medusa_num_heads", int, ge=1, le=MAX_LAYERS, aliases=("num_heads",)),
    Key("medusa_num_layers", int, ge=0, le=MAX_LAYERS, aliases=("num_hidden_layers",)),
    Key("hidden_size", int, ge=1, le=MAX_HIDDEN, default=MEDUSA_DEFAULT_HIDDEN),
    Key("vocab_size", int, ge=1, le=MAX_VOCAB, default=MEDUSA_DEFAULT_VOCAB),
    Key("truncated_vocab_size", int, ge=1, le=MAX_VOCAB),
    Key("medusa_fc_bias", bool, default=False),
    Key("original_lm_head", bool, default=False),
)}


@dataclass(frozen=True)
class EagleHead:
    """What an EAGLE or EAGLE-3 head is made of: read from its config (`read_head`) or estimated from the target's
    first layer (`target_shaped`)."""
    method: str                  # "eagle" or "eagle3"
    config_file: str | None      # the head's config.json; None: estimated from the target's shapes
    layers: tuple[Layer, ...]    # its decoder layers (Llama's), each as its config states it (two norms)
    hidden_size: int
    vocab_size: int              # its embedding's rows, where it loads one of its own
    fc_input_size: int           # fc: this many values -> hidden_size; 0: no fc
    output_vocab: int            # EAGLE-3: its own output head's rows (draft_vocab_size); 0: EAGLE's is the target's
    input_norms: bool            # HASS (add_para_norm): a norm each on the embedding and on the target's hidden state
    # an embedding of another shape than the target's (another width, EAGLE-3's, or another vocabulary): vLLM's
    # eagle.py load_model shares the target's only where the shapes match, else the head loads its own
    own_embedding: bool


@dataclass(frozen=True)
class MedusaHead:
    """Medusa's heads as vLLM builds them from their config (vllm/model_executor/models/medusa.py)."""
    config_file: str
    stated_heads: int            # medusa_num_heads; vLLM builds num_speculative_tokens heads whatever it says
    layers_per_head: int         # ResidualBlock layers: nn.Linear(hidden, hidden) each
    hidden_size: int
    vocab_size: int              # as stated (32001 when not: MedusaConfig's default)
    truncated_vocab_size: int    # the output heads' rows while vocab_size is the target's
    fc_bias: bool                # medusa_fc_bias: the residual layers' biases
    shared_lm_head: bool         # original_lm_head: one output head serves every head


SpecHead = EagleHead | MedusaHead


def read_head(ckpt: Checkpoint, method: str, target: ModelSpec) -> SpecHead:
    """The head of speculative_config `method` (eagle, eagle3 or medusa) that `ckpt` holds, to serve beside
    `target`."""
    config, file = ckpt.config, ckpt.config_file
    if method == "medusa":
        return _medusa(config, file, target)
    got = {name: read_key(key, config, file)[0] for name, key in EAGLE_KEYS.items()}
    if method == "eagle":
        # EAGLE-3's own keys: its draft vocabulary, the target's width its fc reads, its auxiliary hidden states;
        # vLLM's llama_eagle.py builds none of them, and an EAGLE-3 checkpoint does not load into it
        for key in ("draft_vocab_size", "target_hidden_size", "eagle_config"):
            if got[key] is not None:
                raise InputError(file, key, "an EAGLE-3 head's key: this is an eagle3 head; expected "
                                            "speculative_config.method eagle3 for it (or an EAGLE head's config)")
    aux = got["eagle_config"] is None or read_key(USE_AUX, got["eagle_config"], file, "eagle_config.")[0]
    biased = bool(got["bias"] or read_key(KEYS["attention_bias"], config, file)[0])
    body_config = {k: v for k, v in config.items() if k not in EAGLE_KEYS}
    # both heads' layers are vLLM's LlamaDecoderLayer (llama_eagle3.py's subclasses it), which reads `bias` as
    # attention_bias: biases on q, k and v too
    body_config["attention_bias"] = biased
    body = from_hf_config(body_config, name=ckpt.name, file=file)
    if body.quantization is not None:
        raise InputError(file, "quantization_config", f"a quantised {method} head is not modelled; expected an "
                                                      "unquantised head (its weights in the target's dtype)")
    if body.towers or not all(isinstance(layer.mixer, Attention) and isinstance(layer.ffn, DenseFFN)
                              for layer in body.layers):
        raise InputError(file, "architectures", f"expected the Llama decoder layers of an {method} head (attention "
                                                "and a dense MLP each, vLLM's llama_eagle)")
    if len(body.layers) >= target.num_layers:
        # a head drafts with a layer or two beside the target; a model as deep as it is a draft model (or the target
        # itself, named by mistake)
        raise InputError(file, "num_hidden_layers", f"{len(body.layers)}: as many decoder layers as {target.name} "
                                                    f"({target.num_layers}), a whole model, not an {method} head; "
                                                    "expected the head's own config (or method draft_model for a "
                                                    "draft model)")
    h, width = body.hidden_size, target.hidden_size
    eagle3 = method == "eagle3"
    if eagle3 and (got["draft_vocab_size"] or 0) > body.vocab_size:
        raise InputError(file, "draft_vocab_size", f"{got['draft_vocab_size']} is above vocab_size {body.vocab_size}; "
                                                   f"expected at most {body.vocab_size} (the draft vocabulary is a "
                                                   "subset of the target's, mapped back by d2t)")
    # EAGLE-3's fc reads the target's hidden states at target_hidden_size, its layers their own width (then it keeps
    # its own embedding); EAGLE's fc reads the embedding beside them at its own width
    field, reads = ("target_hidden_size", got["target_hidden_size"]) if eagle3 and got["target_hidden_size"] \
        else ("hidden_size", h)
    if reads != width:
        raise InputError(file, field, f"{reads}: the head reads the hidden states of {target.name}, whose "
                                      f"hidden_size is {width}; expected {width} (a head trained for this model)")
    # vLLM's LlamaDecoderLayer biases o_proj with q, k and v whatever the head's model_type says
    layers = tuple(replace(layer, mixer=replace(layer.mixer, o_bias=biased)) for layer in body.layers)
    return EagleHead(method, file, layers, h, body.vocab_size,
                     EAGLE_FC_INPUTS[method] * reads if aux or not eagle3 else 0,
                     (got["draft_vocab_size"] or body.vocab_size) if eagle3 else 0,
                     got["add_para_norm"], h != width or body.vocab_size != target.vocab_size)


def target_shaped(method: str, target: ModelSpec) -> EagleHead | None:
    """An EAGLE or EAGLE-3 head estimated as the published ones are built (EAGLE-LLaMA3.1-Instruct-8B,
    EAGLE3-LLaMA3.1-Instruct-8B): one decoder layer of the target's first layer's shapes, fc over the target's
    hidden size, EAGLE-3's output head over the target's whole vocabulary (an upper bound: published heads often
    keep 32,000 tokens). None for a target whose first layer is not attention and a dense MLP."""
    first = target.layers[0]
    if target.is_moe or not isinstance(first.mixer, Attention) or not isinstance(first.ffn, DenseFFN):
        return None
    h = target.hidden_size
    return EagleHead(method, None, (first,), h, target.vocab_size, EAGLE_FC_INPUTS[method] * h,
                     target.vocab_size if method == "eagle3" else 0, False, False)


def _medusa(config: dict[str, Any], file: str, target: ModelSpec) -> MedusaHead:
    if config.get("quantization_config") is not None:
        raise InputError(file, "quantization_config", "quantised Medusa heads are not modelled; expected unquantised "
                                                      "heads (their weights in the target's dtype)")
    got = {name: read_key(key, config, file)[0] for name, key in MEDUSA_KEYS.items()}
    for name in ("medusa_num_heads", "medusa_num_layers"):
        if got[name] is None:
            raise InputError(file, name, f"missing; expected an integer ({name} or {MEDUSA_KEYS[name].aliases[0]}): "
                                         "what a Medusa head's config states")
    h, vocab = got["hidden_size"], got["vocab_size"]
    if h != target.hidden_size:
        unstated = "" if "hidden_size" in config else f" (not stated: MedusaConfig takes {MEDUSA_DEFAULT_HIDDEN})"
        raise InputError(file, "hidden_size", f"{h}{unstated}: the heads read the hidden states of {target.name}, "
                                              f"whose hidden_size is {target.hidden_size}; expected "
                                              f"{target.hidden_size}")
    truncated = got["truncated_vocab_size"] or vocab
    if truncated > vocab:
        raise InputError(file, "truncated_vocab_size", f"{truncated} is above vocab_size {vocab}; expected at most "
                                                       f"{vocab} (the most frequent tokens of the vocabulary)")
    return MedusaHead(file, got["medusa_num_heads"], got["medusa_num_layers"], h, vocab, truncated,
                      got["medusa_fc_bias"], got["original_lm_head"])
