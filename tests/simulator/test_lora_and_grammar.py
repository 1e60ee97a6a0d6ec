"""Multi-LoRA serving and structured outputs in the simulator: adapter slots and hold-backs, the
LRU caches and what a load costs, schema compilation and the per-token mask. Step times come
from the linear model (simhelp.py), which does not price LoRA tokens, so every difference below
is the load, compile or mask cost alone."""

import numpy as np
import pytest
from simhelp import DATA, LinearStepModel, scheduler_config, sim_config

from simulator.config import SwapLink
from simulator.grammar import GrammarConfig
from simulator.kv_cache import KVCacheManager
from simulator.lora import DISK, GPU, HOST, AdapterCache, LoraConfig
from simulator.request import Request
from simulator.run import simulate
from simulator.scheduler import Scheduler
from simulator.traces import read_csv_trace, read_mooncake
from simulator.workload import AdapterPopularity, Arrivals, Lengths, SchemaUse, WorkloadSpec, generate, with_tags
from validation.errors import FieldError

# 1 GB adapters, a 10 GB/s host link, a 1 GB/s disk: 0.1 s from the host, 0.1 + 1 = 1.1 s from disk
LINK = dict(adapter_bytes=1e9, host_bytes_per_s=1e10, disk_bytes_per_s=1e9)


def lora(max_loras, max_cpu_loras=None):
    return LoraConfig(max_loras, max_cpu_loras or max_loras, **LINK)


def test_adapter_slots_and_host_cache_are_least_recently_used():
    cache = AdapterCache(lora(1, 2))
    assert cache.config.load_s(HOST) == pytest.approx(0.1) and cache.config.load_s(DISK) == pytest.approx(1.1)
    seen = []
    for adapter in (0, 1, 0, 0, 2, 1):
        seen.append(cache.start(adapter))
        cache.stop(adapter)
    # 0 and 1 from disk; 0 again from the host (its GPU slot went to 1); 0 then in its slot; 2 from disk
    # evicts 1, the host's least recently used (0 was used after it), so 1 comes from disk again
    assert seen == [DISK, DISK, HOST, GPU, DISK, DISK]
    assert cache.loads == {DISK: 4, HOST: 1}
    cache.start(0)
    assert cache.can_run(0) and cache.can_run(-1) and not cache.can_run(1)   # one slot, held by 0; base is free


def requests(n, adapters, prompt=100, output=20, gap_s=0.0, schema=None):
    return [Request(i, i * gap_s, prompt, output, adapter_id=adapters[i % len(adapters)],
                    schema_id=-1 if schema is None else schema[i % len(schema)]) for i in range(n)]


# Requests cycle through adapters 0, 1, 2, 3; 100-token prompts under a 2,048-token budget. In the first
# step the first max_loras adapters take the slots and the others are held, each once, until the budget
# runs out: 1 slot: 10 requests run (1,000 tokens), 30 held; 2 slots: 20 run (2,000 tokens), 20 held;
# 3 slots: three of every four run, and the 21st (i = 26) takes the last 48 tokens after requests
# 3, 7, ..., 23 were held: 6; 4 slots: none held.
@pytest.mark.parametrize("max_loras, first_step_holdbacks", [(1, 30), (2, 20), (3, 6), (4, 0)])
def test_a_step_runs_at_most_max_loras_adapters_and_holdbacks_vanish_when_all_fit(max_loras, first_step_holdbacks):
    kv = KVCacheManager(2000, 16, False, False)
    sched = Scheduler(scheduler_config(64, 2048, lora=lora(max_loras, 4)), kv)
    reqs = requests(40, [0, 1, 2, 3])
    for r in reqs:
        sched.add_request(r, 0.0)
    t, first = 0.0, None
    while sched.has_unfinished():
        step = sched.schedule(t)
        assert len({s.request.adapter_id for s in step.seqs}) <= max_loras
        first = sched.num_holdbacks if first is None else first
        t += 0.01
        sched.update(step, t)
    assert first == first_step_holdbacks
    assert (sched.num_holdbacks == 0) == (max_loras == 4)
    assert all(r.finished_s > 0 for r in reqs) and kv.num_used_blocks == 0 and not sched.adapters.running


