"""The API server's passes as the run goes, for clients that wait for their answer (closed loops).

What a client sees is computed from the step timeline at the end of a run (records.ApiServer). A closed
loop's client sends its next request when its answer reaches it, so the run needs that time while it goes:
this follows the same passes step by step. The API server, when free, takes every step output that has
reached it (every step ended by then) and handles them in one pass of output_s_per_pass + output_s_per_token
x their sequences; a step that ends while it is busy waits for the next pass, which starts when the current
one ends. A step's answer is known at once when it finds the server idle, else when that next pass starts
(a timer then: every step ended by then has been applied, as a closed loop's replicas step one event per
step). Ties aside (a step ending exactly as a pass starts), the times are records.ApiServer's.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import simpy

from simulator.engine_loop import EngineLoop


class ApiPasses:
    """One replica's API server, fed its steps in order (`step_ended`); `when_answered` calls back with the client
    time of the last step fed."""

    def __init__(self, env: simpy.Environment, loop: EngineLoop):
        self.env, self.loop = env, loop
        self.free_s = -math.inf            # when the pass under way (or the last) ends
        self.pending_seqs = 0              # sequences of the steps waiting for the next pass
        self.waiters: list[Callable[[float], None]] | None = None    # not None: steps wait, a pass at free_s
        self.last_answer_s = -math.inf     # the last step's client time, when it found the server idle

    def step_ended(self, end_s: float, num_seqs: int) -> None:
        if self.waiters is None and end_s >= self.free_s:       # idle: a pass of this step's outputs alone
            self.free_s = end_s + self.loop.output_s_per_pass + self.loop.output_s_per_token * num_seqs
            self.last_answer_s = self.free_s
            return
        if self.waiters is None:                                 # busy: the next pass starts when this one ends
            self.waiters = []
            self.env.timeout(max(0.0, self.free_s - self.env.now)).callbacks.append(self._next_pass)
        self.pending_seqs += num_seqs

    def when_answered(self, callback: Callable[[float], None]) -> None:
        """`callback(client_s)` for a request that finished in the last step fed: now, or when its pass starts."""
        if self.waiters is None:
            callback(self.last_answer_s)
        else:
            self.waiters.append(callback)

    def _next_pass(self, _event) -> None:
        waiters, self.waiters = self.waiters or [], None
        self.free_s += self.loop.output_s_per_pass + self.loop.output_s_per_token * self.pending_seqs
        self.pending_seqs = 0
        for callback in waiters:
            callback(self.free_s)
