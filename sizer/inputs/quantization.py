"""A checkpoint's quantisation as one typed description, read the way vLLM reads it.

It comes from config.json's `quantization_config` (or `compression_config`, llm-compressor's older
spelling) or, when config.json states none, from ModelOpt's `hf_quant_config.json` beside it. Each
method's keys become sizer's weight format, the layout of its scales, what the activations are
quantised to, the KV-cache format the checkpoint states, and the modules it leaves unquantised:

- `gptq`, `awq` (and their `_marlin` spellings): integer weights, an fp16 scale and a packed zero per
  group of input values (`group_size` -1: one per output row), `modules_to_not_convert`;
- `fp8` (vLLM's Fp8Config): FP8 weights with an fp32 scale per tensor or per `weight_block_size`
  block, FP8 activations (`activation_scheme` static: a stored input scale), `ignored_layers`;
- `modelopt` (NVIDIA ModelOpt, in config.json or hf_quant_config.json): `quant_algo` FP8 (static
  per-tensor), FP8_PER_CHANNEL_PER_TOKEN, FP8_PB_WO (128 x 128 blocks, weight-only) or NVFP4,
  `kv_cache_quant_algo`, `exclude_modules` / `ignore` (globs);
- `compressed-tensors` (llm-compressor): every config group's `weights` and `input_activations`
  scheme (W8A8 FP8 static or dynamic, W8A16, W8A8 INT8, W4A16 / W8A16 integer, NVFP4, MXFP4) and
  `targets`, the `ignore` list ("re:" regexes and module names), `kv_cache_scheme`;
- `mxfp4` (gpt-oss): MXFP4 MoE experts only; every other linear layer is in
  `modules_to_not_convert`.

A method or scheme sizer does not model gives `format == ""` and the reason in `why_not`; the
planner refuses it only when asked to size the checkpoint as it is (`deployment.quantization: auto`).
Malformed keys raise InputError naming the file and the key.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from dataclasses import dataclass, field, replace
from typing import Any

from sizer.errors import InputError
from sizer.inputs.gguf_types import TensorTable
from validation.errors import excerpt
from validation.schema import Key, read_key

# a regex's parsed form (checked for nested repetition): re._parser from Python 3.11, sre_parse before
re_parser = importlib.import_module("re._parser" if sys.version_info >= (3, 11) else "sre_parse")
re_constants = importlib.import_module("re._constants" if sys.version_info >= (3, 11) else "sre_constants")
MAX_BITS = 32
MAX_GROUP_SIZE = 1_000_000      # input values per scale: at most a row (config_keys.MAX_HIDDEN)
# Module patterns in one list (targets, or the ignore lists together): the largest published lists hold about 700
# (GLM-5-FP8's modules_to_not_convert), each a test tried on every layer's matrices; 10,000 keeps that bounded
MAX_PATTERNS = 10_000
NVFP4_GROUP = 16                # NVFP4 stores an FP8 scale per 16 values: the format, and vLLM's kernels, fix it
WEIGHT_ONLY = "16-bit"          # `activations` of a weight-only scheme: the GEMMs read 16-bit inputs


@dataclass(frozen=True)
class Quantization:
    """How a checkpoint (or a format named on the command line) stores its linear layers."""
    method: str                      # quant_method as the checkpoint names it ("" for a format named by the user)
    format: str                      # sizer's weight format (analytic.formats.FORMATS); "" when not modelled
    bits: int | None = None          # bits per stored weight value (None: the format's own)
    scales: str = "tensor"           # one scale per "tensor", per output "channel", per "group" of inputs, per "block"
    group_size: int | None = None    # "group": input values per scale (None: the scenario's quantization_group_size)
    block_size: tuple[int, int] | None = None   # "block": (output rows, input columns) per scale
    scale_bytes: int = 4             # bytes per scale value: fp32 4, fp16/bf16 2, FP8/E8M0 block scales 1
    zero_points: bool = False        # asymmetric integer weights: a packed 4-bit zero per scale
    activations: str = WEIGHT_ONLY   # what the GEMMs' inputs are quantised to ("fp8", "int8", "fp4"), or 16-bit
    static_activations: bool = False  # an fp32 input scale stored per matrix (static activation quantisation)
    kv_cache: str = ""               # the KV-cache format the checkpoint states ("fp8"), "" when none
    targets: tuple[str, ...] = ()    # module patterns the scheme quantises; () = every linear layer
    ignore: tuple[str, ...] = ()     # module patterns left unquantised: names, globs, "re:" regexes
    quantized_lm_head: bool = False  # GPTQ's lm_head: true: the output head stored in the scheme too
    symmetric: bool | None = None    # GPTQ's `sym` as stated (None: not stated); Marlin runs only symmetric GPTQ
    source: str = ""                 # where it was read, e.g. "config.json quantization_config"
    why_not: str = ""                # format "": what sizer does not model
    # ModelOpt MIXED_PRECISION: the layers stored in other formats than this one, each with its own `targets`
    # (the modules quantized_layers names for it); this scheme's own `targets` name its layers
    parts: tuple[Quantization, ...] = ()
    # A sidecar vLLM reads only when told the method (AutoGPTQ's quantize_config.json, AutoAWQ's quant_config.json,
    # and no quantization_config in config.json): the `--quantization` it needs ("gptq", "awq"), "" otherwise.
    # Sized when that format is named; refused for `auto` (vLLM builds the model unquantised and fails on the
    # checkpoint's packed qweight tensors).
    needs_flag: str = ""
    notes: tuple[str, ...] = ()      # what the plan names about the scheme (keys read and not modelled)
    # A .gguf file's tensors as its tensor table states them: the weights are sized from these (sizer.analytic.formats)
    gguf_tensors: TensorTable | None = field(default=None, repr=False)     # compared by identity: one file's

    @property
    def weight_only(self) -> bool:
        return self.activations == WEIGHT_ONLY

    @property
    def method_algo(self) -> str:
        """How a part of a MIXED_PRECISION checkpoint is stored, as the checkpoint names it (e.g. W4A16_NVFP4)."""
        return self.source.rsplit(" ", 1)[-1]

    @property
    def summary(self) -> str:
        """One line for the plan, e.g. "compressed-tensors: fp8 weights with per-channel scales, fp8 activations
        (dynamic); 449 module patterns left unquantised"."""
        layout = {"tensor": "a scale per tensor", "channel": "per-channel scales",
                  "group": f"a scale per {self.group_size or 'quantization_group_size'} inputs",
                  "block": "a scale per {}x{} block".format(*(self.block_size or (0, 0)))}[self.scales]
        acts = ("16-bit activations (weight-only)" if self.weight_only else
                f"{self.activations} activations ({'static' if self.static_activations else 'dynamic'})")
        integer = self.format in ("gptq", "awq") and self.method not in ("gptq", "awq")    # e.g. W4A16
        weights = f"int{self.bits}" if integer else self.format
        text = f"{self.method or 'sizer'}: {weights} weights with {layout}, {acts}"
        if self.targets:
            text += f"; only modules matching {len(self.targets)} target pattern(s) quantised"
        if self.ignore:
            text += f"; {len(self.ignore)} module pattern(s) left unquantised"
        if self.quantized_lm_head:
            text += "; the lm_head quantised too"
        for part in self.parts:
            text += f"; {len(part.targets)} module(s) in {part.format} ({part.method_algo})"
        return text + (f"; KV cache stated as {self.kv_cache}" if self.kv_cache else "")


