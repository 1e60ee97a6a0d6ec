"""Energy: power per GPU by what it does, and the energy, kWh and carbon of serving tokens.

    power per GPU   idle x (1 - busy) + busy x (prefill x compute-bound share + decode x (1 - that share))
                    busy: the share of time the GPU runs steps; compute-bound: steps of more tokens than
                    the ridge (below)
    ridge tokens    peak bf16 FLOP/s / memory bandwidth: a step of n tokens does 2 FLOPs per parameter per
                    token against 2 bytes per bf16 parameter read once, so above n = FLOP/s / (B/s) it is
                    compute-bound (prefill-bound), below it memory-bound (decode-bound)
    kWh             watts x GPUs x seconds x PUE / 3.6e6
    per million     kWh / tokens x 1e6;  gCO2e = kWh x grid gCO2e per kWh

A profile's `power:` gives the three figures with its sources; a profile with only `tdp_w` is priced at
the fractions below of its board power (an assumption, named in every plan that uses it).
"""

from __future__ import annotations

from dataclasses import dataclass

from sizer.inputs.hardware import HardwareSpec

# Without a `power:` section: idle and decode-bound power as shares of TDP, from the H100 SXM figures
# (hardware_profiles/h100-sxm.yaml: 80 W idle and 450 W decode-bound of 700 W).
IDLE_SHARE_OF_TDP = 80 / 700
DECODE_SHARE_OF_TDP = 450 / 700
J_PER_KWH = 3.6e6


@dataclass(frozen=True)
class PowerByState:
    idle_w: float
    decode_w: float
    prefill_w: float
    source: str


def power_by_state(hw: HardwareSpec) -> PowerByState | None:
    """The profile's power figures; else shares of its TDP (stated); None without either."""
    p = hw.power_w
    if p and {"idle_w", "decode_w", "prefill_w"} <= p.keys():
        return PowerByState(p["idle_w"], p["decode_w"], p["prefill_w"], f"{hw.id} profile: {hw.power_source}")
    if hw.tdp_w:
        return PowerByState(hw.tdp_w * IDLE_SHARE_OF_TDP, hw.tdp_w * DECODE_SHARE_OF_TDP, hw.tdp_w,
                            f"assumption: the H100 SXM's idle and decode shares of TDP applied to {hw.id}'s "
                            f"{hw.tdp_w:g} W TDP")
    return None


def no_power_reason(hw: HardwareSpec) -> str:
    """Why `power_by_state(hw)` is None, in the words the plan prints."""
    if hw.mig_slice:
        return (f"NVIDIA publishes no power for a MIG slice, and {hw.id} is one (its board's figures are not "
                f"the slice's)")
    return f"the {hw.id} profile gives no power figures and no tdp_w (its power: section or tdp_w sets them)"


def ridge_tokens(hw: HardwareSpec) -> float:
    """Tokens per step above which a step is compute-bound (bf16 weights): peak FLOP/s / bandwidth."""
    return hw.peak_flops("bf16") / hw.memory_bandwidth_bytes_per_s


def mean_power_w(p: PowerByState, busy_share: float, compute_bound_share: float) -> float:
    """Mean watts of one GPU busy `busy_share` of the time, `compute_bound_share` of that in compute-bound steps."""
    running = p.prefill_w * compute_bound_share + p.decode_w * (1.0 - compute_bound_share)
    return p.idle_w * (1.0 - busy_share) + running * busy_share


def kwh(watts: float, seconds: float, pue: float = 1.0) -> float:
    """Energy drawn at `watts` for `seconds`, with the facility's PUE."""
    return watts * seconds * pue / J_PER_KWH


def per_million(total: float, tokens: float) -> float | None:
    """`total` (kWh, gCO2e) per million tokens; None without tokens."""
    return total / tokens * 1e6 if tokens > 0 else None
