"""One step's batch as device tensors: the tokens fed, their positions and KV slots, and
what the two attention kernels need.

Sequences with one new token (decodes) go first and use the decode kernel; sequences with
more (prefill chunks) follow and use the prefill kernel. Logits are taken at the last new
token of every sequence, in that same order.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.kv_cache import slots_for


@dataclass(frozen=True)
class SeqWork:
    """One sequence's share of a step, in host terms."""

    token_ids: list[int]        # the new tokens fed this step
    num_cached_tokens: int      # tokens of this sequence already in the KV cache
    block_ids: list[int]        # physical blocks, covering num_cached_tokens + len(token_ids)


@dataclass
class StepInputs:
    token_ids: torch.Tensor             # [T] long
    positions: torch.Tensor             # [T] long
    slots: torch.Tensor                 # [T] long
    num_decode_tokens: int
    decode_block_tables: torch.Tensor   # [D, blocks] int32
    decode_seq_lens: torch.Tensor       # [D] int32, including the new token
    decode_max_len: int
    prefill_block_tables: torch.Tensor  # [P, blocks] int32
    prefill_cu_q: torch.Tensor          # [P + 1] int32
    prefill_ctx_lens: torch.Tensor      # [P] int32
    prefill_max_q: int
    logits_indices: torch.Tensor        # [D + P] long: last new token of each sequence
    order: list[int]                    # seqs[order[i]] owns logits row i

    @property
    def num_tokens(self) -> int:
        return self.token_ids.numel()


def _block_table(rows: list[list[int]], device) -> torch.Tensor:
    width = max((len(r) for r in rows), default=1)
    padded = [r + [0] * (width - len(r)) for r in rows]
    return torch.tensor(padded, dtype=torch.int32, device=device).reshape(len(rows), width)


def build_step(seqs: list[SeqWork], block_size: int, device: torch.device | str) -> StepInputs:
    """Lay out the step's sequences, decodes first, as the tensors the model reads."""
    order = ([i for i, s in enumerate(seqs) if len(s.token_ids) == 1]
             + [i for i, s in enumerate(seqs) if len(s.token_ids) > 1])
    tokens, positions, slots, last = [], [], [], []
    decode_tables, decode_lens, prefill_tables, cu_q, ctx_lens = [], [], [], [0], []
    for i in order:
        s = seqs[i]
        n, c = len(s.token_ids), s.num_cached_tokens
        needed = -(-(c + n) // block_size)
        tokens += s.token_ids
        positions += range(c, c + n)
        slots += slots_for(s.block_ids, c, n, block_size)
        last.append(len(tokens) - 1)
        if n == 1:
            decode_tables.append(list(s.block_ids[:needed]))
            decode_lens.append(c + 1)
        else:
            prefill_tables.append(list(s.block_ids[:needed]))
            cu_q.append(cu_q[-1] + n)
            ctx_lens.append(c)

    def long(values):
        return torch.tensor(values, dtype=torch.long, device=device)

    def int32(values):
        return torch.tensor(values, dtype=torch.int32, device=device)

    return StepInputs(
        token_ids=long(tokens), positions=long(positions), slots=long(slots),
        num_decode_tokens=len(decode_lens),
        decode_block_tables=_block_table(decode_tables, device), decode_seq_lens=int32(decode_lens),
        decode_max_len=max(decode_lens, default=0),
        prefill_block_tables=_block_table(prefill_tables, device), prefill_cu_q=int32(cu_q),
        prefill_ctx_lens=int32(ctx_lens),
        # pairwise differences: cu_q[1:] is one shorter than cu_q
        prefill_max_q=max((b - a for a, b in zip(cu_q, cu_q[1:], strict=False)), default=0),
        logits_indices=long(last), order=order,
    )