# Bits each method's kernels store: GPTQ 2, 3, 4 or 8; AWQ 4 only; the float and 8-bit formats their own.
QUANT_BITS = {"gptq": (2, 3, 4, 8), "awq": (4,), "fp8": (8,), "int8": (8,), "nvfp4": (4,), "mxfp4": (4,)}
# The lists of modules a method leaves unquantised, by the key each method writes them under.
IGNORE_KEYS = ("ignore", "exclude_modules", "ignored_layers", "modules_to_not_convert")
QUANT_KEYS: dict[str, Key] = {k.name: k for k in (
    Key("quant_method", str),
    Key("bits", int, ge=1, le=MAX_BITS, aliases=("w_bit",)),
    # -1 is GPTQ's per-channel quantisation: one scale per output row
    Key("group_size", int, ge=-1, le=MAX_GROUP_SIZE, aliases=("q_group_size",), doc="-1 or >= 1"),
    Key("zero_point", bool, doc="AWQ: asymmetric (a zero per group), default true"),
    Key("sym", bool, doc="GPTQ: symmetric weights (zeros are stored all the same)"),
    Key("desc_act", bool, doc="GPTQ act-order: vLLM keeps a row-parallel matrix's scales whole on every GPU"),
    Key("lm_head", bool, default=False, doc="GPTQ: the lm_head quantised too (vLLM's GPTQConfig lm_head_quantized)"),
    Key("dynamic", dict, doc="GPTQModel: per-module overrides of bits and group size (vLLM's GPTQConfig dynamic)"),
    Key("weight_block_size", list[int]),
    Key("activation_scheme", str, doc="fp8: static or dynamic"),
    Key("quant_algo", str),
    Key("kv_cache_quant_algo", str),
    # compressed-tensors' scheme ({"num_bits": 8, "type": "float"}) or its short string form ("fp8")
    Key("kv_cache_scheme", dict | str),
    Key("quantized_layers", dict, doc="ModelOpt MIXED_PRECISION: each layer's quant_algo (and group_size)"),
    Key("config_groups", dict),
    Key("format", str),
    Key("sparsity_config", dict),
    *(Key(name, list[str]) for name in IGNORE_KEYS),
)}
# compressed-tensors: each config group's weights and input_activations schemes
CT_WEIGHT_KEYS: dict[str, Key] = {k.name: k for k in (
    Key("num_bits", int, ge=1, le=MAX_BITS),
    Key("type", str),
    Key("group_size", int, ge=-1, le=MAX_GROUP_SIZE, doc="-1 or >= 1"),
    Key("strategy", str),
    Key("symmetric", bool, default=True),
    Key("block_structure", list[int]),
    Key("scale_dtype", str, doc="e.g. torch.float8_e4m3fn; null: the checkpoint's 16-bit dtype"),
    # input_activations: scales computed per step (true), stored (false), or NVFP4's per-group "local"
    Key("dynamic", bool | str, default=False),
)}
# bytes per scale value by compressed-tensors' scale_dtype (null: the weights' own 16-bit dtype)
SCALE_DTYPE_BYTES = {"float8": 1, "float16": 2, "bfloat16": 2, "float32": 4}
CT_GROUP_KEYS: dict[str, Key] = {k.name: k for k in (
    Key("weights", dict),
    Key("input_activations", dict),
    Key("targets", list[str]),
)}
MODELOPT_ALGOS = ("FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO", "NVFP4", "W4A16_NVFP4")
# the short kv_cache_scheme strings read as a KV-cache format (the engines' --kv-cache-dtype spellings)
KV_CACHE_SHORT = {"fp8": "fp8", "fp8_e4m3": "fp8", "float8": "fp8", "int8": "int8"}
# ModelOpt's KV-cache algorithms (its kv_cache_quant_algo: FP8, and NVFP4 for Blackwell)
KV_CACHE_ALGOS = ("fp8", "nvfp4")
# fp8's activation scales: computed per step (dynamic) or stored in the checkpoint (static) (vLLM's Fp8Config)
ACTIVATION_SCHEMES = ("dynamic", "static")


