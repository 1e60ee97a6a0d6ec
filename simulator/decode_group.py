"""The running requests in steady decode, advanced together at O(1) cost per step.

Every member decodes one token each step, so instead of touching every member the group
counts steps (`tick`): a member that joined at tick g0 with c0 computed and o0 sampled tokens
has c0 + (tick - g0) and o0 + (tick - g0) now. A step touches only the members that cross a
block boundary (indexed by their phase within a block) or finish (indexed by tick). `sync`
writes a member's counters back to its Request; the scheduler does so before anyone else
reads them.
"""

from __future__ import annotations

from heapq import heappop, heappush

from simulator.request import Request


class DecodeGroup:
    def __init__(self, block_size: int):
        self.block_size = block_size
        self.tick = 0
        self.last_tick_s = float("-inf")
        self.context_tokens = 0                       # sum over members, at the current tick
        self.members: dict[Request, None] = {}        # in running order
        # members by (computed tokens - tick) % block_size: `needing_block` reads which need a block next
        self.phase: list[dict[Request, None]] = [{} for _ in range(block_size)]
        self._finish_at: dict[int, list[Request]] = {}
        self._finish_ticks: list[int] = []            # the keys of _finish_at, a heap: the first finish in O(1)

    def __len__(self) -> int:
        return len(self.members)

    def join(self, req: Request) -> None:
        """Add a request whose fields are current and that decodes from the next step on."""
        req.group_tick = self.tick
        self.members[req] = None
        self.phase[(req.num_computed_tokens - self.tick) % self.block_size][req] = None
        at = self.tick + req.output_tokens - req.num_output_tokens
        finishing = self._finish_at.get(at)
        if finishing is None:
            self._finish_at[at] = [req]
            heappush(self._finish_ticks, at)
        else:
            finishing.append(req)
        self.context_tokens += req.num_computed_tokens

    def sync(self, req: Request) -> None:
        """Bring a member's Request fields up to the current tick. Its blocks cover its computed tokens exactly (it
        joins so, and takes one more at each block boundary), so its block count is theirs (a pool of counts,
        `BlockCounts`, counts only its own side as members take blocks)."""
        d = self.tick - req.group_tick
        if d:
            c = req.num_computed_tokens = req.num_computed_tokens + d
            req.num_output_tokens += d
            req.num_blocks = -(-c // self.block_size)
            req.last_token_s = self.last_tick_s
            req.group_tick = self.tick

    def sync_all(self) -> None:
        for req in self.members:
            self.sync(req)

    def needing_block(self, steps_ahead: int = 0) -> dict[Request, None]:
        """Members whose cache is exactly full before step `tick + steps_ahead + 1` (blocks
        fit the computed tokens exactly, so that is when the next token needs a new block)."""
        return self.phase[-(self.tick + steps_ahead) % self.block_size]

    def needing_blocks(self, steps: int) -> list[dict[Request, None]]:
        """`needing_block(j)` for each of the next `steps` steps: the phases in reverse cyclic
        order from the current one (a run is mostly one or two steps: no cycle is built)."""
        phase, bs, p = self.phase, self.block_size, -self.tick
        return [phase[(p - j) % bs] for j in range(steps)]

    def steps_to_first_finish(self) -> int:
        return self._finish_ticks[0] - self.tick

    def advance(self, steps: int, now_s: float) -> list[Request]:
        """Count `steps` decode steps ending at `now_s`; remove and return the members that
        finished (all at the last step: a caller never advances past a finish)."""
        self.tick += steps
        self.context_tokens += len(self.members) * steps
        self.last_tick_s = now_s
        done = self._finish_at.pop(self.tick, None)
        if done is None:
            return []
        heappop(self._finish_ticks)          # this tick: a run never goes past the first finish
        for req in done:
            self._remove(req)
        return done

    def dissolve(self) -> list[Request]:
        """Sync and release every member, in running order."""
        out = list(self.members)
        for req in out:
            self._remove(req)
        self._finish_at.clear()
        self._finish_ticks.clear()
        return out

    def _remove(self, req: Request) -> None:
        self.sync(req)
        del self.members[req]
        del self.phase[(req.num_computed_tokens - self.tick) % self.block_size][req]
        self.context_tokens -= req.num_computed_tokens
        req.group_tick = -1