def test_records_carry_each_requests_adapter_and_nothing_is_lost():
    spec = WorkloadSpec(300, Arrivals("poisson", 40.0), Lengths("uniform", min_tokens=20, max_tokens=400),
                        Lengths("uniform", min_tokens=5, max_tokens=60), adapters=AdapterPopularity(12, 1.0))
    workload = generate(spec, seed=3)
    cfg = sim_config(num_blocks=600, lora=lora(2, 4), check_invariants=True)   # KV blocks checked every event
    res = simulate(cfg, LinearStepModel(), workload)
    c = res.columns
    assert len(c["request_id"]) == 300 and not c["rejected"].any()
    assert np.array_equal(c["adapter"], workload.adapter)          # sorted by request_id, as drawn
    assert np.array_equal(c["generated_tokens"], c["output_tokens"])
    assert c["lora_holdbacks"].sum() > 0                             # 12 adapters through 2 slots


def ttft_s(res):
    return res.columns["engine_ttft_ms"] / 1e3


def test_an_adapter_load_lengthens_only_the_step_it_loads_in():
    # requests 10 s apart, each alone: base model, adapter 0 (from disk), adapter 0 again (in its slot),
    # adapter 1 (from disk; 0's slot is free), adapter 0 (from the host cache: 1 took the one slot)
    reqs = requests(5, [-1, 0, 0, 1, 0], gap_s=10.0)
    res = simulate(sim_config(lora=lora(1, 4)), LinearStepModel(), reqs)
    base = ttft_s(res)[0]           # one 100-token prefill: 5 ms + 100 x 0.05 ms = 10 ms
    assert base == pytest.approx(0.010)
    assert ttft_s(res) - base == pytest.approx([0.0, 1.1, 0.0, 1.1, 0.1])


def test_schema_compilation_delays_the_first_request_of_each_schema_only():
    reqs = requests(4, [-1], gap_s=10.0, schema=[0, 0, 1, -1])
    cfg = sim_config(grammar=GrammarConfig(compile_s=0.05, mask_s_per_token=0.0, cache_entries=10))
    ttft = ttft_s(simulate(cfg, LinearStepModel(), reqs))
    # schema 0 compiles for 50 ms before its first request's 10 ms prefill; then it is cached; schema 1 compiles
    assert ttft == pytest.approx([0.060, 0.010, 0.060, 0.010])


def test_a_small_cache_compiles_an_evicted_schema_again():
    reqs = requests(3, [-1], gap_s=10.0, schema=[0, 1, 0])
    cfg = sim_config(grammar=GrammarConfig(compile_s=0.05, mask_s_per_token=0.0, cache_entries=1))
    assert ttft_s(simulate(cfg, LinearStepModel(), reqs)) == pytest.approx([0.060, 0.060, 0.060])


def test_the_token_mask_costs_every_step_of_a_grammar_request():
    reqs = requests(2, [-1], output=10, gap_s=10.0, schema=[0, -1])
    cfg = sim_config(grammar=GrammarConfig(compile_s=0.0, mask_s_per_token=1e-3, cache_entries=10))
    e2e = simulate(cfg, LinearStepModel(), reqs).columns["engine_e2e_ms"]
    # 10 output tokens = 10 steps (the prefill samples the first), each 1 ms longer for the grammar request
    assert e2e[0] - e2e[1] == pytest.approx(10.0)