def _read(keys: dict[str, Key], data: dict, file: str | None, prefix: str) -> dict[str, Any]:
    return {name: read_key(spec, data, file, prefix)[0] for name, spec in keys.items()}


def _group_size(value: int | None, path: str, file: str | None) -> None:
    if value == 0:
        raise InputError(file, path, "expected -1 (per channel) or an integer >= 1, got 0")


def _block(value: list[int] | None, file: str | None, path: str) -> tuple[int, int] | None:
    """A block of (output rows, input columns) per scale, as vLLM's weight_block_size [block_n, block_k]."""
    if value is not None and not (len(value) == 2 and all(0 < b <= MAX_GROUP_SIZE for b in value)):
        raise InputError(file, path, f"expected two positive integers, got {excerpt(value)}")
    return (value[0], value[1]) if value else None


def _patterns(values: list[str], file: str | None, path: str) -> tuple[str, ...]:
    """Module patterns, at most MAX_PATTERNS, each "re:" regex compiled once here so a bad one names its place; a
    regex that can backtrack exponentially (a repetition holding another repetition or an alternation) is refused."""
    if len(values) > MAX_PATTERNS:
        raise InputError(file, path, f"{len(values):,} module patterns; expected at most {MAX_PATTERNS:,}")
    for i, p in enumerate(values):
        if p.startswith("re:"):
            try:
                parsed = re_parser.parse(p[3:])
                re.compile(p[3:])
            except re.error as exc:
                raise InputError(file, f"{path}[{i}]", f"not a regular expression ({exc.msg}): {excerpt(p)}") \
                    from None
            if _nested_repeat(parsed, inside=False):
                raise InputError(file, f"{path}[{i}]", f"a repetition holding a repetition or alternation can take "
                                                      f"exponential time; expected a simple module regex: {excerpt(p)}")
    return tuple(values)


