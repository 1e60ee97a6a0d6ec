"""Weight formats: the format to size a model in, and the bytes each matrix takes in it.

A format is its name, its bits and a scheme (sizer.inputs.quantization.Quantization): the layout
of its scales and zeros, what the activations run in, and which modules stay unquantised. A
checkpoint's own format carries the checkpoint's scheme; a format named on the command line carries
sizer's defaults for it (`FORMATS`). Matrices are counted exactly: scales per tensor, row, group or
block, and the layers a checkpoint leaves unquantised (matched by name, sizer.analytic.module_names)
at 16 bits, so a group of matrices partly excluded counts partly. A GGUF preset gives each tensor the
type llama.cpp's quantizer rules pick; a .gguf file given as the model is counted from its own tensor
table instead, each matrix's tensors found by llama.cpp's names (`_table_tensors`), layer by layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sizer.analytic.module_names import mentions_vision, quantised_share
from sizer.analytic.parallel import ParallelConfig
from sizer.analytic.weights import LinearGroup, linear_groups
from sizer.errors import InputError
from sizer.inputs import gguf_types as gg
from sizer.inputs.layers import (
    ATTENTION,
    EXPERT,
    LM_HEAD,
    MLP,
    ROUTER,
    SHARED_EXPERT,
    VISION,
    Attention,
    LatentAttention,
)
from sizer.inputs.model_spec import ModelSpec
from sizer.inputs.quantization import Quantization

PLAIN = ("bf16", "fp16", "fp32")
GROUPED = ("awq", "gptq")        # integer formats whose group size the scenario may set
# The matrices tensor parallelism splits by their inputs (vLLM's RowParallelLinear; the experts' down_proj when TP
# slices them): each GPU holds in_features / TP of their inputs
ROW_PARALLEL = ("o_proj", "down_proj", "out_proj")
# vLLM's dtype=auto serves float32 checkpoints in float16, bfloat16 ones in bfloat16.
DTYPE_FORMATS = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp16", "half": "fp16"}
UNCONVERTED_KINDS = {ROUTER, LM_HEAD}   # vLLM builds routers and the lm_head without a quantisation method
# Other modules vLLM builds without one, whatever the scheme: DSA's indexer weights_proj (vllm/model_executor/models/
# deepseek_v2.py, Indexer: ReplicatedLinear(..., quant_config=None), "weight_proj is not quantized")
UNCONVERTED_MODULES = ("self_attn.indexer.weights_proj",)


@dataclass(frozen=True)
class WeightFormat:
    name: str
    bits: int                    # bits per stored value of a converted matrix
    compute: str                 # the GEMMs' input format ("bf16" when the activations stay 16-bit)
    description: str
    scheme: Quantization         # scales, activations, unquantised modules: the checkpoint's or sizer's defaults
    gguf: gg.Preset | None = None   # a llama.cpp preset: every tensor's GGUF type by llama.cpp's rules

    @property
    def from_checkpoint(self) -> bool:
        return bool(self.scheme.method)

    @property
    def read_by_engine(self) -> bool:
        """The checkpoint states the format where the engine reads it unasked (not a GPTQ/AWQ sidecar, which vLLM
        reads only when `--quantization` names the method: Quantization.needs_flag)."""
        return self.from_checkpoint and not self.scheme.needs_flag


def _format(name: str, bits: int, description: str, scheme: Quantization) -> WeightFormat:
    compute = name if name in PLAIN else "bf16" if scheme.weight_only else scheme.activations
    return WeightFormat(name, bits, compute, description, scheme)


def _default(name: str, bits: int, description: str, **scheme) -> WeightFormat:
    return _format(name, bits, description, Quantization("", name, bits, source=f"sizer's defaults for {name}",
                                                         **scheme))


FORMATS = {
    "bf16": _default("bf16", 16, "bfloat16, 2 bytes per value"),
    "fp16": _default("fp16", 16, "float16, 2 bytes per value"),
    "fp32": _default("fp32", 32, "float32, 4 bytes per value"),
    "fp8": _default("fp8", 8, "FP8 E4M3 weights and activations; fp32 weight and input scale per tensor",
                    activations="fp8", static_activations=True),
    "int8": _default("int8", 8, "INT8 weights and activations (W8A8); fp32 scale per output channel",
                     scales="channel", activations="int8"),
    "awq": _default("awq", 4, "AWQ 4-bit weights; fp16 scale and 4-bit zero per group along the input; "
                    "activations 16-bit", scales="group", scale_bytes=2, zero_points=True),
    "gptq": _default("gptq", 4, "GPTQ 4-bit weights; fp16 scale and 4-bit zero per group along the input; "
                     "activations 16-bit", scales="group", scale_bytes=2, zero_points=True),
    "nvfp4": _default("nvfp4", 4, "NVFP4: 4-bit floats in blocks of 16 with an FP8 (E4M3) scale each, "
                      "plus fp32 per-tensor scales", scales="group", group_size=16, scale_bytes=1,
                      activations="fp4", static_activations=True),
    "mxfp4": _default("mxfp4", 4, "MXFP4: 4-bit floats in blocks of 32 with a power-of-two (E8M0, 1 byte) scale each",
                      scales="group", group_size=32, scale_bytes=1, activations="fp4"),
}


def _gguf(p: gg.Preset) -> WeightFormat:
    base = gg.TYPES[p.base]
    bits = int(base.bits_per_value) if base.quantized else 16
    rules = "; ".join(f"{r.category} {r.type} ({r.when.replace('_', ' ')})" for r in p.rules)
    description = (f"GGUF {p.name}: {base.name} blocks of {base.block_values} values in {base.block_bytes} bytes "
                   f"({base.bits_per_value:g} bits per value)" + (f"; {rules}" if rules else "")
                   + "; output matrix Q6_K; norms F32")
    scheme = Quantization("", p.key, bits, source=f"llama.cpp's {p.name} rules")
    return WeightFormat(p.key, bits, "bf16" if base.quantized else "fp16", description, scheme, p)


# llama.cpp's presets under their names lower-cased; BF16 is sizer's bf16 (2 bytes per value either way)
GGUF_FORMATS = {k: _gguf(p) for k, p in gg.PRESETS.items() if k not in FORMATS}
FORMATS.update(GGUF_FORMATS)


def checkpoint_format(q: Quantization) -> WeightFormat:
    """The checkpoint's own format: its bits, scales, activations and unquantised modules; a .gguf file's, its
    tensors (`_gguf_file`)."""
    if q.method == "gguf":
        return _gguf_file(q)
    return _format(q.format, q.bits or FORMATS[q.format].bits, f"{q.summary} (read from {q.source})", q)


def _gguf_file(q: Quantization) -> WeightFormat:
    """A .gguf file's own format: every tensor at the type and bytes its tensor table states (per-tensor overrides and
    importance-matrix mixes as the file holds them, not its preset's rules), named after its preset; a file type that
    is no preset sizer knows is "gguf", its preset then the type holding most of its bytes (for how llama.cpp runs
    it: sizer.timing.llamacpp)."""
    table = q.gguf_tensors
    preset = gg.PRESETS.get(q.format)
    if preset is None:          # file_type -1: a stand-in (the file's own, if it states one, is in q.source)
        main = table.main_type.name
        preset = gg.Preset(f"{main} mix", -1, main)
    base = gg.TYPES[preset.base]
    description = f"GGUF {preset.name}: each tensor at its own type and size, as the file's {table.source} states"
    return WeightFormat(q.format, q.bits, "bf16" if base.quantized or base.name == "BF16" else "fp16", description, q,
                        preset)


def weight_format(m: ModelSpec, requested: str, group_size: int, file: str | None = None) -> tuple[WeightFormat, int]:
    """The format to size and its AWQ/GPTQ group size: for `auto` the checkpoint's own (its scheme and group
    size), else the requested one, with the checkpoint's scheme when it is the checkpoint's format."""
    q = m.quantization
    if requested == "auto" and q is None:
        return FORMATS[DTYPE_FORMATS.get(m.torch_dtype, "bf16")], group_size
    if requested == "auto" and q.needs_flag:     # a sidecar vLLM reads only with --quantization (parse_sidecar)
        raise InputError(q.source, None, f"{q.why_not}; name the format to size it as vLLM --quantization "
                                         f"{q.needs_flag} serves it (--weights {q.needs_flag}, or "
                                         f"deployment.quantization: {q.needs_flag})")
    if requested == "auto" and not q.format:
        raise InputError(file, "deployment.quantization", f"the checkpoint's {q.why_not} (read from {q.source}); "
                                                          "name the format to size (deployment.quantization, or "
                                                          f"--weights): {', '.join(FORMATS)}")
    if requested != "auto" and (q is None or q.format != requested):
        return FORMATS[requested], group_size
    if q.format in GROUPED and q.scales == "channel":
        return checkpoint_format(q), -1
    return checkpoint_format(q), q.group_size or group_size


def gguf_facts(m: ModelSpec) -> gg.ModelFacts:
    """What llama.cpp's quantizer rules read of the model."""
    attn = m.attention
    gqa = attn.num_heads // attn.num_kv_heads if isinstance(attn, Attention) else 1   # MLA: one KV head per head
    moe = m.moe
    return gg.ModelFacts(gqa, moe.num_experts if moe else 0, m.num_layers == 80 and gqa > 1)


