"""`sizer check`: CI rules over a scenario or a Kubernetes/Helm deployment that runs `vllm serve`.

A manifest is read for what vLLM will actually run: the model (an HF repo id, mapped to the
catalog by its `_sizer.hf_repo`), the engine flags in `command`/`args`, the `nvidia.com/gpu`
limit, the replica count and the GPU type (a `sizer:` block or a node-selector label). The
`sizer:` block adds what a manifest cannot say: workload, SLO, budget. Rules (each pass,
fail or skip, with by how much and the smallest changes that fix it):

  memory         weights, activations and context fit at gpu_memory_utilization
  max_model_len  within the model's limit, and the KV cache holds ceil(kv_share x max_num_seqs)
                 sequences of max_model_len (at least one)
  slo            the stated share of requests meets every SLO target at the stated rate (simulated)
  cost           replicas x GPUs x price within the stated budget
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sizer.errors import InputError
from sizer.inputs.manifest import CheckInput, read_check_input
from sizer.analytic.memory import GiB
from sizer.sizing.plan import Plan, make_plan
from sizer.sizing.resolve import Resolved, resolve
from sizer.inputs.scenario import scenario_from_dict

@dataclass(frozen=True)
class RuleResult:
    name: str
    status: str                 # "pass", "fail" or "skip"
    message: str                # what was measured against which limit
    fixes: tuple[str, ...] = ()  # smallest change first; empty when passing

    @property
    def passed(self) -> bool:
        return self.status != "fail"


@dataclass(frozen=True)
class CheckResult:
    file: str
    kind: str                   # "scenario", "kubernetes manifest", "helm values"
    summary: str                # what was checked, in one line
    rules: tuple[RuleResult, ...]
    notes: tuple[str, ...]      # flags not modelled, GPUs requested but unused, ...

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.rules)

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1


def check_file(path: str, kv_share: float | None = None, budget_usd_per_hour: float | None = None) -> CheckResult:
    """Read `path` (scenario or manifest) and evaluate every rule; raises InputError on bad input."""
    inp = read_check_input(path, kv_share, budget_usd_per_hour)
    return evaluate(inp)


def evaluate(inp: CheckInput) -> CheckResult:
    notes = list(inp.notes)
    data = inp.scenario_data
    model_limit = _model_limit(data, inp.file)
    stated_len = (data.get("deployment") or {}).get("max_model_len")
    len_overrides = {}
    if model_limit and stated_len and stated_len > model_limit:
        len_overrides = {"deployment.max_model_len": model_limit}
        notes.append(f"max_model_len {stated_len} exceeds the model's {model_limit}; the other rules use {model_limit}")
    resolved = resolve(scenario_from_dict(data, inp.file, len_overrides, default_name=inp.name))
    plan = make_plan(resolved)
    rules = [memory_rule(inp, plan), max_model_len_rule(inp, plan, stated_len, model_limit)]
    if plan.fits:
        slo, replicas_needed = slo_rule(inp, resolved, plan)
    else:
        slo, replicas_needed = RuleResult("slo", "skip", "not simulated: the model does not fit in memory"), None
    cost = cost_rule(inp, plan, replicas_needed)
    if cost.status == "fail" and slo.status == "pass":      # fewer replicas may still meet the SLO
        cost = cost_rule(inp, plan, replicas_for_slo(resolved, plan)[0])
    rules += [slo, cost]
    p = plan.parallel
    summary = (f"{plan.model.name} on {inp.replicas} x {inp.gpus_per_replica} {plan.gpu} "
               f"(TP {p.tensor_parallel_size}, PP {p.pipeline_parallel_size}, {plan.weights.format} weights, "
               f"{plan.kv.dtype} KV, max_model_len {plan.memory.max_model_len:,})")
    return CheckResult(inp.file, inp.kind, summary, tuple(rules), tuple(notes))


def _model_limit(data: dict, file: str) -> int | None:
    from sizer.sizing.resolve import model_of
    return model_of(scenario_from_dict(data, file)).max_position_embeddings or None


def _plan_with(inp: CheckInput, overrides: dict) -> Plan | None:
    """The plan with `overrides`, or None when that variant is not a valid deployment."""
    try:
        return make_plan(resolve(scenario_from_dict(inp.scenario_data, inp.file, overrides, default_name=inp.name)))
    except InputError:
        return None


# ---- memory -----------------------------------------------------------------------------


def memory_rule(inp: CheckInput, plan: Plan) -> RuleResult:
    mem = plan.memory
    fixed = mem.weights_bytes + mem.activation_bytes + mem.non_torch_bytes
    parts = (f"weights {mem.weights_bytes / GiB:.1f} GiB + activations {mem.activation_bytes / GiB:.1f} GiB + "
             f"context {mem.non_torch_bytes / GiB:.1f} GiB")
    if mem.fits:
        return RuleResult("memory", "pass", f"fits: {parts} leave {mem.kv_cache_bytes / GiB:.1f} GiB KV cache of "
                          f"{mem.usable_bytes / GiB:.1f} GiB usable per GPU")
    need = fixed + mem.sequence_bytes_at_max_model_len
    what = (f"{'; '.join(mem.reasons)}: {parts} + one sequence of max_model_len "
            f"{mem.sequence_bytes_at_max_model_len / GiB:.1f} GiB = {need / GiB:.1f} GiB per GPU, "
            f"{(need - mem.usable_bytes) / GiB:.1f} GiB more than the {mem.usable_bytes / GiB:.1f} GiB usable")
    return RuleResult("memory", "fail", what, _fixes(inp, plan, lambda p: p.memory.fits))


def _fixes(inp: CheckInput, plan: Plan, ok, sequences: int = 1) -> tuple[str, ...]:
    """Single changes that make `ok(plan)` true: those that keep the GPU count first, then more GPUs.

    A lower max_model_len is offered only down to the workload's longest request: the largest
    length (a multiple of 1,024) at which the KV cache holds `sequences` sequences.
    """
    d = inp.scenario_data.get("deployment") or {}
    found = []
    if not plan.kv.dtype.startswith("fp8") and (p := _plan_with(inp, {"deployment.kv_cache_dtype": "fp8"})) and ok(p):
        found.append("FP8 KV cache (--kv-cache-dtype fp8)")
    length = int(plan.memory.kv_cache_bytes / (sequences * plan.kv.bytes_per_token_per_gpu)) // 1024 * 1024
    if max(1024, longest_request_tokens(inp.scenario_data) or 0) <= length < plan.memory.max_model_len:
        if (p := _plan_with(inp, {"deployment.max_model_len": length})) and ok(p):
            found.append(f"--max-model-len {length} (from {plan.memory.max_model_len}; the workload's longest request fits)")
    if plan.weights.format in ("bf16", "fp16", "fp32"):
        if (p := _plan_with(inp, {"deployment.quantization": "fp8"})) and ok(p):
            found.append("FP8 weights (--quantization fp8; evaluate accuracy first)")
    tp, pp = d.get("tensor_parallel_size", 1), d.get("pipeline_parallel_size", 1)
    bigger = [("tensor_parallel_size", t, pp) for t in (2 * tp, 4 * tp) if t <= 8] or [("pipeline_parallel_size", tp, 2 * pp)]
    for key, t, p_size in bigger:
        if (p := _plan_with(inp, {f"deployment.{key}": t if key == "tensor_parallel_size" else p_size})) and ok(p):
            extra = (t * p_size - tp * pp) * d.get("data_parallel_size", 1)
            flag = f"--tensor-parallel-size {t}" if key == "tensor_parallel_size" else f"--pipeline-parallel-size {p_size}"
            found.append(f"more GPUs: {flag} (+{extra} GPUs per replica)")
            break
    return tuple(found)


def longest_request_tokens(data: dict) -> int | None:
    """Longest prompt + output the workload can produce, when both lengths are bounded."""
    w = data.get("workload") or {}
    total = 0
    for key in ("prompt_tokens", "output_tokens"):
        d = w.get(key)
        if not isinstance(d, dict):
            return None
        if d.get("distribution") == "fixed":
            total += d.get("value") or 0
        elif d.get("distribution") == "empirical" and d.get("values"):
            total += max(d["values"])
        elif d.get("max") is not None:
            total += d["max"]
        else:
            return None
    return int(total)


# ---- max_model_len ------------------------------------------------------------------------


def sequences_required(max_num_seqs: int, kv_share: float) -> int:
    """Sequences of max_model_len the KV cache must hold: ceil(share x max_num_seqs), at least 1."""
    return max(1, math.ceil(kv_share * max_num_seqs - 1e-9))


def max_model_len_rule(inp: CheckInput, plan: Plan, stated_len: int | None, model_limit: int | None) -> RuleResult:
    mem = plan.memory
    if model_limit and stated_len and stated_len > model_limit:
        return RuleResult("max_model_len", "fail", f"max_model_len {stated_len:,} exceeds the model's "
                          f"max_position_embeddings {model_limit:,} (by {stated_len - model_limit:,} tokens)",
                          (f"--max-model-len {model_limit}",))
    if not plan.memory.fits:
        return RuleResult("max_model_len", "skip", f"max_model_len {mem.max_model_len:,} is within the model's limit; "
                          "the KV share is not checked until the memory rule passes")
    max_seqs = plan.engine["max_num_seqs"]
    need = sequences_required(max_seqs, inp.kv_share)
    have = mem.max_seqs_at_max_model_len * plan.parallel.data_parallel_size
    what = (f"KV cache holds {have:,} sequences of max_model_len {mem.max_model_len:,} per replica; "
            f"required {need:,} (ceil({inp.kv_share:g} x max_num_seqs {max_seqs:,}), at least 1)")
    if have >= need:
        return RuleResult("max_model_len", "pass", what)
    fixes = list(_fixes(inp, plan, lambda p: p.memory.max_seqs_at_max_model_len * p.parallel.data_parallel_size >= need,
                        math.ceil(need / plan.parallel.data_parallel_size)))
    if inp.kv_share > 0 and have >= 1:
        fixes.append(f"--max-num-seqs {int(have / inp.kv_share)} (from {max_seqs:,}; fewer sequences per step)")
    return RuleResult("max_model_len", "fail", what + f"; short by {need - have:,} sequences", tuple(fixes))


# ---- SLO ---------------------------------------------------------------------------------


def slo_rule(inp: CheckInput, resolved: Resolved, plan: Plan) -> tuple[RuleResult, int | None]:
    """Simulate one replica at rate / replicas (random routing of Poisson traffic stays Poisson).

    Returns the rule and, when it fails, the replicas the SLO needs (from a coarse goodput search).
    """
    from sizer.sizing.search import probe_slo, slo_of

    s = resolved.scenario
    if not slo_of(s).has_targets:
        return RuleResult("slo", "skip", "no SLO targets stated"), None
    rate = s.workload.arrival.rate_per_s
    if rate is None:
        return RuleResult("slo", "skip", "trace replay: no arrival rate to split across replicas"), None
    per_replica = rate / inp.replicas
    probe = probe_slo(resolved, per_replica, s.workload.num_requests)
    p = probe.percentiles_ms
    what = (f"{probe.share_met:.1%} of requests meet every target at {per_replica:.3g} req/s per replica "
            f"({rate:g} req/s over {inp.replicas} replica(s)), {s.slo.required_share:.0%} required; p95 TTFT "
            f"{p['ttft'][1]:,.0f} ms, TPOT {p['tpot'][1]:,.1f} ms, E2E {p['e2e'][1]:,.0f} ms ("
            + ", ".join(f"{k} <= {v:g} ms" for k, v in (("TTFT", s.slo.ttft_ms), ("ITL", s.slo.itl_ms), ("E2E", s.slo.e2e_ms))
                        if v is not None) + ")")
    if probe.share_met >= s.slo.required_share:
        return RuleResult("slo", "pass", what), None
    needed, goodput = replicas_for_slo(resolved, plan)
    by = f"; short by {s.slo.required_share - probe.share_met:.1%} of requests (binding: {probe.binding})"
    if needed:
        price = resolved.price_usd_per_gpu_hour
        cost = f", ${needed * inp.gpus_requested * price:,.2f}/hour" if price is not None else ""
        fixes = (f"{needed} replicas (+{needed - inp.replicas}, +{(needed - inp.replicas) * inp.gpus_requested} GPUs{cost}): "
                 f"one replica meets the SLO up to about {goodput:.3g} req/s",)
        return RuleResult("slo", "fail", what + by, fixes), needed
    fixes = (f"more replicas do not help: the {probe.binding} target is missed even at low load; "
             "use faster GPUs or more tensor parallelism (`sizer search`)",)
    return RuleResult("slo", "fail", what + by, fixes), None


def replicas_for_slo(resolved: Resolved, plan: Plan) -> tuple[int | None, float]:
    """Replicas the scenario's rate needs from a coarse goodput search (None: the SLO is missed at any rate)."""
    from sizer.sizing.search import SearchSettings, goodput_rate, rate_bound_per_s, replicas_for

    goodput, _ = goodput_rate(resolved, rate_bound_per_s(plan), SearchSettings())
    if goodput <= 0:
        return None, 0.0
    return replicas_for(resolved.scenario.workload.arrival.rate_per_s, goodput), goodput