_REPEATS = (re_constants.MAX_REPEAT, re_constants.MIN_REPEAT, re_constants.POSSESSIVE_REPEAT) \
    if hasattr(re_constants, "POSSESSIVE_REPEAT") else (re_constants.MAX_REPEAT, re_constants.MIN_REPEAT)


def _nested_repeat(items, inside: bool) -> bool:
    """Whether a parsed regex repeats (more than once) something that itself repeats or branches."""
    for op, arg in items:
        if op in _REPEATS:
            low, high, body = arg
            if inside or _nested_repeat(body, inside=high > 1):
                return True
        elif op == re_constants.BRANCH:
            if inside or any(_nested_repeat(b, inside) for b in arg[1]):
                return True
        elif op == re_constants.SUBPATTERN:
            if _nested_repeat(arg[-1], inside):
                return True
        elif op in (re_constants.ASSERT, re_constants.ASSERT_NOT):
            if _nested_repeat(arg[1], inside):
                return True
    return False


def parse_quantization(q: dict, file: str | None, prefix: str = "quantization_config.",
                       source: str = "config.json quantization_config") -> Quantization:
    """config.json's quantization_config (`prefix` names where it sits in `file`)."""
    got = _read(QUANT_KEYS, q, file, prefix)
    method = str(got["quant_method"] or "").lower().removesuffix("_marlin")
    if not method:    # no quant_method: what the keys themselves say, as vLLM's parsers accept them
        method = ("compressed-tensors" if got["config_groups"] is not None
                  else "modelopt" if got["quant_algo"] is not None
                  else "fp8" if got["activation_scheme"] is not None else "")
    bits = got["bits"]
    if bits is not None and method in QUANT_BITS and bits not in QUANT_BITS[method]:
        allowed = ", ".join(map(str, QUANT_BITS[method]))
        key = read_key(QUANT_KEYS["bits"], q, file, prefix)[1]
        raise InputError(file, prefix + key, f"expected one of {allowed} for {method}, got {excerpt(bits)}")
    _group_size(got["group_size"], prefix + read_key(QUANT_KEYS["group_size"], q, file, prefix)[1], file)
    block = _block(got["weight_block_size"], file, prefix + "weight_block_size")
    ignore: list[str] = []
    for key in IGNORE_KEYS:
        ignore += got[key] or []
    common = {"ignore": _patterns(ignore, file, prefix + "ignore"), "source": source,
              "kv_cache": _kv_cache(got, file, prefix)}
    if method == "compressed-tensors":
        return _compressed_tensors(got, file, prefix, common)
    if method == "modelopt":
        return _modelopt(got, file, prefix, common)
    if method in ("gptq", "awq"):
        for name in ("bits", "group_size"):     # vLLM's GPTQConfig and AWQConfig require both (no default)
            if got[name] is None:
                raise InputError(file, prefix + QUANT_KEYS[name].name, f"missing; {method} states its "
                                                                       f"{name.replace('_', ' ')} (vLLM requires it)")
        zeros = got["zero_point"] if method == "awq" else True      # GPTQ stores qzeros even when symmetric
        group = got["group_size"]
        if got["dynamic"]:
            return Quantization(method, "", why_not=f"per-module overrides of bits and group size ({prefix}dynamic) "
                                                    "not modelled", **common)
        notes = (f"{prefix}desc_act = true (GPTQ act-order): vLLM keeps the whole scales and zeros of a "
                 "row-parallel matrix on every GPU when TP splits it; not modelled (a share of the scales, about "
                 "1-2% of the 4-bit weights, counted once)",) if got["desc_act"] else ()
        # lm_head: true (GPTQ): vLLM's GPTQConfig lm_head_quantized builds the ParallelLMHead with the GPTQ method
        return Quantization(method, method, bits, "channel" if group == -1 else "group",
                            group, scale_bytes=2, zero_points=zeros is not False, notes=notes,
                            quantized_lm_head=method == "gptq" and bool(got["lm_head"]),
                            symmetric=got["sym"] if method == "gptq" else None, **common)
    if method == "fp8":
        scheme = str(got["activation_scheme"] or "dynamic").lower()
        if scheme not in ACTIVATION_SCHEMES:
            raise InputError(file, prefix + "activation_scheme", f"expected one of {', '.join(ACTIVATION_SCHEMES)}, "
                                                                 f"got {excerpt(got['activation_scheme'])}")
        static = scheme == "static"
        return Quantization(method, "fp8", 8, "block" if block else "tensor", block_size=block, activations="fp8",
                            static_activations=static, **common)
    if method == "int8":
        return Quantization(method, "int8", 8, "channel", activations="int8", **common)
    if method == "mxfp4":      # vLLM's Mxfp4Config quantises the MoE experts only, 16-bit activations
        return Quantization(method, "mxfp4", 4, "group", 32, scale_bytes=1, targets=("re:.*experts.*",), **common)
    return Quantization(method, "", why_not=f"quant_method {excerpt(got['quant_method'])} is not modelled",
                        **common)


