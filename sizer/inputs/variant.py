"""A variant of a scenario: the typed changes that CLI flags, search candidates, check's fixes and sweep points
make to a scenario. Each change sets a field of the typed scenario (`dataclasses.replace` on its sections), checked
by that field's own declaration, and the scenario's cross-field rules are checked again on the result. Where each
change lands is `SETTABLE` in sizer/inputs/scenario.py; the clears are here.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, replace
from typing import Any

from sizer.inputs.hardware import other_device
from sizer.inputs.scenario import (
    SETTABLE,
    Scenario,
    _refuse_huge_integers,
    checked_scenario,
    in_source_order,
)
from validation.schema import build, field_value

# Flags that remove a stated value, so that its default applies again.
_CLEARS = {
    "clear_replicas": "deployment.replicas",                    # the sizing pipeline chooses replicas
    "clear_speculative": "deployment.speculative_config",       # speculative decoding off
    "clear_calibrated_profile": "hardware.calibrated_profile",  # a profile prices its own GPU only
    "clear_kernel_tables": "hardware.kernel_tables",            # so do a scenario's own kernel tables
}
# Flags that remove several stated values: a scenario's hardware overrides describe its own device only; a closed
# loop's clients set the rate, and send as answers come (no gamma gaps of burstiness cv).
_CLEAR_GROUPS = {
    "clear_hardware_overrides": tuple(f"hardware.{key}" for key in
                                      ("memory_gb", "memory_bandwidth_gb_per_s", "gpu_working_set_fraction")),
    "clear_rate": ("workload.arrival.rate_per_s", "workload.arrival.cv"),
}
# A stated price is its own GPU's: every variant onto another device (plan --gpu, a search candidate, a sweep point)
# clears it, and the profile's price applies (docs/sizing.md, "Cost").
PRICE = "cost.price_usd_per_gpu_hour"
# Changes that set a length distribution to one fixed length (--prompt-tokens, --output-tokens).
_FIXED_LENGTHS = ("prompt_tokens", "output_tokens")
# The required inputs a variant may name: a scenario from flags alone (`plan --model X --gpu Y`) is made of them.
_REQUIRED = ("model", "gpu")


@dataclass(frozen=True)
class Variant:
    """Changes to a scenario; None keeps the scenario's value."""
    model: str | None = None
    gpu: str | None = None
    calibrated_profile: str | None = None
    memory_gb: float | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    max_model_len: int | None = None
    replicas: int | None = None
    rate_per_s: float | None = None
    num_requests: int | None = None
    arrival_process: str | None = None
    concurrency: int | None = None
    engine: str | None = None
    data_parallel_size: int | None = None
    enable_expert_parallel: bool | None = None
    enable_attention_dp: bool | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    num_speculative_tokens: int | None = None
    ttft_ms: float | None = None
    itl_ms: float | None = None
    e2e_ms: float | None = None
    prompt_tokens: int | None = None       # a fixed length (--prompt-tokens): the workload's whole distribution
    output_tokens: int | None = None
    tpot_ms: float | None = None
    seed: int | None = None
    trace_time_scale: float | None = None
    parallel: int | None = None
    ctx_size: int | None = None
    num_parallel: int | None = None
    clear_replicas: bool = False
    clear_speculative: bool = False
    clear_calibrated_profile: bool = False
    clear_kernel_tables: bool = False
    clear_rate: bool = False
    clear_hardware_overrides: bool = False

    def fields_set(self) -> dict[str, str]:
        """Variant field -> the dotted scenario path it sets, for every change this variant makes."""
        return {name: path for name, path in SETTABLE.items() if getattr(self, name) is not None}

    def required_inputs(self) -> dict[str, dict[str, str]]:
        """Section -> {key: value} of the required inputs this variant names (model.name, hardware.gpu), which fill
        a scenario mapping that lacks them before it is read: that is making the input, not changing it."""
        out: dict[str, dict[str, str]] = {}
        for name in _REQUIRED:
            if getattr(self, name) is not None:
                section, key = SETTABLE[name].split(".")
                out[section] = {key: getattr(self, name)}
        return out

    def apply(self, scenario: Scenario) -> Scenario:
        """`scenario` with these changes made to its typed sections: each value checked by the declaration of the
        field it sets (refused in one line naming that field, as the same value in the file would be), a section
        a change needs and the scenario lacks built from that value and its declared defaults, each cleared value
        back to its default; then the engine chosen again where no one named it and the cross-field rules checked
        on the result. The sources stay beside the values: a set value is stated, a cleared one a default."""
        sources, own_gpu, price = dict(scenario.sources), scenario.hardware.gpu, scenario.cost.price_usd_per_gpu_hour
        cleared = self._cleared(own_gpu, scenario.file)
        for path, value in self._changes():
            scenario = _set(scenario, path.split("."), value, "", scenario.file)
            sources[path] = "scenario"
        for path in cleared:
            scenario = _clear(scenario, path.split("."))
            sources = {p: s for p, s in sources.items() if p != path and not p.startswith(path + ".")}
        if PRICE in cleared and price is not None:
            sources[PRICE] = f"not the scenario's ${price:g}, stated for its {own_gpu}"
        scenario = replace(scenario, sources=in_source_order(sources))
        if self.engine is not None:
            scenario = replace(scenario, engine_source="scenario")
        return checked_scenario(scenario)

    def stated_in(self, data: dict, own_gpu: str) -> dict:
        """A copy of the scenario mapping `data` (whose hardware.gpu is `own_gpu`) stating these changes: a sweep
        point's identity, which its hash and seed derive from (sizer/sizing/sweep.py `point_hash`), so a stored sweep
        resumes under the same keys. The scenario itself is changed by `apply`."""
        for path, value in self._changes():
            data = _stated(data, tuple(path.split(".")), value)
        for path in self._cleared(own_gpu, None):
            data = _stated(data, tuple(path.split(".")), None)
        return data

    def _changes(self) -> list[tuple[str, Any]]:
        """(path, value as the scenario states it) of every change this variant makes, in SETTABLE's order."""
        out = []
        for name, path in SETTABLE.items():
            value = getattr(self, name)
            if value is not None:
                out.append((path, {"distribution": "fixed", "value": value} if name in _FIXED_LENGTHS else value))
        return out

    def _cleared(self, own_gpu: str, file: str | None) -> list[str]:
        """The paths this variant clears, in order, of a scenario on `own_gpu` (read relative to `file`)."""
        paths = [path for name, path in _CLEARS.items() if getattr(self, name)]
        paths += [PRICE] if other_device(self.gpu, own_gpu, file) else []
        return paths + [path for name, group in _CLEAR_GROUPS.items() if getattr(self, name) for path in group]


