"""What one engine step is: the sequences it runs and the batch shape a step model prices.

`StepBuilder` accumulates a step (the scheduler fills it); `DecodeRun` describes several
decode steps that the simulator may apply at once (see `Scheduler.decode_run`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simulator.request import Request
from simulator.step_batch import StepBatch, attention_pairs, batch_of


@dataclass(slots=True)
class ScheduledSeq:
    request: Request
    num_new_tokens: int        # tokens through the model this step (incl. speculative ones)
    context_tokens: int        # tokens already in the KV cache before this step
    is_prefill: bool
    samples_token: bool        # this step ends the prompt (or recompute) or is a decode
    num_spec_tokens: int = 0   # draft tokens verified this step


@dataclass(slots=True)
class ScheduledStep:
    """One step. Steady decodes come as the decode group's members (`group`, contexts derived
    from `group_tick`) and other plain decodes as two flat lists: the hot paths. `seqs` gives
    every sequence as a ScheduledSeq, decodes first; read it before `update(step)`."""
    group: list[Request]
    group_tick: int
    decodes: list[Request]
    decode_context_tokens: list[int]
    others: list[ScheduledSeq]           # prefill chunks and speculative verifications
    batch: StepBatch
    preempted: list[Request] = field(default_factory=list)
    swap_out_blocks: int = 0
    swap_in_blocks: int = 0
    num_itl_seqs: int = 0        # seqs whose token this step comes one step after their last
    spec_seqs: int = 0           # seqs verifying draft tokens
    adapter_loads: tuple[str, ...] = ()   # where each adapter loaded for this step came from (simulator/lora.py)
    grammar_seqs: int = 0        # seqs sampling a token under a grammar (a token mask each)
    _seqs: list[ScheduledSeq] | None = None

    @property
    def seqs(self) -> list[ScheduledSeq]:
        if self._seqs is None:
            t = self.group_tick
            self._seqs = ([ScheduledSeq(r, 1, r.num_computed_tokens + t - r.group_tick, False, True)
                           for r in self.group]
                          + [ScheduledSeq(r, 1, c, False, True)
                             for r, c in zip(self.decodes, self.decode_context_tokens, strict=True)]
                          + self.others)
        return self._seqs

    @property
    def is_empty(self) -> bool:
        return not self.group and not self.decodes and not self.others


@dataclass(slots=True)
class DecodeRun:
    """Up to `max_steps` steps of `num_seqs` plain decodes (`context_tokens` at the first step);
    the first step may also run the last `tail_tokens` of the newest request's prompt, which
    then decodes with the others."""
    max_steps: int
    num_seqs: int
    context_tokens: int
    tail: Request | None = None
    tail_tokens: int = 0

    def tail_shape(self) -> tuple[int, int, int, int, int, int, int, int, int]:
        """The first step's StepBatch fields when it also runs the tail's last prompt tokens."""
        n, ctx, m, c = self.num_seqs, self.context_tokens, self.tail_tokens, self.tail.num_computed_tokens
        return n + 1, n + m, ctx + c, ctx + n + attention_pairs(m, c), 1, m, 0, 0, 0      # n decodes: ctx + n pairs

    def decode_start(self) -> tuple[int, int]:
        """(sequences, context tokens) of the first plain decode step, after any tail step;
        each later step has the same sequences and `sequences` more context."""
        if self.tail is None:
            return self.num_seqs, self.context_tokens
        return self.num_seqs + 1, self.context_tokens + self.num_seqs + self.tail.num_computed_tokens + self.tail_tokens

    def batches(self):
        """The StepBatch of each step, as stepping would build it."""
        if self.tail is not None:
            yield StepBatch(*self.tail_shape())
        n, ctx = self.decode_start()
        while True:
            yield StepBatch(n, n, ctx, ctx + n)        # n decodes: attention_pairs(1, c) = c + 1 each
            ctx += n


@dataclass(slots=True)
class DecodeSteps:
    """The steps `Scheduler.decode_through` applied, in order, from `start_s`: each one's duration s (its end is
    the end before plus it, `start_s` the first's start, added in order; `end_s` the last end) and KV blocks in
    use; (sequences, new tokens, sequences whose token comes one step after their last, steps) for each stretch
    of them with the same counts; and the requests that finished, in the order they did."""
    start_s: float
    end_s: float = 0.0
    step_s: list[float] = field(default_factory=list)
    kv_used_blocks: list[int] = field(default_factory=list)
    counts: list[tuple[int, int, int, int]] = field(default_factory=list)
    finished: list[Request] = field(default_factory=list)


class StepBuilder:
    """Accumulates a step's sequences and its StepBatch sums without per-token work."""

    __slots__ = ("budget", "prev_s", "group", "group_tick", "decodes", "decode_context", "others", "preempted",
                 "swap_out_blocks",
                 "swap_in_blocks", "new", "ctx", "pairs", "pf_seqs", "pf_tokens", "draft", "itl", "spec_seqs",
                 "tagging", "lora_tokens", "adapters", "adapter_loads", "grammar_seqs")

    def __init__(self, budget: int, prev_s: float, tagging: bool = False):
        self.budget, self.prev_s, self.tagging = budget, prev_s, tagging
        self.group: list[Request] = []
        self.group_tick = 0
        self.decodes: list[Request] = []
        self.decode_context: list[int] = []
        self.others: list[ScheduledSeq] = []
        self.preempted: list[Request] = []
        self.swap_out_blocks = self.swap_in_blocks = 0
        self.new = self.ctx = self.pairs = self.pf_seqs = self.pf_tokens = 0
        self.draft = self.itl = self.spec_seqs = 0
        self.lora_tokens = self.grammar_seqs = 0
        self.adapters: set[int] = set()
        self.adapter_loads: list[str] = []

    def tag(self, req: Request, n: int, samples: bool) -> None:
        """Count a sequence's LoRA tokens and grammar mask (the scheduler calls it only when
        LoRA or structured outputs are on, so other runs pay nothing)."""
        if req.adapter_id >= 0:
            self.lora_tokens += n
            self.adapters.add(req.adapter_id)
        if samples and req.schema_id >= 0:
            self.grammar_seqs += 1

    def add(self, req: Request, n: int, decode: bool, spec: int) -> None:
        """Add a prefill chunk or a speculative verification (the caller takes `n` off the budget)."""
        c = req.num_computed_tokens
        samples = decode or c + n == req.num_tokens
        self.others.append(ScheduledSeq(req, n, c, not decode, samples, spec))
        if self.tagging:
            self.tag(req, n, samples)
        self.new += n
        self.ctx += c
        self.pairs += attention_pairs(n, c)
        if decode:
            if req.last_token_s == self.prev_s:
                self.itl += 1
            if spec:
                self.draft += spec
                self.spec_seqs += 1
        else:
            self.pf_seqs += 1
            self.pf_tokens += n

    def build(self) -> ScheduledStep:
        d = len(self.decodes) + len(self.group)
        batch = batch_of((d + len(self.others), self.new + d, self.ctx, self.pairs + len(self.decodes), self.pf_seqs,
                          self.pf_tokens, self.draft, self.lora_tokens, len(self.adapters)))
        return ScheduledStep(self.group, self.group_tick, self.decodes, self.decode_context, self.others, batch,
                             self.preempted,
                             self.swap_out_blocks, self.swap_in_blocks, self.itl, self.spec_seqs,
                             tuple(self.adapter_loads), self.grammar_seqs)
