"""Everything a sizing report shows, gathered into one dataclass the template renders.

The answer comes first: the cheapest configuration of the search that meets the SLO (or the
scenario's own configuration when no search is run or nothing passes), sized by the pipeline
every command uses (`sizer.sizing.pipeline.size_deployment`), in one sentence with its cost and
the searched configurations' cost against latency (`summary.py`). Around it: the question,
memory per GPU, latency against rate, KV and batch timelines, the top configurations, every
assumption, and the configurations not chosen grouped by why.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import numpy as np

from sizer.analytic.format_support import SOURCES as FORMAT_SOURCES
from sizer.analytic.lengths import mean_text
from sizer.inputs.scenario import scenario_from_dict, targets_text
from sizer.outputs.emit import ServingConfig, serving_config
from sizer.outputs.report.charts import MemoryBar, RatePoint, latency_chart, memory_chart, pareto_chart, timeline_chart
from sizer.outputs.report.day import day_chart
from sizer.outputs.report.summary import (
    Group,
    Headline,
    ParetoPoint,
    headline,
    left_gpu,
    pareto_panels,
    pareto_points,
    search_counts,
    top_and_rest,
)
from sizer.sizing.cost import gpus_per_replica
from sizer.sizing.day import plan_day
from sizer.sizing.day_result import DayPlan
from sizer.sizing.goodput import probe_slo, simulate_at
from sizer.sizing.pipeline import method_notes, size_deployment
from sizer.sizing.plan import Plan, make_plan
from sizer.sizing.resolve import Resolved, resolve
from sizer.sizing.result import Sizing
from sizer.sizing.search import Outcome, SearchResult, SearchSettings, SearchSpace, search
from sizer.sizing.slots import SlotAnswers
from sizer.sizing.workload import requests_of

RATE_FACTORS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5)     # latency sweep, as multiples of the goodput rate


@dataclass(frozen=True)
class Answer:
    source: str                    # "the cheapest configuration of the search" or "the scenario's configuration"
    configuration: str
    plan_command: str
    sizing: Sizing                 # the pipeline's answer: status, verdict, replicas, cost, operating point


@dataclass(frozen=True)
class Report:
    title: str
    scenario_file: str | None
    headline: Headline             # the first page: the answer in one sentence and its cost
    front_svgs: list[str]          # the first page's chart: cost against latency (`pareto_points`, a panel each
                                   # for TTFT and the per-token latency the SLO targets, `pareto_panels`) when a
                                   # search found configurations, else latency against rate
    front_notes: list[str]         # a cost-latency panel left out, and why (no configuration has its latency)
    pareto_points: list[ParetoPoint]
    top: list[Outcome]             # the cheapest configurations that meet the SLO
    not_chosen: list[Group]        # every other configuration searched, by why it was not chosen
    references: list[tuple[str, str]]   # (code, what it stands for): each bracketed source code the report cites
    question: list[tuple[str, str]]
    answer: Answer
    own: Answer | None             # the scenario's own configuration, when the answer is another
    memory_svg: str
    memory_bars: list[MemoryBar]
    latency_svg: str | None
    latency_points: list[RatePoint]
    timeline_svg: str | None
    search: SearchResult | None
    inputs: list[tuple[str, str]]
    layers: list[tuple[str, str, str, str, str, str]]   # the plan's layers by kind, formatted
    formulas: list[tuple[str, str]]
    assumptions: list[str]
    step_model: str
    simulation_notes: list[str]
    serving: ServingConfig | None  # the answer's engine settings and replicas (`report --emit`); None: does not fit
    day: DayPlan | None = None     # workload.schedule: the answer's configuration over the day (sizer.sizing.day)
    day_svg: str | None = None
    slots: SlotAnswers | None = None   # llama.cpp / Ollama: the answer's plan in the user's terms (sizer.sizing.slots)
    left_gpu: str | None = None    # why the answer left the scenario's GPU (summary.left_gpu)
    counts: list[tuple[str, int]] | None = None   # the configurations searched by outcome, adding up to the total


def build_report(data: dict, file: str | None, space: SearchSpace | None, workers: int = 1,
                 settings: SearchSettings = SearchSettings(), progress=None) -> Report:
    """Plan, search (when `space` is given), simulate and chart the scenario mapping `data`."""
    scenario = scenario_from_dict(data, file)
    own_resolved = resolve(scenario)
    result = search(data, file, space, settings, workers, progress) if space else None
    best = result.recommended if result else None
    if best is not None:
        chosen = resolve(best.candidate.variant(scenario).apply(scenario))
        source = "the cheapest configuration of the search that meets the SLO"
    else:
        chosen = own_resolved
        source = "the scenario's configuration" + (" (no searched configuration met the SLO)" if result else "")
    answer, chosen_timeline = _answer(chosen, source, settings, best.sizing if best else None)
    bars = [_memory_bar(("recommended: " if best else "") + answer.configuration, chosen, chosen_timeline)]
    own = None
    if best is not None and _shape(chosen) != _shape(own_resolved):
        own, own_timeline = _answer(own_resolved, "the scenario's configuration", settings)
        bars.append(_memory_bar("scenario: " + own.configuration, own_resolved, own_timeline))
    goodput = answer.sizing.goodput_per_replica_per_s
    points = _latency_points(chosen, goodput, settings.goodput.num_requests) if goodput else []
    slo = scenario.slo
    plan = make_plan(chosen)
    method = method_notes(settings.goodput, requests_of(own_resolved))
    slo_ms = {"ttft_ms": slo.ttft_ms, "itl_ms": slo.itl_ms, "tpot_ms": slo.tpot_ms, "e2e_ms": slo.e2e_ms}

    front = pareto_points(result, best) if result else []
    panels, front_notes = pareto_panels(front, slo) if front else ([], [])
    top, not_chosen = top_and_rest(result) if result else ([], [])
    inputs = input_rows(scenario, own_resolved)
    day = plan_day(chosen, plan, settings.goodput)[0] if scenario.workload.schedule is not None else None
    return Report(
        title=scenario.name, scenario_file=file,
        headline=headline(chosen.model.name, chosen.hardware.id.upper(), gpus_per_replica(chosen),
                          chosen.weight_format.name, answer.sizing, slo, result is not None),
        front_svgs=(pareto_chart(front, panels) if front else
                    [latency_chart(points, slo_ms, goodput, chart_id="front")] if points else []),
        front_notes=front_notes, pareto_points=front, top=top,
        not_chosen=not_chosen,
        question=question_rows(own_resolved), answer=answer, own=own,
        memory_svg=memory_chart(bars), memory_bars=bars,
        latency_svg=latency_chart(points, slo_ms, goodput) if points else None,
        latency_points=points,
        timeline_svg=timeline_chart(*chosen_timeline) if chosen_timeline else None,
        search=result, inputs=inputs, layers=layer_rows(plan), formulas=formula_rows(plan),
        assumptions=plan.assumptions, step_model=plan.step_times.model,
        simulation_notes=[
            *method,
            f"latency against rate: {settings.goodput.num_requests:,} requests per rate (as each goodput probe) at "
            f"{', '.join(f'{f:g}' for f in RATE_FACTORS)} x the goodput rate, the same random traffic on every run",
            "the SLO's ITL target is checked on the gaps between consecutive tokens, pooled over requests (vllm bench "
            "serve's ITL); its TPOT target per request, on the mean time per output token after the first",
        ] + [n for n in (result.notes if result else ()) if n not in method],
        references=references([*plan.assumptions, *(v for _, v in inputs)], chosen, own_resolved),
        serving=serving_config(chosen, answer.sizing.cost, answer.sizing.verdict) if chosen.memory.fits else None,
        slots=plan.slots, day=day, day_svg=day_chart(day) if day else None,
        left_gpu=left_gpu(result, scenario.hardware.gpu, best.candidate.gpu) if best is not None else None,
        counts=search_counts(result) if result else None)


CODE = re.compile(r"\[([A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*)\]")     # a source cited by its code: "[STAS]", "[VLLM-HW]"


def references(texts: list[str], *configurations: Resolved) -> list[tuple[str, str]]:
    """Each bracketed source code the `texts` cite, once, with what it stands for: the address in the GPU
    profiles' sources ("[AIC] https://..."), else the format table's `SOURCES`."""
    known = dict(FORMAT_SOURCES)
    for r in configurations:
        for source in r.hardware.sources:
            m = re.match(CODE.pattern + r"\s+(.+)", source)
            if m:
                known.setdefault(m.group(1), m.group(2))
    cited = sorted({code for text in texts for code in CODE.findall(text)})
    return [(code, known.get(code, "named in sizer's sources; no address recorded")) for code in cited]


def _shape(r: Resolved) -> tuple:
    """What the search varies: GPU, split, weight and KV formats."""
    return r.hardware.id, r.parallel, r.weight_format.name, r.kv_cache_dtype


def _answer(r: Resolved, source: str, settings: SearchSettings, sizing: Sizing | None = None):
    """The pipeline's verdict for one configuration (sized here unless the search already did), and the KV and
    batch timeline of its operating point (the same seeded simulation again)."""
    plan = make_plan(r)
    d = r.deployment
    config = (f"{plan.parallel.replica_gpus} x {r.hardware.name}, TP {d.tensor_parallel_size}"
              + (f" PP {d.pipeline_parallel_size}" if d.pipeline_parallel_size > 1 else "")
              + f", {r.weight_format.name} weights, {r.kv_cache_dtype} KV")
    # the checkpoint's own format is what --weights auto reads again (a .gguf file's type mix has no flag value);
    # a GPTQ/AWQ sidecar's is named, as auto refuses it
    weights = "auto" if r.weight_format.read_by_engine else r.weight_format.name
    # a slot engine's split and cache types are its own settings, not these flags (search's plan_flags likewise)
    split = "" if r.slots else (f" --tp {d.tensor_parallel_size} --pp {d.pipeline_parallel_size}"
                                f" --kv-cache-dtype {r.kv_cache_dtype}")
    command = (f"sizer plan {r.file or 'scenario.yaml'} --gpu {r.hardware.id}{split} --weights {weights} "
               "--simulate")
    sizing = sizing or size_deployment(r, plan, settings.goodput)
    answer = Answer(source, config, command, sizing)
    point = sizing.operating_point
    if point is None:
        return answer, None
    # the operating point's run: the scenario's requests (a trace's: those it replays, None)
    t = simulate_at(r, point.rate_per_s, None if r.workload.trace is not None else r.workload.num_requests).timeline
    first = t.replica == 0
    return answer, (t.end_s[first], t.kv_usage[first], t.num_seqs[first])


def _memory_bar(label: str, r: Resolved, timeline) -> MemoryBar:
    """One GPU's memory; the KV cache split at the p95 of simulated block usage (all free when not simulated)."""
    m = make_plan(r).memory
    used = (m.kv_cache_bytes * float(np.percentile(timeline[1], 95))
            if timeline is not None and len(timeline[1]) else 0.0)
    return MemoryBar(label, m.gpu_memory_bytes, m.weights_bytes + m.draft_weights_bytes, used, m.kv_cache_bytes - used,
                     m.activation_bytes, m.non_torch_bytes, m.gpu_memory_bytes - m.usable_bytes)


