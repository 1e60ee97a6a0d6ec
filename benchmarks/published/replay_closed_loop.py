"""Replay InferenceMAX's published closed-loop points (tests/data/fidelity/inferencemax.csv) through sizer.

A point is replayed as InferenceMAX ran it (SemiAnalysisAI/InferenceX at e9a7193, 2026-01-02: benchmarks/
benchmark_lib.sh and the server script per model, GPU and framework, named below):
- the client: `benchmark_serving.py --dataset-name random --random-range-ratio 0.8 --num-prompts 10 x conc
  --max-concurrency conc --request-rate inf --ignore-eos` (kimbochen/bench_serving, its `sample_uniform`: each
  prompt's and each output's length uniform on the integers [int(0.8 x L), L]); a closed loop of conc clients,
  no prefix shared;
- the server, by framework:
  vllm (gptoss_fp4_{h100,h200,b200}_*.sh): `--max-num-seqs conc`, max-num-batched-tokens 8192, prefix caching
  off, async scheduling, `--gpu-memory-utilization 0.9`, max-model-len 10240 on the H100, elsewhere isl + osl +
  20 (1k/1k) or + 200; the B200 with an FP8 KV cache; the H100 and H200 with VLLM_MXFP4_USE_MARLIN=1 (Marlin MoE:
  sizer's moe_backend marlin);
  trt, gpt-oss (gptoss_fp4_b200_trt_*.sh): trtllm-serve with an FP8 KV cache, free_gpu_memory_fraction 0.85,
  max_num_tokens 20000, block reuse off, stream_interval 20, EP as the point's; an attention-DP point as sizer's DEP
  (the experts spread whole with an all-to-all, also where its ep_size 1 sliced them over TP) and without its ADP
  balance (enable_balance, not a deployment field: sizer takes unbalanced ranks); CUDA-graph padding up to conc left at
  sizer's preset;
  sglang, DeepSeek-R1 FP8 (dsr1_fp8_{h200,b200,mi300x,mi325x}_*.sh): radix cache off; --stream-interval 10 on the
  H200, 30 on the B200 (the MI300X's and MI325X's scripts set none); on the H200
  --max-running-requests 512 (1k/1k, else 256), --chunked-prefill-size 32768, --mem-fraction-static 0.82; on the
  B200 --max-running-requests 128, 32768, 0.82, an FP8 KV cache, `--ep-size` as the point's and
  --scheduler-recv-interval 10 below 16 clients, else 30; on the MI300X
  and MI325X --chunked-prefill-size 196608, --mem-fraction-static 0.8 (--max-running-requests left to SGLang:
  at most conc run at once).
Every other framework or checkpoint (AMD's ATOM, FP4 DeepSeek-R1, the MI355X's servers) is listed as not
replayed, with why.
Predicted: `vllm bench serve`'s metrics from the simulated run (sizer.sizing.compare.predictions): mean and median TTFT,
mean TPOT, median ITL, mean E2E, and throughput per GPU (input and output tokens per second over the run's span / GPUs).
"""

from __future__ import annotations

import csv
from pathlib import Path

from benchmarks.published.replay_saturation import priced_by
from sizer.inputs.scenario import scenario_from_dict
from sizer.sizing.compare import predictions
from sizer.sizing.resolve import resolve
from sizer.sizing.simulate import simulate_scenario
from sizer.timing.step_model import step_model_for

CSV = Path(__file__).resolve().parents[2] / "tests" / "data" / "fidelity" / "inferencemax.csv"
MODELS = {"openai/gpt-oss-120b": "gpt-oss-120b", "deepseek-ai/DeepSeek-R1-0528": "deepseek-ai/DeepSeek-R1"}
GPUS = {"h100": "h100-sxm", "h200": "h200", "b200": "b200", "b200-trt": "b200", "mi300x": "mi300x", "mi325x": "mi325x"}
ENGINES = {"vllm": "vllm", "sglang": "sglang", "trt": "tensorrt-llm"}
RANGE_RATIO = 0.8              # InferenceMAX's RANDOM_RANGE_RATIO
PROMPTS_PER_CLIENT = 10        # --num-prompts 10 x conc
METRICS = ("mean_ttft_ms", "median_ttft_ms", "mean_tpot_ms", "median_itl_ms", "mean_e2el_ms")


