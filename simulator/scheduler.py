"""Continuous-batching scheduler (vLLM v1 style), shared by the simulator and the real engine.

Each `schedule()` picks the next step under a token budget and a sequence cap; `update()`
applies what the step produced. With chunked prefill, running requests go first (decodes and
unfinished prefill chunks), then waiting requests fill what is left of the budget. Without
it the same, but a prompt is taken only whole, and one the rest of the budget cannot hold waits
with the queue behind it (vLLM V1, TensorRT-LLM). When blocks
run out the newest running request is preempted: recompute (free, requeue at the front) or
swap (its blocks are copied to host and back, priced by the caller). Nothing here knows
whether a step is simulated or run; `decode_run`, `allocate_decode_run` and `finish_decode_run`
let a caller apply several decode steps at once with the same outcome as stepping, and
`decode_through` a caller nobody observes between steps apply whole stretches of the decode
group's steps, through finishes and beside prompt chunks and admissions.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from simulator.decode_group import DecodeGroup
from simulator.grammar import GrammarCache, GrammarConfig
from simulator.kv_cache import KVCacheManager
from simulator.lora import GPU, AdapterCache, LoraConfig
from simulator.request import Request, Status
from simulator.speculative import SpeculativeConfig
from simulator.step import DecodeRun, DecodeSteps, ScheduledSeq, ScheduledStep, StepBuilder
from simulator.step_batch import attention_pairs

__all__ = ["Scheduler", "SchedulerConfig", "ScheduledSeq", "ScheduledStep"]   # the engine's contract

# `Scheduler._prefill_step` checks every waiting request before it changes anything: a longer queue (an overload)
# goes to `schedule()`, which looks only at those it admits
PREFILL_STEP_MAX_WAITING = 4


@dataclass(frozen=True)
class SchedulerConfig:
    """Every field is given by the caller (sizer's resolve, or the engine's calibration sweep):
    the scheduler has no defaults of its own."""
    max_num_seqs: int
    max_num_batched_tokens: int
    enable_chunked_prefill: bool
    preemption_mode: str                          # 'recompute' | 'swap'
    speculative: SpeculativeConfig | None
    max_model_len: int | None                     # prompt + output cap; longer requests are rejected
    prefill_only: bool                            # disaggregated prefill worker: done at first token
    reserve_full_kv: bool                         # admit only with blocks for the whole output, so
                                                  # nothing is ever preempted (TensorRT-LLM's default)
    lora: LoraConfig | None = None                # multi-LoRA serving; None: off (adapters ignored)
    grammar: GrammarConfig | None = None          # structured outputs; None: off (schemas ignored)

    def __post_init__(self) -> None:
        if self.max_num_seqs < 1 or self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError("need 1 <= max_num_seqs <= max_num_batched_tokens, got "
                             f"{self.max_num_seqs} and {self.max_num_batched_tokens}")
        if self.preemption_mode not in ("recompute", "swap"):
            raise ValueError(f"preemption_mode must be 'recompute' or 'swap', not {self.preemption_mode!r}")

    @property
    def num_speculative_tokens(self) -> int:
        return self.speculative.num_speculative_tokens if self.speculative else 0


class Scheduler:
    def __init__(self, config: SchedulerConfig, kv: KVCacheManager):
        self.config = config
        self.kv = kv
        self.waiting: deque[Request] = deque()
        self._explicit: list[Request] = []       # running requests outside the decode group, in order
        # Steady decodes advance as a group (a prefix of the running order) when every step
        # schedules all of them: chunked prefill on, no drafts (see decode_group.py).
        self._group = DecodeGroup(kv.block_size)
        self.adapters = AdapterCache(config.lora) if config.lora else None
        self.grammars = GrammarCache(config.grammar) if config.grammar else None
        # LoRA and grammars are counted per sequence, so their runs step each sequence explicitly
        self._tagging = bool(config.lora or config.grammar)
        self._gamma = config.num_speculative_tokens
        self._use_group = config.enable_chunked_prefill and not self._gamma and not self._tagging
        self.num_preemptions = 0
        self.num_holdbacks = 0           # waiting requests skipped, per step, for want of an adapter slot
        self._last_update_s = float("-inf")
        self._reserved_blocks = 0        # reserve_full_kv: final blocks of the running requests
        self._longest_accepted = self._longest_served()     # prompt + output: a longer request is rejected

    # -- queue --
    def add_request(self, req: Request, now_s: float | None = None) -> bool:
        """Queue the request, or mark it REJECTED (with why) if it could never be served. `now_s`
        (when it reached the engine) starts its schema's compilation; without it, the first
        schedule that considers the request does. A request
        must have output left to produce (a KV transfer's request arrives with none produced and its last prompt
        token to compute again: cluster.py): every step of it samples one, so a finished one would over-generate, and
        with drafts the cap below (output left - 1) would go negative."""
        if req.num_output_tokens >= req.output_tokens > 0:
            raise ValueError(f"request {req.request_id} has already produced its {req.output_tokens} output "
                             "tokens; there is nothing left to schedule")
        reason = self._reject_reason(req)
        if reason:
            req.status = Status.REJECTED
            req.reject_reason = reason
            return False
        req.status = Status.WAITING
        if self.grammars is not None and req.schema_id >= 0 and now_s is not None:
            req.grammar_ready_s = self.grammars.ready_s(req.schema_id, now_s)
        self.waiting.append(req)
        return True

    def _reject_reason(self, req: Request) -> str:
        if req.prompt_tokens < 1 or req.output_tokens < 1:
            return "prompt and output must each be at least one token"
        total = req.prompt_tokens + req.output_tokens
        return "" if total <= self._longest_accepted else self._too_long(total)

    def _too_long(self, total: int) -> str:
        """Why a request of `total` prompt + output tokens could never be served ("" if it could); a request
        longer than one refused is refused too."""
        cfg, kv = self.config, self.kv
        if cfg.max_model_len and total > cfg.max_model_len:
            return f"prompt + output = {total} tokens > max_model_len {cfg.max_model_len}"
        need = self.kv.final_blocks(total)
        if need > kv.num_blocks:
            return f"needs {need} KV blocks, the cache holds {kv.num_blocks}"
        if not cfg.enable_chunked_prefill and total - 1 > cfg.max_num_batched_tokens:
            return (f"prompt + output = {total} tokens > max_num_batched_tokens "
                    f"{cfg.max_num_batched_tokens} with chunked prefill off")
        return ""

    def _longest_served(self) -> int:
        """The longest prompt + output `_too_long` accepts (by bisection: it accepts a prefix of the totals), or 1
        when it accepts none: past the cache's every token, the blocks alone refuse it."""
        lo, hi = 1, self.kv.num_blocks * self.kv.block_size + 2        # _too_long(lo) == "" (no request has 1)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if not self._too_long(mid) else (lo, mid)
        return lo

    @property
    def running(self) -> list[Request]:
        """Running requests in order, their fields up to date."""
        self._group.sync_all()
        return list(self._group.members) + self._explicit

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self._group.members or self._explicit)

    @property
    def num_unfinished(self) -> int:
        return len(self.waiting) + len(self._group.members) + len(self._explicit)

    # -- scheduling --
    def schedule(self, now_s: float | None = None) -> ScheduledStep:
        """Choose the next step. `now_s` (its start) stamps requests scheduled for the first time."""
        now = self._last_update_s if now_s is None else now_s
        step = StepBuilder(self.config.max_num_batched_tokens, self._last_update_s, self._tagging)
        if self._group.members:
            self._schedule_group(step)
        if self._explicit:
            self._schedule_running(step)
        if self.waiting and not step.preempted:
            self._schedule_waiting(step, now)
        return step.build()

    def _schedule_group(self, step: StepBuilder) -> None:
        """The group decodes one token each; a shortage of blocks dissolves it into explicit
        requests, so that the per-request path below preempts exactly as it always does."""
        g, kv = self._group, self.kv
        need = g.needing_block()
        if len(need) > kv.num_free_blocks:
            self._explicit[:0] = g.dissolve()
            return
        kv.append_block_each(need)
        n = len(g.members)
        step.group, step.group_tick = list(g.members), g.tick
        step.budget -= n
        step.ctx += g.context_tokens
        step.pairs += g.context_tokens + n          # attention_pairs(1, c) = c + 1 per decode
        step.itl += n

    def _schedule_running(self, step: StepBuilder) -> None:
        running, bs = self._explicit, self.kv.block_size
        gamma = self._gamma
        decodes, contexts, prev, budget = step.decodes, step.decode_context, step.prev_s, step.budget
        plain_ctx = itl = 0                  # plain decodes (one token, no drafts), summed at the end
        i, n_running = 0, len(running)
        while i < n_running and budget > 0:
            req = running[i]
            c = req.num_computed_tokens
            out = req.num_output_tokens
            n = req.prompt_tokens + out - c
            if n == 1 and out and not gamma:
                if c >= req.num_blocks * bs:
                    if not self._make_room(req, 1, step):
                        break
                    n_running = len(running)
                decodes.append(req)
                contexts.append(c)
                if self._tagging:
                    step.tag(req, 1, True)
                plain_ctx += c
                if req.last_token_s == prev:
                    itl += 1
                budget -= 1
            else:
                decode = n == 1 and out > 0
                # Drafts: at most the output left less the token the verification itself yields
                # (vLLM caps a step at prompt + max_tokens - 1 - computed), so >= 0: a queued
                # request has output left (add_request) and finishes when it has none.
                spec = min(gamma, req.output_tokens - out - 1, budget - 1) if decode else 0
                n = n + spec if decode else min(n, budget)
                if not self._make_room(req, n, step):
                    break
                n_running = len(running)
                step.add(req, n, decode, spec)
                budget -= n
            i += 1
        step.budget = budget
        step.ctx += plain_ctx
        step.pairs += plain_ctx                     # their + 1 each: StepBuilder.build
        step.itl += itl

    def _make_room(self, req: Request, n: int, step: StepBuilder) -> bool:
        """Allocate for `req`, preempting from the tail of `running`; False if `req` itself went."""
        while not self.kv.allocate_slots(req, n):
            victim = self._explicit.pop()
            self._preempt(victim, step)
            if victim is req:
                return False
        return True

    def _schedule_waiting(self, step: StepBuilder, now: float) -> None:
        """Admit waiting requests in order; with LoRA or grammars on, those held back (no adapter
        slot, schema still compiling) are skipped and keep their place in the queue."""
        held: list[Request] = []
        try:
            self._admit_waiting(step, now, held)
        finally:
            if held:
                self.waiting.extendleft(reversed(held))

    def _held(self, req: Request, now: float) -> bool:
        """Whether `req` must wait this step for its schema's compilation or an adapter slot."""
        grammars, adapters = self.grammars, self.adapters
        if grammars is not None and req.schema_id >= 0:
            if req.grammar_ready_s < 0:
                req.grammar_ready_s = grammars.ready_s(req.schema_id, now)
            if req.grammar_ready_s > now:
                return True
        if adapters is not None and not adapters.can_run(req.adapter_id):
            req.num_holdbacks += 1
            self.num_holdbacks += 1
            return True
        return False

    def next_ready_s(self) -> float:
        """The earliest time a waiting request's schema is compiled, if one is still compiling
        (the engine waits for it when nothing else can run); else -inf."""
        pending = [r.grammar_ready_s for r in self.waiting if r.grammar_ready_s > self._last_update_s]
        return min(pending, default=float("-inf"))

    def _admit_waiting(self, step: StepBuilder, now: float, held: list[Request]) -> None:
        cfg, kv, waiting, running = self.config, self.kv, self.waiting, self._explicit
        gamma = self._gamma
        while waiting and step.budget > 0 and len(running) + len(self._group.members) < cfg.max_num_seqs:
            req = waiting[0]
            if self._tagging and self._held(req, now):
                held.append(waiting.popleft())
                continue
            hit_blocks, hit_free = kv.count_computed_blocks(req) if req.num_computed_tokens == 0 else (0, 0)
            num_hit = hit_blocks * kv.block_size
            if kv.slot_prompt_reuse and req.num_computed_tokens == 0 and kv.num_free_blocks:
                num_hit = kv.claim_slot(req)        # llama.cpp: the slot's kept prompt; one block per request
            computed = req.num_computed_tokens + num_hit
            n = req.prompt_tokens + req.num_output_tokens - computed     # req.num_tokens, inline: a hot path
            decode = n == 1 and req.num_output_tokens > 0       # KV arrived from a prefill worker
            if not cfg.enable_chunked_prefill and n > step.budget:
                return
            spec = min(gamma, req.remaining_output_tokens - 1, step.budget - 1) if decode and gamma else 0  # >= 0
            n = n + spec if decode else min(n, step.budget)
            swapped = req.status is Status.SWAPPED
            final = self._final_blocks(req) if cfg.reserve_full_kv else 0
            if final and final > kv.num_free_blocks - max(0, self._reserved_blocks - kv.num_used_blocks):
                return
            if hit_blocks:
                if (kv.blocks_for(computed + n) - req.num_blocks - hit_blocks + kv.window_need(req)
                        > kv.num_free_blocks - hit_free):
                    return                          # short of blocks: skip building the hit list
                if not kv.allocate_slots(req, n, kv.get_computed_blocks(req)[0]):
                    return
            elif not kv.allocate_slots(req, n):     # the same check of the pool, without hits
                return
            self._reserved_blocks += final
            waiting.popleft()
            running.append(req)
            if self.adapters is not None:
                source = self.adapters.start(req.adapter_id)
                if source != GPU:
                    step.adapter_loads.append(source)
            req.status = Status.RUNNING
            req.num_computed_tokens = computed
            if swapped:
                step.swap_in_blocks += kv.blocks_for(computed) + len(req.window_block_ids)
            if req.scheduled_s < 0:
                req.scheduled_s = now
                req.num_cached_prompt_tokens = num_hit
            step.add(req, n, decode, spec)
            step.budget -= n

    def _final_blocks(self, req: Request) -> int:
        return self.kv.final_blocks(req.prompt_tokens + req.output_tokens)

    def _release(self, req: Request) -> None:
        self.kv.free(req)
        if self.adapters is not None:
            self.adapters.stop(req.adapter_id)
        if self.config.reserve_full_kv:
            self._reserved_blocks -= self._final_blocks(req)

    def _preempt(self, req: Request, step: StepBuilder) -> None:
        if self.config.preemption_mode == "swap":
            step.swap_out_blocks += req.num_blocks + len(req.window_block_ids)
            req.status = Status.SWAPPED
        else:
            req.num_computed_tokens = 0
            req.status = Status.PREEMPTED
        self._release(req)
        req.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(req)
        step.preempted.append(req)

    # -- applying results --
    def update(self, step: ScheduledStep, now_s: float,
               tokens_accepted: dict[int, int] | None = None) -> list[Request]:
        """Apply a finished step at time `now_s`; `tokens_accepted` maps request_id to accepted
        draft tokens. Returns the requests that finished (their blocks already freed)."""
        kv, prev, finished = self.kv, self._last_update_s, []
        prefill_only = self.config.prefill_only
        if step.group:
            for req in self._group.advance(1, now_s):
                self._finish(req, now_s)
                finished.append(req)
        for req in step.decodes:
            req.num_computed_tokens += 1
            if req.last_token_s != prev:
                self._gap(req, now_s)
            req.last_token_s = now_s
            req.num_output_tokens += 1
            if req.num_output_tokens >= req.output_tokens or prefill_only:
                self._finish(req, now_s)
                finished.append(req)
        for seq in step.others:
            req = seq.request
            spec = seq.num_spec_tokens
            accepted = min(tokens_accepted.get(req.request_id, 0), spec) if spec and tokens_accepted else 0
            req.num_computed_tokens += seq.num_new_tokens - spec + accepted
            if seq.is_prefill:
                kv.cache_full_blocks(req)
            if not seq.samples_token:
                continue
            if req.num_output_tokens == 0:
                req.first_token_s = now_s
            elif req.last_token_s != prev:
                self._gap(req, now_s)
            req.num_output_tokens += 1 + accepted
            req.last_token_s = now_s
            if req.num_output_tokens >= req.output_tokens or prefill_only:
                self._finish(req, now_s)
                finished.append(req)
        if finished:
            self._explicit = [r for r in self._explicit if r.status is Status.RUNNING]
        self._last_update_s = now_s
        self._join_group(now_s)
        return finished

    def _join_group(self, now_s: float) -> None:
        """Move steady decodes at the head of the explicit list into the group."""
        if not self._use_group:
            return
        explicit, bs, join = self._explicit, self.kv.block_size, self._group.join
        while explicit:
            req = explicit[0]
            c, out = req.num_computed_tokens, req.num_output_tokens
            # c + 1 == req.num_tokens, blocks exactly kv.blocks_for(c), inline: a hot path
            if not (out and c + 1 == req.prompt_tokens + out and req.last_token_s == now_s
                    and req.num_blocks == -(-c // bs)):
                return
            join(explicit.pop(0))

    @staticmethod
    def _gap(req: Request, now_s: float) -> None:
        """A token that does not follow its previous one by exactly one step (see metrics)."""
        if req.itl_gaps_s is None:
            req.itl_gaps_s = []
        req.itl_gaps_s.append(now_s - req.last_token_s)

    def _finish(self, req: Request, now_s: float) -> None:
        self._release(req)
        req.status = Status.FINISHED
        req.finished_s = now_s
        req.block_hashes = None

    # -- several decode steps at once --
    def decode_run(self) -> DecodeRun | None:
        """The next steps as a `DecodeRun` if they are decodes of the decode group, ending with
        its first finish, the first step possibly also finishing the prompt of the one other
        running request: no waiting work, no drafts. None when the next step must be
        scheduled normally."""
        cfg, g, explicit = self.config, self._group, self._explicit
        if self.waiting or not self._use_group or cfg.prefill_only or len(explicit) > 1:
            return None
        limit = g.steps_to_first_finish() if g.members else 1 << 62
        tail, tail_tokens = None, 0
        if explicit:
            tail = explicit[0]
            tail_tokens = tail.prompt_tokens - tail.num_computed_tokens
            if tail.num_output_tokens or len(g.members) + tail_tokens > cfg.max_num_batched_tokens:
                return None
            limit = min(limit, tail.output_tokens)
        if not g.members and tail is None:
            return None
        return DecodeRun(limit, len(g.members), g.context_tokens, tail, tail_tokens)

    def allocate_decode_run(self, run: DecodeRun, step_end_s: list[float]) -> tuple[int, list[int]]:
        """Allocate the blocks of the run's steps ending at `step_end_s` in stepping order,
        stopping before the first step the pool cannot serve, and apply the tail's prompt
        step. Returns (steps allocated, used blocks after each); 0 steps (nothing changed)
        when the pool cannot serve the first."""
        kv, tail = self.kv, run.tail
        used = kv.num_used_blocks
        free = kv.num_blocks - used
        per_step: list[int] = []
        take_each, record = kv.append_block_each, per_step.append
        if tail is None:
            for members in self._group.needing_blocks(len(step_end_s)):
                if members:
                    c = len(members)
                    if c > free:
                        break
                    free -= c
                    used += c
                    take_each(members)
                record(used)
            return len(per_step), per_step
        bs = kv.block_size
        full = kv.blocks_for(tail.prompt_tokens)
        extra = full - tail.num_blocks       # step 1: the rest of its prompt's blocks
        next_block = full * bs - tail.prompt_tokens + 1    # its decodes, steps 2..k: a block every bs steps
        for j, members in enumerate(self._group.needing_blocks(len(step_end_s))):
            if j == next_block:
                extra, next_block = 1, next_block + bs
            c = len(members) + extra
            if c > free:
                break
            free -= c
            used += c
            if members:
                take_each(members)
            if extra:
                kv.append_blocks(tail, extra)
                extra = 0
            record(used)
        if not per_step:
            return 0, per_step
        tail.num_computed_tokens = tail.prompt_tokens      # its first token, at the end of step 1
        kv.cache_full_blocks(tail)
        tail.num_output_tokens = 1
        tail.first_token_s = tail.last_token_s = step_end_s[0]
        return len(per_step), per_step

    def decode_through(self, start_s: float, ready_s: float, lag: bool, prompt_s: Callable[..., float],
                       decode_times: Callable[[int], dict[int, float]],
                       miss: Callable[[int, int], float]) -> DecodeSteps | None:
        """Apply the next steps one after another from `start_s` while they are the decode group's decodes,
        beside prompt chunks while a prompt is under way or a request waits (`_prefill_step`), and return them;
        None, with nothing changed, when the next step is another (or the pool cannot serve it): `schedule` it.

        Stepping's outcome to the bit: each step's blocks are taken, its time priced (`prompt_s` of its
        StepBatch's first six fields; a plain decode step's `decode_times(seqs)[context]`, else
        `miss(seqs, context)`) and its result applied (`update`'s order: the group's finishes, then the prompts)
        before the next is scheduled, so a finishing member leaves the group, its blocks freed, and the steps go on
        with the smaller batch.
        It stops after the step whose start (`lag`: asynchronous scheduling) or end is at or after `ready_s`
        (the next request's admission cut-off), before a step the pool cannot serve or that is none of these,
        or when the group empties.

        Only for a caller that nobody observes between the steps (the only replica of known arrivals): the
        state changes at once, not at each step's end."""
        if not self._use_group or self.config.prefill_only:
            return None
        g, out = self._group, DecodeSteps(start_s)
        t = start_s
        while self.waiting or self._explicit:
            start = t
            t = self._prefill_step(start, prompt_s, decode_times, miss, out)
            if t < 0.0:
                return out if out.counts else None
            if (start if lag else t) >= ready_s:
                return out
        n, ctx = len(g.members), g.context_tokens
        if not n:
            return out if out.counts else None
        kv = self.kv
        free = kv.num_free_blocks
        used = kv.num_blocks - free
        take_each, bs, phase = kv.append_block_each, kv.block_size, g.phase
        p, done, finish_in = -g.tick, 0, g.steps_to_first_finish()
        times = decode_times(n)
        duration, in_use = out.step_s.append, out.kv_used_blocks.append
        while True:
            members = phase[(p - done) % bs]            # g.needing_block(done), inline
            if members:
                c = len(members)
                if c > free:
                    break
                free -= c
                used += c
                take_each(members)
            dt = times.get(ctx) or miss(n, ctx)          # a hit without a call (times are > 0)
            ctx += n
            t += dt
            duration(dt)
            in_use(used)
            done += 1
            if done == finish_in:                        # members finish: they leave, the batch shrinks
                out.counts.append((n, n, n, done))
                for req in g.advance(done, t):
                    self._finish(req, t)
                    out.finished.append(req)
                self._last_update_s = t
                n, ctx = len(g.members), g.context_tokens
                if not n:
                    out.end_s = t
                    return out
                free = kv.num_free_blocks
                used = kv.num_blocks - free
                p, done, finish_in = -g.tick, 0, g.steps_to_first_finish()
                times = decode_times(n)
            if (t - dt if lag else t) >= ready_s:
                break
        if done:
            out.counts.append((n, n, n, done))
            g.advance(done, t)                           # no finish: the first is later
            self._last_update_s = t
        out.end_s = t
        return out if out.counts else None

    def _prefill_step(self, t: float, prompt_s: Callable[..., float],
                      decode_times: Callable[[int], dict[int, float]], miss: Callable[[int, int], float],
                      out: DecodeSteps) -> float:
        """One step from `t` as `schedule` and `update` run it when it holds the group's decodes, a chunk of the
        one explicit request's prompt (nothing sampled yet) and the first chunks of the new waiting requests it
        admits (`_admit_waiting`'s order and checks: the group's blocks, the explicit prompt's, then each
        admission's cache hit and blocks, until the budget, the sequence cap or the pool stops it); its end, or
        -1.0 with nothing changed when the step would be another (a decode or more than one request outside the
        group, a request back from preemption, a policy this path leaves to `schedule`, or a pool that cannot
        serve the group or the explicit prompt) or empty."""
        cfg, kv, g, waiting, explicit = self.config, self.kv, self._group, self.waiting, self._explicit
        n = len(g.members)
        budget = cfg.max_num_batched_tokens - n
        tail = explicit[0] if explicit else None
        if (budget <= 0 or len(explicit) > 1 or (tail is not None and tail.num_output_tokens)
                or len(waiting) > PREFILL_STEP_MAX_WAITING):
            return -1.0
        if waiting and (cfg.reserve_full_kv or kv.slot_prompt_reuse):
            return -1.0
        WAITING = Status.WAITING
        for r in waiting:                              # new requests only (not back from preemption, not transferred)
            if r.status is not WAITING or r.num_computed_tokens or r.num_output_tokens:
                return -1.0
        bs, windows, prefix = kv.block_size, kv.window_groups, kv.enable_prefix_caching
        members = g.phase[-g.tick % bs]                # g.needing_block(), inline
        need = len(members)
        if tail is not None:
            c = tail.num_computed_tokens
            m = tail.prompt_tokens - c
            if m > budget:
                m = budget
            need += -(-(c + m) // bs) - tail.num_blocks + (kv.window_need(tail) if windows else 0)
        if need > kv.num_free_blocks:
            return -1.0
        if members:
            kv.append_block_each(members)              # _schedule_group
        ctx = g.context_tokens
        seqs, new, pairs, pf_tokens = n, n, ctx + n, 0   # n decodes: attention_pairs(1, c) = c + 1 each
        prompts: list[tuple[Request, int]] = []
        if tail is not None:                            # _schedule_running
            kv.allocate_slots(tail, m)
            seqs, new, ctx, pairs, pf_tokens = seqs + 1, new + m, ctx + c, pairs + attention_pairs(m, c), m
            budget -= m
            prompts.append((tail, m))
        max_seqs = cfg.max_num_seqs
        while waiting and budget > 0 and len(explicit) + n < max_seqs:     # _admit_waiting
            req = waiting[0]
            if prefix and req.prefix_segments:
                hit_blocks, hit_free = kv.count_computed_blocks(req)
            else:
                hit_blocks = 0
            c = hit_blocks * bs
            m = req.prompt_tokens - c
            if m > budget:
                m = budget
            if hit_blocks:
                if (-(-(c + m) // bs) - hit_blocks + kv.window_need(req) > kv.num_free_blocks - hit_free
                        or not kv.allocate_slots(req, m, kv.get_computed_blocks(req)[0])):
                    break
            elif not kv.allocate_slots(req, m):
                break
            waiting.popleft()
            explicit.append(req)
            req.status = Status.RUNNING
            req.num_computed_tokens = c
            if req.scheduled_s < 0:
                req.scheduled_s = t
                req.num_cached_prompt_tokens = c
            seqs, new, ctx, pairs, pf_tokens = seqs + 1, new + m, ctx + c, pairs + attention_pairs(m, c), pf_tokens + m
            budget -= m
            prompts.append((req, m))
        if not prompts:
            if not n:                                   # nothing changed: the pool cannot take the waiting request
                return -1.0
            dt = decode_times(n).get(ctx) or miss(n, ctx)     # the group decodes alone, the request waits
        else:
            dt = prompt_s(seqs, new, ctx, pairs, len(prompts), pf_tokens)
        t += dt
        out.end_s = t
        out.step_s.append(dt)
        out.kv_used_blocks.append(kv.num_used_blocks)
        out.counts.append((seqs, new, n, 1))
        finished = out.finished                         # update()
        for req in g.advance(1, t):
            self._finish(req, t)
            finished.append(req)
        sampled = False                                 # a prompt done: only such a request can join the group
        left = False                                    # one finished at its first token: it leaves the explicit list
        for req, m in prompts:
            c = req.num_computed_tokens = req.num_computed_tokens + m
            if prefix and req.prefix_segments:
                kv.cache_full_blocks(req)
            if c == req.prompt_tokens:                  # its prompt done: its first token
                sampled = True
                req.first_token_s = req.last_token_s = t
                req.num_output_tokens = 1
                if req.output_tokens == 1:
                    self._finish(req, t)
                    finished.append(req)
                    left = True
        if left:                                        # (the group's finished members are not in it)
            self._explicit = [r for r in self._explicit if r.status is Status.RUNNING]
        self._last_update_s = t
        if sampled and self._explicit:
            self._join_group(t)
        return t

    def finish_decode_run(self, run: DecodeRun, k: int, now_s: float) -> list[Request]:
        """Apply k allocated steps of `run`, the last ending at `now_s`; returns the finished."""
        finished = []
        for req in self._group.advance(k, now_s):
            self._finish(req, now_s)
            finished.append(req)
        tail = run.tail
        if tail is not None:
            tail.num_computed_tokens += k - 1
            tail.num_output_tokens += k - 1
            tail.last_token_s = now_s
            if tail.num_output_tokens >= tail.output_tokens:
                self._finish(tail, now_s)
                finished.append(tail)
                self._explicit.remove(tail)
        self._last_update_s = now_s
        self._join_group(now_s)
        return finished


# `Scheduler._too_long`'s refusals name the request's own length and blocks: a count of rejections by reason counts
# them by the refusal, not by each request's figures
_REQUEST_LENGTH = re.compile(r"prompt \+ output = \d+ tokens > ")
_REQUEST_BLOCKS = re.compile(r"needs \d+ KV blocks, the cache holds (\d+)")


def reason_kind(why: str) -> str:
    """A rejection's reason without the request's own figures: "prompt + output = 9000 tokens > max_model_len 8192"
    is "prompt + output > max_model_len 8192" (anything before it, a gateway's target, kept)."""
    why = _REQUEST_LENGTH.sub("prompt + output > ", why)
    return _REQUEST_BLOCKS.sub(r"needs more KV blocks than the cache's \1", why)
