"""Known arrivals fed to the only replica of a cluster without simpy events.

`Cluster._arrivals` is a simpy process: at each arrival it wakes, hands the request to the replica and sleeps
until the next. When one replica takes every request and nobody else acts (`Replica.sole_entry`), that process
and the replica's are the only ones, so the replica can run both itself: `KnownArrivals` is `_arrivals`
step for step, and the replica asks it to run what simpy would run before each of the replica's own waits.

Simpy runs events by time, then by creation: `KnownArrivals` numbers the arrival process's sleeps and the
replica's waits in the order they are made (which is simpy's, as both run in simpy's order) and runs an arrival
before a wait that ends at the same time only when it was made first. Its times are the same sums simpy makes
(`now + (arrival - now)`), so the replica sees each request when it would have, and its clock reads what
simpy's would. Nothing else reads simpy's clock in such a run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from simulator.request import Request


class KnownArrivals:
    def __init__(self, requests: Iterable[Request], submit: Callable[[Request], None]):
        self._requests = iter(requests)
        self._submit = submit
        self.now_s = 0.0                   # simpy's clock at the arrival process's last event
        self.next_arrival_s = 0.0          # Cluster._next_arrival_s: the next request's arrival
        self.event_s = 0.0                 # when the process next runs: its start, then each wake (inf: ended)
        self._pending: Request | None = None     # the request it hands over then
        self._made = 0                     # events made so far (the process's sleeps and the replica's waits)
        self._event_order = 0              # the order in which its next event was made

    def advance(self) -> bool:
        """Run the process's next event; False when it has ended."""
        if self.event_s == math.inf:
            return False
        self.now_s = self.event_s
        if self._pending is not None:
            self._submit(self._pending)
        self._run()
        return True

    def wait_until(self, at_s: float) -> None:
        """A wait of the replica, made now, that ends at `at_s`: run the events simpy runs before it ends (those
        before `at_s`, and those at `at_s` made before it)."""
        self._made += 1
        order = self._made
        while self.event_s < at_s or (self.event_s == at_s and self._event_order < order):
            self.advance()

    def _run(self) -> None:
        """`Cluster._arrivals` from a wake to its next sleep."""
        now = self.now_s
        for req in self._requests:
            self.next_arrival_s = req.arrival_s
            if req.arrival_s > now:
                self._made += 1
                self._pending, self.event_s, self._event_order = req, now + (req.arrival_s - now), self._made
                return
            self._submit(req)
        self.next_arrival_s, self._pending, self.event_s = math.inf, None, math.inf
