"""Speculative decoding: proposer kinds, their cost per step, and accepted-token draws.

A proposer guesses γ tokens per decoding sequence; the target model verifies them in one
pass of γ+1 tokens per sequence (priced by the step-time model like any other batch). Each
draft token is accepted with probability α until the first rejection, so a verification
yields min(G, γ) + 1 tokens with G geometric, whose mean is (1 - α^(γ+1)) / (1 - α)
(Leviathan et al., 2023). Drafting runs beside every step, as vLLM v1 runs it
(`SpeculativeConfig.draft_time_s`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from simulator.step_batch import StepBatch, StepTimeModel

if TYPE_CHECKING:      # the generator's type only: a plan reads SpeculativeConfig without loading numpy
    import numpy as np

METHODS = ("ngram", "medusa", "eagle", "eagle3", "mtp", "draft_model")
# The proposers that run a model with a KV cache of its own over the step's tokens: vLLM v1's
# SpecDecodeBaseProposer (vllm/v1/spec_decode/eagle.py; EagleProposer serves eagle, eagle3 and mtp,
# DraftModelProposer in draft_model.py inherits it). Medusa's heads read one hidden state a sequence
# (vllm/v1/spec_decode/medusa.py), n-gram matching runs on the CPU.
KV_DRAFTERS = ("eagle", "eagle3", "mtp", "draft_model")


def expected_tokens_per_step(acceptance_rate: float, num_speculative_tokens: int) -> float:
    """(1 - α^(γ+1)) / (1 - α): mean tokens one verification step yields."""
    a, g = acceptance_rate, num_speculative_tokens
    return float(g + 1) if a >= 1.0 else (1.0 - a ** (g + 1)) / (1.0 - a)


@dataclass(frozen=True)
class SpeculativeConfig:
    method: str                     # 'ngram' | 'medusa' | 'eagle' | 'eagle3' | 'mtp' | 'draft_model'
    num_speculative_tokens: int     # γ
    acceptance_rate: float          # α, per draft token
    draft_cost_fraction: float      # a drafting pass as a share of the target's step over the same tokens
    draft_step_model: StepTimeModel | None = None  # prices a draft model's own steps instead

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"speculative method must be one of {sorted(METHODS)}, not {self.method!r}")
        if self.num_speculative_tokens < 1:
            raise ValueError("num_speculative_tokens must be >= 1")
        if not 0.0 <= self.acceptance_rate <= 1.0:
            raise ValueError("acceptance_rate must be in [0, 1]")

    def draft_time_s(self, batch: StepBatch, target: StepTimeModel) -> float:
        """Drafting beside a step of `batch`, which vLLM v1 runs for every sequence of every step (the drafts of
        a sequence still prefilling are dropped). A drafter with a KV cache (KV_DRAFTERS) takes every token the
        step scheduled (vllm/v1/worker/gpu_model_runner.py, GPUModelRunner.propose_draft_token_ids:
        input_ids[:num_scheduled_tokens]), so its first pass runs over the prefill chunks, building its KV of
        them, and over each verification's 1 + γ tokens, with one logits row a sequence; then γ - 1 passes of one
        token a sequence (SpecDecodeBaseProposer.propose, vllm/v1/spec_decode/eagle.py). Medusa's γ heads and
        the other proposers: γ one-token passes over the sequences. A draft model is priced by its own step
        model; a proposer without one at `draft_cost_fraction` x the target's step over the same tokens (a head
        is a share of the target's layers for a prefill chunk as for a decode: FLOPs and bytes a token alike)."""
        if self.draft_step_model is not None:
            model, share = self.draft_step_model, 1.0
        elif self.draft_cost_fraction == 0.0:
            return 0.0
        else:
            model, share = target, self.draft_cost_fraction
        seqs, context = batch.num_seqs, batch.context_tokens + batch.new_tokens
        one_token = model.step_time(StepBatch(seqs, seqs, context, context + seqs))
        if self.method not in KV_DRAFTERS:
            return share * self.num_speculative_tokens * one_token
        first = batch._replace(draft_tokens=0, lora_tokens=0, lora_adapters=0)
        return share * (model.step_time(first) + (self.num_speculative_tokens - 1) * one_token)


class DraftingStepModel:
    """A step with the drafting vLLM runs beside it: the target's step + `SpeculativeConfig.draft_time_s`. The
    simulator's replicas price their steps by it, and the plan its prefill and verification steps."""

    def __init__(self, target: StepTimeModel, config: SpeculativeConfig):
        self.target, self.config, self.name = target, config, target.name

    def step_time(self, batch: StepBatch) -> float:
        return self.target.step_time(batch) + self.config.draft_time_s(batch, self.target)


def with_drafting(model: StepTimeModel, config: SpeculativeConfig | None) -> StepTimeModel:
    """`model`, with the drafting beside each step where speculative decoding is on."""
    return model if config is None else DraftingStepModel(model, config)


class Proposer:
    """Draws how many drafts each sequence keeps (its drafting is priced by `DraftingStepModel`)."""

    def __init__(self, config: SpeculativeConfig, rng: np.random.Generator):
        self.config = config
        self._rng = rng

    def draw_accepted(self, caps: list[int]) -> list[int]:
        """Accepted drafts per sequence: leading successes of Bernoulli(α) trials, capped."""
        a = self.config.acceptance_rate
        if a >= 1.0:
            return list(caps)
        if a <= 0.0:
            return [0] * len(caps)
        runs = self._rng.geometric(1.0 - a, size=len(caps)) - 1
        return [min(run, cap) for run, cap in zip(runs.tolist(), caps, strict=True)]