def parse_hf_quant_config(data: Any, file: str) -> Quantization:
    """ModelOpt's hf_quant_config.json: {"producer": ..., "quantization": {"quant_algo": ..., ...}}."""
    if not isinstance(data, dict):
        raise InputError(file, None, "expected a JSON object")
    q = data.get("quantization")
    if not isinstance(q, dict):
        raise InputError(file, "quantization", f"expected a JSON object (ModelOpt's quant_algo, exclude_modules), "
                                               f"got {excerpt(q)}")
    return parse_quantization({**q, "quant_method": "modelopt"}, file, "quantization.", "hf_quant_config.json")


# The quantisation sidecars vLLM reads from a checkpoint's folder only when told the method (`--quantization`) and
# config.json states no quantization_config (vllm/model_executor/model_loader/weight_utils.py get_quant_config: the
# folder's *.json files ending in one of the method's get_config_filenames): AutoGPTQ's quantize_config.json
# (GPTQConfig: ["quantize_config.json"]), AutoAWQ's quant_config.json (AWQConfig: ["quant_config.json",
# "quantize_config.json"]). The keys each method's from_config requires (get_from_keys: no default).
GPTQ_SIDECAR, AWQ_SIDECAR = "quantize_config.json", "quant_config.json"
SIDECAR_REQUIRED = {"gptq": (("bits",), ("group_size",), ("desc_act",)),
                    "awq": (("w_bit", "bits"), ("q_group_size", "group_size"), ("zero_point",))}
# keys only AutoAWQ (and llm-awq) write: a quantize_config.json holding them is an AWQ sidecar
AWQ_ONLY_KEYS = ("w_bit", "q_group_size", "zero_point", "version")


def parse_sidecar(data: Any, file: str) -> Quantization:
    """AutoGPTQ's quantize_config.json or AutoAWQ's quant_config.json, as vLLM's `--quantization gptq|awq` reads
    it: the scheme, with `needs_flag` set (vLLM does not read it by itself)."""
    name = file.replace("\\", "/").rsplit("/", 1)[-1]
    if not isinstance(data, dict):
        raise InputError(file, None, f"expected a JSON object (the quantisation: bits, group_size, ...), "
                                     f"got {excerpt(data)}")
    stated = read_key(QUANT_KEYS["quant_method"], data, file)[0]
    method = (str(stated).lower().removesuffix("_marlin") if stated
              else "awq" if name == AWQ_SIDECAR or any(k in data for k in AWQ_ONLY_KEYS) else "gptq")
    if method not in SIDECAR_REQUIRED:
        raise InputError(file, "quant_method", f"expected gptq or awq (the methods vLLM reads {name} for), "
                                               f"got {excerpt(stated)}")
    for spellings in SIDECAR_REQUIRED[method]:
        if all(data.get(key) is None for key in spellings):
            raise InputError(file, spellings[0], f"missing; vLLM's {method.upper()}Config requires it (its from_config "
                                                 f"reads {' or '.join(spellings)}, with no default)")
    q = parse_quantization({**data, "quant_method": method}, file, "", file)
    known = {k for spec in QUANT_KEYS.values() for k in spec.keys}
    unread = [f"{k} = {excerpt(json.dumps(v), quote=False)}" for k, v in data.items() if k not in known]
    notes = tuple(f"{name} {n}" for n in q.notes)
    if unread:
        notes += (f"{name} keys sizer does not read (taken not to change the weights' bytes): " + ", ".join(unread),)
    bits = f"int{q.bits}" if q.bits else method
    why = (f"states {method} {bits} weights, but config.json states no quantization_config: vLLM reads {name} only "
           f"when told the method (--quantization {method}), and without it builds the model unquantised and fails "
           "to load the packed qweight tensors")
    if not q.format:      # a scheme sizer does not model (dynamic): that first
        why = q.why_not + f"; and vLLM reads {name} only with --quantization {method}"
    return replace(q, needs_flag=method, why_not=why, notes=notes)


