"""One serving replica as a simpy process: schedule, take the step's time, apply the step.

Stepping is one simpy event per engine step. With `fast_forward`, shortcuts give the same step
times, records and state as stepping, with fewer events and less work:
- steps that end before the next moment anything can reach this replica (an arrival, a KV
  transfer: `next_event_s`) are applied without waiting for simpy, since nobody can observe
  them earlier; the step that crosses that moment is waited for as usual;
- a run of decode steps of the scheduler's decode group is priced step by step but scheduled
  and applied in one go (`Scheduler.decode_run` and friends); its first step may also finish
  the prompt of the newest request. It stops at the step after which a request on its way in
  would be admitted (`_admit`'s cut-off), and at the group's first finish;
- the only replica of a cluster fed by known arrivals (`sole_entry`) goes further, since an
  arrival can only come to it and nobody looks at it between its steps: it applies the steps
  one after another while they are the group's decodes, beside prompt chunks and admissions
  (`Scheduler.decode_through`: through finishes, the batch shrinking as members leave), past
  the next arrival up to the step after which it is admitted, and only then waits for simpy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np
import simpy

from simulator.api_passes import ApiPasses
from simulator.config import ReplicaConfig
from simulator.engine_loop import EngineLoop
from simulator.feed import KnownArrivals
from simulator.kv_cache import kv_cache_for
from simulator.records import Recorder
from simulator.request import Request
from simulator.scheduler import Scheduler
from simulator.speculative import Proposer
from simulator.step import DecodeRun, ScheduledStep
from simulator.step_batch import StepBatch, StepTimeModel, batch_of

FEED_ENDED = object()      # `Replica._idle` with a feed whose arrivals have all been handed over: the run is over


class StepTimes:
    """Memoised step times: a step-time model is a pure function of the batch, and runs of
    similar traffic repeat batch shapes often (more than half the steps of the standard
    benchmark). Keys are tuples of the batch's fields; a StepBatch is itself such a tuple
    (a NamedTuple), so it is its own key. Plain decode steps are memoised apart, by their
    sequences and then by their context tokens (`decode_times`: a run of them has the same
    sequences, so a lookup is one dict of ints). Bounded (`max_entries` each: the batch shapes,
    and the decode steps of all sequence counts together). A step's time is the engine loop's
    period around the model's GPU time (`EngineLoop.period_s`), so the loop costs nothing per step."""

    def __init__(self, model: StepTimeModel, loop: EngineLoop, max_entries: int = 1 << 16):
        self.model, self.loop, self._max = model, loop, max_entries
        # a model whose time depends on a batch's first four sums alone, where it verifies no drafts (their logits
        # rows are a later field), may price them in one call (`KernelTableStepTimeModel.sums_step_time`); None:
        # every miss builds its StepBatch
        sums_step_time = getattr(model, "sums_step_time", None)
        self._sums = sums_step_time() if sums_step_time is not None else None
        # and one whose tables price attention, a plain decode step's time from its sequences and context alone
        # (`KernelTableStepTimeModel.decode_step_time`); None: `decode_miss` prices it as any other step
        decode_step_time = getattr(model, "decode_step_time", None)
        self._decode = decode_step_time() if decode_step_time is not None and not self._sums else None
        self._memo: dict[tuple[int, ...], float] = {}
        self._decodes: dict[int, dict[int, float]] = {}      # plain decode steps: seqs -> context -> s
        self._num_decodes = 0                                # entries of all of them

    def shape(self, key: tuple[int, int, int, int, int, int, int, int, int]) -> float:
        """The time of the batch with these field values (all nine, StepBatch order: the key a StepBatch of them is
        memoised under); the StepBatch is built only when the time is not memoised."""
        memo = self._memo
        t = memo.get(key)
        if t is None:
            sums = self._sums
            t = (self._period(sums(key[0], key[1], key[2], key[3]), key[0]) if sums and not key[6]
                 else self._time(batch_of(key)))
            if len(memo) >= self._max:
                memo.clear()
            memo[key] = t
        return t

    __call__ = shape            # the time of a StepBatch: its own key (a tuple of the nine values)

    def prompt_s(self, num_seqs: int, new_tokens: int, context_tokens: int, attention_pairs: int, prefill_seqs: int,
                 prefill_tokens: int) -> float:
        """The time of a step with these sums (a StepBatch's first six fields, no drafts or LoRA). Priced without
        the memo when the model reads the four sums alone: a prompt step's sums rarely repeat (17% of the standard
        workload's do), so memoising them cost more than pricing the repeats again."""
        if self._sums:
            return self._period(self._sums(num_seqs, new_tokens, context_tokens, attention_pairs), num_seqs)
        return self.shape((num_seqs, new_tokens, context_tokens, attention_pairs, prefill_seqs, prefill_tokens,
                           0, 0, 0))

    def decode_times(self, num_seqs: int) -> dict[int, float]:
        """The memoised times of steps of `num_seqs` one-token decodes, by their context tokens in all (read it;
        `decode_miss` adds to it). The same dict for as long as this memo lives: bounding it empties it in place."""
        times = self._decodes.get(num_seqs)
        if times is None:
            times = self._decodes[num_seqs] = {}
        return times

    def decode_miss(self, num_seqs: int, context_tokens: int) -> float:
        """A step of `num_seqs` one-token decodes on `context_tokens` in all, not memoised yet (the caller
        looked): price it and memoise it."""
        sums = self._sums
        if sums:
            t = self._period(sums(num_seqs, num_seqs, context_tokens, context_tokens + num_seqs), num_seqs)
        elif self._decode:
            t = self._period(self._decode(num_seqs, context_tokens), num_seqs)
        else:
            t = self._time(batch_of((num_seqs, num_seqs, context_tokens, context_tokens + num_seqs, 0, 0, 0, 0, 0)))
        if self._num_decodes >= self._max:
            for times in self._decodes.values():
                times.clear()
            self._num_decodes = 0
        self.decode_times(num_seqs)[context_tokens] = t
        self._num_decodes += 1
        return t

    def _time(self, batch: StepBatch) -> float:
        return self._period(self.model.step_time(batch), batch.num_seqs)

    def _period(self, gpu_s: float, num_seqs: int) -> float:
        if not gpu_s > 0.0:
            raise ValueError(f"step-time model returned {gpu_s!r} s; a step must take a positive time")
        return self.loop.period_s(gpu_s, num_seqs)


