"""`sizer check`: CI rules over a scenario or a Kubernetes/Helm deployment that runs `vllm serve`.

A manifest is read for what vLLM will actually run: the model (an HF repo id, mapped to the
catalog by its `_sizer.hf_repo`), the engine flags in `command`/`args`, the `nvidia.com/gpu`
limit, the replica count and the GPU type (a `sizer:` block or a node-selector label). The
`sizer:` block or `check`'s flags add what a manifest cannot say: workload, SLO, budget; without
a workload the slo rule is skipped and the rest still decide. Rules (each pass, fail or skip, with
by how much and the smallest changes that fix it):

  deployment     the split divides the model and the weight format runs on the GPU (else the
                 other rules are skipped)
  memory         weights, activations and context fit at gpu_memory_utilization
  max_model_len  within the model's limit, long enough for the workload's requests (the engine
                 refuses one whose prompt + output exceed it), and the KV cache holds
                 ceil(kv_share x max_num_seqs) sequences of max_model_len (at least one); a note warns
                 when it holds fewer than max_num_seqs
  slo            the stated share of requests meets every SLO target at the stated rate, on the
                 stated replicas (a scenario without them: as many as the sizing pipeline finds)
  cost           replicas x GPUs requested x price within the stated budget

The slo and cost rules read one `Sizing` from `sizer.sizing.pipeline.size_deployment`, the
answer `plan --simulate`, `search` and `report` give for the same deployment.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from sizer.analytic.memory import GiB
from sizer.errors import InputError
from sizer.inputs.manifest import CheckFlags, CheckInput, Source, read_check_input
from sizer.inputs.manifests.commands import flag_for
from sizer.inputs.scenario import (
    Scenario,
    SLOSection,
    length_bounds,
    scenario_from_dict,
    targets_text,
    with_sources,
)
from sizer.inputs.traffic import Traffic
from sizer.inputs.variant import Variant
from sizer.sizing.cost import usd_per_hour
from sizer.sizing.pipeline import closed_loop_note, size_deployment
from sizer.sizing.plan import Plan, make_plan
from sizer.sizing.resolve import STATED_SHARE, ContextLimit, context_limit, model_of, resolve
from sizer.sizing.result import GoodputSettings, Sizing, SizingStatus
from sizer.words import count, dollars
from validation.errors import FieldError


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
    sizing: Sizing | None       # the sizing pipeline's answer (does_not_fit: not simulated; None: no workload)
    sources: tuple[Source, ...] = ()    # where the model, GPU and GPU count came from

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.rules)

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1


def check_file(path: str, kv_share: float | None = None, budget_usd_per_hour: float | None = None,
               traffic: Traffic = Traffic(), settings: GoodputSettings = GoodputSettings(),
               scenario: str | None = None, flags: CheckFlags = CheckFlags(),
               progress: Callable[[int], None] | None = None) -> CheckResult:
    """Read `path` (scenario or manifest; `-` standard input; `scenario` a side scenario's workload, SLO and
    price) and evaluate every rule; raises FieldError on bad input. `progress`: the sizing pipeline's."""
    inp = read_check_input(path, kv_share, budget_usd_per_hour, traffic, scenario, flags)
    try:
        return evaluate(inp, settings, progress)
    except FieldError as error:
        # the scenario field a manifest's `sizer:` block set is named as the block's field (sizer.gpu, not
        # hardware.gpu, which the manifest does not have)
        stated = {SCENARIO_FIELDS[s.setting]: s.source for s in inp.sources if s.setting in SCENARIO_FIELDS}
        if inp.kind != "scenario" and stated.get(error.field, "").startswith("sizer."):
            raise InputError(error.file, stated[error.field], error.message) from None
        # a config key the server's overrides set (--hf-overrides, --json-model-override-args) under that flag
        overrides, _, key = (error.field or "").partition("model.overrides")
        if inp.kind != "scenario" and not overrides and key:
            engine = inp.scenario_data["deployment"].get("engine", "vllm")
            raise InputError(error.file, flag_for(engine, "model_overrides") + key, error.message) from None
        # a deployment field the server's flags set (`--enable-dp-attention` on a dense model, `--moe-backend marlin`
        # without experts) under the engine's flag: the manifest has no `deployment.` section to name
        setting = (error.field or "").removeprefix("deployment.").split(".")[0]
        if inp.kind != "scenario" and (error.field or "").startswith("deployment.") \
                and setting in (inp.scenario_data.get("deployment") or {}):
            flag = flag_for(inp.scenario_data["deployment"].get("engine", "vllm"), setting)
            if flag is not None:
                raise InputError(error.file, flag, error.message) from None
        raise