def _latency_points(r: Resolved, goodput: float, num_requests: int) -> list[RatePoint]:
    """p50/p95/p99 around the goodput rate; at 1 x goodput the very simulation the bisection accepted."""
    points = []
    for factor in RATE_FACTORS:
        m = probe_slo(r, goodput * factor, num_requests).metrics
        ttft, tpot, e2e, itl = ((lat.p50_ms, lat.p95_ms, lat.p99_ms) for lat in (m.ttft, m.tpot, m.e2e, m.itl))
        points.append(RatePoint(goodput * factor, ttft, tpot, e2e, m.slo_share, itl))
    return points


def question_rows(r: Resolved) -> list[tuple[str, str]]:
    w, d, slo = r.workload, r.deployment, r.slo
    targets = targets_text(slo)
    return [
        ("model", f"{r.model.name} ({r.model.architecture})"),
        ("scenario's hardware", f"{r.hardware.name}, TP {d.tensor_parallel_size} x PP {d.pipeline_parallel_size}, "
                                f"{r.weight_format.name} weights, {r.kv_cache_dtype} KV, engine {d.engine}"),
        ("traffic", _traffic(w)),
        ("context", f"max_model_len {r.engine.max_model_len:,} tokens"),
        ("latency targets", f"{targets or 'none'}, met by {slo.required_share:.0%} of requests"),
    ]


