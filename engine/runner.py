"""Continuous batching on the real model, driven by the simulator's own scheduler.

Each loop: admit the requests that have arrived, ask `simulator.scheduler.Scheduler` for the
next step, run it as one forward pass over the mixed batch (decodes and prefill chunks),
sample, and hand the step back to the scheduler with the device-synchronised time it ended.
Outputs are forced to the requested length (no EOS), as serving benchmarks do. Blocks come
from the shared `KVCacheManager`, so prefix-cache hits skip computation for real and a
preempted request is recomputed from its tokens.

Every busy moment belongs to one step: a step's time runs from the end of the previous step
(or the arrival that woke the engine) to the end of its own sampling, so step times add up
to the busy time, as the simulator's do. Time is the device's clock (engine/device.py): a
synchronised wall clock on a GPU; on a CPU the engine thread's CPU time, with idle waits
for arrivals skipped rather than slept.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import torch

from engine.batch import SeqWork, build_step
from engine.device import Device
from engine.kv_cache import PagedKVCache
from engine.model import Transformer, sample
from simulator import KVCacheManager, ReplicaConfig, Request, Scheduler, StepBatch


@dataclass(frozen=True)
class StepRecord:
    batch: StepBatch
    start_s: float
    end_s: float
    forward_s: float = 0.0     # the forward pass and sampling; the rest is the host's work

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass
class RunResult:
    requests: list[Request]
    token_times_s: dict[int, list[float]]     # request_id -> time of each output token
    output_ids: dict[int, list[int]]          # request_id -> the generated token ids
    steps: list[StepRecord] = field(default_factory=list)
    duration_s: float = 0.0            # the run on the device clock (engine/device.py)


def prompt_token_ids(req: Request, vocab_size: int) -> list[int]:
    """Token ids for a request's prompt: its prefix segments (each `segment_tokens` ids drawn
    from the segment id, so equal segments give equal tokens), then ids unique to it."""
    ids: list[int] = []
    for seg in req.prefix_segments:
        if req.segment_tokens == 1:
            ids.append(seg % vocab_size)
        else:
            ids.extend(hash((seg, i)) % vocab_size for i in range(req.segment_tokens))
        if len(ids) >= req.prompt_tokens:
            break
    unique = torch.Generator().manual_seed(1_000_003 + req.request_id)
    rest = req.prompt_tokens - len(ids)
    if rest > 0:
        ids.extend(torch.randint(0, vocab_size, (rest,), generator=unique).tolist())
    return ids[:req.prompt_tokens]


class EngineRunner:
    def __init__(self, model: Transformer, device: Device, replica: ReplicaConfig):
        """Serve as `replica` says (scheduler settings, block pool): the configuration the
        simulator runs too. The engine preempts by recompute only."""
        if replica.scheduler.preemption_mode != "recompute":
            raise ValueError("the bundled engine preempts by recompute only")
        self.model, self.device = model, device
        cfg = model.cfg
        self.kv = PagedKVCache(cfg.num_layers, replica.num_blocks, replica.block_size, cfg.num_kv_heads, cfg.head_dim,
                               device.dtype, device.torch_device)
        self.block_manager = KVCacheManager(replica.num_blocks, replica.block_size, replica.enable_prefix_caching,
                                            replica.tenant_isolation)
        self.scheduler = Scheduler(replica.scheduler, self.block_manager)
        self.block_size = replica.block_size

    def warm_up(self) -> None:
        """A full-budget prefill, a long decode beside a chunk, and a short decode, so that
        every kernel variant is compiled and large buffers touched before the timed run.
        Writes only into blocks nobody owns yet, and only at positions the model has rotary tables for (its
        max_model_len): the decode sits at position `budget`, so a budget past them (max_model_len at most
        max_num_batched_tokens) would index beyond the tables."""
        positions = self.model.cos.shape[0]
        budget = min(self.scheduler.config.max_num_batched_tokens, self.kv.num_blocks * self.block_size - 1,
                     positions - 1)
        ids = [i % self.model.cfg.vocab_size for i in range(budget)]
        blocks = list(range(-(-(budget + 1) // self.block_size)))
        for seqs in ([SeqWork(ids, 0, blocks)],
                     [SeqWork(ids[:1], budget, blocks), SeqWork(ids[:-1], 0, blocks)],
                     [SeqWork(ids[:1], 0, blocks)]):
            sample(self.model.forward(build_step(seqs, self.block_size, self.device.torch_device), self.kv)).tolist()
        self.device.synchronize()

    def run(self, requests: list[Request]) -> RunResult:
        """Serve `requests` at their arrival times (seconds from the start of the run)."""
        sched, dev, vocab = self.scheduler, self.device, self.model.cfg.vocab_size
        pending = deque(sorted(requests, key=lambda r: r.arrival_s))
        tokens = {r.request_id: prompt_token_ids(r, vocab) for r in requests}
        times: dict[int, list[float]] = {r.request_id: [] for r in requests}
        outputs: dict[int, list[int]] = {r.request_id: [] for r in requests}
        result = RunResult(list(requests), times, outputs)
        clock = dev.clock()
        step_start = 0.0
        while pending or sched.has_unfinished():
            now = clock.now_s()
            while pending and pending[0].arrival_s <= now:
                sched.add_request(pending.popleft())
            if not sched.has_unfinished():
                if pending:
                    clock.wait_until(pending[0].arrival_s)
                    step_start = clock.now_s()
                continue
            step = sched.schedule(now)
            if step.is_empty:
                if step.preempted:
                    continue
                if not pending:
                    raise RuntimeError("the scheduler can make no progress: "
                                       "KV cache too small for the running requests")
                clock.wait_until(pending[0].arrival_s)
                step_start = clock.now_s()
                continue
            work = [SeqWork(tokens[s.request.request_id][s.context_tokens:s.context_tokens + s.num_new_tokens],
                            s.context_tokens, s.request.block_ids) for s in step.seqs]
            inputs = build_step(work, self.block_size, dev.torch_device)
            forward_start = clock.now_s()
            sampled = sample(self.model.forward(inputs, self.kv)).tolist()
            end = clock.now_s()
            for row, i in enumerate(inputs.order):
                seq = step.seqs[i]
                if seq.samples_token:
                    rid = seq.request.request_id
                    tokens[rid].append(sampled[row])
                    outputs[rid].append(sampled[row])
                    times[rid].append(end)
            sched.update(step, end)
            result.steps.append(StepRecord(step.batch, step_start, end, end - forward_start))
            step_start = end
        result.duration_s = clock.now_s()
        return result