def points(path: Path = CSV) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def not_replayed(row: dict) -> str | None:
    """Why sizer does not replay the point, or None."""
    if row["framework"] not in ENGINES:
        return f"{row['framework']}: no server script of it read here"
    if row["model"] not in MODELS:
        return f"{row['model']}: not the checkpoint the replayed scripts serve"
    if row["hw"] not in GPUS:
        return f"{row['hw']}: its servers are not the scripts read here"
    return None


def deployment(row: dict) -> dict:
    """The server as the point's script started it (module docstring)."""
    isl, osl, conc, hw = int(row["isl"]), int(row["osl"]), int(row["conc"]), row["hw"]
    d = {"engine": ENGINES[row["framework"]], "tensor_parallel_size": int(row["tp"]), "enable_prefix_caching": False}
    if row["framework"] == "trt":
        return d | {"kv_cache_dtype": "fp8", "gpu_memory_utilization": 0.85, "max_num_batched_tokens": 20000,
                    "max_model_len": isl + osl + 200, "enable_attention_dp": row["dp_attention"] == "true",
                    "enable_expert_parallel": int(row["ep"]) > 1, "stream_interval": 20}
    if row["framework"] == "vllm":
        d |= {"max_num_seqs": conc, "max_num_batched_tokens": 8192, "gpu_memory_utilization": 0.9,
              "max_model_len": 10240 if hw == "h100" else isl + osl + (20 if (isl, osl) == (1024, 1024) else 200)}
        if hw == "b200":
            d["kv_cache_dtype"] = "fp8"
        elif hw in ("h100", "h200"):        # the Hopper scripts export VLLM_MXFP4_USE_MARLIN=1
            d["moe_backend"] = "marlin"
        return d
    if hw in ("mi300x", "mi325x"):
        return d | {"max_num_batched_tokens": 196608, "gpu_memory_utilization": 0.8}
    d |= {"max_num_batched_tokens": 32768, "gpu_memory_utilization": 0.82,
          "stream_interval": 30 if hw == "b200" else 10,
          "max_num_seqs": 128 if hw == "b200" else (512 if (isl, osl) == (1024, 1024) else 256)}
    if hw == "b200":   # --ep-size = TP (the experts whole); a poll every 10 decode steps, 30 from 16 clients
        d |= {"kv_cache_dtype": "fp8", "enable_expert_parallel": int(row["ep"]) > 1,
              "scheduler_recv_interval": 30 if conc >= 16 else 10}
    return d


def scenario_of(row: dict, step_model: str = "auto") -> dict:
    isl, osl, conc = int(row["isl"]), int(row["osl"]), int(row["conc"])
    return {"name": f"{row['model']} {row['hw']} TP{row['tp']} {isl}/{osl} c{conc}", "model": MODELS[row["model"]],
            "hardware": {"gpu": GPUS[row["hw"]], "step_model": step_model}, "deployment": deployment(row),
            "workload": {"arrival": {"process": "closed", "concurrency": conc},
                         "prompt_tokens": {"distribution": "uniform", "min": int(RANGE_RATIO * isl), "max": isl},
                         "output_tokens": {"distribution": "uniform", "min": int(RANGE_RATIO * osl), "max": osl},
                         "num_requests": PROMPTS_PER_CLIENT * conc}}


def predicted(row: dict, step_model: str = "auto") -> tuple[dict[str, float], str]:
    """(the point's metrics as sizer predicts them, what priced the steps)."""
    r = resolve(scenario_from_dict(scenario_of(row, step_model), None))
    step = step_model_for(r)
    out = predictions(simulate_scenario(r, step=step), list(METRICS))
    out["tput_per_gpu"] = out["total_token_throughput"] / int(row["tp"])
    return out, priced_by(step, "tables")
