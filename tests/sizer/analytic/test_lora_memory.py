"""LoRA adapter memory per GPU, derived by hand for Llama-3.1-8B (catalog: hidden 4,096, 32 query
and 8 KV heads of 128, intermediate 14,336, 32 layers), and what it takes from the KV cache."""

import pytest

from simulator.step_batch import StepBatch
from sizer.analytic.memory import lora_memory
from sizer.analytic.parallel import ParallelConfig
from sizer.inputs.scenario import scenario_from_dict
from sizer.sizing.resolve import model_of, resolve
from sizer.timing.step_model import roofline_for


def scenario(**deployment):
    return scenario_from_dict({
        "model": "llama-3.1-8b", "hardware": "h100-sxm", "deployment": {"max_model_len": 8192, **deployment},
        "workload": {"arrival": {"rate_per_s": 1}, "prompt_tokens": {"distribution": "fixed", "value": 1000},
                     "output_tokens": {"distribution": "fixed", "value": 100}}}, None)


MODEL = model_of(scenario())


def test_rank_16_adapter_on_every_linear_layer_by_hand():
    # per layer, rank 16 x (in + out): q 16 x (4096 + 4096) = 131,072; k and v 16 x (4096 + 1024) = 81,920 each;
    # o 131,072; gate and up (two slices of gate_up_proj) 16 x (4096 + 14336) = 294,912 each; down 294,912.
    # Sum 1,310,720 x 32 layers = 41,943,040 parameters (the usual "42M" of a rank-16 Llama-3-8B adapter)
    # x 2 B (bf16) = 83,886,080 B = 80 MiB per slot.
    m = lora_memory(MODEL, ParallelConfig(1, 1, 1, False), rank=16, slots=1, bytes_per_value=2)
    assert m.params_per_slot == 41_943_040 and m.bytes_per_slot == 83_886_080
    assert m.modules == ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    assert lora_memory(MODEL, ParallelConfig(1, 1, 1, False), 16, 8, 2).bytes == 8 * 83_886_080


def test_tensor_parallel_splits_b_of_column_and_a_of_row_parallel_layers():
    # TP2: column-parallel keep A whole, split B: q 16 x (4096 + 2048) = 98,304; k, v 16 x (4096 + 512) = 73,728;
    # gate, up 16 x (4096 + 7168) = 180,224; row-parallel split A, keep B: o 16 x (2048 + 4096) = 98,304;
    # down 16 x (7168 + 4096) = 180,224. Sum 884,736 x 32 = 28,311,552 parameters x 2 B = 56,623,104 B.
    m = lora_memory(MODEL, ParallelConfig(2, 1, 1, False), rank=16, slots=1, bytes_per_value=2)
    assert m.bytes_per_slot == 56_623_104


def test_target_modules_choose_the_layers():
    # q and v only: (131,072 + 81,920) x 32 = 6,815,744 parameters x 2 B = 13,631,488 B
    m = lora_memory(MODEL, ParallelConfig(1, 1, 1, False), 16, 1, 2, targets=("q_proj", "v_proj"))
    assert m.bytes_per_slot == 13_631_488 and m.modules == ("q_proj", "v_proj")


def test_adapter_slots_come_out_of_the_kv_cache():
    base = resolve(scenario())
    r = resolve(scenario(enable_lora=True, max_loras=8, max_lora_rank=32))
    # 8 slots at rank 32: 8 x 2 x 83,886,080 B = 1,342,177,280 B fewer for KV
    assert r.memory.lora_bytes == 1_342_177_280
    assert base.memory.kv_cache_bytes - r.memory.kv_cache_bytes == pytest.approx(1_342_177_280)
    assert r.memory.kv_blocks < base.memory.kv_blocks
    assert r.scheduler.lora.max_loras == 8 and r.scheduler.lora.max_cpu_loras == 8    # vLLM: default max_loras


def test_lora_tokens_cost_flops_or_adapter_reads_in_the_roofline():
    r = resolve(scenario(enable_lora=True, max_loras=4))
    step = roofline_for(r)
    plain = StepBatch(8, 8, 8000, 8008)
    # 8 decode tokens of 2 adapters: memory-bound, the read of 2 x 80 MiB dominates 2 x 41.9M x 8 FLOPs
    with_lora = plain._replace(lora_tokens=8, lora_adapters=2)
    extra = step.step_time(with_lora) - step.step_time(plain)
    read_s = 2 * 83_886_080 / (step.bytes_per_s * 0.80)        # WEIGHT_STREAM_EFFICIENCY
    assert extra == pytest.approx(read_s + 32 * 8e-6)          # + LORA_STEP_S_PER_LAYER x 32 layers
    assert step.cost(with_lora).lora_s == pytest.approx(extra)