def _kv_cache(got: dict, file: str | None, prefix: str) -> str:
    """The KV-cache format the checkpoint states: ModelOpt's kv_cache_quant_algo, compressed-tensors'
    (and ModelOpt-in-config.json's) kv_cache_scheme."""
    algo = got["kv_cache_quant_algo"]
    if algo:
        if str(algo).lower() not in KV_CACHE_ALGOS:
            raise InputError(file, prefix + "kv_cache_quant_algo", f"expected one of "
                                                                   f"{', '.join(a.upper() for a in KV_CACHE_ALGOS)} "
                                                                   f"(ModelOpt's), got {excerpt(algo)}")
        return str(algo).lower()
    scheme = got["kv_cache_scheme"]
    if isinstance(scheme, str):     # the short form: the format's name
        if scheme.lower() not in KV_CACHE_SHORT:
            raise InputError(file, prefix + "kv_cache_scheme", f"expected one of {', '.join(KV_CACHE_SHORT)} or a "
                                                               f"scheme object, got {excerpt(scheme)}")
        return KV_CACHE_SHORT[scheme.lower()]
    if scheme:
        at = prefix + "kv_cache_scheme."
        bits = read_key(CT_WEIGHT_KEYS["num_bits"], scheme, file, at)[0]
        kind = read_key(CT_WEIGHT_KEYS["type"], scheme, file, at)[0] or "int"
        stated = f"{'fp' if kind == 'float' else 'int'}{bits}"
        if bits is None:
            raise InputError(file, at + "num_bits", "missing; expected 8 (an fp8 or int8 KV cache)")
        if kind not in ("float", "int") or stated not in KV_CACHE_SHORT.values():
            field = "type" if kind not in ("float", "int") else "num_bits"
            raise InputError(file, at + field, f"a KV cache of {bits}-bit {excerpt(kind)} values is not modelled; "
                                               "expected 8-bit float (fp8) or int (int8)")
        return stated
    return ""


def _modelopt(got: dict, file: str | None, prefix: str, common: dict) -> Quantization:
    algo = str(got["quant_algo"] or "").upper()
    if algo == "MIXED_PRECISION" and got["quantized_layers"]:
        return _mixed_precision(got, file, prefix, common)
    return _modelopt_algo(algo, got, file, prefix, common)