def _section_type(cls: type, name: str) -> type:
    """The dataclass an optional section field of `cls` holds (DeploymentSection.speculative_config:
    SpeculativeSection)."""
    hint = typing.get_type_hints(cls)[name]
    return next(a for a in (*typing.get_args(hint), hint) if dataclasses.is_dataclass(a))


def _nested(keys: list[str], value: Any) -> Any:
    """{k0: {k1: ... value}}: what a mapping states for `value` at keys."""
    return {keys[0]: _nested(keys[1:], value)} if keys else value


def _set(section: Any, keys: list[str], value: Any, path: str, file: str | None) -> Any:
    """A copy of typed `section` with section.k0.k1... = value, the value checked by its field's declaration. An
    absent section on the way is built from the value and its declaration's defaults, so a section that needs more
    (a speculative_config's method) is refused as a mapping without it would be."""
    name, *rest = keys
    where = f"{path}.{name}" if path else name
    if not rest:
        _refuse_huge_integers(value, where, file)
        return replace(section, **{name: field_value(type(section), name, value, where, file)})
    inner = getattr(section, name)
    if inner is None:
        _refuse_huge_integers(value, f"{where}.{'.'.join(rest)}", file)
        inner = build(_section_type(type(section), name), _nested(rest, value), where, file)
    else:
        inner = _set(inner, rest, value, where, file)
    return replace(section, **{name: inner})


def _clear(section: Any, keys: list[str]) -> Any:
    """A copy of typed `section` with section.k0.k1... back to None (an absent section on the way: unchanged)."""
    name, *rest = keys
    if not rest:
        return replace(section, **{name: None})
    inner = getattr(section, name)
    return section if inner is None else replace(section, **{name: _clear(inner, rest)})


def _stated(data: dict, path: tuple[str, ...], value: object) -> dict:
    """A copy of mapping `data` with data[k0][k1]... = value, creating sections as needed."""
    head, *rest = path
    inner = data.get(head)
    return {**data, head: _stated(inner if isinstance(inner, dict) else {}, tuple(rest), value) if rest else value}
