"""The engine loop around each step, and the path of a token to the client.

A serving engine does more than run steps on the GPU. Its CPU schedules each step and
applies its output; with asynchronous scheduling (vLLM V1's default, SGLang's overlap
scheduler) it schedules the next step while one runs, so that CPU work hides behind the
GPU's, but a request that arrives while step k runs can only join step k + 2 (step k + 1 was
chosen when step k started). A separate API-server process tokenises each prompt before the
engine sees it (a fixed cost and one per prompt token), and detokenises and streams the
steps' tokens after them: each token reaches the client in its own message, unless the API
server lags, when it handles every step output waiting for it in one pass and a request's
tokens from those steps arrive together. Nothing here is per token in the simulation: a
step's loop cost folds into its time (`period_s`), admission is a cut-off time the replica
applies, and what a client sees is computed from the per-step timeline at the end
(simulator/records.py, `client_visible_s`).

Every field is given by the caller (sizer's engine presets); the simulator has no defaults.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineLoop:
    name: str
    async_scheduling: bool              # the next step is scheduled while one runs (one step in flight)
    schedule_s: float                   # CPU per step: schedule it and apply its output, fixed part
    schedule_s_per_seq: float           # ... and per sequence in the step
    input_s: float                      # client send to engine queue, per request: HTTP, hand-off
    output_s_per_pass: float            # API server, per pass over the step outputs waiting for it
    output_s_per_token: float           # API server, per token: detokenise and stream it
    scheduler_ranks: int                # processes that each schedule their own share of a step's sequences
    #                                     (data-parallel ranks run as one engine: each rank its own scheduler)
    stream_interval: int = 1            # tokens per streamed message after the first, which goes alone
    recv_interval: int = 1              # decode-only steps between the scheduler's polls for new requests (SGLang's
    #                                     --scheduler-recv-interval): a step with prompt tokens, or an idle engine,
    #                                     polls at once
    input_s_per_prompt_token: float = 0.0   # ... and per prompt token: the API server tokenises the prompt's text

    def input_done_s(self, arrival_s: float, prompt_tokens: int) -> float:
        """When a request sent at `arrival_s` reaches the engine's queue: its input path, the fixed part and its
        prompt's tokenisation (each request's own, not queued behind another's: see sizer/sizing/presets.py)."""
        return arrival_s + self.input_s + self.input_s_per_prompt_token * prompt_tokens

    def __post_init__(self) -> None:
        costs = (self.schedule_s, self.schedule_s_per_seq, self.input_s, self.input_s_per_prompt_token,
                 self.output_s_per_pass, self.output_s_per_token)
        if min(costs) < 0:
            raise ValueError(f"engine loop {self.name!r}: costs must be >= 0")
        if self.scheduler_ranks < 1:
            raise ValueError(f"engine loop {self.name!r}: scheduler_ranks must be >= 1")
        if self.stream_interval < 1:
            raise ValueError(f"engine loop {self.name!r}: stream_interval must be >= 1")
        if self.recv_interval < 1:
            raise ValueError(f"engine loop {self.name!r}: recv_interval must be >= 1")

    def pass_end_s(self, start_s: float, num_seqs: int) -> float:
        """When an API-server pass started at `start_s` over step outputs of `num_seqs` sequences ends (the one sum,
        in this order, that records' walk and a closed loop's live passes both take)."""
        return start_s + self.output_s_per_pass + self.output_s_per_token * num_seqs

    def period_s(self, gpu_s: float, num_seqs: int) -> float:
        """Time from one step's end to the next's, for a step whose GPU work takes `gpu_s`: the
        loop's CPU work runs beside the GPU's (asynchronous scheduling) or before it. Data-parallel ranks
        schedule side by side, the busiest its ceil(num_seqs / scheduler_ranks) sequences."""
        per_rank = num_seqs if self.scheduler_ranks == 1 else -(-num_seqs // self.scheduler_ranks)
        cpu_s = self.schedule_s + self.schedule_s_per_seq * per_rank
        if self.async_scheduling:
            return gpu_s if gpu_s > cpu_s else cpu_s
        return gpu_s + cpu_s


# The loop of the bundled engine and of runs that price steps alone: synchronous, free,
# tokens seen as they are sampled (the simulator's behaviour before engine loops existed).
BARE = EngineLoop("bare (steps only)", async_scheduling=False, schedule_s=0.0, schedule_s_per_seq=0.0, input_s=0.0,
                  output_s_per_pass=0.0, output_s_per_token=0.0, scheduler_ranks=1)
