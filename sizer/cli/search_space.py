"""--gpus, --tp, --pp, --weights, --kv-cache-dtype, --slots and --speculative as the space that `sizer search` and
`sizer report` sweep: every value checked up front, one line naming the flag."""

from __future__ import annotations

import dataclasses
import typing

from simulator.errors import excerpt
from sizer.cli.flags import check_choices, check_range
from sizer.errors import InputError
from sizer.inputs.hardware import load_hardware
from sizer.inputs.scenario import MAX_REPLICAS, MAX_SLOTS, KVCacheDtype, Scenario, WeightFormat
from sizer.sizing.presets import slot_preset
from sizer.sizing.search import SearchSpace, default_space


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


def parallel_sizes(text: str | None, flag: str) -> tuple | None:
    """`1,2,4` as parallel degrees: whole numbers from 1 to MAX_REPLICAS."""
    sizes = parse_list(text, int, flag)
    for size in sizes or ():
        check_range(size, flag, 1, MAX_REPLICAS)
    return sizes


def space_from_options(scenario: Scenario, gpus: str | None, tp: str | None, pp: str | None, weights: str | None,
                       kv: str | None, speculative: bool, slots: str | None = None) -> SearchSpace:
    """The sweep the flags ask for, every value checked (one line naming the flag); what a flag leaves out is
    the scenario's default space (`default_space`: its engine's); GPUs by id or alias."""
    engine = scenario.deployment.engine
    if slots is not None and slot_preset(engine) is None:
        raise InputError(None, "--slots", f"sets llama.cpp's and Ollama's parallel slots; this scenario's engine is "
                                          f"{engine} (its batch is deployment.max_num_seqs)")
    slot_counts = parse_list(slots, int, "--slots")
    for n in slot_counts or ():
        check_range(n, "--slots", 1, MAX_SLOTS)
    gpu_ids = tuple(dict.fromkeys(load_hardware(g, None, "--gpus").id for g in parse_list(gpus, str, "--gpus") or ()))
    defaults = default_space(scenario)
    return dataclasses.replace(
        defaults,
        gpus=gpu_ids or defaults.gpus,
        slots=slot_counts or defaults.slots,
        tensor_parallel_sizes=parallel_sizes(tp, "--tp") or defaults.tensor_parallel_sizes,
        pipeline_parallel_sizes=parallel_sizes(pp, "--pp") or defaults.pipeline_parallel_sizes,
        weight_formats=check_choices(parse_list(weights, str, "--weights"), "--weights", typing.get_args(WeightFormat))
        or defaults.weight_formats,
        kv_cache_dtypes=check_choices(parse_list(kv, str, "--kv-cache-dtype"), "--kv-cache-dtype",
                                                 typing.get_args(KVCacheDtype))
        or defaults.kv_cache_dtypes,
        speculative=(True, False) if speculative else (False,))
