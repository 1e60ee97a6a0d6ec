"""Which copies of a matrix a checkpoint's module patterns name, as checkpoints spell them.

A checkpoint names a matrix by its full path: `model.layers.12.self_attn.q_proj` (Llama, Qwen,
DeepSeek), `language_model.model.layers.12.self_attn.q_proj` (Llama-4's wrapper),
`model.language_model.layers.12.linear_attn.in_proj_qkvz` (Qwen3.5, Gemma wrappers),
`backbone.layers.12.mixer.q_proj` (NemotronH). sizer names a matrix by its module inside a layer
(`LinearGroup.name`, spelled as sizer.inputs.layers writes it) and the layers that hold it. Each
layer's copy is tried under every root above and in its family's spelling (`SPELLINGS`), with
fused matrices split as checkpoints store them (`gate_up_proj` is `gate_proj` and `up_proj`).

Patterns match the way the quantisation libraries match them:

- "re:<regex>": the regex matches from the start of the name (compressed-tensors, vLLM's re.match);
- a glob (`*`, `?`, `[`): the whole name or one of its parent modules (ModelOpt's fnmatch; a module
  excluded with Hugging Face's `modules_to_not_convert` takes everything under it along);
- a plain name: the name or a parent module ends with it at a dot (`lm_head` names
  `language_model.lm_head`, `self_attn` names every attention projection, a full path names itself).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from functools import lru_cache

CANONICAL = "model.layers."
ROOTS = ("model.layers.", "language_model.model.layers.", "model.language_model.layers.", "backbone.layers.",
         "language_model.layers.")
# Families whose checkpoints spell modules differently from sizer: (architecture prefix, renames of
# sizer's module path prefix); the first rename that applies replaces sizer's spelling.
SPELLINGS = (
    ("Llama4", (("mlp.shared_experts.", "feed_forward.shared_expert."), ("mlp.", "feed_forward."))),
    ("NemotronH", (("self_attn.", "mixer."), ("mlp.", "mixer."))),
    ("Qwen", (("mlp.shared_experts.", "mlp.shared_expert."),)),
    # Gemma-4 MoE layers: the dense MLP beside the experts is `mlp`, the experts and router sit on the layer
    ("Gemma4", (("mlp.shared_experts.", "mlp."), ("mlp.experts.", "experts."), ("mlp.gate", "router"))),
)
# sizer's fused matrices and the matrices checkpoints store instead
FUSED = {"gate_up_proj": ("gate_proj", "up_proj"), "in_proj_qkvz": ("in_proj_qkv", "in_proj_z"),
         "in_proj_ba": ("in_proj_b", "in_proj_a")}
VISION_WORDS = ("visual", "vision", "mm_projector", "multi_modal_projector", "patch_embed", "merger")
_LAYER = re.compile(r"model\.layers\.(\d+)\.")


def spellings(module: str, architecture: str) -> tuple[str, ...]:
    """`module` as its family's checkpoints spell it: fused (as sizer counts it) and split (as most checkpoints
    store it), and with an expert index (checkpoints that store each expert: `experts.0.gate_proj`)."""
    renames = next((r for prefix, r in SPELLINGS if architecture.startswith(prefix)), ())
    ours, theirs = next(((o, t) for o, t in renames if module.startswith(o)), ("", ""))
    name = theirs + module[len(ours):]
    parent, _, leaf = name.rpartition(".")
    out = []
    for part in (leaf, *FUSED.get(leaf, ())):
        full = f"{parent}.{part}" if parent else part
        out += [full, full.replace("experts.", "experts.0.", 1)] if ".experts." in f".{full}" else [full]
    return tuple(out)


def _canonical(pattern: str) -> str:
    for root in ROOTS:
        if pattern.startswith(root):
            return CANONICAL + pattern[len(root):]
    return pattern


def _tests(pattern: str):
    """A test on a canonical name (with its parents) for a plain name or glob."""
    if any(c in pattern for c in "*?["):
        rx = re.compile(fnmatch.translate(pattern))
        return lambda name: any(rx.match(part) for part in _parents(name))
    dotted = f".{pattern}."
    return lambda name: dotted in f".{name}."


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]


@dataclass(frozen=True)
class Compiled:
    by_layer: dict[int, tuple]           # tests of patterns that name one layer, by its index
    anywhere: tuple                      # tests of the other plain names and globs
    regexes: tuple[re.Pattern, ...]      # "re:" patterns, tried under every root


@lru_cache(maxsize=64)
def compile_patterns(patterns: tuple[str, ...]) -> Compiled:
    by_layer: dict[int, list] = {}
    anywhere, regexes = [], []
    for p in patterns:
        if p.startswith("re:"):
            regexes.append(re.compile(p[3:]))
            continue
        canon = _canonical(p)
        m = _LAYER.match(canon)
        (by_layer.setdefault(int(m[1]), []) if m else anywhere).append(_tests(canon))
    return Compiled({i: tuple(t) for i, t in by_layer.items()}, tuple(anywhere), tuple(regexes))


def _names(compiled: Compiled, names: tuple[str, ...], layer: int) -> bool:
    tests = compiled.anywhere + compiled.by_layer.get(layer, ())
    if any(test(name) for test in tests for name in names):
        return True
    return any(rx.match(root + name[len(CANONICAL):]) for rx in compiled.regexes for name in names for root in ROOTS)


@lru_cache(maxsize=4096)
def quantised_share(module: str, layers: tuple[int, ...], ignore: tuple[str, ...], targets: tuple[str, ...],
                    architecture: str) -> float:
    """Share of the layers holding `module` whose copy the patterns quantise: named by `targets`
    (every layer when there are none) and not named by `ignore`."""
    if not layers:
        return 1.0
    kept, wanted = compile_patterns(ignore), compile_patterns(targets)
    forms = spellings(module, architecture)
    quantised = 0
    for i in layers:
        names = tuple(f"{CANONICAL}{i}.{form}" for form in forms)
        if (not targets or _names(wanted, names, i)) and not _names(kept, names, i):
            quantised += 1
    return quantised / len(layers)


def mentions_vision(patterns: tuple[str, ...]) -> bool:
    """A vision tower is named as a whole: any pattern about it (`vision_tower*`, `model.visual*`, the
    vision blocks' own names) counts for all of it."""
    return any(word in p.lower() for p in patterns for word in VISION_WORDS)
