"""Replay a public real-vLLM experiment through sizer and compare what it measured.

The experiments (tests/data/fidelity/README.md) ran vLLM 0.15.1 behind inference-perf's
shared-prefix generator with staged constant rates. Each becomes a scenario (the model's
config.json, the GPU, TP, the engine arguments the run set) and a workload built as the load
generator built it: a fixed set of groups x prompts per group prompts, cycled, one stage after
another, at the arrival times its `load.type: constant` draws (`simulator.workload.PromptSet`,
`staged_arrival_s`). The simulation reports what a
client measures, as the runs did.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.metrics import summarise
from simulator.run import simulate
from simulator.workload import PromptSet, Stage, staged_arrival_s
from sizer.inputs.scenario import scenario_from_dict
from sizer.sizing.resolve import resolve
from sizer.sizing.simulate import simulation_config
from sizer.timing.step_model import step_model_for

METRICS = ("e2e_mean", "e2e_p90", "e2e_p99", "ttft_mean", "ttft_p90", "ttft_p99", "itl_mean")
STAGE_METRICS = ("ttft_mean", "ttft_p99", "e2e_mean", "e2e_p99", "ttft_p90", "e2e_p90")  # the CSV's stage rows' figures
GPU_IDS = {"H100": "h100-sxm", "A100": "a100-80gb", "L40S": "l40s"}
# Weight format of the checkpoints by the CSV's precision (the FP8 one is RedHatAI's
# compressed-tensors FP8-dynamic: FP8 weights per channel, FP8 activations per token).
FORMATS = {"FP16": "auto", "FP8": "fp8"}
# Groups x prompts per group of a run whose parsed config the CSV lacks: the presets name them
# `num_unique_system_prompts` / `num_users_per_system_prompt`, which the inference-perf these runs installed
# ignores (tektonc-data-collection's tekton/tasks/install-inference-perf-blis.yaml pins kubernetes-sigs/
# inference-perf e8e0aa9, 2025-10-16, whose config.py SharedPrefix has only `num_groups` and
# `num_prompts_per_group`, both 10 by default), as the runs whose parsed config is known show (10 x 10)
INFERENCE_PERF_PROMPTS = (10, 10)


@dataclass(frozen=True)
class Experiment:
    """One run (its whole-run row), with what the replay needs."""
    exp_id: str
    model_config: Path
    gpu: str
    tp: int
    precision: str
    max_num_batched_tokens: int
    max_num_seqs: int
    max_model_len: int
    gpu_memory_utilization: float
    block_size: int
    stages: tuple[Stage, ...]
    prompts: PromptSet
    itl_output_tokens: float          # the token count the measured ITL was divided by (minus one)
    measured_ms: dict[str, float]     # METRICS -> ms
    stage_ms: tuple[dict[str, float], ...] = ()      # measured STAGE_METRICS -> ms per stage, in stage order

    @property
    def label(self) -> str:
        model = self.model_config.name.split("--", 1)[-1].removesuffix("_config.json")
        return f"{self.exp_id[:24]} {model[:26]} TP{self.tp}"


def _float(row: dict, key: str) -> float | None:
    v = row.get(key, "")
    return float(v) if v not in ("", None) else None


def load_experiments(csv_path: Path, configs: Path) -> list[Experiment]:
    """The experiments of the CSV, in file order, from their whole-run and per-stage rows."""
    rows = list(csv.DictReader(csv_path.open()))
    out = []
    for whole in (r for r in rows if r["stage_index"] == "-1"):
        stages = sorted((r for r in rows if r["exp_id"] == whole["exp_id"] and r["stage_index"] != "-1"),
                        key=lambda r: int(r["stage_index"]))
        groups = _float(whole, "ip_effective_num_groups") or INFERENCE_PERF_PROMPTS[0]
        per = _float(whole, "ip_effective_num_prompts_per_group") or INFERENCE_PERF_PROMPTS[1]
        output = int(whole["output_len"])
        measured_out = _float(whole, "measured_output_len_mean")
        out.append(Experiment(
            exp_id=whole["exp_id"],
            model_config=configs / (whole["model_hf_id"].replace("/", "--") + "_config.json"),
            gpu=GPU_IDS[whole["hardware"]], tp=int(whole["tp"]), precision=whole["precision"],
            max_num_batched_tokens=int(whole["max_num_batched_tokens"]), max_num_seqs=int(whole["max_num_seqs"]),
            max_model_len=int(whole["max_model_len"]),
            gpu_memory_utilization=float(whole["gpu_memory_utilization"]), block_size=int(whole["kv_block_size"]),
            stages=tuple(Stage(float(r["stage_rate_rps"]), float(r["stage_duration_s"])) for r in stages),
            prompts=PromptSet(int(groups), int(per), int(whole["system_prompt_len"]), int(whole["question_len"]),
                              output),
            itl_output_tokens=measured_out or output,
            measured_ms={m: float(whole[f"actual_{m}_ms"]) for m in METRICS},
            stage_ms=tuple({m: float(r[f"actual_{m}_ms"]) for m in STAGE_METRICS} for r in stages)))
    return out


def scenario_of(e: Experiment, step_model: str = "auto") -> dict:
    """The scenario a user would write for the run's server (`step_model`: hardware.step_model)."""
    return {"name": e.exp_id, "model": str(e.model_config), "hardware": {"gpu": e.gpu, "step_model": step_model},
            "deployment": {"engine": "vllm", "tensor_parallel_size": e.tp, "quantization": FORMATS[e.precision],
                           "max_num_batched_tokens": e.max_num_batched_tokens, "max_num_seqs": e.max_num_seqs,
                           "max_model_len": e.max_model_len, "gpu_memory_utilization": e.gpu_memory_utilization,
                           "block_size": e.block_size, "enable_prefix_caching": True, "enable_chunked_prefill": True},
            "workload": {"arrival": {"process": "constant", "rate_per_s": e.stages[0].rate_per_s},
                         "prompt_tokens": {"distribution": "fixed", "value": e.prompts.prompt_tokens},
                         "output_tokens": {"distribution": "fixed", "value": e.prompts.output_tokens}}}