def _mixed_precision(got: dict, file: str | None, prefix: str, common: dict) -> Quantization:
    """ModelOpt MIXED_PRECISION: `quantized_layers` maps each module to its own quant_algo (and group_size).
    The modules of each (algo, group size) become one scheme whose targets name them; the lowest-bit one is
    the checkpoint's format, the others its `parts`. A module the map does not name stays 16-bit."""
    by_algo: dict[tuple[str, int | None], list[str]] = {}
    first: dict[tuple[str, int | None], str] = {}     # where each (algo, group size) was first read
    path = prefix + "quantized_layers."
    for module, entry in got["quantized_layers"].items():
        where = path + excerpt(module, quote=False)
        if not isinstance(entry, dict):
            raise InputError(file, where, f"expected a JSON object with quant_algo, got {excerpt(entry)}")
        e = _read({k: QUANT_KEYS[k] for k in ("quant_algo", "group_size")}, entry, file, where + ".")
        _group_size(e["group_size"], where + ".group_size", file)
        by_algo.setdefault((str(e["quant_algo"] or ""), e["group_size"]), []).append(module)
        first.setdefault((str(e["quant_algo"] or ""), e["group_size"]), where + ".group_size")
    schemes = []
    for (algo, group), modules in by_algo.items():
        part = _modelopt_algo(algo.upper(), {**got, "quant_algo": algo, "group_size": group}, file, prefix,
                              {**common, "source": f"{common['source']} quantized_layers {algo}"},
                              first[algo, group])
        if not part.format:
            return Quantization("modelopt", "", why_not=f"quantized_layers: {part.why_not}", **common)
        schemes.append(replace(part, targets=tuple(modules)))
    schemes.sort(key=lambda q: (q.bits or 16, -len(q.targets)))
    return replace(schemes[0], source=common["source"] + " (MIXED_PRECISION, per layer)", parts=tuple(schemes[1:]))


def _nvfp4_group(group: int | None, file: str | None, path: str) -> int:
    """An NVFP4 checkpoint's values per scale: 16 (also when not stated), the format's own."""
    if group is not None and group != NVFP4_GROUP:
        raise InputError(file, path, f"expected NVFP4's {NVFP4_GROUP} values per scale, got {excerpt(group)}")
    return NVFP4_GROUP


def _modelopt_algo(algo: str, got: dict, file: str | None, prefix: str, common: dict,
                   group_path: str | None = None) -> Quantization:
    """One ModelOpt quant_algo's scheme; `group_path` names where its group_size was read (default the prefix's)."""
    group_path = group_path or prefix + "group_size"
    if algo == "FP8":              # fp32 weight scale and static input scale per tensor
        return Quantization("modelopt", "fp8", 8, "tensor", activations="fp8", static_activations=True, **common)
    if algo == "FP8_PER_CHANNEL_PER_TOKEN":
        return Quantization("modelopt", "fp8", 8, "channel", activations="fp8", **common)
    if algo == "FP8_PB_WO":        # per-block FP8 weights, 16-bit activations
        return Quantization("modelopt", "fp8", 8, "block", block_size=(128, 128), **common)
    if algo == "NVFP4":            # FP8 (E4M3) scale per 16 values, fp32 global weight and input scales
        return Quantization("modelopt", "nvfp4", 4, "group", _nvfp4_group(got["group_size"], file, group_path),
                            scale_bytes=1, activations="fp4", static_activations=True, **common)
    if algo == "W4A16_NVFP4":      # NVFP4 weights (E4M3 scale per 16, fp32 global scale), 16-bit activations
        return Quantization("modelopt", "nvfp4", 4, "group", _nvfp4_group(got["group_size"], file, group_path),
                            scale_bytes=1, **common)
    why = (f"ModelOpt quant_algo {excerpt(got['quant_algo'])} is not modelled (sizer models "
           + ", ".join(MODELOPT_ALGOS) + (", and MIXED_PRECISION with its quantized_layers map"
                                          if algo == "MIXED_PRECISION" else "") + ")")
    return Quantization("modelopt", "", why_not=why, **common)


def _compressed_tensors(got: dict, file: str | None, prefix: str, common: dict) -> Quantization:
    """llm-compressor's config groups: one scheme (the same in every group) over the union of their targets."""
    sparsity = got["sparsity_config"] or {}
    if str(sparsity.get("format", "dense")).lower() not in ("dense", "none"):
        return Quantization("compressed-tensors", "", why_not=f"sparse compressed-tensors checkpoints (sparsity "
                            f"format {excerpt(sparsity.get('format'))}) are not modelled", **common)
    schemes, targets = [], []
    for name, group in (got["config_groups"] or {}).items():
        path = f"{prefix}config_groups.{excerpt(name, quote=False)}"
        if not isinstance(group, dict):
            raise InputError(file, path, f"expected a JSON object, got {excerpt(group)}")
        g = _read(CT_GROUP_KEYS, group, file, path + ".")
        if g["weights"] is None or g["targets"] == []:      # no scheme, or no module it applies to: switched off
            continue
        schemes.append(_ct_scheme(g["weights"], g["input_activations"], file, path))
        targets += g["targets"] or ["Linear"]
    if not schemes:
        return Quantization("compressed-tensors", "", why_not="no config group quantises weights", **common)
    if len(set(schemes)) > 1:
        return Quantization("compressed-tensors", "", why_not="config groups with different schemes (mixed precision) "
                            "are not modelled", **common)
    scheme = schemes[0]
    if isinstance(scheme, str):
        return Quantization("compressed-tensors", "", why_not=scheme, **common)
    everything = "Linear" in targets or any(t.lower() == "linear" for t in targets)
    return Quantization("compressed-tensors", **dict(scheme),
                        targets=() if everything else _patterns(targets, file, prefix + "config_groups.targets"),
                        **common)


