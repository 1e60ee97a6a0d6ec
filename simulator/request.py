"""One inference request: what it asks for, and where the scheduler has got with it.

The fixed part (arrival, prompt and output lengths, prompt content as prefix segments) comes
from a workload or a trace; the mutable part is scheduling state shared by the simulator and
the real engine, which drive the same `Scheduler`. While a request sits in the scheduler's
decode group its token counts and last token time advance lazily: read `Scheduler.running`
(which brings them up to date) or a step's `seqs`, not the fields, in the middle of a run.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Status(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTED = "preempted"   # recompute: back in the waiting queue with its KV freed
    SWAPPED = "swapped"       # swap: back in the waiting queue with its KV copied to host
    FINISHED = "finished"
    REJECTED = "rejected"


@dataclass(slots=True, eq=False)
class Request:
    request_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    # Content ids of the prompt, each covering `segment_tokens` tokens from the start; prompt
    # tokens past the covered span are unique to this request.
    prefix_segments: tuple[int, ...] = ()
    segment_tokens: int = 1
    tenant: int = 0
    adapter_id: int = -1                  # LoRA adapter (simulator/lora.py); -1: the base model
    schema_id: int = -1                   # structured-output schema (simulator/grammar.py); -1: none

    # -- scheduling state --
    status: Status = Status.WAITING
    num_computed_tokens: int = 0          # tokens whose KV is in the cache
    num_output_tokens: int = 0            # tokens sampled so far
    num_cached_prompt_tokens: int = 0     # prompt tokens served by the prefix cache at admission
    num_blocks: int = 0                   # KV blocks it holds (its block_ids, where the pool keeps ids; on counts,
                                          # a decode-group member's as of the group's last sync)
    block_ids: list[int] = field(default_factory=list)
    window_block_ids: list[int] = field(default_factory=list)   # blocks its sliding-window layers hold
    block_hashes: list[int] | None = None  # prefix-cache keys of the full prompt blocks
    num_hashed_blocks: int = 0            # leading blocks already registered in the cache
    num_preemptions: int = 0
    num_holdbacks: int = 0                # steps it waited only because its adapter had no slot
    grammar_ready_s: float = -1.0         # when its schema is compiled (-1: not asked yet)
    group_tick: int = -1                  # in the scheduler's decode group since this tick (-1: not)
    reject_reason: str = ""

    # -- timestamps (seconds, simulated or wall clock) --
    input_done_s: float = -1.0            # reached the engine's queue (arrival plus the API server's input path)
    scheduled_s: float = -1.0             # first time any of it was scheduled
    first_token_s: float = -1.0
    last_token_s: float = -1.0
    finished_s: float = -1.0
    # Inter-token gaps that are not one step long (after a preemption or a skipped step).
    itl_gaps_s: list[float] | None = None

    @property
    def num_tokens(self) -> int:
        """Prompt plus sampled tokens: what the KV cache must hold before the next sample."""
        return self.prompt_tokens + self.num_output_tokens

    @property
    def remaining_output_tokens(self) -> int:
        return self.output_tokens - self.num_output_tokens