def _traffic(w) -> str:
    """The workload as given: a trace replayed, a closed loop of clients, or arrivals at a rate, with its lengths."""
    a = w.arrival
    if w.trace is not None:
        scale = f", inter-arrival times x {w.trace.time_scale:g}" if w.trace.time_scale != 1 else ""
        return f"the {w.trace.format} trace {w.trace.path} replayed (its arrivals and lengths{scale})"
    if a.process == "closed":
        think = f", {a.think_time_s:g} s think time" if a.think_time_s else ""
        head = (f"a closed loop of {a.concurrency} clients{think} (the latency charts probe rates: Poisson arrivals "
                "at each)")
    else:
        head = f"{a.process} arrivals at {a.rate_per_s:g} requests/s"
    return f"{head}; prompts {_dist(w.prompt_tokens)}; outputs {_dist(w.output_tokens)}"


def _dist(d) -> str:
    if d.distribution == "fixed":
        return f"{d.value:g} tokens"
    bounds = f" (clipped to {d.min:g}-{d.max:g})" if d.min is not None and d.max is not None else ""
    return f"{d.distribution}, {mean_text(d)}{bounds}"


def input_rows(s, r: Resolved) -> list[tuple[str, str]]:
    """Every scenario field as given or defaulted, then the engine settings with where each came from."""
    rows = []

    def walk(prefix: str, value) -> None:
        if isinstance(value, dict) and value:
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else key, inner)
        elif value is not None and prefix != "file":
            rows.append((prefix, str(value)))

    walk("", dataclasses.asdict(s))
    rows += [(f"engine.{k}", f"{getattr(r.engine, k)} ({src})") for k, src in r.engine.sources.items()]
    rows.append(("price_usd_per_gpu_hour", f"{r.price_usd_per_gpu_hour} ({r.price_source})"))
    return rows


