"""Option parsing that several commands share (search and report sweep the same space)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sizer.errors import InputError
from sizer.inputs.hardware import all_profiles, load_hardware
from sizer.inputs.safe_load import excerpt, load_yaml
from sizer.inputs.scenario import load_scenario
from sizer.sizing.search import SearchSpace


def parse_list(text: str | None, cast, flag: str) -> tuple | None:
    """`1,2,4` -> (1, 2, 4); None stays None (the default applies)."""
    if text is None:
        return None
    try:
        items = tuple(cast(x.strip()) for x in text.split(",") if x.strip())
    except ValueError:
        raise InputError(None, flag, f"expected a comma-separated list, got {excerpt(text)}") from None
    if not items:
        raise InputError(None, flag, "expected at least one value")
    return items


def space_from_options(gpus: str | None, tp: str | None, pp: str | None, weights: str | None, kv: str | None,
                       speculative: bool):
    """The sweep the flags ask for; GPUs by id or alias, default every profile."""
    gpu_ids = tuple(dict.fromkeys(load_hardware(g, None, "--gpus").id for g in parse_list(gpus, str, "--gpus") or ()))
    defaults = SearchSpace(gpus=gpu_ids or tuple(all_profiles()))
    return dataclasses.replace(
        defaults,
        tensor_parallel_sizes=parse_list(tp, int, "--tp") or defaults.tensor_parallel_sizes,
        pipeline_parallel_sizes=parse_list(pp, int, "--pp") or defaults.pipeline_parallel_sizes,
        weight_formats=parse_list(weights, str, "--weights") or defaults.weight_formats,
        kv_cache_dtypes=parse_list(kv, str, "--kv-cache-dtype") or defaults.kv_cache_dtypes,
        speculative=(True, False) if speculative else (False,))


def read_scenario_data(path: Path) -> dict:
    """The scenario as a mapping (sweeps apply overrides to it); validated by the first load."""
    load_scenario(path)
    return load_yaml(path)
