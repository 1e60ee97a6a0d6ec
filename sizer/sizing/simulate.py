"""From a resolved scenario to a simulation: the workload, the cluster around the resolved
replica (router, replicas), the step model, and the run itself."""

from __future__ import annotations

from collections.abc import Callable

from simulator import Workload
from simulator.run import SimulationConfig, simulate
from simulator.step_batch import StepTimeModel
from sizer.errors import InputError
from sizer.sizing.resolve import Resolved
from sizer.sizing.workload import replay_words, unread_words, workload_of
from sizer.timing.step_model import step_model_for
from sizer.words import listed

DEFAULT_ROUTER = "least_outstanding"     # the router every command uses unless told otherwise
PREFIX_BALANCE_SLACK = 8                 # prefix_aware: extra requests tolerated for a cache hit (assumption)


# KV blocks one simulation keeps, all replicas together: about 0.5 GiB of the simulator's block tables
MAX_SIMULATED_BLOCKS = 8_000_000


def simulation_config(r: Resolved, replicas: int | None = None, router: str = DEFAULT_ROUTER,
                      fast_forward: bool = True) -> SimulationConfig:
    """The resolved replica (or disaggregated pools) behind `router`: `replicas`, else the
    scenario's, else one."""
    if r.replica.num_blocks < 1:
        raise InputError(r.file, "deployment",
                         f"no room for a KV cache on {r.hardware.name}: " + "; ".join(r.memory.reasons))
    replicas = replicas or r.deployment.replicas or 1
    check_simulated_blocks(replicas * r.replica.num_blocks, r.file, "deployment.replicas")
    return SimulationConfig(r.replica, replicas, router, PREFIX_BALANCE_SLACK, r.disaggregation,
                            fast_forward=fast_forward)


def check_simulated_blocks(blocks: int, file: str | None, field: str) -> None:
    """The simulator keeps every replica's KV blocks (about 70 bytes each): at most MAX_SIMULATED_BLOCKS in one run,
    refused before any work past that (10,000 replicas of an 8B model on an H100 would take 20 GB)."""
    if blocks > MAX_SIMULATED_BLOCKS:
        raise InputError(file, field, f"the replicas hold {blocks:,} KV blocks together; the simulator keeps at most "
                                      f"{MAX_SIMULATED_BLOCKS:,} (about 0.5 GiB) in one run: simulate fewer replicas "
                                      "and scale the rate")


def simulate_scenario(r: Resolved, num_requests: int | None = None, replicas: int | None = None,
                      router: str = DEFAULT_ROUTER, progress: Callable[[int], None] | None = None,
                      rate_per_s: float | None = None, step: StepTimeModel | None = None,
                      workload: Workload | None = None, rows: Callable[[dict, dict], None] | None = None):
    """Simulate the scenario's workload (at `rate_per_s` if given; `workload`'s requests as they are, if given) on
    its deployment with its step model (`step`, when the caller has built it already); `rows`: `simulate`'s, the
    per-request rows as they are final."""
    return simulate(simulation_config(r, replicas, router), step or step_model_for(r),
                    workload or workload_of(r, num_requests, rate_per_s), r.workload.seed, progress, rows)


# The workload fields only the plan reads (its Little's law and memory check): a simulation measures what they state
PLAN_ONLY_FIELDS = ("time_in_system_s", "kv_tokens_per_request", "concurrent_sequences")


def simulate_notes(r: Resolved, workload: Workload) -> list[str]:
    """What `sizer simulate` says beside its figures: which of a trace's requests it replayed and what of them it
    does not model, and what of the scenario it did not run or read (a schedule's day, the plan's own inputs, a
    seed nothing draws with)."""
    w, notes = r.workload, []
    if w.trace is not None:
        notes.append(f"trace {w.trace.path}: {replay_words(r, workload)} replayed")
        if (unread := unread_words(r, workload)) is not None:
            notes.append(unread)
    if w.schedule is not None:
        notes.append(f"workload.schedule: simulated at workload.arrival.rate_per_s ({w.arrival.rate_per_s:g} req/s); "
                     f"`sizer plan --simulate` sizes the {w.schedule.period}")
    stated = [f"workload.{key} {getattr(w, key):,g}" for key in PLAN_ONLY_FIELDS if getattr(w, key) is not None]
    if stated:
        notes.append(f"{listed(stated)}: {'inputs' if len(stated) > 1 else 'an input'} of the plan's Little's law and "
                     "memory check, not read here: the simulation measures each request's time in system and the KV "
                     "cache it holds")
    if w.trace is not None and r.source_of("workload.seed") != "default" and not _draws(r):
        notes.append(f"workload.seed {w.seed} ({r.source_of('workload.seed')}): nothing in this run is drawn at random "
                     "(the trace's arrivals and lengths are replayed as they are; no LoRA adapters, structured output "
                     "or speculative acceptance to draw), so the seed changes nothing")
    return notes


def _draws(r: Resolved) -> bool:
    """Does a run of this trace draw anything with the seed: each request's LoRA adapter (a popularity other than
    the trace's own column) or schema, or speculative acceptances?"""
    w = r.workload
    return ((w.lora is not None and w.lora.popularity != "trace") or w.structured_output is not None
            or r.deployment.speculative_config is not None)


def simulate_replica(r: Resolved, rate_per_s: float, num_requests: int | None,
                     progress: Callable[[int], None] | None = None):
    """One replica (or one disaggregated pair of pools) at `rate_per_s`: for goodput searches and operating points
    (`progress`: told the requests done so far, as `simulate_scenario`'s)."""
    return simulate_scenario(r, num_requests, replicas=1, progress=progress, rate_per_s=rate_per_s)
