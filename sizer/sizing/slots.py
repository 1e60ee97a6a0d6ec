"""Answers in a small deployment's own terms (llama.cpp and Ollama): does it fit in this machine's memory and
what is left over, how fast each user's tokens come at 1..N parallel users, the time to the first token of
the scenario's prompt, the longest context a slot could have, and which weight format and slot count reach a
target speed per user.

Per-user speed at b parallel users is one token per decode step of b sequences: 1 / period(step(b)), the
engine loop's period around the step model's time (the simulator's own step price), at the context of a
request halfway through its answer. The target speed is 1000 / slo.itl_ms (an inter-token latency of
itl_ms is that many tokens a second), or 1000 / slo.tpot_ms, the tighter when both are stated: every busy slot
gets one token a step, so its gaps and its time per output token are the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from sizer.analytic.format_support import execution
from sizer.analytic.formats import weight_format
from sizer.analytic.memory import KVLayout, largest_fitting, memory_budget, weight_memory
from sizer.analytic.offload import all_layers_on_gpu
from sizer.errors import InputError
from sizer.inputs.scenario import MAX_SLOTS
from sizer.sizing.resolve import Resolved, SlotSettings
from sizer.timing.roofline import RooflineStepTimeModel, decode_batch, prefill_time_s

# GGUF presets the recommendation tries, highest precision first (sizer.inputs.gguf_types.PRESETS).
FORMAT_CANDIDATES = ("f16", "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q3_k_m")
LONGEST_CONTEXT = 1 << 31     # the search bound for the longest context (the model's max_position_embeddings caps it)


@dataclass(frozen=True)
class UserSpeed:
    users: int                        # parallel users, each decoding
    step_ms: float                    # one decode step of `users` sequences, engine loop included
    tokens_per_s_per_user: float      # 1000 / step_ms


@dataclass(frozen=True)
class FormatOption:
    format: str
    weights_bytes: float
    fits: bool                        # weights, the scenario's context per slot for one slot, compute buffer
    slots_that_fit: int               # slots of the scenario's context per slot that memory holds (<= 256)
    users_at_target: int              # most parallel users each at the target speed, within slots_that_fit
    tokens_per_s_at_one_user: float


@dataclass(frozen=True)
class SlotAnswers:
    engine: str
    memory_bytes: int                 # the machine's unified memory (Apple, Jetson), else the device's
    unified_memory: bool
    device_limit_bytes: int           # what the GPU may use of it (Metal's working-set limit on Apple parts)
    engine_bytes: float               # weights + KV of the whole context + compute buffer + runtime context
    left_bytes: float                 # memory_bytes - engine_bytes: for the OS and everything else
    slots: int
    kv_unified: bool
    context_per_slot_tokens: int
    largest_context_per_slot_tokens: int   # what the memory left after the weights holds per slot (model cap)
    prompt_tokens: int                # the scenario's mean prompt
    context_tokens: int               # mean prompt + half the mean output: where per-user speed is priced
    ttft_s: float                     # the prompt alone on the server, batch_size tokens a step
    speeds: tuple[UserSpeed, ...]     # 1..slots users
    target_tokens_per_s_per_user: float | None
    options: tuple[FormatOption, ...]
    recommendation: str
    load_s: float | None              # Ollama: reading the model when it is not resident
    cold_start_share: float | None    # Ollama: share of requests that arrive after keep_alive of idleness
    device_kind: str = "gpu"          # the device's kind (hardware.DEVICE_KINDS): its memory's own terms
    partial_offload: bool = False     # n_gpu_layers below all: the memory above is the GPU's layers only
    host_weights_bytes: float = 0.0   # weights llama.cpp keeps in host memory (partial offload: the host layers)
    host_kv_bytes: float = 0.0        # the host layers' KV (partial offload)
    host_memory_bytes: int | None = None   # the host's memory (hardware profile host.memory_bytes)


def slot_requests_held(sl: SlotSettings, tokens_per_request: int) -> int:
    """Requests one server holds at once: one per slot; in one unified buffer, no more than its context holds of
    requests of `tokens_per_request` tokens."""
    if not sl.kv_unified:
        return sl.slots
    return min(sl.slots, sl.ctx_total_tokens // tokens_per_request)


def _speed(r: Resolved, step, users: int, context: int) -> UserSpeed:
    period = r.replica.engine_loop.period_s(step.step_time(decode_batch(users, context)), users)
    return UserSpeed(users, period * 1e3, 1 / period)


def _option(r: Resolved, name: str, target: float | None, context: int, request_tokens: int) -> FormatOption | None:
    """The scenario's model in weight format `name` on its device, or None where the format does not apply. Slots
    that fit: of the scenario's context each, or in one unified buffer, of `request_tokens` (prompt + output)."""
    sl, m, hw, p = r.slots, r.model, r.hardware, r.parallel
    try:
        fmt, group = weight_format(m, name, r.group_size, r.file)
        execution(fmt, hw, r.file)
    except InputError:
        return None
    weights = weight_memory(m, fmt, p, group, r.num_parameters)
    e = r.engine
    budget = memory_budget(m, hw.memory_bytes, all_layers_on_gpu(m, fmt, weights), r.kv, p,
                           r.memory.gpu_memory_utilization, e.block_size, e.max_model_len, sl.ubatch_size,
                           e.max_num_seqs, all_outputs=True)
    slots = _slots_fitting(sl, r.kv, budget.room_for_kv_bytes, request_tokens)
    step = RooflineStepTimeModel(m, hw, fmt, weights, r.kv, p, group)
    at_one = _speed(r, step, 1, context).tokens_per_s_per_user
    users = 0
    if target is not None:
        lo, hi = 0, slots                      # per-user speed falls as users are added
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if _speed(r, step, mid, context).tokens_per_s_per_user >= target:
                lo = mid
            else:
                hi = mid - 1
        users = lo
    return FormatOption(fmt.name, weights.per_gpu_bytes, slots >= 1, slots, users, at_one)