def _ct_scheme(weights: dict, acts: dict | None, file: str | None, path: str) -> tuple | str:
    """A config group's scheme as the keyword arguments of Quantization (a hashable tuple of pairs), or why
    it is not modelled."""
    w = _read(CT_WEIGHT_KEYS, weights, file, path + ".weights.")
    _group_size(w["group_size"], path + ".weights.group_size", file)
    a = _read(CT_WEIGHT_KEYS, acts, file, path + ".input_activations.") if acts else None
    group = w["group_size"]      # compressed-tensors infers the strategy from the group size when it is not stated
    inferred = "group" if group and group > 0 else "channel" if group == -1 else "tensor"
    bits, kind, strategy = w["num_bits"], str(w["type"] or "int"), str(w["strategy"] or inferred).lower()
    block = _block(w["block_structure"], file, path + ".weights.block_structure")
    act_kind = None if a is None else f"{'fp' if a['type'] == 'float' else 'int'}{a['num_bits']}"
    if a is not None and a["dynamic"] not in (True, False, "local"):
        raise InputError(file, path + ".input_activations.dynamic",
                         f"expected true, false or \"local\", got {excerpt(a['dynamic'])}")
    dynamic = bool(a["dynamic"]) if a is not None else False
    scales = {"tensor": "tensor", "channel": "channel", "group": "group", "tensor_group": "group",
              "block": "block"}.get(strategy)
    if scales is None:
        return f"compressed-tensors weight strategy {excerpt(strategy)} is not modelled"
    needs = {"group": ("group_size", w["group_size"]), "block": ("block_structure", block)}.get(scales)
    if needs and needs[1] is None:      # compressed-tensors' QuantizationArgs refuse the strategy without it
        raise InputError(file, f"{path}.weights.{needs[0]}", f"missing; the {strategy} strategy states it")
    common = {"scales": scales, "group_size": w["group_size"] if scales == "group" else None,
              "block_size": block if scales == "block" else None}
    scale = next((b for name, b in SCALE_DTYPE_BYTES.items() if name in str(w["scale_dtype"] or "")), 2)
    if kind == "float" and bits == 8:
        if act_kind not in (None, "fp8"):
            return f"FP8 weights with {act_kind} activations are not modelled"
        common.update(format="fp8", bits=8, scale_bytes=scale, activations=act_kind or WEIGHT_ONLY,
                      static_activations=act_kind is not None and not dynamic)
    elif kind == "float" and bits == 4 and w["group_size"] in (16, 32):
        fmt = "nvfp4" if w["group_size"] == 16 else "mxfp4"
        if act_kind not in (None, "fp4"):
            return f"{fmt.upper()} weights with {act_kind} activations are not modelled"
        common.update(format=fmt, bits=4, scale_bytes=1, activations=act_kind or WEIGHT_ONLY,
                      static_activations=fmt == "nvfp4" and act_kind == "fp4")
    elif kind == "int" and bits == 8 and act_kind == "int8":
        common.update(format="int8", bits=8, scale_bytes=scale, activations="int8", static_activations=not dynamic)
    elif kind == "int" and bits in (4, 8) and act_kind is None:     # WNA16: GPTQ-style integer weights
        common.update(format="gptq", bits=bits, scale_bytes=scale, zero_points=not w["symmetric"])
        if scales not in ("group", "channel"):
            return f"integer weights with {scales} scales are not modelled"
    else:
        return (f"compressed-tensors weights of {bits}-bit {kind} with "
                f"{act_kind or '16-bit'} activations are not modelled")
    return tuple(sorted(common.items()))
