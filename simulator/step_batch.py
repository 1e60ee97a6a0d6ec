"""The shape of one engine step, as every step-time model sees it.

A step is a list of sequences, each contributing `new_tokens` (a prefill chunk, one decode
token, or 1 + gamma speculative-verification tokens) on top of `context_tokens` already in
its KV cache. Step time depends on the batch only through these sums, so the simulator
builds a `StepBatch` incrementally (no per-token objects) and the engine builds the same one
from the step it actually ran.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import NamedTuple, Protocol


def attention_pairs(new_tokens: int, context_tokens: int) -> int:
    """Query-key pairs of one sequence in one step: each of its n new tokens attends to the c
    cached ones and to the new ones up to itself, n c + n (n + 1) / 2 (a decode: c + 1)."""
    return new_tokens * context_tokens + new_tokens * (new_tokens + 1) // 2


def windowed_pairs(new_tokens: float, context_tokens: float, window: int) -> float:
    """Query-key pairs of a chunk of n new tokens on c cached ones when each query attends to at most the
    `window` latest tokens (itself included): the query at position j (1-based) attends to min(window, j) keys,
    summed over j = c + 1 ... c + n. Equal to attention_pairs(n, c) while c + n <= window, n x window once
    c + 1 >= window. A local-attention chunk (Llama-4's) is priced by this bound: there a query attends to its
    own chunk's tokens before it, (j - 1) mod chunk + 1 <= min(chunk, j)."""
    first, last = context_tokens + 1, context_tokens + new_tokens
    if last <= window:
        return new_tokens * (first + last) / 2
    if first >= window:
        return new_tokens * window
    return (first + window) * (window - first + 1) / 2 + (last - window) * window


class StepBatch(NamedTuple):
    """Immutable sums over a step's sequences (a NamedTuple: built once per simulated step, so cheap to build)."""

    num_seqs: int = 0
    new_tokens: int = 0            # tokens through the GEMMs this step, all sequences
    context_tokens: int = 0        # KV tokens already cached, read by attention, all sequences
    attention_pairs: int = 0       # query-key pairs: sum of attention_pairs(n, c) per sequence
    prefill_seqs: int = 0          # sequences with more than one new token that are prefilling
    prefill_tokens: int = 0        # new tokens of those sequences
    draft_tokens: int = 0          # speculative tokens verified this step (a logits row each; drafting: the proposer)
    lora_tokens: int = 0           # new tokens of sequences running a LoRA adapter
    lora_adapters: int = 0         # distinct LoRA adapters in the step (their weights are read)

    @property
    def logits_rows(self) -> int:
        """Rows the lm_head computes: one a sequence, and one more for each draft token a verification scores (vLLM
        v1 gpu_model_runner._calc_spec_decode_metadata: `logits_indices` holds a verifying sequence's γ draft
        positions and its bonus token's)."""
        return self.num_seqs + self.draft_tokens

    @staticmethod
    def from_seqs(seqs: Iterable[tuple[int, int]], prefill: Iterable[bool] | None = None) -> StepBatch:
        """Build from (new_tokens, context_tokens) pairs; `prefill` marks prefill chunks.

        Without `prefill`, a sequence with more than one new token counts as prefill.
        """
        seqs = list(seqs)
        flags = list(prefill) if prefill is not None else [n > 1 for n, _ in seqs]
        num = len(seqs)
        new = sum(n for n, _ in seqs)
        ctx = sum(c for _, c in seqs)
        pairs = sum(attention_pairs(n, c) for n, c in seqs)
        pf_seqs = sum(1 for f in flags if f)
        pf_tokens = sum(n for (n, _), f in zip(seqs, flags, strict=True) if f)
        return StepBatch(num, new, ctx, pairs, pf_seqs, pf_tokens)

# A StepBatch from all nine field values, in order, as one tuple: `batch_of((n, n, c, c + n, 0, 0, 0, 0, 0))` is
# StepBatch(n, n, c, c + n) built by one C call, without the NamedTuple's Python-level __new__ (the simulator
# builds one for each step whose time is not memoised)
batch_of = partial(tuple.__new__, StepBatch)


def split_attention(batch: StepBatch) -> tuple[int, float, int, float, float]:
    """(decode seqs, context per decode seq, prefill seqs, tokens per prefill seq, context
    per prefill seq) from a batch's totals, assuming equal prefill chunks.

    Decodes contribute c + 1 pairs each, a prefill chunk of n tokens on c cached ones
    n c + n (n + 1) / 2, so pairs - context - decodes = P c (n - 1) + P n (n + 1) / 2.
    """
    prefill, decode = batch.prefill_seqs, batch.num_seqs - batch.prefill_seqs
    n = batch.prefill_tokens / prefill if prefill else 0.0
    if prefill and n <= 1:                       # one-token chunks run as decodes
        decode, prefill, n = decode + prefill, 0, 0.0
    c = 0.0
    if prefill:
        excess = batch.attention_pairs - batch.context_tokens - decode - prefill * n * (n + 1) / 2
        c = min(max(0.0, excess / (prefill * (n - 1))), batch.context_tokens / prefill)
    decode_ctx = (batch.context_tokens - prefill * c) / decode if decode else 0.0
    return decode, decode_ctx, prefill, n, c


class StepTimeModel(Protocol):
    """Seconds for one engine step of a given batch (roofline or calibrated)."""

    name: str

    def step_time(self, batch: StepBatch) -> float: ...
