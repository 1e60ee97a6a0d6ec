"""Public llama-bench runs (pp512, tg128) replayed through sizer's step model (tests/data/llamacpp/).

llama-bench's pp512 processes one 512-token prompt in one micro-batch (its default ubatch 512) and
reports 512 / seconds; tg128 generates 128 tokens one at a time after an empty prompt and reports
128 / seconds. Each row is priced with the roofline the plan uses, on the device's profile, with
llama-bench's f16 KV cache.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass
from pathlib import Path

from sizer.analytic.formats import FORMATS
from sizer.analytic.memory import kv_layout, weight_memory
from sizer.analytic.parallel import ParallelConfig
from sizer.analytic.roofline import RooflineStepTimeModel, decode_batch, prefill_time_s
from sizer.inputs.hardware import load_hardware
from sizer.inputs.model_spec import load_model

PROMPT_TOKENS, GENERATED_TOKENS = 512, 128     # llama-bench's default tests


@dataclass(frozen=True)
class PublishedRun:
    device: str
    model: str
    format: str
    pp512_tok_per_s: float
    tg128_tok_per_s: float
    source: str


@dataclass(frozen=True)
class Replayed:
    run: PublishedRun
    pp512_tok_per_s: float            # predicted
    tg128_tok_per_s: float

    @property
    def pp512_error(self) -> float:
        return self.pp512_tok_per_s / self.run.pp512_tok_per_s - 1

    @property
    def tg128_error(self) -> float:
        return self.tg128_tok_per_s / self.run.tg128_tok_per_s - 1


def read_runs(path: Path) -> list[PublishedRun]:
    with path.open(newline="") as f:
        return [PublishedRun(r["device"], r["model"], r["format"], float(r["pp512_tok_per_s"]),
                             float(r["tg128_tok_per_s"]), r["source"]) for r in csv.DictReader(f)]


def replay(run: PublishedRun) -> Replayed:
    m, hw, fmt, p = load_model(run.model), load_hardware(run.device), FORMATS[run.format], ParallelConfig()
    roofline = RooflineStepTimeModel(m, hw, fmt, weight_memory(m, fmt, p), kv_layout(m, "fp16", p), p)
    prompt_s = prefill_time_s(roofline, PROMPT_TOKENS, None)
    generate_s = sum(roofline.step_time(decode_batch(1, context)) for context in range(GENERATED_TOKENS))
    return Replayed(run, PROMPT_TOKENS / prompt_s, GENERATED_TOKENS / generate_s)


def median_errors(rows: list[Replayed]) -> tuple[float, float]:
    """Median absolute relative error of pp512 and of tg128."""
    return (statistics.median(abs(r.pp512_error) for r in rows), statistics.median(abs(r.tg128_error) for r in rows))
