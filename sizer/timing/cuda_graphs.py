"""Decode steps padded to the batch sizes an engine captured CUDA graphs for.

TensorRT-LLM's PyTorch backend with `cuda_graph_config.enable_padding` runs a step through a captured graph only
when it is generation-only on every rank, at the smallest captured batch size at least the step's (under attention
DP the largest rank's batch, gathered from every rank: `PyTorchModelEngine._get_padded_batch`,
tensorrt_llm/_torch/pyexecutor/model_engine.py, TensorRT-LLM 1.0); the padding's dummy sequences go through every
GEMM, the MoE layers and their token exchange like real ones. It captures the listed sizes up to its max_batch_size
and max_num_tokens, and that cap where a listed size is above it (`captured_sizes`); a larger step runs eagerly,
unpadded. A step with a prompt
runs eagerly too.
"""

from __future__ import annotations

from bisect import bisect_left

from simulator.step_batch import StepBatch, StepTimeModel


def captured_sizes(sizes: tuple[int, ...], max_num_seqs: int, max_num_tokens: int) -> tuple[int, ...]:
    """The decode batches (a rank's sequences) the engine captures graphs for, padding on: the listed sizes up to
    min(max_batch_size, max_num_tokens), and that cap itself when a listed size is above it
    (`_filter_cuda_graph_batch_sizes`, tensorrt_llm/_torch/pyexecutor/model_engine.py, TensorRT-LLM 1.0)."""
    cap = min(max_num_seqs, max_num_tokens)
    kept = {size for size in sizes if size <= cap} | ({cap} if any(size > cap for size in sizes) else set())
    return tuple(sorted(kept))


class CudaGraphPadding:
    """A step-time model that prices a decode-only step at its padded batch (`StepTimeModel`); other steps as
    the model it wraps. `ranks`: attention-DP ranks the replica's decodes spread evenly over (1 without)."""

    def __init__(self, model: StepTimeModel, sizes: tuple[int, ...], ranks: int, max_num_seqs: int,
                 max_num_batched_tokens: int):
        self.model, self.ranks = model, ranks
        self.sizes = captured_sizes(sizes, max_num_seqs, max_num_batched_tokens)
        self.name = model.name
        # what priced each operator family, for the plan (step_model.step_sources): the wrapped model's
        self.sources = getattr(model, "sources", None)

    def padded_sequences(self, num_seqs: int) -> int:
        """The replica's sequences as the graph runs them: every rank at the padded size of the busiest's
        ceil(num_seqs / ranks); `num_seqs` when that is above every captured size."""
        busiest = -(-num_seqs // self.ranks)
        i = bisect_left(self.sizes, busiest)
        return self.sizes[i] * self.ranks if i < len(self.sizes) else num_seqs

    def step_time(self, batch: StepBatch) -> float:
        if batch.prefill_seqs or batch.draft_tokens or not batch.num_seqs:
            return self.model.step_time(batch)
        plain = self.model.step_time(batch)
        extra = self.padded_sequences(batch.num_seqs) - batch.num_seqs
        if not extra:
            return plain
        # dummy one-token decodes, each attending to itself. Padding only adds work, but a model that prices
        # decode attention at the batch's mean context (split_attention) would see the dummies' zero contexts
        # lower that mean: the padded step is never priced below the step itself.
        padded = batch._replace(num_seqs=batch.num_seqs + extra, new_tokens=batch.new_tokens + extra,
                                attention_pairs=batch.attention_pairs + extra)
        return max(plain, self.model.step_time(padded))