# GGUF tensor category of each module name's last part (llama.cpp's tensor names in brackets)
_GGUF_CATEGORIES = {"q_proj": gg.ATTN_Q, "k_proj": gg.ATTN_K, "v_proj": gg.ATTN_V, "kv_b_proj": gg.ATTN_V,
                    "o_proj": gg.ATTN_OUTPUT, "up_proj": gg.FFN_UP, "gate_up_proj": gg.FFN_UP,
                    "down_proj": gg.FFN_DOWN}


def gguf_category(g: LinearGroup) -> str:
    return gg.OUTPUT if g.kind == LM_HEAD else _GGUF_CATEGORIES.get(g.name.rsplit(".", 1)[-1], gg.OTHER)


def _preset_layers(g: LinearGroup, p: gg.Preset, m: ModelSpec) -> list[tuple[int, float, float]]:
    """(layer, bytes, bytes in quantised types) of group `g` stored by llama.cpp's `p` rules, layer by layer (layer -1:
    a matrix outside the layers): attn_v is indexed among the layers holding one, ffn_down by layer."""
    if g.kind == ROUTER:            # ffn_gate_inp is never quantised; the converter writes it F32
        return [(layer, 4.0 * (g.params // len(g.layers)), 0.0) for layer in g.layers]
    if g.kind == VISION:            # the vision tower lives in a separate mmproj file, F16 as llama.cpp writes it
        return [(-1, 2.0 * g.params, 0.0)]
    category, facts = gguf_category(g), gguf_facts(m)
    if not g.layers:
        t = gg.tensor_type(p, category, 0, 1, g.in_features, facts)
        return [(-1, t.tensor_bytes(g.params), t.tensor_bytes(g.params) if t.quantized else 0.0)]
    holders = range(m.num_layers)
    if category == gg.ATTN_V:
        holders = [i for i, layer in enumerate(m.layers)
                   if any(_GGUF_CATEGORIES.get(lin.module.rsplit(".", 1)[-1]) == gg.ATTN_V
                          for lin in layer.linears(m.hidden_size))]
    per_layer = g.params // len(g.layers)
    rows = []
    for layer in g.layers:
        t = gg.tensor_type(p, category, list(holders).index(layer), len(holders), g.in_features, facts)
        rows.append((layer, t.tensor_bytes(per_layer), t.tensor_bytes(per_layer) if t.quantized else 0.0))
    return rows


# llama.cpp's tensor of each module within a block, blk.N.NAME.weight (src/llama-arch.cpp; gguf-py's MODEL_TENSOR
# names), "_exps" added for routed experts and "_shexp" for shared ones; where a file holds the module merged with
# others in one tensor (llama.cpp loads attn_qkv for q/k/v and ffn_gate_up_exps for gate and up when the file has
# them: create_tensor_qkv, create_tensor_gate_up_exps), that tensor, of which the module holds its rows' share
_GGUF_TENSORS = {"q_proj": ("attn_q",), "k_proj": ("attn_k",), "v_proj": ("attn_v",), "o_proj": ("attn_output",),
                 "gate_up_proj": ("ffn_gate", "ffn_up"), "up_proj": ("ffn_up",), "down_proj": ("ffn_down",)}
_GGUF_MERGED = {"q_proj": "attn_qkv", "k_proj": "attn_qkv", "v_proj": "attn_qkv", "gate_up_proj": "ffn_gate_up"}
_GGUF_SUFFIX = {EXPERT: "_exps", SHARED_EXPERT: "_shexp"}


def _table_tensors(g: LinearGroup, t: gg.TensorTable, layer: int) -> list[tuple[gg.GGUFTensor, float]]:
    """The tensors of table `t` holding group `g`'s matrices in block `layer`, each with the share of it they are (1,
    or a merged tensor's rows' share: its rows are all of one type). A tensor llama.cpp requires that the table lacks,
    or one of other values than the model's matrices, is refused naming it, as llama.cpp refuses to load the file."""
    last = g.name.rsplit(".", 1)[-1]
    suffix = _GGUF_SUFFIX.get(g.kind, "")
    names = ["ffn_gate_inp"] if g.kind == ROUTER else [name + suffix for name in _GGUF_TENSORS.get(last, ())]
    if not names:
        raise InputError(t.file, None, f"{g.name}: sizer knows no GGUF tensor name for this module, so its bytes "
                                       "cannot be read from the tensor table")
    want = g.params // len(g.layers)
    held = [t.by_name.get(f"blk.{layer}.{name}.weight") for name in names]
    if all(held):
        values = sum(x.values for x in held)
        if values != want:
            raise InputError(t.file, f"tensors.blk.{layer}.{names[0]}.weight",
                             f"{values:,} values in {' and '.join(names)}; the model read from the metadata holds "
                             f"{want:,} in its {g.name} of layer {layer}: the sizes and the tensors disagree")
        return [(x, 1.0) for x in held]
    merged = t.by_name.get(f"blk.{layer}.{_GGUF_MERGED[last]}{suffix}.weight") if last in _GGUF_MERGED else None
    if merged is not None and merged.values >= want:
        return [(merged, want / merged.values)]
    missing = next(name for name, x in zip(names, held, strict=True) if x is None)
    raise InputError(t.file, f"tensors.blk.{layer}.{missing}.weight", f"missing from the tensor table: block "
                                                                      f"{layer}'s {g.name} (llama.cpp refuses a "
                                                                      "block without it)")


def _table_tensor(t: gg.TensorTable, name: str) -> gg.GGUFTensor:
    """Tensor `name` of table `t` (the token embedding, the output matrix): refused when missing, as llama.cpp does."""
    tensor = t.by_name.get(name)
    if tensor is None:
        raise InputError(t.file, f"tensors.{name}", "missing from the tensor table (llama.cpp refuses a model "
                                                    "without it)")
    return tensor


def _gguf_layers(g: LinearGroup, fmt: WeightFormat, m: ModelSpec) -> list[tuple[int, float, float]]:
    """(layer, bytes, bytes in quantised types) of group `g` in GGUF format `fmt`, layer by layer (layer -1: a matrix
    outside the layers): a .gguf file's own format, its tensors' bytes (`_table_tensors`; the output matrix is
    output.weight); a preset, llama.cpp's rules (`_preset_layers`)."""
    t = fmt.scheme.gguf_tensors
    if t is None:
        return _preset_layers(g, fmt.gguf, m)
    held = [(-1, _table_tensor(t, "output.weight"), 1.0)] if g.kind == LM_HEAD else \
        [(layer, x, share) for layer in g.layers for x, share in _table_tensors(g, t, layer)]
    rows: dict[int, tuple[float, float]] = {}
    for layer, x, share in held:
        total, quantised = rows.get(layer, (0.0, 0.0))
        rows[layer] = (total + x.nbytes * share, quantised + (x.nbytes * share if x.type.quantized else 0.0))
    return [(layer, total, quantised) for layer, (total, quantised) in rows.items()]


def _gguf_bytes(g: LinearGroup, fmt: WeightFormat, m: ModelSpec) -> tuple[float, float]:
    """(bytes, bytes in quantised types) of group `g` in GGUF format `fmt`, its layers' summed."""
    total = quantised = 0.0
    for _, nbytes, in_quantised in _gguf_layers(g, fmt, m):
        total += nbytes
        quantised += in_quantised
    return total, quantised


def layer_bytes(g: LinearGroup, fmt: WeightFormat, group_size: int, m: ModelSpec) -> dict[int, float]:
    """Bytes (values and scales) of group `g`'s matrices in each layer holding them: GGUF's layer by layer (the
    file's tensors or llama.cpp's rules: some layers' tensors at more bits than others'), other formats' the
    group's bytes spread evenly over its layers."""
    if fmt.gguf is not None:
        return {layer: nbytes for layer, nbytes, _ in _gguf_layers(g, fmt, m)}
    values, scales, _ = group_bytes(g, fmt, group_size, m)
    return {layer: (values + scales) / len(g.layers) for layer in g.layers}


def embedding_bytes_per_value(fmt: WeightFormat, m: ModelSpec) -> float:
    """Bytes per value of the token embedding: unconverted in sizer's formats; GGUF quantises it (to the output
    matrix's type when the two are tied), a .gguf file's own format to the type its token_embd has."""
    if fmt.gguf is None:
        return plain_bytes_per_value(fmt)
    t = fmt.scheme.gguf_tensors
    stored = _table_tensor(t, "token_embd.weight").type if t is not None else \
        gg.tensor_type(fmt.gguf, gg.TOKEN_EMBD, 0, 1, m.hidden_size, gguf_facts(m), m.tie_word_embeddings)
    return stored.block_bytes / stored.block_values


def vector_bytes(fmt: WeightFormat, m: ModelSpec, values: int) -> float:
    """Bytes of the model's norms, biases and other 1-D tensors (`values` of them): a .gguf file's own format, the
    tensors its table holds beside the matrices and the token embedding (rope frequencies too); else F32 in GGUF, and
    elsewhere as unconverted modules."""
    t = fmt.scheme.gguf_tensors
    if t is None:
        return values * (4.0 if fmt.gguf is not None else plain_bytes_per_value(fmt))
    _table_tensor(t, "output_norm.weight")       # llama.cpp's loaders for the GGUF architectures sizer maps require it
    claimed = {"token_embd.weight"}
    for g in linear_groups(m):
        if g.kind == LM_HEAD:
            claimed.add("output.weight")
        else:
            claimed.update(x.name for layer in g.layers for x, _ in _table_tensors(g, t, layer))
    return sum(x.nbytes for x in t.tensors if x.name not in claimed)


def plain_bytes_per_value(fmt: WeightFormat) -> float:
    """Bytes per value of what `fmt` leaves unconverted (embeddings, norms, lm_head, routers, excluded modules):
    the format's own width when it is a plain float format, else 16-bit as quantised checkpoints keep them."""
    return fmt.bits / 8 if fmt.bits >= 16 else 2


def _splits_inputs(g: LinearGroup, p: ParallelConfig) -> bool:
    """Whether tensor parallelism splits `g` by its inputs (ROW_PARALLEL), each GPU holding in_features / TP of
    them: an expert's down_proj only where TP slices the experts (expert parallelism keeps each expert whole)."""
    return g.name.rsplit(".", 1)[-1] in ROW_PARALLEL and (g.kind != EXPERT or not p.expert_parallel)


def _inputs_a_gpu(g: LinearGroup, p: ParallelConfig) -> int:
    return g.in_features // p.tp if _splits_inputs(g, p) else g.in_features


# Matrices vLLM builds as a ColumnParallelLinear of one output, so that validate_fp8_block_shape checks each GPU's
# out_features / TP of them: MLA's q_b_proj and kv_b_proj (q_proj where MLA has no q_lora_rank), a non-gated MLP's
# up_proj. Merged ones (qkv_proj, gate_up_proj, Mamba-2's and Gated DeltaNet's in_proj) are not checked:
# ColumnParallelLinear._maybe_allow_fp8_block_shape_mismatch (vllm/model_executor/layers/linear.py) lets a layer of
# several outputs through when one is not whole blocks of its quant config's weight_block_size (Fp8Config's, the
# `fp8` method of the block checkpoints sizer has met). Replicated ones (q_a_proj, kv_a_proj_with_mqa, the DSA
# indexer, routers, NemotronH's latent projections: ReplicatedLinear) are whole on every GPU.
SINGLE_COLUMN = ("q_b_proj", "kv_b_proj", "up_proj")


def _split_outputs(g: LinearGroup, m: ModelSpec, p: ParallelConfig) -> int | None:
    """Outputs of each logical matrix of `g` (gate and up apart) where TP splits them and vLLM checks each GPU's
    share against FP8 blocks, else None: SINGLE_COLUMN's matrices, and the experts' gate and up where TP slices the
    experts (vLLM's Fp8MoEMethod checks their intermediate_size_per_partition, validate_moe_block_sizes)."""
    last = g.name.rsplit(".", 1)[-1]
    if g.kind == EXPERT and not p.expert_parallel and last not in ROW_PARALLEL:
        return g.out_features // 2 if last == "gate_up_proj" else g.out_features
    mla_q = last == "q_proj" and bool(g.layers) and isinstance(m.layers[g.layers[0]].mixer, LatentAttention)
    if g.kind in (ATTENTION, MLP, SHARED_EXPERT) and (last in SINGLE_COLUMN or mla_q):
        return g.out_features
    return None


def validate_groups(m: ModelSpec, p: ParallelConfig, fmt: WeightFormat, group_size: int, file: str | None) -> None:
    """Refuse a split whose GPUs would hold part of a scale group or block, as vLLM refuses to load it (`_groups`,
    `_blocks`): AWQ/GPTQ groups of `group_size`, and the FP8 blocks of a checkpoint's weight_block_size (its own
    format's, or a part's of a per-layer map)."""
    grouped = fmt.name in GROUPED and group_size > 0     # -1: one group spans a matrix's inputs (per channel)
    blocked = [f for f in (fmt, *map(checkpoint_format, fmt.scheme.parts)) if f.scheme.scales == "block"]
    if not grouped and not blocked:
        return
    for g in linear_groups(m):
        if g.kind == VISION:
            continue
        if grouped and converted_share(g, fmt, m) > 0.0:
            _groups(g, p, fmt, group_size, file)
        for f in blocked:
            if converted_share(g, f, m) > 0.0:
                _blocks(g, m, p, f, file)


def _groups(g: LinearGroup, p: ParallelConfig, fmt: WeightFormat, group_size: int, file: str | None) -> None:
    """vLLM's grouped-integer layers need each GPU's inputs of a matrix to be whole groups (awq.py and gptq.py
    create_weights: "The input size is not aligned with the quantized weight shape. This can be caused by too large
    tensor parallel size."; the Marlin kernels' marlin_utils.verify_marlin_supports_shape, where a group is shorter
    than the matrix's inputs). Qwen2.5-72B's 29,568-wide MLP at TP 8 leaves 3,696 inputs a GPU: not whole
    128-groups, which is why Qwen's AWQ and GPTQ checkpoints pad it to 29,696."""
    row, inputs = _splits_inputs(g, p), _inputs_a_gpu(g, p)
    if group_size < g.in_features and inputs % group_size:
        split = f" ({g.in_features:,} / TP {p.tp})" if row and p.tp > 1 else ""
        field = "deployment.tensor_parallel_size" if row and g.in_features % group_size == 0 else \
            "deployment.quantization_group_size" if not fmt.from_checkpoint else "deployment.quantization"
        whole = "; enable_expert_parallel keeps each expert whole" if g.kind == EXPERT and row else ""
        raise InputError(file, field, f"{g.name} would hold {inputs:,} inputs a GPU{split}, not whole "
                                      f"{fmt.name} groups of {group_size}: the engine refuses to load it (vLLM: "
                                      f"\"The input size is not aligned with the quantized weight shape\"){whole}")


def _blocks(g: LinearGroup, m: ModelSpec, p: ParallelConfig, fmt: WeightFormat, file: str | None) -> None:
    """vLLM's block-FP8 layers need each GPU's share of a matrix that TP splits to be whole blocks of [block_n output
    rows, block_k input columns] (vllm/model_executor/layers/quantization/utils/fp8_utils.py
    validate_fp8_block_shape: a row-parallel matrix's input_size_per_partition by block_k, a column-parallel one's
    output partitions by block_n; Fp8MoEMethod for TP-sliced experts, intermediate_size_per_partition by both).
    Nothing is checked that TP leaves whole (replicated matrices, experts under expert parallelism) or that vLLM
    lets through (merged matrices: SINGLE_COLUMN). Qwen3-30B-A3B-FP8's 768-wide experts at TP 4: 192 a GPU, 1.5
    blocks of 128."""
    if p.tp == 1:
        return
    block_n, block_k = fmt.scheme.block_size
    expert = g.kind == EXPERT
    cuts = []                       # (what, whole, a GPU's share, block, vLLM's words for the share, block's name)
    if _splits_inputs(g, p):
        cuts.append(("inputs", g.in_features, _inputs_a_gpu(g, p), block_k,
                     "The input_size of down's weight" if expert else "Weight input_size_per_partition", "block_k"))
    outputs = _split_outputs(g, m, p)
    if outputs is not None:
        each = " of gate and of up each" if g.name.endswith("gate_up_proj") else ""
        cuts.append((f"outputs{each}", outputs, outputs // p.tp, block_n,
                     "The output_size of gate's and up's weight" if expert else "Weight output_partition_size",
                     "block_n"))
    for what, whole, share, block, said, name in cuts:
        if share % block:
            whole_experts = "; enable_expert_parallel keeps each expert whole" if expert else ""
            raise InputError(file, "deployment.tensor_parallel_size",
                             f"{g.name} would hold {share:,} {what} a GPU ({whole:,} / TP {p.tp}), not whole "
                             f"{block_n}x{block_k} FP8 blocks (the checkpoint's weight_block_size): the engine "
                             f"refuses to load it (vLLM: \"{said} = {share} is not divisible by weight quantization "
                             f"{name} = {block}\"){whole_experts}")


def converted_share(g: LinearGroup, fmt: WeightFormat, m: ModelSpec) -> float:
    """Share of `g`'s matrices stored in `fmt` (the rest stay 16-bit): by the scheme's targets and exclusions,
    matched against the full module name of each layer's copy."""
    q = fmt.scheme
    if fmt.bits >= 16:
        return 0.0
    if g.kind in UNCONVERTED_KINDS:     # unless a per-layer map (MIXED_PRECISION) or GPTQ's lm_head: true names it
        return 1.0 if g.kind == LM_HEAD and ("lm_head" in q.targets or q.quantized_lm_head) else 0.0
    if g.name in UNCONVERTED_MODULES:
        return 0.0
    if g.kind == VISION:
        named = mentions_vision(q.ignore) or (q.targets and not mentions_vision(q.targets))
        return 0.0 if named else 1.0
    if not q.ignore and not q.targets:
        return 1.0
    return quantised_share(g.name, g.layers, q.ignore, q.targets, m.architecture)


def scale_bytes(g: LinearGroup, fmt: WeightFormat, group_size: int) -> float:
    """Bytes of scales and zeros `fmt` stores for all of `g`'s matrices, were they all converted."""
    q, k, n = fmt.scheme, g.in_features, g.out_features
    if fmt.bits >= 16:
        return 0.0
    if fmt.name in GROUPED:          # group_size -1 is GPTQ's per-channel: one group spans the input
        scales = math.ceil(k / (k if group_size == -1 else group_size)) * n
    elif q.scales == "group":
        scales = math.ceil(k / q.group_size) * n
    elif q.scales == "channel":
        scales = n
    elif q.scales == "block":        # vLLM's weight_block_size: [output rows, input columns]
        scales = math.ceil(n / q.block_size[0]) * math.ceil(k / q.block_size[1])
    else:
        scales = 1
    # fp32 per matrix: NVFP4's global weight scale, and the input scale of static activation quantisation
    per_matrix = 4 * ((fmt.name == "nvfp4") + q.static_activations)
    return (scales * (q.scale_bytes + (0.5 if q.zero_points else 0)) + per_matrix) * g.count


def stored_shares(g: LinearGroup, fmt: WeightFormat, m: ModelSpec) -> tuple[float, float]:
    """(share of `g`'s matrices stored in `fmt` itself, share stored in another format of a per-layer map:
    MIXED_PRECISION's parts); the rest stay unconverted (`plain_bytes_per_value`). A GGUF preset's tensors are all
    its own types: (1, 0)."""
    if fmt.gguf is not None:
        return 1.0, 0.0
    other = sum(converted_share(g, checkpoint_format(part), m) for part in fmt.scheme.parts)
    return converted_share(g, fmt, m), other


def group_bytes(g: LinearGroup, fmt: WeightFormat, group_size: int, m: ModelSpec) -> tuple[float, float, float]:
    """(value bytes, scale bytes, value bytes stored in `fmt`) of group `g`: converted matrices at the format's
    bits with their scales, the rest at 16 bits. GGUF blocks hold their scales: all in the values (`_gguf_layers`)."""
    if fmt.gguf is not None:
        total, quantised = _gguf_bytes(g, fmt, m)
        return total, 0.0, quantised
    share = converted_share(g, fmt, m)
    converted = g.params * share * fmt.bits / 8
    scales = scale_bytes(g, fmt, group_size) * share
    left = 1 - share
    for part in fmt.scheme.parts:       # MIXED_PRECISION: the layers stored in another format
        part_fmt = checkpoint_format(part)
        part_share = converted_share(g, part_fmt, m)
        converted += g.params * part_share * part_fmt.bits / 8
        scales += scale_bytes(g, part_fmt, group_size) * part_share
        left -= part_share
    plain = g.params * left * plain_bytes_per_value(fmt)
    return converted + plain, scales, converted

