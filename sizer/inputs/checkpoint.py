"""Where a model's config.json comes from, and what the checkpoint folder holds beside it.

A model reference is, in this order: a path (a config.json, or a checkpoint folder holding one); a
name in the bundled catalog; or a Hugging Face model id `org/name`, found in the local Hugging
Face cache (`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`; the snapshot
that `refs/main` names, else the only one), else in sizer's bundled store of HF configs
(sizer.inputs.hf_store).
Nothing is ever downloaded. Beside config.json the folder may hold:

- `hf_quant_config.json`, NVIDIA ModelOpt's statement of the quantisation. vLLM reads it only when
  config.json has no `quantization_config`, and so does sizer (`Checkpoint.quantization`);
- `quantize_config.json` (AutoGPTQ) or `quant_config.json` (AutoAWQ), with no `quantization_config` in
  config.json: vLLM reads it only when told the method (`--quantization gptq|awq`; get_quant_config), and
  without the flag builds the model unquantised and fails on the packed `qweight` tensors. sizer reads it
  (`Checkpoint.sidecar`, quantization.parse_sidecar) and sizes it when that format is named, refusing it for
  `auto` in one line naming the file; beside a quantization_config (or hf_quant_config.json) it is not read, and
  the plan says so;
- a `.gguf` file instead of all of these: its metadata stands for config.json, its file type for the
  quantisation and its tensor table for the bytes (sizer.inputs.gguf_file);
- the weights: `model.safetensors.index.json` states their bytes (`metadata.total_size`) and the file
  of each tensor (`weight_map`); without it, each `.safetensors` file's header (an 8-byte
  little-endian length, then a JSON table of the tensors and their byte ranges) gives them. Only
  headers are read, never tensors. An index listing no tensor, or a `.safetensors` file holding
  none, is refused: it is not this model's weights. Where the shards the index names are all in the folder,
  their headers are read too, as vLLM and the safetensors library read the weights (neither reads
  `total_size`, which is the writer's sum): a tensor of the `weight_map` that no shard holds is refused (vLLM
  refuses a checkpoint that leaves a weight unloaded), the bytes are the headers', and a `total_size` that
  differs from them by more than the shards' own headers (8 bytes and the JSON table each, which a writer
  summing file sizes counts) is named in the plan. Where some shards are missing (an interrupted download),
  `total_size` stands and the plan names the missing ones; where none is (a config-only download), it stands.
  Packed integer weights in a header (`qweight`, `weight_packed`: I32) with no quantisation stated anywhere are
  refused for `auto` (`Checkpoint.packed`): vLLM would build the model unquantised and fail to load them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sizer.errors import InputError
from sizer.inputs.hf_store import BUNDLED, bundled
from sizer.inputs.quantization import AWQ_SIDECAR, GPTQ_SIDECAR, Quantization, parse_hf_quant_config, parse_sidecar
from sizer.kinds import kind
from validation.errors import excerpt
from validation.safe_load import load_json, read_text
from validation.safetensors import SafetensorsHeader, read_header

HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
INDEX = "model.safetensors.index.json"
# The most bytes an index may state: 2^50 (1 PiB), a thousand times the largest checkpoint published.
MAX_TOTAL_BYTES = 2**50
HF_QUANT_CONFIG = "hf_quant_config.json"
# An index's shard: a file of the checkpoint's folder (no folder part, no "..")
SHARD_NAME = re.compile(r"(?!\.\.?$)[^/\\]+")
# Files beyond this are refused (each one's header: validation/safetensors.py).
MAX_SAFETENSORS_FILES = 10_000


@dataclass(frozen=True)
class Checkpoint:
    """A model's config.json and what its folder says about the stored weights."""
    config: dict[str, Any]
    name: str
    config_file: str                   # where config.json was read (the catalog's file for a catalog name)
    found_as: str                      # "catalog", "path", the Hugging Face cache snapshot or sizer's bundled copy
    quantization: Quantization | None = None   # hf_quant_config.json, when the folder has one
    stored_bytes: int | None = None    # bytes of the tensors in the checkpoint files
    stored_bytes_source: str = ""      # where stored_bytes was read
    sidecar: Quantization | None = None   # quantize_config.json / quant_config.json, read where vLLM would
    notes: tuple[str, ...] = ()        # what the plan names about the folder (files not read, index and shards)
    packed: str = ""                   # a packed integer tensor the headers hold ("name (I32) in path"), else ""


@dataclass(frozen=True)
class StoredWeights:
    """What the folder's safetensors files say: their tensors' bytes, where those were read, notes, and the first
    packed integer tensor (GPTQ / AWQ / compressed-tensors' qweight or weight_packed) found."""
    bytes: int | None
    source: str
    notes: tuple[str, ...] = ()
    packed: str = ""