def _largest_context(sl: SlotSettings, kv: KVLayout, room_bytes: float, share: float) -> int:
    """The longest context one slot can have in `room_bytes` of device memory (the whole buffer's when unified),
    every slot's stream that long, `share` of its KV on the device, windowed layers as the engine keeps them."""
    if not kv.bytes_per_token_per_gpu * share:
        return sl.ctx_per_slot_tokens
    return largest_fitting(max(0.0, room_bytes), lambda cells: sl.kv_bytes(kv, cells) * share, LONGEST_CONTEXT)


def _slots_fitting(sl: SlotSettings, kv: KVLayout, room_bytes: float, request_tokens: int) -> int:
    """How many slots `room_bytes` of KV holds (at most MAX_SLOTS): slots of their own context each, or, sharing one
    unified buffer, `request_tokens` (prompt + output) each; windowed layers as the engine keeps them (kv_bytes)."""
    if room_bytes <= 0:
        return 0
    if sl.kv_unified:
        def kv_of(n: int) -> float:
            return replace(sl, slots=n).kv_bytes(kv, n * request_tokens)
    else:
        def kv_of(n: int) -> float:
            return replace(sl, slots=n).kv_bytes(kv)
    return largest_fitting(room_bytes, kv_of, MAX_SLOTS)


def _recommend(options: list[FormatOption], slots: int, target: float | None, ctx: int, unified: bool) -> str:
    if target is None:
        return "state slo.itl_ms or slo.tpot_ms (1000 / tokens per second per user) for a format and slot count"
    ok = [o for o in options if o.users_at_target >= slots]
    if ok:
        o = ok[0]
        where = f"sharing a {ctx:,}-token buffer" if unified else f"of {ctx:,}-token slots"
        return (f"{o.format}: the most precise format that serves {slots} users {where} at "
                f">= {target:.1f} tokens/s each (up to {o.users_at_target} users)")
    fitting = [o for o in options if o.fits]
    if not fitting:
        return (f"no format fits its weights and one slot of {ctx:,} tokens in device memory (a smaller ctx_size, "
                "or n_gpu_layers to keep layers in host memory)")
    best = max(fitting, key=lambda o: o.users_at_target)
    if best.users_at_target == 0:
        fastest = max(fitting, key=lambda o: o.tokens_per_s_at_one_user)
        return (f"no format that fits reaches {target:.1f} tokens/s per user on this device; fastest: "
                f"{fastest.format} at {fastest.tokens_per_s_at_one_user:.1f} tokens/s for one user")
    return (f"{best.format} with {best.users_at_target} slots: no format serves {slots} users at "
            f">= {target:.1f} tokens/s each")


def slot_answers(r: Resolved, step, prompt_mean: float, output_mean: float, rate_per_s: float) -> SlotAnswers:
    """The user-facing answers for a llama.cpp or Ollama scenario (`r.slots` set); `step` prices steps."""
    sl, b = r.slots, r.memory
    context = int(prompt_mean + output_mean / 2)
    # KV in device memory: with n_gpu_layers below all, only the GPU layers' share
    share = r.offload.gpu_kv_share if r.offload else 1.0
    hw = r.hardware
    # unified memory: the weights llama.cpp keeps in host memory take the same memory
    engine_bytes = (b.weights_bytes + b.activation_bytes + b.non_torch_bytes + sl.kv_bytes(r.kv) * share
                    + (r.host_weight_bytes if hw.unified_memory_bytes else 0.0))
    largest = _largest_context(sl, r.kv, b.room_for_kv_bytes, share)
    if r.model.max_position_embeddings:
        largest = min(largest, r.model.max_position_embeddings)
    prompt = int(round(prompt_mean))
    ttft = prefill_time_s(step, prompt, sl.batch_size)
    speeds = tuple(_speed(r, step, n, context) for n in range(1, sl.slots + 1))
    per_token = [t for t in (r.slo.itl_ms, r.slo.tpot_ms) if t]
    target = 1e3 / min(per_token) if per_token else None
    request = max(1, int(round(prompt_mean + output_mean)))
    options = [o for name in FORMAT_CANDIDATES if (o := _option(r, name, target, context, request)) is not None]
    load = cold = None
    if sl.load_bytes_per_s:
        load = r.weights.total_bytes / sl.load_bytes_per_s
        # Poisson arrivals: a gap longer than keep_alive finds the model unloaded
        cold = math.exp(-rate_per_s * sl.keep_alive_s) if rate_per_s else 1.0
    whole = hw.unified_memory_bytes or hw.memory_bytes
    return SlotAnswers(sl.engine, whole, hw.unified_memory_bytes is not None, hw.memory_bytes, engine_bytes,
                       whole - engine_bytes,
                       sl.slots, sl.kv_unified, sl.ctx_per_slot_tokens, largest, prompt, context, ttft, speeds, target,
                       tuple(options), _recommend(options, sl.slots, target, sl.ctx_per_slot_tokens, sl.kv_unified),
                       load, cold, hw.device_kind, r.offload is not None,
                       r.host_weight_bytes, r.offload.host_kv_bytes if r.offload else 0.0,
                       hw.host_memory_bytes)
