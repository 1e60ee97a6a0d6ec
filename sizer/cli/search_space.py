"""--gpus, --tp, --pp, --weights, --kv-cache-dtype, --slots and --speculative as the space that `sizer search` and
`sizer report` sweep: every value checked up front, one line naming the flag."""

from __future__ import annotations

import dataclasses
import typing

from sizer.cli.flags import check_choices, check_range, parallel_sizes, parse_list
from sizer.errors import InputError
from sizer.inputs.hardware import load_hardware, scenario_hardware
from sizer.inputs.scenario import MAX_SLOTS, KVCacheDtype, Scenario, WeightFormat
from sizer.sizing.presets import slot_preset
from sizer.sizing.search import SearchSpace, candidates, default_space
from sizer.words import count

# `sizer report`'s --gpus help: why its default space is the scenario's GPU alone.
REPORT_GPUS_HELP = ("profiles the search tries. Default: the scenario's GPU only (its TP sizes x weight x KV "
                    f"formats, {len(candidates(SearchSpace(gpus=('',))))} configurations), so that a report answers "
                    "for the hardware it names in minutes; every data-centre GPU (`sizer search`'s default) "
                    "multiplies that by their number, an hour on a loaded machine. llama.cpp and Ollama: the local "
                    "devices of the scenario's kind")


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


def report_space(scenario: Scenario, gpus: str | None, tp: str | None, weights: str | None, kv: str | None,
                 slots: str | None) -> SearchSpace:
    """`sizer report`'s space: search's, except that without --gpus it stays on the scenario's GPU
    (REPORT_GPUS_HELP says why); llama.cpp and Ollama keep their local devices (an analytic search of seconds)."""
    if gpus is None and slot_preset(scenario.deployment.engine) is None:
        gpus = scenario_hardware(scenario.hardware.gpu, scenario.file).id
    return space_from_options(scenario, gpus, tp, None, weights, kv, False, slots)


def describe_space(space: SearchSpace) -> str:
    """What a search tries, in one line: '16 configurations: GPUs h200; TP 1,2,4,8; weights bf16,fp8; KV auto,fp8'."""
    axes = [f"{'GPU' if len(space.gpus) == 1 else 'GPUs'} {','.join(space.gpus)}",
            f"TP {','.join(map(str, space.tensor_parallel_sizes))}"]
    if space.pipeline_parallel_sizes != (1,):
        axes.append(f"PP {','.join(map(str, space.pipeline_parallel_sizes))}")
    axes += [f"weights {','.join(space.weight_formats)}", f"KV {','.join(space.kv_cache_dtypes)}"]
    if space.slots != (None,):
        axes.append(f"slots {','.join(map(str, space.slots))}")
    if any(space.speculative):
        axes.append("speculative decoding on and off")
    return f"{count(len(candidates(space)), 'configuration')}: {'; '.join(axes)}"
