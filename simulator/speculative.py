"""Speculative decoding: proposer kinds, their cost per step, and accepted-token draws.

A proposer guesses γ tokens per decoding sequence; the target model verifies them in one
pass of γ+1 tokens per sequence (priced by the step-time model like any other batch). Each
draft token is accepted with probability α until the first rejection, so a verification
yields min(G, γ) + 1 tokens with G geometric, whose mean is (1 - α^(γ+1)) / (1 - α)
(Leviathan et al., 2023).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from simulator.step_batch import StepBatch, StepTimeModel

if TYPE_CHECKING:      # the generator's type only: a plan reads SpeculativeConfig without loading numpy
    import numpy as np

METHODS = ("ngram", "medusa", "eagle", "eagle3", "mtp", "draft_model")


def expected_tokens_per_step(acceptance_rate: float, num_speculative_tokens: int) -> float:
    """(1 - α^(γ+1)) / (1 - α): mean tokens one verification step yields."""
    a, g = acceptance_rate, num_speculative_tokens
    return float(g + 1) if a >= 1.0 else (1.0 - a ** (g + 1)) / (1.0 - a)


@dataclass(frozen=True)
class SpeculativeConfig:
    method: str                     # 'ngram' | 'medusa' | 'eagle' | 'eagle3' | 'mtp' | 'draft_model'
    num_speculative_tokens: int     # γ
    acceptance_rate: float          # α, per draft token
    draft_cost_fraction: float      # cost of proposing one token, as a share of one target decode step
    draft_step_model: StepTimeModel | None = None  # prices a draft model's own steps instead

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"speculative method must be one of {sorted(METHODS)}, not {self.method!r}")
        if self.num_speculative_tokens < 1:
            raise ValueError("num_speculative_tokens must be >= 1")
        if not 0.0 <= self.acceptance_rate <= 1.0:
            raise ValueError("acceptance_rate must be in [0, 1]")


class Proposer:
    """Prices the drafting of a step and draws how many drafts each sequence keeps."""

    def __init__(self, config: SpeculativeConfig, rng: np.random.Generator):
        self.config = config
        self._rng = rng

    def draft_time_s(self, spec_seqs: int, spec_context_tokens: int, target: StepTimeModel) -> float:
        """γ sequential one-token passes over the drafting sequences."""
        if spec_seqs == 0:
            return 0.0
        cfg = self.config
        one = StepBatch(spec_seqs, spec_seqs, spec_context_tokens, spec_context_tokens + spec_seqs)
        if cfg.draft_step_model is not None:
            return cfg.num_speculative_tokens * cfg.draft_step_model.step_time(one)
        if cfg.draft_cost_fraction == 0.0:
            return 0.0
        return cfg.num_speculative_tokens * cfg.draft_cost_fraction * target.step_time(one)

    def draw_accepted(self, caps: list[int]) -> list[int]:
        """Accepted drafts per sequence: leading successes of Bernoulli(α) trials, capped."""
        a = self.config.acceptance_rate
        if a >= 1.0:
            return list(caps)
        if a <= 0.0:
            return [0] * len(caps)
        runs = self._rng.geometric(1.0 - a, size=len(caps)) - 1
        return [min(run, cap) for run, cap in zip(runs.tolist(), caps, strict=True)]