def test_zipf_popularity_and_schema_share_leave_the_rest_of_the_workload_unchanged():
    base = WorkloadSpec(200_000, Arrivals("poisson", 10.0), Lengths("fixed", mean_tokens=10),
                        Lengths("uniform", min_tokens=1, max_tokens=9))
    tagged = WorkloadSpec(**{**base.__dict__, "adapters": AdapterPopularity(50, 1.0), "schemas": SchemaUse(0.3, 20)})
    a, b = generate(base, 7), generate(tagged, 7)
    assert np.array_equal(a.arrival_s, b.arrival_s) and np.array_equal(a.output_tokens, b.output_tokens)
    # Zipf s = 1 over 50: adapter 0 has 1 / H_50 = 1 / 4.4992 = 0.2223 of requests, adapter 49 1 / (50 H_50) = 0.0044
    share = np.bincount(b.adapter, minlength=50) / len(b)
    assert share[0] == pytest.approx(0.2223, abs=0.004) and share[49] == pytest.approx(0.0044, abs=0.001)
    assert (b.schema >= 0).mean() == pytest.approx(0.3, abs=0.005) and b.schema.max() == 19


def test_prefix_cache_blocks_are_not_shared_across_adapters():
    # two requests with the same 64-token prompt content 10 s apart: the second hits the first's 4 blocks
    # only when both run on the same adapter (or both on the base model)
    def hit(first, second):
        reqs = [Request(i, 10.0 * i, 64, 4, prefix_segments=(7,), segment_tokens=64, adapter_id=a)
                for i, a in enumerate((first, second))]
        return simulate(sim_config(lora=lora(2)), LinearStepModel(), reqs).columns["cached_prompt_tokens"][1]
    # the last block is recomputed (a prompt keeps at least one token to compute): 3 blocks x 16 = 48 tokens
    assert (hit(-1, -1), hit(0, 0), hit(0, 1), hit(-1, 0)) == (48, 48, 0, 0)


def test_a_trace_gets_the_adapters_and_schemas_a_synthetic_workload_of_its_size_would():
    trace = read_csv_trace(DATA / "azure_conv_head500.csv")
    tagged = with_tags(trace, AdapterPopularity(50, 1.0), SchemaUse(0.3, 20), seed=5)
    one = Lengths("fixed", mean_tokens=1)
    same = generate(WorkloadSpec(len(trace), Arrivals(), one, one, adapters=AdapterPopularity(50, 1.0),
                                 schemas=SchemaUse(0.3, 20)), 5)
    assert np.array_equal(tagged.adapter, same.adapter) and np.array_equal(tagged.schema, same.schema)
    assert np.array_equal(tagged.arrival_s, trace.arrival_s)
    assert np.array_equal(tagged.prompt_tokens, trace.prompt_tokens)


def test_a_mooncake_trace_may_name_each_requests_adapter(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 10, "output_length": 2, "adapter": 5}\n'
                    '{"timestamp": 5, "input_length": 10, "output_length": 2}\n')
    assert read_mooncake(path).adapter.tolist() == [5, -1]          # a record without the key: the base model
    path.write_text('{"timestamp": 0, "input_length": 10, "output_length": 2, "adapter": "x"}\n')
    with pytest.raises(FieldError) as e:
        read_mooncake(path)
    assert e.value.field == "line 1, adapter"


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_preempted_requests_give_back_their_adapter_slot_and_every_block(mode):
    spec = WorkloadSpec(200, Arrivals("poisson", 200.0), Lengths("uniform", min_tokens=50, max_tokens=300),
                        Lengths("uniform", min_tokens=20, max_tokens=200), adapters=AdapterPopularity(6, 1.0),
                        schemas=SchemaUse(0.5, 3))
    cfg = sim_config(num_blocks=120, lora=lora(3, 6), preemption_mode=mode, check_invariants=True,
                     grammar=GrammarConfig(compile_s=0.01, mask_s_per_token=1e-4, cache_entries=2),
                     swap=SwapLink(1e5, 1e10) if mode == "swap" else None)
    res = simulate(cfg, LinearStepModel(), generate(spec, 1))
    c = res.columns
    assert res.num_preemptions > 0                                   # 120 blocks of 16 tokens: the pool runs short
    assert len(c["request_id"]) == 200 and not c["rejected"].any()
    assert np.array_equal(c["generated_tokens"], c["output_tokens"])
