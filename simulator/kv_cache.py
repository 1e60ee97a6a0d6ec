"""Paged KV cache: a pool of fixed-size blocks, ref-counted, with a prefix cache.

Follows vLLM v1's KVCacheManager. A full prompt block is keyed by a chained hash over the
prompt content (parent key, the content ids covering its tokens, the tenant when caches
are isolated, and the LoRA adapter), so two requests share block k only if they share everything before it. Only
keyed blocks can be shared, so only they carry reference counts. A freed keyed block keeps
its key in an LRU queue of cached blocks; a freed unkeyed block goes to a plain free list.
Allocation takes plain blocks first and evicts the least recently used cached block only
when none is left (as SGLang's radix cache does; vLLM keeps one LRU queue for both, which
can evict a cached block while plain ones wait). Physical block ids are 0..num_blocks-1, so
a real engine can index its KV tensors with them.

Sliding-window (and chunked-local) layers keep only their last `window` tokens, as vLLM's hybrid KV
cache frees their blocks outside the window. With `window_groups` a pool block holds `block_size`
tokens of the layers that keep everything, and a request also holds, from its first allocation to its
end, `window_blocks(prompt + output - 1)` plain blocks for its windowed layers: per group, the blocks of
its window (and the one the window straddles) scaled by that group's bytes per token over a pool
block's. Exact at the request's end; held from the start (vLLM grows them as tokens come). A group of
window 0 is a hybrid model's recurrent (Mamba / linear-attention) state: its share is the state's bytes
over a pool token's, and a request holds that many tokens' worth of blocks whatever its length (vLLM
gives each running request its state blocks from the same pool).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Collection, Iterable, Sequence

from simulator.request import Request


def prompt_block_hashes(req: Request, block_size: int, tenant_scoped: bool) -> list[int]:
    """Keys of the prompt's full blocks that lie inside its content segments.

    Keys are Python hashes of int tuples: deterministic across runs. When a segment spans a
    whole number of blocks, block keys are derived from one hash per segment (key*per+offset,
    unique because 0 <= offset < per), which keeps long traced prompts cheap.
    """
    seg, segs = req.segment_tokens, req.prefix_segments
    num = min(req.prompt_tokens, len(segs) * seg) // block_size
    if num == 0:
        return []
    parent = hash((seg, block_size, req.tenant if tenant_scoped else -1))
    if req.adapter_id >= 0:     # KV computed under an adapter is its own (vLLM: the LoRA id is in the block hash,
        parent = hash((parent, "lora", req.adapter_id))      # vllm/v1/core/kv_cache_utils.py, extra keys)
    if seg % block_size == 0:
        per = seg // block_size
        keys: list[int] = []
        for s in segs[: -(-num // per)]:
            parent = hash((parent, s))
            base = parent * per
            keys.extend(range(base, base + per))
        del keys[num:]
        return keys
    keys = []
    for j in range(num):
        first, last = j * block_size // seg, ((j + 1) * block_size - 1) // seg
        parent = hash((parent, segs[first:last + 1], j * block_size % seg))
        keys.append(parent)
    return keys


class KVCacheManager:
    """Block pool + prefix cache. Conservation: free_plain + used + cached_free == num_blocks."""

    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True,
                 tenant_isolation: bool = False, slot_prompt_reuse: bool = False,
                 window_groups: tuple[tuple[float, int], ...] = ()):
        if num_blocks < 1 or block_size < 1:
            raise ValueError(f"num_blocks ({num_blocks}) and block_size ({block_size}) must be >= 1")
        if slot_prompt_reuse and enable_prefix_caching:
            raise ValueError("slot prompt reuse replaces the shared prefix cache; enable only one")
        self.num_blocks = num_blocks
        self.block_size = block_size
        # (pool blocks per block of the group's tokens, window tokens); window 0: a recurrent state
        self.window_groups = window_groups
        self.enable_prefix_caching = enable_prefix_caching
        self.tenant_isolation = tenant_isolation
        # llama.cpp slots (each block one slot's whole context): a slot keeps its last prompt, and a request
        # that lands on it reuses their common prefix (llama-server's cache_prompt). What each slot last held:
        # (tenant scope, segment tokens, content segments, prompt tokens).
        self.slot_prompt_reuse = slot_prompt_reuse
        self._slot_prompt: list[tuple | None] = [None] * num_blocks
        self._plain = list(range(num_blocks - 1, -1, -1))   # free, unkeyed; pop() gives block 0 first
        self._lru: OrderedDict[int, None] = OrderedDict()    # free, keyed; head = evict first
        self._ref = [0] * num_blocks                          # holders of each keyed block
        self._key_of: list[int | None] = [None] * num_blocks
        self._cached: dict[int, int] = {}                     # prefix key -> block id
        # Keys of a segment spanning whole blocks form a span (key // blocks per segment);
        # counting each span's cached and cached-free blocks lets a lookup skip whole segments.
        self._span_of: list[int | None] = [None] * num_blocks
        self._span_cached: dict[int, int] = {}
        self._span_free: dict[int, int] = {}

    # -- counts --
    @property
    def num_free_blocks(self) -> int:
        """Blocks an allocation can take: plain free ones and cached unreferenced (evictable) ones."""
        return len(self._plain) + len(self._lru)

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - len(self._plain) - len(self._lru)

    @property
    def num_cached_free_blocks(self) -> int:
        return len(self._lru)

    def blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def final_blocks(self, total_tokens: int) -> int:
        """Blocks a request of `total_tokens` prompt + output tokens holds at its end (the last token's KV is never
        written), its window blocks too: the pool can serve it only if it has that many."""
        return self.blocks_for(total_tokens - 1) + self.window_blocks(total_tokens - 1)

    def pool_to_serve(self, totals: Iterable[int], max_model_len: int | None) -> tuple[int, int]:
        """(the longest of the requests of `totals` prompt + output tokens a scheduler of `max_model_len` takes, the
        blocks it holds at its end): the smallest pool that serves every request not refused for its length."""
        longest = max((t for t in totals if not max_model_len or t <= max_model_len), default=0)
        return longest, self.final_blocks(longest) if longest else 0

    def window_blocks(self, num_tokens: int) -> int:
        """Pool blocks the windowed layers of a sequence of `num_tokens` hold (0 without window groups)."""
        if not self.window_groups:
            return 0
        bs, total = self.block_size, 0.0
        for share, window in self.window_groups:
            if not window:                  # a recurrent state: `share` tokens' worth of blocks, whatever the length
                total += share / bs
                continue
            kept = min(num_tokens, window)
            total += share * (-(-kept // bs) + (kept < num_tokens))
        return math.ceil(total - 1e-9)

    def window_need(self, req: Request) -> int:
        """The window blocks `req` still has to take: all of them at its first allocation, then none."""
        if not self.window_groups or req.window_block_ids:
            return 0
        return self.window_blocks(req.prompt_tokens + req.output_tokens - 1)

    # -- prefix cache --
    def _keys(self, req: Request) -> list[int]:
        if req.block_hashes is None:
            req.block_hashes = prompt_block_hashes(req, self.block_size, self.tenant_isolation)
        return req.block_hashes

    def count_computed_blocks(self, req: Request) -> tuple[int, int]:
        """(blocks, of which unreferenced) that `get_computed_blocks` would return, cheaply:
        a segment whose blocks are all cached counts whole without a lookup per block."""
        if not self.enable_prefix_caching or not req.prefix_segments:
            return 0, 0
        keys, bs = self._keys(req), self.block_size
        limit = min(len(keys), (req.num_tokens - 1) // bs)
        per = req.segment_tokens // bs if req.segment_tokens % bs == 0 else 1
        cached, ref, span_cached, span_free = self._cached, self._ref, self._span_cached, self._span_free
        j = free = 0
        while j < limit:
            end = min(j + per, limit)
            if per > 1 and end - j == per and span_cached.get(keys[j] // per, 0) == per:
                free += span_free.get(keys[j] // per, 0)
                j = end
                continue
            while j < end:
                b = cached.get(keys[j])
                if b is None:
                    return j, free
                free += ref[b] == 0
                j += 1
        return j, free

    def get_computed_blocks(self, req: Request) -> tuple[list[int], int]:
        """Longest cached prefix of the request (blocks, tokens), leaving >= 1 token to compute."""
        if not self.enable_prefix_caching or not req.prefix_segments:
            return [], 0
        keys = self._keys(req)
        limit = min(len(keys), (req.num_tokens - 1) // self.block_size)
        blocks: list[int] = []
        cached = self._cached
        for j in range(limit):
            b = cached.get(keys[j])
            if b is None:
                break
            blocks.append(b)
        return blocks, len(blocks) * self.block_size

    def cache_full_blocks(self, req: Request) -> None:
        """Register the request's newly completed prompt blocks under their prefix keys."""
        if not self.enable_prefix_caching or not req.prefix_segments:
            return
        keys = self._keys(req)
        full = min(req.num_computed_tokens // self.block_size, len(keys), len(req.block_ids))
        key_of, cached, ref, ids = self._key_of, self._cached, self._ref, req.block_ids
        per = req.segment_tokens // self.block_size if req.segment_tokens % self.block_size == 0 else 1
        for j in range(req.num_hashed_blocks, full):
            b, k = ids[j], keys[j]
            if key_of[b] is None and k not in cached:
                cached[k] = b
                key_of[b] = k
                ref[b] = 1
                if per > 1:
                    span = self._span_of[b] = k // per
                    self._span_cached[span] = self._span_cached.get(span, 0) + 1
        if full > req.num_hashed_blocks:
            req.num_hashed_blocks = full

    # -- llama.cpp slots --
    def _prompt_of(self, req: Request) -> tuple:
        return (req.tenant if self.tenant_isolation else -1, req.segment_tokens, req.prefix_segments,
                req.prompt_tokens)

    def claim_slot(self, req: Request) -> int:
        """Slot prompt reuse: the idle slot `req` gets and the prompt tokens it reuses there. llama-server
        gives a request the idle slot whose kept prompt shares the longest prefix with it (then the least
        recently freed one) and keeps that common prefix, leaving at least one token to compute. The slot
        is moved to the head of the free list, so the next allocation takes it."""
        scope, seg, segs, _ = self._prompt_of(req)
        best, best_tokens = (self._plain[-1] if self._plain else -1), 0
        if segs:
            for b in self._plain:
                prev = self._slot_prompt[b]
                if prev is None or prev[0] != scope or prev[1] != seg:
                    continue
                same = 0
                for x, y in zip(prev[2], segs, strict=False):
                    if x != y:
                        break
                    same += 1
                tokens = min(same * seg, prev[3], req.prompt_tokens, req.num_tokens - 1)
                if tokens > best_tokens:
                    best, best_tokens = b, tokens
        if best >= 0:
            self._plain.remove(best)
            self._plain.append(best)
        return best_tokens

    # -- allocation --
    def allocate_slots(self, req: Request, num_new_tokens: int,
                       computed_blocks: Sequence[int] = ()) -> bool:
        """Give `req` blocks for its computed tokens, any cache hits, and `num_new_tokens` more.

        All or nothing: returns False, changing nothing, when the pool is short. The caller
        adds the hits to `req.num_computed_tokens` after a successful call.
        """
        num_hit = len(computed_blocks)
        plain = self._plain
        if not num_hit and not self.window_groups:      # the common case: no hits, no windows, plain blocks enough
            need = -(-(req.num_computed_tokens + num_new_tokens) // self.block_size) - req.num_blocks
            if need <= len(plain):
                if need > 0:
                    self._take(req.block_ids, need)
                    req.num_blocks += need
                return True
        total = req.num_computed_tokens + num_hit * self.block_size + num_new_tokens
        window = self.window_need(req)
        need = -(-total // self.block_size) - req.num_blocks - num_hit + window
        free = len(plain) + len(self._lru)
        if num_hit:
            ref, lru = self._ref, self._lru
            if need > free - sum(1 for b in computed_blocks if ref[b] == 0):
                return False
            for b in computed_blocks:
                if ref[b] == 0:
                    del lru[b]
                    if self._span_of[b] is not None:
                        self._span_free[self._span_of[b]] -= 1
                ref[b] += 1
            req.block_ids.extend(computed_blocks)
            req.num_blocks += num_hit
            req.num_hashed_blocks = num_hit
        elif need > free:
            return False
        if window:
            self._take(req.window_block_ids, window)
            need -= window
        if need > 0:
            self._take(req.block_ids, need)
            req.num_blocks += need
        return True

    def append_blocks(self, req: Request, n: int) -> None:
        """Take `n` more blocks for `req`; the caller has checked that the pool holds them."""
        self._take(req.block_ids, n)
        req.num_blocks += n

    def append_block_each(self, reqs: Collection[Request]) -> None:
        """Give each request one more block, in order, as `append_blocks(req, 1)` would; the
        caller has checked that the pool holds them."""
        plain = self._plain
        if len(reqs) <= len(plain):            # plain blocks for all: `_take`'s first branch, one block each
            pop = plain.pop
            for req in reqs:
                req.block_ids.append(pop())
                req.num_blocks += 1
            return
        for req in reqs:
            if plain:
                req.block_ids.append(plain.pop())
            else:
                self._take(req.block_ids, 1)
            req.num_blocks += 1

    def _take(self, out: list[int], n: int) -> None:
        plain = self._plain
        if n <= len(plain):
            out.extend(plain[:-n - 1:-1])
            del plain[-n:]
            return
        out.extend(reversed(plain))
        n -= len(plain)
        plain.clear()
        key_of, popitem = self._key_of, self._lru.popitem
        for _ in range(n):                     # evict least recently used cached blocks
            b = popitem(last=False)[0]
            del self._cached[key_of[b]]
            key_of[b] = None
            span = self._span_of[b]
            if span is not None:
                self._span_of[b] = None
                self._span_cached[span] -= 1
                self._span_free[span] -= 1
            out.append(b)

    def free(self, req: Request) -> None:
        """Release the request's blocks, tail first, so its tail is reused or evicted first."""
        ids, h = req.block_ids, req.num_hashed_blocks
        if req.window_block_ids:
            self._plain.extend(reversed(req.window_block_ids))
            req.window_block_ids = []
        if self.slot_prompt_reuse:
            for b in ids:
                self._slot_prompt[b] = self._prompt_of(req)
        self._plain.extend(ids[:h - 1:-1] if h else ids[::-1])   # past the keyed head: never shared
        if h:
            ref, key_of, lru, plain = self._ref, self._key_of, self._lru, self._plain
            for b in reversed(ids[:h]):
                if key_of[b] is None:
                    plain.append(b)
                else:
                    ref[b] -= 1
                    if ref[b] == 0:
                        lru[b] = None
                        span = self._span_of[b]
                        if span is not None:
                            self._span_free[span] = self._span_free.get(span, 0) + 1
        req.block_ids = []
        req.num_blocks = req.num_hashed_blocks = 0

    # -- checks --
    def check_invariants(self, holders: Iterable[Request] | None = None) -> None:
        """Raise AssertionError unless blocks are conserved: every block is exactly one of
        plain-free, cached-free or used. Given the requests holding blocks, also check that each
        used block is held (once, unless keyed and shared) and each keyed ref count is right."""
        plain, lru, key_of = self._plain, self._lru, self._key_of
        assert len(set(plain)) == len(plain), "a block is in the plain free list twice"
        assert not set(plain) & set(lru), "a block is both plain-free and cached-free"
        assert all(key_of[b] is None for b in plain), "a keyed block in the plain free list"
        assert all(key_of[b] is not None and self._ref[b] == 0 for b in lru), "a bad block in the LRU queue"
        assert self.num_used_blocks >= 0 and len(plain) + len(lru) + self.num_used_blocks == self.num_blocks
        for k, b in self._cached.items():
            assert key_of[b] == k, "cache map and block keys disagree"
        spans: dict[int, list[int]] = {}
        for b, span in enumerate(self._span_of):
            if span is not None:
                assert key_of[b] is not None, "a span on an unkeyed block"
                spans.setdefault(span, []).append(b)
        for span, blocks in spans.items():
            assert self._span_cached.get(span, 0) == len(blocks), "span count drifted"
            assert self._span_free.get(span, 0) == sum(self._ref[b] == 0 for b in blocks), "span free count drifted"
        if holders is None:
            return
        count = [0] * self.num_blocks
        for req in holders:
            assert req.num_blocks == len(req.block_ids), f"request {req.request_id}: its block count drifted"
            for b in (*req.block_ids, *req.window_block_ids):
                count[b] += 1
        free = set(plain) | set(lru)
        for b in range(self.num_blocks):
            if b in free:
                assert count[b] == 0, f"free block {b} is held"
            elif key_of[b] is None:
                assert count[b] == 1, f"unkeyed used block {b} held {count[b]} times"
            else:
                assert count[b] == self._ref[b] >= 1, f"keyed block {b}: ref {self._ref[b]}, held {count[b]}"


class BlockCounts(KVCacheManager):
    """The pool as a count of free blocks, for a replica where no block's id is ever observed: no prefix cache, no
    llama.cpp slots, no windowed layers (and not the real engine, which indexes its KV tensors with the ids). A
    request's blocks are its `num_blocks`; taking and freeing them is arithmetic on the free count, where
    `KVCacheManager` moves ids between lists. Every count, and so every scheduling decision, is the same as the ids
    give (`tests/simulator/test_kv_cache.py` runs both side by side; `kv_cache_for` chooses)."""

    def __init__(self, num_blocks: int, block_size: int):
        super().__init__(num_blocks, block_size, enable_prefix_caching=False)
        self._plain = []                     # no ids: the free blocks are a count
        self._free = num_blocks

    @property
    def num_free_blocks(self) -> int:
        return self._free

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - self._free

    def allocate_slots(self, req: Request, num_new_tokens: int, computed_blocks: Sequence[int] = ()) -> bool:
        need = -(-(req.num_computed_tokens + num_new_tokens) // self.block_size) - req.num_blocks
        if need > self._free:
            return False
        if need > 0:
            self._free -= need
            req.num_blocks += need
        return True

    def append_blocks(self, req: Request, n: int) -> None:
        if n > self._free:                   # the ids pool would pop an empty list: a scheduler bug either way
            raise RuntimeError(f"{n} KV blocks asked for, {self._free} free")
        self._free -= n
        req.num_blocks += n

    def append_block_each(self, reqs: Collection[Request]) -> None:
        """The pool's side only: the scheduler gives one block each to members of its decode group, whose block
        counts the group brings up to date as it syncs them (`DecodeGroup.sync`)."""
        if len(reqs) > self._free:
            raise RuntimeError(f"{len(reqs)} KV blocks asked for, {self._free} free")
        self._free -= len(reqs)

    def free(self, req: Request) -> None:
        self._free += req.num_blocks
        req.num_blocks = 0

    def check_invariants(self, holders: Iterable[Request] | None = None) -> None:
        """Raise AssertionError unless the free count is within the pool and, given the requests holding blocks,
        their blocks are the used ones."""
        assert 0 <= self._free <= self.num_blocks, f"free count {self._free} outside 0..{self.num_blocks}"
        if holders is not None:
            held = sum(req.num_blocks for req in holders)
            assert held == self.num_blocks - self._free, f"{held} blocks held, {self.num_blocks - self._free} used"


def kv_cache_for(num_blocks: int, block_size: int, enable_prefix_caching: bool, tenant_isolation: bool,
                 slot_prompt_reuse: bool, window_groups: tuple[tuple[float, int], ...]) -> KVCacheManager:
    """The simulator's pool: counts of blocks where no id is ever observed (`BlockCounts`), else the ids. A caller
    whose requests carry no prompt content passes `enable_prefix_caching` False: its cache would never hold one."""
    if enable_prefix_caching or slot_prompt_reuse or window_groups:
        return KVCacheManager(num_blocks, block_size, enable_prefix_caching, tenant_isolation, slot_prompt_reuse,
                              window_groups)
    return BlockCounts(num_blocks, block_size)