# ---- cost --------------------------------------------------------------------------------


def cost_rule(inp: CheckInput, plan: Plan, replicas_needed: int | None) -> RuleResult:
    if inp.budget_usd_per_hour is None:
        return RuleResult("cost", "skip", "no budget stated (sizer.budget_usd_per_hour or --budget)")
    price = plan.cost.price_usd_per_gpu_hour
    if price is None:
        return RuleResult("cost", "fail", f"no price for {plan.gpu}; state sizer.price_usd_per_gpu_hour",
                          ("sizer.price_usd_per_gpu_hour: <USD per GPU-hour>",))
    gpus = inp.replicas * inp.gpus_requested
    per_hour = gpus * price
    what = (f"{inp.replicas} replica(s) x {inp.gpus_requested} GPUs x ${price:.2f}/GPU-hour = ${per_hour:,.2f}/hour; "
            f"budget ${inp.budget_usd_per_hour:,.2f}/hour")
    if per_hour <= inp.budget_usd_per_hour + 1e-9:
        return RuleResult("cost", "pass", what)
    fixes = []
    affordable = int(inp.budget_usd_per_hour // (inp.gpus_requested * price))
    if replicas_needed and replicas_needed < inp.replicas:
        fixes.append(f"{replicas_needed} replicas meet the SLO (${replicas_needed * inp.gpus_requested * price:,.2f}/hour)")
    if inp.gpus_requested > inp.gpus_per_replica:
        fixes.append(f"request {inp.gpus_per_replica} GPUs per pod (the engine uses {inp.gpus_per_replica})")
    fixes.append(f"the budget pays for {affordable} replica(s); `sizer search` finds cheaper GPUs")
    return RuleResult("cost", "fail", what + f"; ${per_hour - inp.budget_usd_per_hour:,.2f}/hour over", tuple(fixes))

