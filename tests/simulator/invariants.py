"""Issue 25, item 6: random scenarios over the newer features (a gateway with fallbacks, outages and
replica failures; LoRA adapters on few slots; llama.cpp / Ollama slot engines resolved by sizer;
speculative decoding with disaggregated prefill and decode), and the invariants every run must keep.

Each `*_run(p, n, seed)` draws its scenario from a dict of parameters `p` (tests/simulator/
test_invariants.py draws them with hypothesis; benchmarks/invariants_1m.py scales them to a million
requests), runs it and returns (violations, fingerprint): `violations` lists every invariant broken
(empty when all hold), `fingerprint` is the per-request results, equal for equal seeds.

The invariants: every request ends exactly once (finished, or rejected with a reason); a finished
request generated exactly the output tokens it asked for; as the client sees it, arrival <= first
token <= finish; nothing is left held at the end (`SimulationResult.leaks`: KV blocks not free, LoRA
slots running, requests unfinished, KV transfers in flight); and no step ran more adapters than the
GPU has slots (`SlotWatch`).
"""

from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from simhelp import LinearStepModel, sim_config

from simulator.cluster import DisaggregationConfig
from simulator.config import SwapLink
from simulator.engine_loop import BARE
from simulator.gateway import (
    FALLBACK,
    OUTCOMES,
    REJECTED,
    ExternalSpec,
    GatewayConfig,
    PoolSpec,
    RequestClass,
    Route,
    simulate_gateway,
)
from simulator.lora import AdapterCache, LoraConfig
from simulator.run import simulate
from simulator.speculative import SpeculativeConfig
from simulator.workload import AdapterPopularity, Arrivals, Lengths, SharedPrefix, WorkloadSpec

SLOT_SCENARIOS = ("llamacpp-rtx4090-slots", "llamacpp-laptop-m4-pro", "ollama-jetson-orin-edge")
REPO_SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def result_violations(result, ids: list[int], label: str = "") -> list[str]:
    """The invariants of one simulator run (`SimulationResult`) that was sent the requests `ids`."""
    c, out = result.columns, []
    if c["request_id"].tolist() != sorted(ids):
        out.append(f"{label}requests out != requests in ({len(c['request_id'])} vs {len(ids)})")
    rejected = c["rejected"]
    reasons = {int(i) for i in c["request_id"][rejected]}
    if set(result.reject_reasons) != reasons or not all(result.reject_reasons.values()):
        out.append(f"{label}rejections without a reason, or reasons without a rejection")
    done = ~rejected
    wrong = np.flatnonzero(c["generated_tokens"][done] != c["output_tokens"][done])
    if len(wrong):
        out.append(f"{label}{len(wrong)} finished requests generated other than their output tokens")
    ttft, e2e = c["ttft_ms"][done], c["e2e_ms"][done]
    if not (np.isfinite(ttft).all() and (ttft >= 0).all() and (ttft <= e2e).all()):
        out.append(f"{label}a client saw arrival > first token or first token > finish")
    out.extend(label + leak for leak in result.leaks)
    return out


def fingerprint(result) -> tuple:
    """Every per-request column, bit for bit (NaN equal to NaN)."""
    return tuple((k, v.tobytes()) for k, v in sorted(result.columns.items()))


class SlotWatch:
    """Counts, over a run, the times an adapter started while more adapters ran than the GPU has slots."""

    def __init__(self):
        self.over = 0

    @contextmanager
    def watching(self):
        start = AdapterCache.start

        def checked(cache, adapter):
            source = start(cache, adapter)
            limit = cache.config.max_loras
            self.over += len(cache.running) > limit or len(cache.gpu) > limit
            return source
        AdapterCache.start = checked
        try:
            yield self
        finally:
            AdapterCache.start = start


def _lengths(p: dict, key: str) -> Lengths:
    return Lengths("uniform", min_tokens=p[key][0], max_tokens=p[key][1])


# -- (a) the gateway: pools, fallback chains, outages, replica failures, hosted endpoints with budgets --

def gateway_config(p: dict, n: int) -> GatewayConfig:
    replica = sim_config(num_blocks=p["blocks"]).replica
    names = [f"pool{i}" for i in range(p["pools"])]
    span_s = n / p["rate"]                                       # about how long the arrivals last
    pools = tuple(PoolSpec(name, replica, p["replicas"], LinearStepModel(base_s=5e-3 * (1 + i)),
                           p["router"], 8, p["max_outstanding"], p["max_queue_wait_s"],
                           tuple((span_s * a, span_s * (a + w)) for a, w in p["outages"][i::len(names)]),
                           p["failures_per_hour"], p["repair_s"])
                  for i, name in enumerate(names))
    hosted = ExternalSpec("hosted", 300.0, 0.5, 15.0, 1.0, 4.0, p["hosted_budget"])
    classes = (RequestClass("chat", 0.6, _lengths(p, "prompt"), _lengths(p, "output"), "public", 2.0, 5.0,
                            SharedPrefix(0.5, 64, 2)),
               RequestClass("records", 0.4, _lengths(p, "prompt"), _lengths(p, "output"), "pii"))
    chain = tuple(names[1:]) + ("hosted",)
    routes = (Route("difficulty", ("chat",), weak=names[0], strong=names[-1], strong_share=p["strong_share"],
                    fallback=chain),
              Route("records", ("records",), target=names[0], fallback=chain))
    residency = {"pii": tuple(names)} if p["residency"] else {}
    return GatewayConfig(pools, (hosted,), classes, routes, residency, Arrivals("poisson", p["rate"]), n, 60.0,
                         fast_forward=p["fast_forward"], check_invariants=p["check_invariants"],
                         budget_usd_per_hour=p["gateway_budget"])


