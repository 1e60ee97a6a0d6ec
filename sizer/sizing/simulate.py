"""From a resolved scenario to a simulation: the workload, the replica configuration with its
KV block count from the memory budget, the roofline step model, and the run itself."""

from __future__ import annotations

import math

from typing import Callable

from sizer.errors import InputError
from sizer.sizing.resolve import Resolved
from sizer.inputs.scenario import Distribution, Scenario, scenario_dir

DEFAULT_ROUTER = "least_outstanding"


def _lengths(d: Distribution):
    from simulator.workload import Lengths

    clip = {"min_tokens": int(d.min or 1), "max_tokens": int(d.max) if d.max else None}
    if d.distribution == "fixed":
        return Lengths("fixed", mean_tokens=d.value, **clip)
    if d.distribution == "uniform":
        return Lengths("uniform", min_tokens=int(d.min), max_tokens=int(d.max))
    if d.distribution == "normal":
        return Lengths("normal", mean_tokens=d.mean, std_tokens=d.std or 0.0, **clip)
    if d.distribution == "lognormal":      # the scenario gives sigma of log length; Lengths wants the std of lengths
        return Lengths("lognormal", mean_tokens=d.mean, std_tokens=d.mean * math.sqrt(math.expm1(d.sigma ** 2)), **clip)
    return Lengths("empirical", values_tokens=tuple(int(v) for v in d.values), weights=tuple(d.weights or ()), **clip)


def workload_of(s: Scenario, num_requests: int | None = None, rate_per_s: float | None = None):
    """The scenario's requests: a trace replay or a seeded synthetic workload. `rate_per_s`
    rescales the arrivals (a trace keeps its shape and is played faster or slower)."""
    from simulator.workload import Arrivals, SharedPrefix, WorkloadSpec, generate

    w = s.workload
    n = num_requests or w.num_requests
    if w.trace is not None:
        from simulator.traces import read_csv_trace, read_mooncake

        reader = read_mooncake if w.trace.format == "mooncake" else read_csv_trace
        limit = min(n, w.trace.max_requests or n)
        trace = reader(scenario_dir(s) / w.trace.path, limit).time_scaled(1.0 / w.trace.time_scale)
        if rate_per_s is not None:
            trace = trace.time_scaled(rate_per_s / trace.summary().rate_per_s)
        return trace
    sp = w.shared_prefix
    spec = WorkloadSpec(n, Arrivals(w.arrival.process, rate_per_s or w.arrival.rate_per_s, w.arrival.cv or 1.0),
                        _lengths(w.prompt_tokens), _lengths(w.output_tokens),
                        SharedPrefix(sp.share, sp.tokens, sp.num_prefixes, sp.num_tenants) if sp else None)
    return generate(spec, w.seed)


def trace_summary(s: Scenario):
    """Requests, span, rate and mean lengths of the scenario's trace (as replayed)."""
    return workload_of(s).summary()


def _speculative(r: Resolved):
    from simulator.speculative import SpeculativeConfig

    sc = r.scenario.deployment.speculative_config
    if sc is None:
        return None
    draft = None
    if sc.method == "draft_model" and sc.model and sc.proposer_cost_fraction is None:
        from sizer.analytic.memory import kv_layout, weight_memory
        from sizer.inputs.model_spec import load_model
        from sizer.analytic.roofline import RooflineStepTimeModel
        from sizer.analytic.weights import weight_format

        m = load_model(str(scenario_dir(r.scenario) / sc.model) if (scenario_dir(r.scenario) / sc.model).exists()
                       else sc.model, r.scenario.file, "deployment.speculative_config.model")
        fmt, group_size = weight_format(m, "auto", r.group_size, r.scenario.file)
        draft = RooflineStepTimeModel(m, r.hardware, fmt, weight_memory(m, fmt, r.parallel, group_size),
                                      kv_layout(m, r.kv_cache_dtype, r.parallel), r.parallel, group_size)
    return SpeculativeConfig(sc.method, sc.num_speculative_tokens, sc.acceptance_rate, sc.proposer_cost_fraction, draft)


def simulation_config(r: Resolved, replicas: int | None = None, router: str = DEFAULT_ROUTER,
                      fast_forward: bool = True):
    """Replica and cluster settings: the engine's scheduling settings, KV blocks from the
    memory budget, swap priced at PCIe, KV transfer (disaggregated) at the interconnect."""
    from simulator.cluster import DisaggregationConfig
    from sizer.sizing.presets import preset
    from simulator.replica import ReplicaConfig
    from simulator.run import SimulationConfig
    from simulator.scheduler import SchedulerConfig
    from sizer.sizing.plan import memory_of

    s, e, hw = r.scenario, r.engine, r.hardware
    d = s.deployment
    _, kv, budget = memory_of(r)
    if budget.kv_blocks < 1:
        raise InputError(s.file, "deployment", f"no room for a KV cache on {hw.name}: " + "; ".join(budget.reasons))
    try:
        sched = SchedulerConfig(e.max_num_seqs, e.max_num_batched_tokens, e.enable_chunked_prefill, e.preemption_mode,
                                speculative=_speculative(r), max_model_len=e.max_model_len,
                                reserve_full_kv=preset(e.engine).reserve_full_kv and d.preemption_mode is None)
    except ValueError as exc:
        raise InputError(s.file, "deployment", str(exc)) from None
    link = hw.interconnect_bytes_per_s_per_direction or hw.pcie_bytes_per_s_per_direction or 25e9
    replica = ReplicaConfig(sched, budget.kv_blocks, e.block_size, e.enable_prefix_caching, d.prefix_cache_tenant_isolation,
                            kv_bytes_per_token=kv.bytes_per_token_per_gpu,
                            swap_bytes_per_s=hw.pcie_bytes_per_s_per_direction or 25e9)
    disagg = None
    if d.disaggregated:
        try:
            disagg = DisaggregationConfig(int(d.disaggregated["prefill_replicas"]), int(d.disaggregated["decode_replicas"]),
                                          kv.bytes_per_token_per_gpu,
                                          float(d.disaggregated.get("kv_transfer_bytes_per_s", link)))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(s.file, "deployment.disaggregated",
                             f"expected {{prefill_replicas: N, decode_replicas: M}} ({exc})") from None
    return SimulationConfig(replica, replicas or d.replicas or 1, router, disaggregation=disagg, fast_forward=fast_forward)


def simulate_scenario(r: Resolved, num_requests: int | None = None, replicas: int | None = None,
                      router: str = DEFAULT_ROUTER, progress: Callable[[int], None] | None = None,
                      rate_per_s: float | None = None):
    """Simulate the scenario's workload (at `rate_per_s` if given) on its deployment with its step model."""
    from simulator.run import simulate
    from sizer.sizing.plan import step_model_for

    return simulate(simulation_config(r, replicas, router), step_model_for(r),
                    workload_of(r.scenario, num_requests, rate_per_s), r.scenario.workload.seed, progress)


def simulate_replica(r: Resolved, rate_per_s: float, num_requests: int):
    """One replica (or one disaggregated pair of pools) at `rate_per_s`: for goodput searches."""
    return simulate_scenario(r, num_requests, replicas=1, rate_per_s=rate_per_s)