# the scenario field each setting `check` reads from a manifest (Source.setting) becomes
SCENARIO_FIELDS = {"model": "model.name", "gpu": "hardware.gpu"}


def evaluate(inp: CheckInput, settings: GoodputSettings = GoodputSettings(),
             progress: Callable[[int], None] | None = None) -> CheckResult:
    notes = list(inp.notes)
    data = inp.scenario_data
    limit = _model_limit(data, inp.file)
    model_limit = limit.tokens or None
    stated_len = (data.get("deployment") or {}).get("max_model_len")
    within_limit = None
    if model_limit and stated_len and stated_len > model_limit:
        within_limit = Variant(max_model_len=model_limit)
        notes.append(f"max_model_len {stated_len} exceeds the model's {limit.described}; the other rules use "
                     f"{model_limit}")
    try:
        resolved = resolve(_scenario(inp, within_limit))
    except FieldError as error:
        if error.field not in CANNOT_RUN:
            raise
        return _cannot_run(inp, error, notes)
    plan = make_plan(resolved)
    if inp.has_workload:
        sizing = size_deployment(resolved, plan, settings, progress=progress)
        replicas = sizing.replicas or inp.replicas
        slo = slo_rule(inp, sizing, resolved.slo)
        note = closed_loop_note(resolved, sizing.target_rate_per_s)
        if note and sizing.goodput_per_replica_per_s is not None:
            notes.append(note)
    else:
        sizing, replicas = None, inp.replicas
        slo = RuleResult("slo", "skip", "no workload stated (--rate, --prompt-tokens, --output-tokens, with --ttft-ms "
                                        "and --itl-ms, or a `sizer:` block)")
    p, runs = plan.parallel, resolved.execution
    runs_rule = RuleResult("deployment", "pass", f"TP {p.tensor_parallel_size} x PP {p.pipeline_parallel_size} "
                           f"divides {plan.model.name}; {runs.weight_format} weights run on {plan.gpu} "
                           f"({runs.kernel})")
    rules = [runs_rule, memory_rule(inp, plan),
             max_model_len_rule(inp, plan, stated_len, limit, resolved.too_long_share), slo,
             cost_rule(inp, plan, sizing, replicas)]
    mem = plan.memory
    held = mem.max_seqs_at_max_model_len * plan.parallel.data_parallel_size
    if mem.fits and held < plan.engine.max_num_seqs:
        notes.append(f"warning: the KV cache holds {count(held, 'sequence')} of max_model_len {mem.max_model_len:,}, "
                     f"fewer than max_num_seqs {plan.engine.max_num_seqs:,}; when that many run at full length, "
                     "the engine preempts some")
    summary = (f"{plan.model.name} on {count(replicas, 'replica')} × {inp.gpus_per_replica} {plan.gpu} "
               f"(TP {p.tensor_parallel_size}, PP {p.pipeline_parallel_size}, {plan.weights.format} weights, "
               f"{plan.kv.dtype} KV, max_model_len {plan.memory.max_model_len:,})")
    return CheckResult(inp.file, inp.kind, summary, tuple(rules), tuple(notes), sizing, inp.sources)


# Scenario fields whose refusal by `resolve` means the deployment cannot run (a split that does not
# divide the model, a weight format no kernel runs on the GPU, MTP drafting on a model without MTP layers), with
# the engine settings (sizer/inputs/manifests/commands.py TABLES) whose flags set them: the deployment rule fails
# (exit 1), naming the engine's flag, rather than the input being bad (exit 2).
CANNOT_RUN = {"deployment.tensor_parallel_size": ("tensor_parallel_size",),
              "deployment.pipeline_parallel_size": ("pipeline_parallel_size",),
              "deployment.enable_expert_parallel": ("enable_expert_parallel", "expert_parallel_size"),
              "deployment.quantization": ("quantization",),
              "deployment.speculative_config.method": ("speculative_config", "speculative_algorithm")}


def _cannot_run(inp: CheckInput, error: FieldError, notes: list[str]) -> CheckResult:
    """The deployment rule failed: the others are skipped, having no plan to read."""
    engine = (inp.scenario_data.get("deployment") or {}).get("engine", "vllm")
    where = error.field if inp.kind == "scenario" else flag_for(engine, *CANNOT_RUN[error.field]) or error.field
    rules = (RuleResult("deployment", "fail", f"{where}: {error.message}"),
             *(RuleResult(name, "skip", "the deployment cannot run") for name in ("memory", "max_model_len", "slo",
                                                                                   "cost")))
    d = inp.scenario_data
    summary = (f"{d['model']['name']} on {count(inp.replicas, 'replica')} × {inp.gpus_per_replica} "
               f"{d['hardware']['gpu']}")
    return CheckResult(inp.file, inp.kind, summary, rules, tuple(notes), None, inp.sources)