# Tensors holding integer weights packed eight 4-bit (or four 8-bit) values to an int32: AutoGPTQ's and AutoAWQ's
# qweight, compressed-tensors' weight_packed
PACKED_SUFFIXES = (".qweight", ".weight_packed")
PACKED_DTYPES = ("I32", "U32")


def hf_cache_dir() -> Path:
    """The Hugging Face hub cache, as huggingface_hub's constants resolve it."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HUGGINGFACE_HUB_CACHE"):       # the older spelling huggingface_hub still honours
        return Path(os.environ["HUGGINGFACE_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


def cached_snapshot(model_id: str, file: str | None, field_path: str) -> Path | None:
    """The folder of `model_id`'s snapshot in the local cache: the one refs/main names (which must be there, as
    huggingface_hub reads it), else the only one; None when the cache holds none."""
    cache = hf_cache_dir()
    repo = cache / ("models--" + model_id.replace("/", "--"))
    snapshots = repo / "snapshots"
    ref = repo / "refs" / "main"
    if os.path.lexists(ref):      # a folder, FIFO or dangling link there is refused by read_text, not passed over
        commit = read_text(ref, 1024, "refs file").strip()
        if not re.fullmatch(r"[0-9a-f]{7,64}", commit):
            raise InputError(str(ref), None, f"expected a commit hash (hexadecimal), got {excerpt(commit)}")
        if not (snapshots / commit).is_dir():
            raise InputError(str(ref), None, f"names snapshot {commit}, which is not in {snapshots} (an interrupted "
                                             "download?); download it again or give a snapshot folder")
        return snapshots / commit
    found = sorted(p for p in snapshots.iterdir() if p.is_dir()) if snapshots.is_dir() else []
    if len(found) == 1:
        return found[0]
    if found:
        raise InputError(file, field_path, f"Hugging Face model {excerpt(model_id)} has {len(found)} snapshots in "
                                           f"{snapshots} and no refs/main naming one; give the snapshot folder")
    return None


def beside(reference: str, folder: Path) -> str:
    """`reference` as a path under `folder` (a scenario's own folder) when one is there, else as given."""
    try:
        local = folder / reference
        return str(local) if local.exists() else reference
    except (OSError, ValueError):    # a name no file system takes: `locate` says so, naming the field
        return reference


class NotCachedError(InputError):
    """A Hugging Face id that is neither in the local cache nor among sizer's bundled configs (sizer never downloads):
    bad input where the model is needed, what a caller that can do without it (a speculative head, estimated
    instead) catches."""


def locate(reference: str, catalog_dir: Path, file: str | None, field_path: str) -> tuple[Path, str]:
    """(the config.json to read, how it was found) for a path, a catalog name or a cached Hugging Face id."""
    try:
        return _locate(reference, catalog_dir, file, field_path)
    except OSError as exc:   # a name the file system cannot take (too long, a NUL byte): not a model sizer can find
        raise InputError(file, field_path, f"cannot look up model {excerpt(reference)}: "
                                           f"{exc.strerror or type(exc).__name__}") from None


def _locate(reference: str, catalog_dir: Path, file: str | None, field_path: str) -> tuple[Path, str]:
    path = Path(reference)
    if "\0" in reference:
        raise OSError(0, "a NUL byte in the name")
    if path.is_dir():
        return path / "config.json", "path"
    if path.exists():
        return path, "path"
    entry = catalog_dir / f"{reference.lower()}.json"
    if path.suffix != ".json" and "/" not in reference and entry.exists():
        return entry, "catalog"
    if path.suffix == ".json":
        raise InputError(file, field_path, f"config file {excerpt(reference)} does not exist")
    if HF_ID.match(reference) and ".." not in reference:
        folder = cached_snapshot(reference, file, field_path)
        if folder is not None:
            return folder / "config.json", f"Hugging Face cache snapshot {folder.name[:12]} ({folder})"
        entry = bundled(reference)
        if entry is not None:
            return entry.config_path, "catalog" if entry.in_catalog else entry.found_as
        raise NotCachedError(file, field_path, f"Hugging Face model {excerpt(reference)} is not in the local "
                                               f"Hugging Face cache ({hf_cache_dir()}; sizer never downloads) nor in "
                                               "sizer's bundled HF configs (sizer/inputs/catalog/hf); fetch it first "
                                               f"(huggingface-cli download {reference} --include '*.json') or give a "
                                               "path to its config.json")
    known = ", ".join(sorted(p.stem for p in catalog_dir.glob("*.json")))
    raise InputError(file, field_path, f"unknown model {excerpt(reference)}; expected a catalog name ({known}), "
                                       "a path to a config.json or a checkpoint folder, or a Hugging Face id "
                                       "(org/name) in the local cache or sizer's bundled configs")


def find_config(reference: str, catalog_dir: Path, file: str | None = None,
                field_path: str = "model") -> tuple[Path, str]:
    """`locate`, and the config.json found there exists: what a reference needs before anything is read."""
    config_path, found_as = locate(reference, catalog_dir, file, field_path)
    if not config_path.exists():
        raise InputError(file, field_path, f"config file {excerpt(str(config_path))} does not exist")
    return config_path, found_as


def read_checkpoint(reference: str, catalog_dir: Path, file: str | None = None,
                    field_path: str = "model") -> Checkpoint:
    """config.json of `reference`, and, beside it, ModelOpt's hf_quant_config.json and the weights' bytes."""
    config_path, found_as = find_config(reference, catalog_dir, file, field_path)
    if config_path.suffix == ".gguf":            # a GGUF file: metadata for the config, its tensor table for bytes
        g = kind("gguf").read_gguf(config_path)
        return Checkpoint(g.config, g.name, str(config_path), found_as, g.quantization(), g.tensor_bytes,
                          g.tensor_source)
    config = load_json(config_path)
    if not isinstance(config, dict):
        raise InputError(str(config_path), None, "expected a JSON object")
    name = reference if HF_ID.match(reference) and found_as.startswith(("Hugging Face", BUNDLED)) else (
        config_path.parent.name if config_path.name == "config.json" else config_path.stem)
    if found_as == "catalog" or config_path.name != "config.json":    # a lone file, not a checkpoint folder
        return Checkpoint(config, name, str(config_path), found_as)
    folder = config_path.parent
    modelopt = folder / HF_QUANT_CONFIG
    quantization = parse_hf_quant_config(load_json(modelopt), str(modelopt)) if modelopt.exists() else None
    sidecar, notes = read_sidecar(folder, config, quantization is not None)
    w = read_weights(folder)
    return Checkpoint(config, name, str(config_path), found_as, quantization, w.bytes, w.source, sidecar,
                      notes + w.notes, w.packed)


def states_quantization(config: dict[str, Any]) -> str:
    """The key config.json (or its text_config) states a quantisation under, as vLLM looks for one; "" if none."""
    text = config.get("text_config")
    for prefix, data in (("", config), ("text_config.", text if isinstance(text, dict) else {})):
        for key in ("quantization_config", "compression_config"):
            if data.get(key) is not None:
                return prefix + key
    return ""


def read_sidecar(folder: Path, config: dict[str, Any], modelopt: bool) -> tuple[Quantization | None, tuple[str, ...]]:
    """AutoGPTQ's quantize_config.json or AutoAWQ's quant_config.json, read where vLLM's get_quant_config would
    (config.json states no quantisation, and no hf_quant_config.json stands for one); else named as not read."""
    found = [folder / n for n in (GPTQ_SIDECAR, AWQ_SIDECAR) if os.path.lexists(folder / n)]
    if not found:
        return None, ()
    stated = states_quantization(config) or (HF_QUANT_CONFIG if modelopt else "")
    if stated:
        return None, tuple(f"the checkpoint folder's {f.name} is not read: {stated} comes first, as in vLLM (which "
                           "reads the file only with --quantization and no quantisation stated)" for f in found)
    sidecar = parse_sidecar(load_json(found[0]), str(found[0]))
    notes: tuple[str, ...] = (f"quantisation read from the checkpoint's {found[0].name}: config.json states none, "
                              f"and vLLM reads that file when told the method (--quantization {sidecar.needs_flag})",)
    if len(found) == 2:
        notes += (f"{AWQ_SIDECAR} beside {GPTQ_SIDECAR} is not read: {GPTQ_SIDECAR} is (vLLM's --quantization "
                  "gptq reads it alone; --quantization awq finds both and refuses them)",)
    return sidecar, notes


def read_weights(folder: Path) -> StoredWeights:
    """The folder's safetensors files: the index's shards' headers where all are there (checked against its
    weight_map and total_size), its total_size where some or all are not, else every .safetensors file's header."""
    index = folder / INDEX
    if _exists(index):
        return _indexed_weights(folder, index)
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return StoredWeights(None, "")
    if len(files) > MAX_SAFETENSORS_FILES:
        raise InputError(str(folder), None, f"more than {MAX_SAFETENSORS_FILES} .safetensors files")
    seen: dict[str, str] = {}
    headers = [_header(f, seen) for f in files]
    return StoredWeights(sum(h.tensor_bytes for h in headers), f"headers of {len(files)} .safetensors file(s)",
                         packed=_packed(files, headers))


def _exists(path: Path) -> bool:
    """Whether `path` is there: False for nothing or a link to nothing (a file not downloaded: the Hugging Face cache
    links each file to its blob); a link loop, or a path that cannot be looked at, refused as reading it would be
    (Path.exists() is False on a loop, which left an index or a shard silently unread)."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        raise InputError(str(path), None, f"cannot read: {exc.strerror or exc}") from None
    return True


def _indexed_weights(folder: Path, index: Path) -> StoredWeights:
    total, weights = _read_index(index)
    shards = sorted(set(weights.values()))
    if len(shards) > MAX_SAFETENSORS_FILES:
        raise InputError(str(index), "weight_map", f"names more than {MAX_SAFETENSORS_FILES} .safetensors files")
    from_index = StoredWeights(total, f"{INDEX} metadata.total_size")
    present = [folder / s for s in shards if _exists(folder / s)]   # a dangling link: missing
    if not present:            # a config-only download: the index's word is all there is
        return from_index
    seen: dict[str, str] = {}
    headers = [_header(f, seen) for f in present]
    packed = _packed(present, headers)
    if len(present) < len(shards):
        missing = [s for s in shards if not _exists(folder / s)]
        return replace(from_index, packed=packed, notes=(
            f"{len(missing)} of the {len(shards)} shard files {INDEX} names are not in the folder "
            f"({', '.join(excerpt(m) for m in missing[:3])}{', ...' if len(missing) > 3 else ''}): an interrupted "
            "download? stored bytes from its metadata.total_size; vLLM would fail to load the missing weights",))
    for tensor, shard in weights.items():
        if tensor not in seen:
            raise InputError(str(index), f"weight_map.{excerpt(tensor, quote=False)}",
                             f"names {excerpt(shard)}, but no shard's header holds that tensor: expected the shards "
                             "to hold every tensor the index lists (vLLM refuses a checkpoint that leaves a weight "
                             "unloaded)")
    held = sum(h.tensor_bytes for h in headers)
    overhead = sum(h.data_start_bytes for h in headers)     # a writer summing file sizes counts these too
    notes = ()
    if abs(total - held) > overhead:
        notes = (f"{INDEX} metadata.total_size states {total:,} bytes, but the {len(shards)} shards' headers hold "
                 f"{held:,} bytes of tensors ({total - held:+,}, more than the {overhead:,} bytes of the headers "
                 "themselves): stored bytes from the headers, which vLLM and the safetensors library read "
                 "(neither reads total_size)",)
    return StoredWeights(held, f"headers of the {len(shards)} .safetensors file(s) {INDEX} names", notes, packed)


def _packed(files: list[Path], headers: list[SafetensorsHeader]) -> str:
    for f, h in zip(files, headers, strict=True):
        for name, entry in h.tensors.items():
            if name.endswith(PACKED_SUFFIXES) and entry.get("dtype") in PACKED_DTYPES:
                return f"{excerpt(name, quote=False)} ({entry['dtype']}) in {f}"
    return ""


def _read_index(index: Path) -> tuple[int, dict[str, str]]:
    """The index's total_size and weight_map (tensor -> shard file), checked."""
    data = load_json(index)
    if not isinstance(data, dict):
        raise InputError(str(index), None, f"expected a JSON object (metadata, weight_map), got {excerpt(data)}")
    metadata = data.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise InputError(str(index), "metadata", f"expected a mapping with total_size, got {excerpt(metadata)}")
    total = (metadata or {}).get("total_size")
    if isinstance(total, bool) or not isinstance(total, (int, float)) or not 0 < total < MAX_TOTAL_BYTES \
            or total != int(total):
        raise InputError(str(index), "metadata.total_size", f"expected a byte count (an integer from 1 to "
                                                            f"{MAX_TOTAL_BYTES:,}), got {excerpt(total)}")
    weights = data.get("weight_map")
    if not (isinstance(weights, dict) and weights and all(isinstance(v, str) for v in weights.values())):
        raise InputError(str(index), "weight_map", f"expected a mapping of each tensor's name to its .safetensors "
                                                   f"file, got {excerpt(weights)}")
    for tensor, shard in weights.items():   # the shards need not be here (a config-only download), but are named
        if not SHARD_NAME.fullmatch(shard):     # as files of this folder, as transformers joins them to it
            raise InputError(str(index), f"weight_map.{excerpt(tensor, quote=False)}",
                             f"expected a file name in the checkpoint's folder, got {excerpt(shard)}")
    return int(total), weights


def _header(path: Path, seen: dict[str, str] | None = None) -> SafetensorsHeader:
    header = read_header(path, InputError)
    if not header.tensors:
        raise InputError(str(path), "header", "no tensors; expected the model's weights")
    for name in header.tensors if seen is not None else ():
        if name in seen:
            raise InputError(str(path), f"header.{excerpt(name, quote=False)}",
                             f"also in {excerpt(seen[name])}; expected each tensor in one file")
        seen[name] = path.name
    return header