def layer_rows(plan: Plan) -> list[tuple[str, str, str, str, str, str]]:
    """(part, kind, layers, parameters, KV per token, state per sequence) for each mixer and FFN kind."""
    kv = plan.kv
    return [(r.part, r.kind, str(r.layers or ""), f"{r.parameters / 1e9:,.3f} B",
             f"{r.kv_values_per_token * kv.bytes_per_value:,} B" if r.kv_values_per_token else "",
             f"{r.state_bytes_per_seq / 2**20:,.1f} MiB" if r.state_bytes_per_seq else "")
            for r in plan.model.layer_kinds]


def formula_rows(plan: Plan) -> list[tuple[str, str]]:
    state = ([("recurrent state per sequence = Mamba-2: conv channels x (kernel - 1) + heads x head dim x d_state; "
               "gated delta net: conv channels x (kernel - 1) + value heads x key dim x value dim; "
               f"x bytes = {plan.kv.state_bytes_per_seq:,} B", "vLLM's MambaMixer2 and GatedDeltaNet state shapes; "
               "sizer/inputs/layers.py")] if plan.kv.state_layers else [])
    return state + [
        ("weight memory = parameters x bytes per parameter (+ scales, + unconverted modules)",
         "sizer/analytic/weights.py"),
        (f"KV cache per token = {plan.kv.formula} = {plan.kv.bytes_per_token:,} B",
         "keys and values of every attention layer; sizer/analytic/memory.py"),
        ("KV cache = usable memory - weights - activation peak - CUDA context, in whole blocks",
         "vLLM's memory profiling; sizer/analytic/memory.py"),
        ("requests in flight = arrival rate x time in system",
         "Little's law (Little, 1961); sizer/analytic/capacity.py"),
        ("step time = GEMMs + attention + lm_head + collectives + overhead, "
         "each max(FLOPs / compute, bytes / bandwidth)",
         "roofline model; sizer/timing/roofline.py"),
        ("speculative tokens per step = (1 - alpha^(gamma+1)) / (1 - alpha)", "Leviathan et al. (2023)"),
        ("goodput = highest rate at which the required share of requests meets every SLO target",
         "DistServe (Zhong et al., 2024)"),
        ("replicas = the fewest whose operating point (target rate / replicas) meets the SLO, searched from "
         "ceil(target rate / goodput per replica)",
         "sizer/sizing/pipeline.py"),
        ("cost = replicas x GPUs x price; per million output tokens at target rate x mean output",
         "sizer/sizing/cost.py"),
    ]
