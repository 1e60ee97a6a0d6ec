"""The workload and SLO that command-line flags state (`--rate`, `--prompt-tokens`, `--ttft-ms`, ...): `Traffic`,
and a scenario's mappings with them in place of its own. Plan, simulate and check read them; a manifest's
`sizer:` block is one more source (sizer/inputs/manifest.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sizer.errors import InputError
from sizer.inputs.scenario import MIN_RATE_PER_S


@dataclass(frozen=True)
class Traffic:
    """Workload and SLO from `sizer check`'s flags; each one given replaces the `sizer:` block's (or the
    scenario's) value. Token counts are fixed lengths. `share`: the share of the workload's requests
    this deployment serves (several deployments behind one router splitting one workload): its
    arrival rate is the workload's times `share` (a trace's inter-arrival times divided by it)."""
    rate_per_s: float | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    ttft_ms: float | None = None
    itl_ms: float | None = None
    share: float | None = None
    tpot_ms: float | None = None

    def flags(self) -> str:
        """The flags given, as a command line writes them again (a re-check with the same workload and SLO)."""
        given = (("--rate", self.rate_per_s), ("--prompt-tokens", self.prompt_tokens),
                 ("--output-tokens", self.output_tokens), ("--ttft-ms", self.ttft_ms), ("--itl-ms", self.itl_ms),
                 ("--tpot-ms", self.tpot_ms), ("--share", self.share))
        # every digit (a whole number without its point)
        return " ".join(f"{flag} {int(value) if float(value).is_integer() else repr(value)}"
                        for flag, value in given if value is not None)


_TOKEN_FLAGS = {"prompt_tokens": "--prompt-tokens", "output_tokens": "--output-tokens"}


def with_traffic(workload: dict, slo: dict, traffic: Traffic) -> tuple[dict, dict]:
    """`workload` and `slo` (scenario mappings) with the flags' values in place of theirs. A workload
    that a flag completes must then be whole: a rate and both lengths (or a trace)."""
    workload, slo = dict(workload), dict(slo)
    if workload.get("trace"):
        for key, flag in (("rate_per_s", "--rate"), *_TOKEN_FLAGS.items()):
            if getattr(traffic, key) is not None:
                raise InputError(None, flag, "not with the workload's trace, which replays its own arrivals and "
                                             "lengths (--share scales its rate)")
    if traffic.rate_per_s is not None:
        workload["arrival"] = {**(workload.get("arrival") or {}), "rate_per_s": traffic.rate_per_s}
    for key in _TOKEN_FLAGS:
        value = getattr(traffic, key)
        if value is not None:
            workload[key] = {"distribution": "fixed", "value": value}
    for key in ("ttft_ms", "itl_ms", "tpot_ms"):
        if getattr(traffic, key) is not None:
            slo[key] = getattr(traffic, key)
    if traffic.share is not None:
        if workload.get("trace"):
            trace = workload["trace"]
            workload["trace"] = {**trace, "time_scale": (trace.get("time_scale") or 1.0) / traffic.share}
        elif (workload.get("arrival") or {}).get("rate_per_s") is not None:
            arrival = workload["arrival"]
            rate = arrival["rate_per_s"]
            # (a rate of another type the scenario's own check refuses, naming its field)
            numeric = isinstance(rate, int | float) and not isinstance(rate, bool)
            if numeric and 0 < rate * traffic.share < MIN_RATE_PER_S:
                least, scaled = MIN_RATE_PER_S / rate, rate * traffic.share
                raise InputError(None, "--share", f"expected at least {least:.3g}: {traffic.share:g} of the "
                                                  f"workload's {rate:g} req/s is {scaled:.3g} req/s, below the "
                                                  f"smallest rate sizer takes ({MIN_RATE_PER_S:g} req/s)")
            workload["arrival"] = {**arrival, "rate_per_s": rate * traffic.share}
    if dataclasses.replace(traffic, share=None) != Traffic() and not workload.get("trace"):
        missing = [flag for key, flag in (("rate_per_s", "--rate"), *_TOKEN_FLAGS.items())
                   if (workload.get("arrival") or {}).get(key) is None and workload.get(key) is None]
        if missing:
            raise InputError(None, missing[0], "missing; a workload needs --rate, --prompt-tokens and "
                                               "--output-tokens (or a `sizer:` block or --scenario that states them)")
    if traffic.share is not None and not (workload.get("trace") or (workload.get("arrival") or {}).get("rate_per_s")):
        if (workload.get("arrival") or {}).get("process") == "closed":
            raise InputError(None, "--share", "a closed loop's clients set its rate, so it has none to take a share "
                                              "of; state this deployment's own concurrency")
        raise InputError(None, "--share", "needs a workload to take a share of (--rate, a `sizer:` block "
                                          "or --scenario)")
    return workload, slo