@dataclass(frozen=True)
class Replay:
    experiment: Experiment
    predicted_ms: dict[str, float]     # METRICS -> ms
    num_requests: int
    stage_ms: tuple[dict[str, float], ...] = ()      # predicted STAGE_METRICS -> ms per stage, by arrival

    def error(self, metric: str) -> float:
        """(predicted - measured) / measured."""
        m = self.experiment.measured_ms[metric]
        return (self.predicted_ms[metric] - m) / m


def replay(e: Experiment, time_scale: float = 1.0, arrivals: str = "inference-perf", seed: int = 0,
           step_model: str = "auto") -> Replay:
    """Simulate the run; `time_scale` < 1 shortens every stage (same rates, fewer requests); `arrivals`: a kind of
    `staged_arrival_s` (by default what inference-perf's `load.type: constant` sends: exponential gaps rescaled to
    the stage's rate x duration requests); `step_model`: the scenario's hardware.step_model (auto, kernel_tables or
    roofline)."""
    r = resolve(scenario_from_dict(scenario_of(e, step_model), None))
    stages = [Stage(s.rate_per_s, s.duration_s * time_scale) for s in e.stages]
    # each stage drawn from its start, so that every request knows its stage (inference-perf sends a stage's last
    # request at the stage's very end, where fixed gaps send the next stage's first)
    starts = np.cumsum([0.0] + [s.duration_s for s in stages[:-1]])
    per_stage = [start + staged_arrival_s([st], arrivals, seed + k)
                 for k, (start, st) in enumerate(zip(starts, stages, strict=True))]
    workload = e.prompts.workload(np.concatenate(per_stage), r.engine.block_size, seed)
    result = simulate(simulation_config(r, replicas=1), step_model_for(r), workload, seed)
    m = summarise(result)
    c = result.columns
    done = ~c["rejected"]
    e2e, ttft = c["e2e_ms"][done], c["ttft_ms"][done]
    # ITL as the CSV defines it: (E2E mean - TTFT mean) / (output tokens - 1), with the run's token count
    itl = (float(e2e.mean()) - float(ttft.mean())) / (e.itl_output_tokens - 1)
    pct = {f"{name}_p{q}": float(np.percentile(v, q)) for name, v in (("e2e", e2e), ("ttft", ttft)) for q in (90, 99)}
    predicted = {"e2e_mean": m.e2e.mean_ms, "ttft_mean": m.ttft.mean_ms, "itl_mean": itl, **pct}
    # per stage: the requests it sent (the CSV's stage rows; the tail of the first stage holds the
    # first cycle's cold prompts: docs/fidelity.md, "What is not modelled")
    stage_of = np.repeat(np.arange(len(stages)), [len(t) for t in per_stage])[c["request_id"][done]]
    by_stage = tuple({**_mean_p90_p99("ttft", ttft[i]), **_mean_p90_p99("e2e", e2e[i])}
                     for i in (stage_of == k for k in range(len(stages))) if i.any())
    return Replay(e, predicted, len(workload), by_stage)


def _mean_p90_p99(name: str, ms: np.ndarray) -> dict[str, float]:
    return {f"{name}_mean": float(ms.mean()), **{f"{name}_p{q}": float(np.percentile(ms, q)) for q in (90, 99)}}


def median_abs_error(replays: list[Replay], metric: str) -> float:
    return statistics.median(abs(rp.error(metric)) for rp in replays)