def _model_limit(data: dict, file: str) -> ContextLimit:
    s = scenario_from_dict(data, file)
    return context_limit(model_of(s), s.deployment.engine)


def _scenario(inp: CheckInput, variant: Variant | None) -> Scenario:
    """The scenario checked, with `variant`'s changes. Without a stated workload its nominal one
    (sizer/inputs/manifest.py NOMINAL_WORKLOAD) is a default: none of its lengths is the user's to be refused."""
    s = scenario_from_dict(inp.scenario_data, inp.file, variant, default_name=inp.name)
    if inp.has_workload:
        return s
    return with_sources(s, {path: "default: no workload stated" for path in ("workload.prompt_tokens",
                                                                             "workload.output_tokens")})


def _plan_with(inp: CheckInput, variant: Variant) -> Plan | None:
    """The plan of `variant`, or None when it is not a valid deployment."""
    try:
        return make_plan(resolve(_scenario(inp, variant)))
    except FieldError:
        return None


# ---- memory -----------------------------------------------------------------------------


def memory_rule(inp: CheckInput, plan: Plan) -> RuleResult:
    mem = plan.memory
    fixed = mem.weights_bytes + mem.draft_weights_bytes + mem.activation_bytes + mem.non_torch_bytes
    drafted = (f" + {mem.draft_what} {mem.draft_weights_bytes / GiB:.1f} GiB"
               if mem.draft_weights_bytes else "")
    parts = (f"weights {mem.weights_bytes / GiB:.1f} GiB{drafted} + activations {mem.activation_bytes / GiB:.1f} GiB + "
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
    if not plan.kv.dtype.startswith("fp8") and (p := _plan_with(inp, Variant(kv_cache_dtype="fp8"))) and ok(p):
        found.append("FP8 KV cache (--kv-cache-dtype fp8)")
    # windowed layers stop growing at their window (KVLayout.longest_tokens); None: every layer is windowed and
    # fits, so no shorter max_model_len makes room
    longest_kept = plan.kv.longest_tokens(plan.memory.kv_cache_bytes / sequences)
    estimate = (longest_kept or 0) // 1024 * 1024
    longest = longest_request_tokens(inp) if inp.has_workload else None
    # whole blocks (and a window's straddled one) can leave the estimate a block short: the next multiple down
    for length in (estimate, estimate - 1024):
        if not max(1024, longest or 0) <= length < plan.memory.max_model_len:
            break
        if (p := _plan_with(inp, Variant(max_model_len=length))) and ok(p):
            found.append(f"--max-model-len {length} (from {plan.memory.max_model_len}; "
                         "the workload's longest request fits)")
            break
    if plan.weights.format in ("bf16", "fp16", "fp32"):
        if (p := _plan_with(inp, Variant(quantization="fp8"))) and ok(p):
            found.append("FP8 weights (--quantization fp8; evaluate accuracy first)")
    tp, pp = d.get("tensor_parallel_size", 1), d.get("pipeline_parallel_size", 1)
    bigger = [(t, pp, f"--tensor-parallel-size {t}") for t in (2 * tp, 4 * tp) if t <= 8] \
        or [(tp, 2 * pp, f"--pipeline-parallel-size {2 * pp}")]
    for t, p_size, flag in bigger:
        if (p := _plan_with(inp, Variant(tensor_parallel_size=t, pipeline_parallel_size=p_size))) and ok(p):
            extra = (t * p_size - tp * pp) * d.get("data_parallel_size", 1)
            gpus, price = inp.replicas * (inp.gpus_requested + extra), p.cost.price_usd_per_gpu_hour
            found.append(f"more GPUs: {flag} (+{count(extra, 'GPU')} per replica)" + _over_budget(inp, gpus, price))
            break
    return tuple(found)


def longest_request_tokens(inp: CheckInput) -> int | None:
    """Longest prompt + output the stated workload draws (as the simulator draws it: sizer/inputs/scenario.py
    length_bounds, its clip and rounding), when both lengths are bounded and there is no trace."""
    w = _scenario(inp, None).workload
    if w.trace is not None or w.prompt_tokens is None or w.output_tokens is None:
        return None
    (_, prompt), (_, output) = length_bounds(w.prompt_tokens), length_bounds(w.output_tokens)
    return None if prompt is None or output is None else prompt + output


# ---- max_model_len ------------------------------------------------------------------------


def sequences_required(max_num_seqs: int, kv_share: float) -> int:
    """Sequences of max_model_len the KV cache must hold: ceil(share x max_num_seqs), at least 1."""
    return max(1, math.ceil(kv_share * max_num_seqs - 1e-9))


def max_model_len_rule(inp: CheckInput, plan: Plan, stated_len: int | None, limit: ContextLimit,
                       too_long: float = 0.0) -> RuleResult:
    """`limit`: the longest context the engine serves the model at; `too_long`: the share of the workload's requests
    whose prompt + output exceed max_model_len (Resolved)."""
    mem = plan.memory
    model_limit = limit.tokens or None
    if model_limit and stated_len and stated_len > model_limit:
        return RuleResult("max_model_len", "fail", f"max_model_len {stated_len:,} exceeds the model's "
                          f"{limit.described} (by {stated_len - model_limit:,} tokens)",
                          (f"--max-model-len {model_limit}",))
    if inp.has_workload and too_long >= STATED_SHARE:
        longest = longest_request_tokens(inp)
        fix = (f"--max-model-len {longest} (from {mem.max_model_len:,}; the workload's longest request fits)"
               if longest is not None and longest <= (model_limit or longest) else
               f"requests of at most {model_limit or mem.max_model_len:,} tokens, prompt + output (the model's "
               "context)")
        return RuleResult("max_model_len", "fail", f"{too_long:.2%} of the workload's requests have prompt + output "
                          f"above max_model_len {mem.max_model_len:,}: the engine refuses them (vLLM answers HTTP "
                          "400)", (fix,))
    if not plan.memory.fits:
        return RuleResult("max_model_len", "skip", f"max_model_len {mem.max_model_len:,} is within the model's limit; "
                          "the KV share is not checked until the memory rule passes")
    max_seqs = plan.engine.max_num_seqs
    need = sequences_required(max_seqs, inp.kv_share)
    have = mem.max_seqs_at_max_model_len * plan.parallel.data_parallel_size
    required = (f"ceil({inp.kv_share:g} x max_num_seqs {max_seqs:,}), at least 1" if inp.kv_share > 0 else
                "at least one; --kv-share or sizer.kv_share asks for a share of max_num_seqs")
    what = (f"KV cache holds {count(have, 'sequence')} of max_model_len {mem.max_model_len:,} per replica; "
            f"required {need:,} ({required})")
    if have >= need:
        return RuleResult("max_model_len", "pass", what)
    fixes = list(_fixes(inp, plan, lambda p: p.memory.max_seqs_at_max_model_len * p.parallel.data_parallel_size >= need,
                        math.ceil(need / plan.parallel.data_parallel_size)))
    if inp.kv_share > 0 and have >= 1:
        fixes.append(f"--max-num-seqs {int(have / inp.kv_share)} (from {max_seqs:,}; fewer sequences per step)")
    return RuleResult("max_model_len", "fail", what + f"; short by {count(need - have, 'sequence')}", tuple(fixes))


# ---- SLO ---------------------------------------------------------------------------------


def slo_rule(inp: CheckInput, sizing: Sizing, slo: SLOSection) -> RuleResult:
    """The sizing pipeline's verdict: one replica simulated at rate / replicas (Poisson traffic split at
    random stays Poisson), with the replicas the SLO needs as the fix."""
    if sizing.status is SizingStatus.DOES_NOT_FIT:
        return RuleResult("slo", "skip", sizing.verdict)
    if sizing.status is SizingStatus.NO_SLO:
        return RuleResult("slo", "skip", "no SLO targets stated")
    point = sizing.operating_point
    if point is None:
        what = f"{sizing.verdict} ({targets_text(slo)})"
    else:
        m = point.metrics
        what = (f"{point.share_met:.1%} of requests meet every target at {point.rate_per_s:.3g} req/s per replica "
                f"({sizing.target_rate_per_s:g} req/s over {count(sizing.replicas, 'replica')}), "
                f"{sizing.required_share:.0%} "
                f"required; p95 TTFT {m.ttft.p95_ms:,.0f} ms, ITL {m.itl.p95_ms:,.1f} ms, "
                f"TPOT {m.tpot.p95_ms:,.1f} ms, E2E {m.e2e.p95_ms:,.0f} ms ({targets_text(slo)})")
        if m.itl_share is not None:
            what += f"; {m.itl_share:.1%} of token gaps within the ITL target"
    if sizing.status is SizingStatus.MET:
        return RuleResult("slo", "pass", what)
    if point is not None:
        gaps = point.metrics.itl_share
        short = (f"{sizing.required_share - point.share_met:.1%} of requests" if point.share_met < sizing.required_share
                 else f"{sizing.required_share - gaps:.1%} of token gaps")     # only the ITL target missed
        what += f"; short by {short} (binding: {point.binding})"
    needed = sizing.replicas_for_slo
    if needed:
        fixes = (_replicas_fix(inp, sizing, needed),)
    elif sizing.status is SizingStatus.MISSED:
        fixes = (f"{sizing.verdict}; `sizer search` finds faster configurations",)
    else:
        fixes = (sizing.suggestion,)
    return RuleResult("slo", "fail", what, fixes)


def _replicas_fix(inp: CheckInput, sizing: Sizing, needed: int) -> str:
    """The replicas the sizing pipeline found to meet the SLO, with the operating point that decided it (the
    verdict's own simulation) and its cost against the budget: a fix over the budget says so."""
    more, price = needed - sizing.replicas, sizing.cost.price_usd_per_gpu_hour
    cost = usd_per_hour(needed, inp.gpus_requested, price)
    text = (f"{needed} replicas (+{more}, +{count(more * inp.gpus_requested, 'GPU')}"
            + (f", ${cost:,.2f}/hour" if cost is not None else "")
            + f"): at {sizing.target_rate_per_s:g} / {needed} = {sizing.target_rate_per_s / needed:.3g} req/s per "
              f"replica {sizing.share_met_for_slo:.1%} of requests meet every target "
              f"({sizing.required_share:.0%} required)")
    budget = inp.budget_usd_per_hour
    if budget is None or cost is None or cost <= budget + 1e-9:
        return text
    affordable = int(budget // (inp.gpus_requested * price)) if price else 0
    return (text + f"; over the ${budget:,.2f}/hour budget, which pays for {count(affordable, 'replica')}: no "
            "replica count meets the SLO within the budget; `sizer search` finds cheaper or faster configurations")


def _over_budget(inp: CheckInput, gpus: int, price: float | None) -> str:
    """"; $X/hour, over the $B/hour budget" when `gpus` at `price` cost more than the stated budget, else ""."""
    budget, cost = inp.budget_usd_per_hour, usd_per_hour(1, gpus, price)
    if budget is None or cost is None or cost <= budget + 1e-9:
        return ""
    return f"; ${cost:,.2f}/hour, over the ${budget:,.2f}/hour budget"


# ---- cost --------------------------------------------------------------------------------


def cost_rule(inp: CheckInput, plan: Plan, sizing: Sizing | None, replicas: int) -> RuleResult:
    """Replicas x GPUs each pod requests x price against the budget (the GPUs billed, used or not)."""
    if inp.budget_usd_per_hour is None:
        return RuleResult("cost", "skip", "no budget stated (sizer.budget_usd_per_hour or --budget)")
    price = plan.cost.price_usd_per_gpu_hour
    if price is None:
        return RuleResult("cost", "fail", f"no price for {plan.gpu}; state sizer.price_usd_per_gpu_hour",
                          ("sizer.price_usd_per_gpu_hour: <USD per GPU-hour>",))
    per_hour = usd_per_hour(replicas, inp.gpus_requested, price)
    what = (f"{count(replicas, 'replica')} x {count(inp.gpus_requested, 'GPU')} x ${dollars(price)}/GPU-hour = "
            f"${dollars(per_hour)}/hour; "
            f"budget ${inp.budget_usd_per_hour:,.2f}/hour")
    if per_hour <= inp.budget_usd_per_hour + 1e-9:
        return RuleResult("cost", "pass", what)
    fixes = []
    affordable = int(inp.budget_usd_per_hour // (inp.gpus_requested * price))
    needed = sizing.replicas_for_slo if sizing else None
    if needed and needed < replicas:
        fixes.append(f"{count(needed, 'replica')} {'meets' if needed == 1 else 'meet'} the SLO "
                     f"(${usd_per_hour(needed, inp.gpus_requested, price):,.2f}/hour)")
    if inp.gpus_requested > inp.gpus_per_replica:
        fixes.append(f"request {count(inp.gpus_per_replica, 'GPU')} per pod (the engine uses {inp.gpus_per_replica})")
    fixes.append(f"the budget pays for {count(affordable, 'replica')}; `sizer search` finds cheaper GPUs")
    return RuleResult("cost", "fail", what + f"; ${per_hour - inp.budget_usd_per_hour:,.2f}/hour over", tuple(fixes))