class Replica:
    def __init__(self, env: simpy.Environment, index: int, config: ReplicaConfig,
                 step_times: StepTimes, recorder: Recorder, rng: np.random.Generator,
                 next_event_s: Callable[[], float], on_done: Callable[[Replica, Request], None],
                 fast_forward: bool = True, check_invariants: bool = False, sole_entry: bool = False,
                 arrivals: Iterable[Request] | None = None, prefix_content: bool = True):
        self.env, self.index, self.config = env, index, config
        self.kv = kv_cache_for(config.num_blocks, config.block_size, config.enable_prefix_caching and prefix_content,
                               config.tenant_isolation, config.slot_prompt_reuse, config.kv_windows)
        self.scheduler = Scheduler(config.scheduler, self.kv)
        spec = config.scheduler.speculative
        self.proposer = Proposer(spec, rng) if spec else None
        self.step_times, self.recorder = step_times, recorder
        self._pricing = step_times.prompt_s, step_times.decode_times, step_times.decode_miss   # decode_through's
        self.next_event_s, self.on_done = next_event_s, on_done
        # the shortcuts admit a request after the step it reaches the engine by; a scheduler that polls for new
        # requests every few steps only (`EngineLoop.recv_interval`) steps one at a time
        self.fast_forward = fast_forward and config.engine_loop.recv_interval == 1
        self.check = check_invariants
        self._unpolled_steps = 0              # decode-only steps since the scheduler last polled (recv_interval)
        # the only replica, fed only by arrivals known in advance: what next reaches it is the next arrival,
        # and nobody looks at it then (a one-replica pool is chosen blind)
        self.sole_entry = sole_entry
        self.inbox: list[Request] = []       # submitted, not yet handed to the scheduler
        self.inbox_ready_s = math.inf        # when the first of them reaches the engine (inf: none)
        self._wake: simpy.Event | None = None
        self._t = 0.0                        # this replica's clock: end of its last step
        self._last_start_s = 0.0             # start of its last step
        self.wake_s = math.inf               # when its process next wakes (inf: idle)
        # a closed loop's: the API server's passes as the run goes (api_passes.py), fed every step before its
        # finished requests are handed over
        self.api: ApiPasses | None = None
        # `arrivals`: the known arrivals of a sole entry, run by this replica's process itself (feed.py); its
        # waits then take no simpy events, and its clock is theirs
        self.feed = KnownArrivals(arrivals, self.submit) if arrivals is not None else None
        if self.feed is not None:
            self.next_event_s = self._next_arrival_s
        self._clock_s = 0.0                  # with a feed: simpy's clock as it would read at this process's events
        self.process = env.process(self._run() if self.feed is None else self._run_fed())

    @property
    def outstanding(self) -> int:
        return len(self.inbox) + self.scheduler.num_unfinished

    def submit(self, req: Request) -> None:
        self.inbox.append(req)
        ready_s = req.input_done_s = self.config.engine_loop.input_done_s(req.arrival_s, req.prompt_tokens)
        if ready_s < self.inbox_ready_s:
            self.inbox_ready_s = ready_s
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    def _admit(self) -> None:
        """Hand the scheduler the requests that have reached the engine in time for the step
        about to be scheduled: by its start, or, with asynchronous scheduling while steps run
        back to back, by the start of the step before it (when this one was chosen)."""
        sched, loop = self.scheduler, self.config.engine_loop
        if loop.recv_interval > 1 and sched.has_unfinished():
            # SGLang's SchedulerRecvSkipper: the scheduler polls once the steps since its last poll reach the
            # interval (whether or not anything waits), else takes nothing this step
            if self._unpolled_steps < loop.recv_interval:
                return
            self._unpolled_steps = 0
        if not self.inbox:
            return
        cutoff = self._last_start_s if loop.async_scheduling and sched.has_unfinished() else self._t
        if self.inbox_ready_s > cutoff:            # none has reached it yet: nothing to hand over
            return
        keep = []
        for req in self.inbox:
            if req.input_done_s > cutoff:      # the time the idle wait sleeps until
                keep.append(req)
            elif not sched.add_request(req, req.input_done_s):
                self.on_done(self, req)
        self.inbox = keep
        self.inbox_ready_s = min(r.input_done_s for r in keep) if keep else math.inf

    def _run(self):
        sched = self.scheduler
        polls_apart = self.config.engine_loop.recv_interval > 1     # each step counts towards the next poll
        while True:
            if self.inbox:
                self._admit()
            if not sched.has_unfinished():
                if self.inbox:                   # on their way in (the input path): wait for the first
                    ready_s = self.inbox_ready_s
                    self.wake_s = ready_s
                    yield self._sleep(ready_s)
                    self._t = ready_s                # exactly: now + (ready - now) may round below it
                else:
                    self.wake_s = math.inf
                    yield self._idle()
                    self._t = self._now_s()
                continue
            horizon = self.next_event_s() if self.fast_forward else -math.inf
            while sched.has_unfinished():
                if self.inbox or polls_apart:
                    self._admit()
                run = None
                if self.fast_forward and self.sole_entry:
                    end_s = self._decode_through(horizon)
                    if end_s is not None:            # applied already: wait for its end if it crosses the horizon
                        if end_s >= horizon:
                            self.wake_s = end_s
                            yield self._sleep(end_s)
                            break
                        continue
                elif self.fast_forward:
                    run = sched.decode_run()
                end_s, apply = (self._plan_decode_run(run, horizon) if run
                                else self._plan_step())
                if end_s >= horizon:
                    self.wake_s = end_s
                    yield self._sleep(end_s)
                    apply()
                    break
                apply()
            if self.check:
                self.kv.check_invariants(sched.running)

    # The process's waits: simpy events, or, with a feed, the feed's events run in their place (`_run_fed`).
    def _sleep(self, until_s: float) -> simpy.Event | None:
        """Wait until `until_s` (at once if it has passed)."""
        if self.feed is None:
            return self.env.timeout(max(0.0, until_s - self.env.now))
        at_s = self._clock_s + max(0.0, until_s - self._clock_s)        # simpy's sum
        self.feed.wait_until(at_s)
        self._clock_s = at_s
        return None

    def _idle(self) -> simpy.Event | None:
        """Wait for a request to be submitted; with a feed, FEED_ENDED when none ever will be."""
        if self.feed is None:
            self._wake = self.env.event()
            return self._wake
        while not self.inbox:
            if not self.feed.advance():
                return FEED_ENDED
        self._clock_s = self.feed.now_s
        return None

    def _now_s(self) -> float:
        return self.env.now if self.feed is None else self._clock_s

    def _next_arrival_s(self) -> float:
        return self.feed.next_arrival_s

    def _run_fed(self):
        """The process of a replica with a feed: `_run`, none of whose waits is simpy's, to the end at once."""
        waits = self._run()
        while next(waits) is not FEED_ENDED:
            pass
        yield from ()                   # a generator, for simpy

    def _plan_step(self):
        """Schedule one step; return its end time and how to apply it."""
        step = self.scheduler.schedule(self._t)
        if step.is_empty:
            ready_s = self.scheduler.next_ready_s()
            if ready_s <= self._t:
                raise RuntimeError(f"replica {self.index}: nothing schedulable with work pending")

            def wait():                      # every waiting request's schema is still compiling
                self._last_start_s = self._t = ready_s
            return ready_s, wait
        dt = self._step_time(step)
        t, used = self._t + dt, self.kv.num_used_blocks

        def apply():
            accepted = self._draw_accepted(step) if step.spec_seqs else None
            # a step with prompt tokens has the scheduler poll before the next (SchedulerRecvSkipper's weight 1,000
            # for any mode but decode); a decode-only step counts one
            self._unpolled_steps = (self.config.engine_loop.recv_interval if step.batch.prefill_tokens
                                    else self._unpolled_steps + 1)
            finished = self.scheduler.update(step, t, accepted)
            self.recorder.step(self.index, t, dt, step.batch.num_seqs, step.batch.new_tokens, step.num_itl_seqs, used)
            self._last_start_s, self._t = t - dt, t
            if self.api is not None:
                self.api.step_ended(t, step.batch.num_seqs)
            for req in finished:
                self.on_done(self, req)
        return t, apply

    def _plan_decode_run(self, run: DecodeRun, horizon: float):
        """Price the run's steps, stopping at the first that ends at or after `horizon` or after
        which a request of the inbox would be admitted (`_admit`'s cut-off: the step's start
        with asynchronous scheduling, else its end), and allocate their blocks; return the last
        end time and how to apply them."""
        t, ends, durations, step_times = self._t, [], [], self.step_times
        loop = self.config.engine_loop
        ready = self.inbox_ready_s
        lag = loop.async_scheduling               # the cut-off is the step's start, t - dt (as `apply` sets it)
        steps = run.max_steps
        if run.tail is not None:
            dt = step_times.shape(run.tail_shape())
            t += dt
            ends.append(t)
            durations.append(dt)
            steps -= 1
            if (t - dt if lag else t) >= ready:
                steps = 0
        n, ctx = run.decode_start()
        times, miss = step_times.decode_times(n), step_times.decode_miss
        for _ in range(steps if t < horizon else 0):
            dt = times.get(ctx) or miss(n, ctx)       # a hit without a call (times are > 0)
            ctx += n
            t += dt
            ends.append(t)
            durations.append(dt)
            if t >= horizon or (t - dt if lag else t) >= ready:
                break
        k, used = self.scheduler.allocate_decode_run(run, ends)
        if k == 0:
            return self._plan_step()          # nothing gained, or the pool is short: step normally
        del ends[k:], durations[k:], used[k:]
        t = ends[-1]

        def apply():
            finished = self.scheduler.finish_decode_run(run, k, t)
            rec, start = self.recorder, 0
            if run.tail is not None:
                rec.step(self.index, ends[0], durations[0], run.num_seqs + 1, run.num_seqs + run.tail_tokens,
                         run.num_seqs, used[0])
                start = 1
            n = run.num_seqs + (run.tail is not None)
            rec.decode_run(self.index, ends[start:], durations[start:], n, used[start:])
            self._last_start_s, self._t = t - durations[-1], t
            if self.api is not None:                # the tail's step holds n sequences too
                for end in ends:
                    self.api.step_ended(end, n)
            for req in finished:
                self.on_done(self, req)
        return t, apply

    def _decode_through(self, horizon: float) -> float | None:
        """The only replica of known arrivals (`sole_entry`): apply the next steps while they are the decode
        group's, beside prompt chunks and admissions (`Scheduler.decode_through`: through finishes), up to the
        step after which the next request would be admitted (the inbox's first or the next arrival's); record
        them and hand over the finished; return the last step's end, or None when the next step is another
        (nothing changed). Nobody looks at this replica between its steps (the arrival only joins its inbox),
        so they are applied before their ends are waited for."""
        loop = self.config.engine_loop
        ready = min(self.inbox_ready_s, loop.input_done_s(horizon, 0))     # the next arrival's, at the earliest
        steps = self.scheduler.decode_through(self._t, ready, loop.async_scheduling, *self._pricing)
        if steps is None:
            return None
        self.recorder.stretch(self.index, steps.start_s, steps.end_s, steps.step_s, steps.kv_used_blocks, steps.counts)
        self._last_start_s, self._t = steps.end_s - steps.step_s[-1], steps.end_s
        for req in steps.finished:
            self.on_done(self, req)
        return self._t

    def _step_time(self, step: ScheduledStep) -> float:
        dt = self.step_times(step.batch)
        swapped = step.swap_out_blocks + step.swap_in_blocks
        if swapped:
            cfg = self.config
            dt += swapped * cfg.block_size * cfg.swap.kv_bytes_per_token / cfg.swap.bytes_per_s
        sched = self.config.scheduler
        for source in step.adapter_loads:          # adapters brought into a GPU slot for this step
            dt += sched.lora.load_s(source)
        if step.grammar_seqs:                      # token masks on the CPU, not overlapped (assumption)
            dt += step.grammar_seqs * sched.grammar.mask_s_per_token
        return dt

    def _draw_accepted(self, step: ScheduledStep) -> dict[int, int]:
        seqs = [s for s in step.seqs if s.num_spec_tokens]
        draws = self.proposer.draw_accepted([s.num_spec_tokens for s in seqs])
        return {s.request.request_id: a for s, a in zip(seqs, draws, strict=True)}