def gateway_run(p: dict, n: int, seed: int) -> tuple[list[str], tuple]:
    cfg = gateway_config(p, n)
    result = simulate_gateway(cfg, seed)
    recs, out = result.records, []
    if len(recs) != n:
        out.append(f"gateway: {len(recs)} records for {n} requests")
    rejected = recs.outcome == OUTCOMES.index(REJECTED)
    if set(recs.reject_reasons) != set(np.flatnonzero(rejected).tolist()) or not all(recs.reject_reasons.values()):
        out.append("gateway: rejections without a reason, or reasons without a rejection")
    fell = recs.outcome == OUTCOMES.index(FALLBACK)
    if not set(np.flatnonzero(fell).tolist()) <= set(recs.fallbacks) or not all(
            why for skipped in recs.fallbacks.values() for _, why in skipped):
        out.append("gateway: a fallback without its reasons")
    served = ~rejected
    if not ((recs.target[served] > 0).all() and (recs.ttft_ms[served] >= 0).all()
            and (recs.ttft_ms[served] <= recs.e2e_ms[served]).all()):
        out.append("gateway: a served request without a target, or a client saw first token > finish")
    sent = 0
    for name, res in result.pools.items():
        ids = np.flatnonzero(recs.is_target(name)).tolist()
        sent += len(ids)
        out.extend(result_violations(res, ids, f"{name}: "))
    external = int((served & ~np.isin(recs.target, [recs.target_names.index(q) for q in result.pools])).sum())
    unplaced = int((rejected & (recs.target == 0)).sum())          # rejected at the gateway, no target taken
    if sent + external + unplaced != n:
        out.append(f"gateway: {sent} to pools + {external} hosted + {unplaced} refused != {n} in")
    cols = (recs.target, recs.outcome, recs.ttft_ms, recs.e2e_ms, recs.cost_usd)
    return out, (tuple(c.tobytes() for c in cols), tuple(sorted(recs.fallbacks.items())),
                 tuple(sorted(recs.reject_reasons.items())))


# -- (b) LoRA: many adapters, few GPU slots, a small KV pool that preempts --

def lora_run(p: dict, n: int, seed: int) -> tuple[list[str], tuple]:
    lora = LoraConfig(p["max_loras"], p["max_loras"] + p["extra_cpu_loras"], 1e8, 1e10, 1e9)
    swap = p["preemption"] == "swap"
    cfg = sim_config(num_blocks=p["blocks"], lora=lora, preemption_mode=p["preemption"],
                     swap=SwapLink(1e5, 1e10) if swap else None, num_replicas=p["replicas"], router=p["router"],
                     fast_forward=p["fast_forward"], check_invariants=p["check_invariants"], max_model_len=4096)
    spec = WorkloadSpec(n, Arrivals("poisson", p["rate"]), _lengths(p, "prompt"), _lengths(p, "output"),
                        adapters=AdapterPopularity(p["adapters"], p["zipf"]))
    watch = SlotWatch()
    with watch.watching():
        result = simulate(cfg, LinearStepModel(), spec, seed)
    out = result_violations(result, list(range(n)), "lora: ")
    if watch.over:
        out.append(f"lora: {watch.over} adapter starts ran past max_loras")
    return out, fingerprint(result)


# -- (c) llama.cpp and Ollama slot engines, as sizer resolves the bundled scenarios --

def slots_run(p: dict, n: int, seed: int) -> tuple[list[str], tuple]:
    from sizer.inputs.scenario import load_scenario
    from sizer.sizing.resolve import resolve
    from sizer.sizing.simulate import simulation_config
    from sizer.timing.step_model import step_model_for

    r = resolve(load_scenario(REPO_SCENARIOS / f"{p['scenario']}.yaml"))
    cfg = simulation_config(r, p["replicas"], p["router"], p["fast_forward"])
    ctx = r.replica.scheduler.max_model_len
    # prompts up to a little past the slot's context, so some are refused; shared system prompts let a
    # slot reuse its last prompt
    prompt = Lengths("uniform", min_tokens=16, max_tokens=int(ctx * p["prompt_of_ctx"]))
    spec = WorkloadSpec(n, Arrivals("poisson", p["rate"]), prompt, _lengths(p, "output"),
                        SharedPrefix(p["share"], min(256, ctx // 4), 2))
    result = simulate(dataclasses.replace(cfg, check_invariants=p["check_invariants"]), step_model_for(r), spec, seed)
    return result_violations(result, list(range(n)), f"{p['scenario']}: "), fingerprint(result)


# -- (d) speculative decoding with disaggregated prefill and decode pools --

def speculative_run(p: dict, n: int, seed: int) -> tuple[list[str], tuple]:
    spec_cfg = SpeculativeConfig(p["method"], p["gamma"], p["acceptance"], 0.05)
    split = DisaggregationConfig(p["prefill"], p["decode"], 1e5, 1e10, 1e-3)
    loop = dataclasses.replace(BARE, async_scheduling=p["async"], input_s=2e-3, output_s_per_pass=1e-3,
                               output_s_per_token=p["per_token_us"] * 1e-6, schedule_s=0.5e-3)
    cfg = sim_config(num_blocks=p["blocks"], speculative=spec_cfg, disaggregation=split, engine_loop=loop,
                     fast_forward=p["fast_forward"], check_invariants=p["check_invariants"], max_model_len=4096)
    spec = WorkloadSpec(n, Arrivals("poisson", p["rate"]), _lengths(p, "prompt"), _lengths(p, "output"))
    result = simulate(cfg, LinearStepModel(), spec, seed)
    return result_violations(result, list(range(n)), "speculative: "), fingerprint(result)


RUNS = {"gateway": gateway_run, "lora": lora_run, "slots": slots_run, "speculative": speculative_run}
