"""Terminal rendering for every command (rich tables): GB and GiB side by side, units everywhere."""

from __future__ import annotations

import math
import textwrap
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table

from sizer.analytic.memory import GB, GiB
from sizer.cli.render_day import render_day, render_energy
from sizer.cli.terminal_text import Terminal, styled
from sizer.words import count, dollars

# for annotations only: `sizer plan` need not import check, search and the simulator, nor `sizer simulate` the plan
if TYPE_CHECKING:
    from simulator.metrics import MetricsSummary
    from sizer.outputs.check import CheckResult
    from sizer.sizing.compare import Comparison
    from sizer.sizing.plan import Plan
    from sizer.sizing.result import Sizing
    from sizer.sizing.search import Outcome, SearchResult

MARKS = {"pass": "✓", "fail": "✗", "skip": "-"}      # check rule statuses
# --wide: a console this wide never narrows a table or wraps a line (no table here is wider than 300 columns)
WIDE_COLUMNS = 1_000
WIDE_SEARCH = 120           # narrower: search's table leaves out the rank and GPUs per replica, and has no borders


def terminal(wide: bool = False, stderr: bool = False) -> Console:
    """The console a command prints on: the terminal's width, or COLUMNS, else 80 columns (a pipe, a log; rich's
    default), which every table is designed to fit: numbers whole, labels wrapped, optional columns left out.
    `wide` (--wide): as wide as the content."""
    return Terminal(stderr=stderr, width=WIDE_COLUMNS if wide else None, markup=False)


def number_column(table: Table, header: str, **options) -> None:
    """A column of numbers: right-aligned, never wrapped, so a number is never split or cut ("671.…"); its header
    is short or broken with "\n" by design, since it sets the column's width."""
    table.add_column(header, justify="right", no_wrap=True, **options)


def text_column(table: Table, header: str, **options) -> None:
    """A column of words: wrapped to the width left, a word longer than the column folded, never cut ("…")."""
    table.add_column(header, **({"overflow": "fold"} | options))


def gb_gib(nbytes: float) -> str:
    return f"{nbytes / GB:,.2f} GB  ({nbytes / GiB:,.2f} GiB)"


def _table(title: str) -> Table:
    table = Table(title=title, title_justify="left", show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    return table


def _layer_kinds(console: Console, plan: Plan) -> None:
    """Layers by mixer and FFN kind: how many, their parameters, KV per token and state per sequence."""
    rows = plan.model.layer_kinds
    if len([r for r in rows if r.part == "mixer"]) < 2 and len([r for r in rows if r.part == "ffn"]) < 2:
        return
    t = Table(title="Layers by kind", title_justify="left")
    for col, right in (("part", False), ("kind", False), ("layers", True), ("parameters\n(B)", True),
                       (f"KV per token\n({plan.kv.dtype})", True), ("state per\nsequence", True)):
        (number_column if right else text_column)(t, col)
    kv_bytes = plan.kv.bytes_per_value
    for r in rows:
        t.add_row(r.part, r.kind, str(r.layers or ""), f"{r.parameters / 1e9:,.3f}",
                  f"{r.kv_values_per_token * kv_bytes + r.index_key_bytes_per_token:,} B"
                  if r.kv_values_per_token else "",
                  f"{r.state_bytes_per_seq / 2**20:,.1f} MiB" if r.state_bytes_per_seq else "")
    console.print(t)


def render_plan(plan: Plan, console: Console) -> None:
    style = "bold green" if plan.fits else "bold red"
    console.print(styled((plan.scenario, "bold"), f": {plan.model.name} on {plan.parallel.replica_gpus} x "
                         f"{plan.gpu} — ", (plan.verdict, style)))
    console.print()

    m = plan.model
    t = _table("Model")
    t.add_row("parameters", f"{m.parameters_used / 1e9:,.3f} B ({m.parameters_source}); derived from the architecture "
              f"{m.parameters_derived / 1e9:,.3f} B, active per token {m.parameters_active_derived / 1e9:,.3f} B"
              + (f"; official {m.parameters_official / 1e9:,.3g} B" if m.parameters_official else ""))
    t.add_row("attention", f"{m.attention}, {m.layers} layers")
    w = plan.weights
    t.add_row("weights", f"{w.format}: {gb_gib(w.total_bytes)} total; "
              f"ideal (parameters x bits) {gb_gib(w.ideal_bytes)}")
    if w.scale_bytes or w.converted_value_bytes:
        t.add_row("", f"quantised values {gb_gib(w.converted_value_bytes)}, scales/zeros {gb_gib(w.scale_bytes)}, "
                  f"unconverted modules {gb_gib(w.unconverted_bytes)}")
    c = plan.checkpoint
    if c.quantization:
        t.add_row("quantisation", f"{c.quantization} ({c.quantization_source})")
    if plan.weight_execution.note:
        t.add_row("runs as", plan.weight_execution.note)
    if c.stored_bytes is not None:
        t.add_row("checkpoint files", f"{gb_gib(c.stored_bytes)} ({c.stored_bytes_source}); derived "
                  f"{gb_gib(c.derived_bytes)} ({c.stored_vs_derived:+.1%})")
    if c.found_as != "catalog":
        t.add_row("read from", f"{c.config_file} ({c.found_as})")
    kv = plan.kv
    t.add_row("KV per token", f"{kv.bytes_per_token:,} B ({kv.bytes_per_token / 1024:,.1f} KiB) = {kv.formula}")
    if kv.state_layers:
        t.add_row("state per sequence", f"{kv.state_bytes_per_seq / 2**20:,.1f} MiB in {kv.state_layers} "
                  "Mamba-2 / linear-attention layers (whatever the sequence's length)")
    if plan.slots:        # llama.cpp / Ollama: a slot's context, not vLLM's max_model_len
        t.add_row("KV per slot", f"{gb_gib(plan.kv_bytes_per_sequence_at_max_model_len)} for "
                  f"{plan.memory.max_model_len:,} tokens" + (" (the whole shared buffer)" if plan.slots.kv_unified
                                                            else " (ctx_size / parallel)" if plan.slots.engine
                                                            == "llama.cpp" else " (num_ctx)"))
    else:
        t.add_row("KV per sequence", f"{gb_gib(plan.kv_bytes_per_sequence_at_max_model_len)} "
                  f"at max_model_len {plan.memory.max_model_len:,}")
    console.print(t)
    _layer_kinds(console, plan)
    console.print()

    mem = plan.memory
    if plan.slots:
        _slot_memory(plan, console)
    else:
        _gpu_memory(plan, console)
    d = plan.kv_demand
    console.print(f"KV demand: {count(d.sequences, 'sequence')} x {d.tokens_per_sequence:,} tokens = "
                  f"{d.tokens:,} tokens = {gb_gib(d.bytes)} ({d.sequences_source})")
    for reason in mem.reasons:
        console.print(f"✗ {reason}", style="red")
    console.print()

    if not plan.slots:    # llama.cpp and Ollama are planned on one device: no split to show
        _render_split(plan, console)

    c = plan.capacity
    t = _table("Capacity (Little's law)")
    t.add_row("in flight", f"{c.arrival_rate_per_s:g} req/s x {c.time_in_system_s:.3g} s = "
              f"{c.requests_in_flight:,.1f} requests (time in system: {c.time_in_system_source})")
    t.add_row("KV needed", f"{c.kv_tokens_needed:,.0f} tokens = {gb_gib(c.kv_bytes_needed)} "
              f"({c.kv_tokens_per_request:,} tokens per request: {c.kv_tokens_per_request_source})")
    if plan.slots:        # a server's slots, not replicas: llama.cpp and Ollama serve on the machine they run on
        a = plan.slots
        t.add_row("slots", f"{count(a.slots, 'slot')} of {a.context_per_slot_tokens:,} tokens"
                  + (" in one unified KV buffer" if a.kv_unified else "") + f": {c.requests_held_per_replica:,} "
                  f"requests at once; the server sustains at most {c.max_arrival_rate_for_memory_per_s:,.3g} req/s "
                  "(requests at once / time in system)")
    else:
        t.add_row("KV capacity", f"{c.kv_capacity_tokens:,} tokens per replica, "
                  f"{count(c.requests_held_per_replica, 'such request')}; "
                  f"memory alone allows {c.max_arrival_rate_for_memory_per_s:,.2f} req/s per replica; "
                  f"replicas for memory: {c.replicas_for_memory}")
    console.print(t)
    console.print()

    s = plan.step_times
    t = _table(f"Step times ({s.model})")
    t.add_row("prefill", f"{s.prefill_ms:,.1f} ms for a {s.prompt_tokens_mean:,.0f}-token prompt")
    t.add_row("decode bound", f">= {s.decode_bandwidth_bound_ms:.2f} ms per step "
              f"(<= {s.decode_bandwidth_bound_tokens_per_s:,.0f} tokens/s): weights per GPU x stages / peak bandwidth")
    t.add_row("decode, batch 1", f"{s.decode_batch1_ms:.2f} ms per step, {s.decode_batch1_tokens_per_s:,.0f} tokens/s")
    t.add_row(f"decode, batch {s.memory_limited_batch}", f"{s.decode_memory_limited_batch_ms:.2f} ms per step, "
              f"{s.decode_memory_limited_tokens_per_s:,.0f} tokens/s ("
              + ("every slot decoding)" if plan.slots else "largest batch KV and max_num_seqs allow)"))
    if s.alltoall_link:
        t.add_row("EP all-to-all", f"dispatch + combine of every MoE layer: {s.alltoall_batch1_ms:.2f} ms of the "
                  f"batch-1 step, {s.alltoall_memory_limited_batch_ms:.2f} ms of the batch-{s.memory_limited_batch} "
                  f"step ({s.alltoall_link})")
    t.add_row("compute-bound from",
              f"batch {s.compute_bound_batch}" if s.compute_bound_batch else "never (bandwidth-bound throughout)")
    t.add_row("priced by", "; ".join(f"{family}: {source}" for family, source in s.sources.items()))
    console.print(t)
    console.print()

    if plan.speculative:
        sp = plan.speculative
        console.print(styled(("Speculative decoding", "bold"), f" ({sp.method}): gamma {sp.num_speculative_tokens}, "
                             f"alpha {sp.acceptance_rate} -> "
                             f"{sp.expected_tokens_per_step:.2f} tokens per verification step = {sp.formula}"))
        console.print(f"  drafting priced as {sp.proposer_cost}", highlight=False)
        console.print(f"  proposer memory: {sp.proposer_memory}", highlight=False)
        console.print()

    if plan.slots:
        _render_slots(plan, console)

    if plan.simulation:
        render_simulation(plan.simulation, console)
    if plan.day:
        render_day(plan.day, console)

    co = plan.cost
    if co is None:
        console.print(styled(("Cost", "bold"), ": none: no replica count was sized (see the sizing verdict)"))
    else:
        price = (f"${dollars(co.price_usd_per_gpu_hour)}/GPU-hour ({co.price_source})"
                 if co.price_usd_per_gpu_hour is not None else "no price known")
        line = (f": {count(co.replicas, 'replica')} x {count(co.gpus // co.replicas, 'GPU')} = "
                f"{count(co.gpus, 'GPU')} at {price}")
        if co.usd_per_hour is not None:
            line += f" = ${dollars(co.usd_per_hour)}/hour"
        if co.usd_per_million_output_tokens is not None:
            line += f"; ${co.usd_per_million_output_tokens:,.3f} per million output tokens ({co.throughput_source})"
        console.print(styled(("Cost", "bold"), line))
    if plan.energy:
        render_energy(plan.energy, console)
    elif plan.energy_unknown:
        console.print(styled(("Energy", "bold"), f": unknown: {plan.energy_unknown}"))
    console.print()
    console.print("Assumptions", style="bold")
    bullets = Table.grid(padding=(0, 1))          # a wrapped assumption stays under its own text
    bullets.add_column(no_wrap=True)
    bullets.add_column(overflow="fold")
    for a in plan.assumptions:
        bullets.add_row("  •", a)
    console.print(bullets)


def _render_split(plan: Plan, console: Console) -> None:
    p = plan.parallel
    t = _table("Parallel split")
    t.add_row("TP x PP x DP", f"{p.tensor_parallel_size} x {p.pipeline_parallel_size} x {p.data_parallel_size} = "
              f"{count(p.gpus_per_replica, 'GPU')} per {'pool' if p.disaggregated else 'replica'}; "
              f"EP {p.expert_parallel_size}; "
              f"{p.kv_heads_per_gpu} KV heads per GPU")
    if p.disaggregated:
        t.add_row("disaggregated", p.disaggregated)
    if p.tp_allreduce_bytes_per_token or p.pp_send_bytes_per_token or p.ep_alltoall_bytes_per_token:
        t.add_row("communication", f"per token per GPU: TP all-reduce {p.tp_allreduce_bytes_per_token:,.0f} B, "
                  f"PP send {p.pp_send_bytes_per_token:,.0f} B, EP all-to-all {p.ep_alltoall_bytes_per_token:,.0f} B")
    console.print(t)
    console.print()


def _memory_table(title: str, parts: list[tuple[str, float]]) -> Table:
    t = Table(title=title, title_justify="left")
    text_column(t, "part")
    number_column(t, "GB")
    number_column(t, "GiB")
    for name, value in parts:
        t.add_row(name, f"{value / GB:,.2f}", f"{value / GiB:,.2f}")
    return t


def _gpu_memory(plan: Plan, console: Console) -> None:
    """A batching engine's GPU memory: vLLM's share of it, then what takes the share, then the KV cache."""
    mem = plan.memory
    parts = [("usable at gpu_memory_utilization " + str(mem.gpu_memory_utilization), mem.usable_bytes),
             ("weights (this GPU's shard)", mem.weights_bytes)]
    if mem.draft_weights_bytes:
        parts.append((f"{mem.draft_what} (speculative_config)", mem.draft_weights_bytes))
    parts += [("activation peak (estimate)", mem.activation_bytes),
             ("CUDA context, workspaces (assumption)", mem.non_torch_bytes)]
    if mem.state_bytes:
        parts.append((f"recurrent state, {count(mem.state_seqs, 'sequence')} (caps max_num_seqs)", mem.state_bytes))
    if plan.lora is not None:
        parts.append((f"LoRA adapters: {plan.lora.slots} slots (max_loras) at rank {plan.lora.rank}", mem.lora_bytes))
    console.print(_memory_table(f"Memory per GPU ({plan.gpu}, {gb_gib(mem.gpu_memory_bytes)})",
                                parts + [("KV cache", mem.kv_cache_bytes)]))
    console.print(f"KV cache: {mem.kv_blocks:,} blocks x {mem.block_size} tokens = {mem.kv_tokens:,} tokens per GPU; "
                  f"{count(mem.max_seqs_at_max_model_len, 'sequence')} at max_model_len {mem.max_model_len:,}")


def _slot_memory(plan: Plan, console: Console) -> None:
    """llama.cpp / Ollama: the device's memory in its own terms (unified memory and the GPU's working-set limit on
    Apple parts), what the server allocates at start, and what is left."""
    mem, a = plan.memory, plan.slots
    if a.unified_memory:
        limit = (f"the GPU may use (working-set limit of {gb_gib(a.memory_bytes)} unified memory)",
                 mem.gpu_memory_bytes)
    else:
        limit = ("device memory (no utilisation share: llama.cpp allocates what it needs)", mem.gpu_memory_bytes)
    runtime = {"apple-gpu": "Metal runtime, buffers (assumption)", "cpu": "runtime, buffers (assumption)"}.get(
        a.device_kind, "CUDA context, buffers (assumption)")
    kv = (f"KV cache (one buffer of {a.context_per_slot_tokens:,} tokens, {plan.kv.dtype})" if a.kv_unified else
          f"KV cache ({a.slots} x {a.context_per_slot_tokens:,} tokens, {plan.kv.dtype})")
    parts = [limit, ("weights" + (" (the layers on the GPU)" if a.partial_offload else ""), mem.weights_bytes),
             (kv, mem.kv_cache_bytes), ("compute buffer (one ubatch, estimate)", mem.activation_bytes),
             (runtime, mem.non_torch_bytes),
             ("left on the device", mem.gpu_memory_bytes - mem.weights_bytes - mem.kv_cache_bytes
              - mem.activation_bytes - mem.non_torch_bytes)]
    if a.host_weights_bytes or a.host_kv_bytes:
        if a.host_memory_bytes:
            parts.append(("host memory", a.host_memory_bytes))
        parts.append(("  weights in host memory" + ("" if a.partial_offload else " (the token embedding)"),
                      a.host_weights_bytes))
        if a.host_kv_bytes:
            parts.append(("  KV cache of the host layers", a.host_kv_bytes))
        if a.host_memory_bytes:
            parts.append(("  left in host memory", a.host_memory_bytes - a.host_weights_bytes - a.host_kv_bytes))
    console.print(_memory_table(f"Memory ({plan.gpu})", parts))


def _render_slots(plan: Plan, console: Console) -> None:
    """llama.cpp / Ollama: the plan in the user's terms."""
    a = plan.slots
    t = _table(f"In short ({a.engine})")
    left = (f"short by {gb_gib(-a.left_bytes)}" if a.left_bytes < 0
            else f"leaving {gb_gib(a.left_bytes)} for the OS and other programs" if a.unified_memory
            else f"leaving {gb_gib(a.left_bytes)} free")
    kind = "unified memory" if a.unified_memory else "device memory"
    t.add_row("memory", f"needs {gb_gib(a.engine_bytes)} of {gb_gib(a.memory_bytes)} of {kind}, {left}"
              + (f" (the GPU may use {gb_gib(a.device_limit_bytes)})" if a.device_limit_bytes < a.memory_bytes
                 else ""))
    t.add_row("slots", (f"{a.slots} sharing one KV buffer of {a.context_per_slot_tokens:,} tokens" if a.kv_unified
                        else f"{a.slots} x {a.context_per_slot_tokens:,} tokens")
              + f"; memory would allow up to {a.largest_context_per_slot_tokens:,} tokens per slot")
    t.add_row("first token", f"{a.ttft_s:.2f} s for a {a.prompt_tokens:,}-token prompt on an idle server")
    t.add_row("per user", ", ".join(f"{s.users} user{'s' if s.users > 1 else ''}: {s.tokens_per_s_per_user:.1f}"
                                    for s in a.speeds) + f" tokens/s (at {a.context_tokens:,} tokens of context)")
    per = "requests (prompt + output) fit in one unified buffer" if a.kv_unified else "slots of this context fit"
    for o in a.options:
        t.add_row(f"  {o.format}", f"weights {gb_gib(o.weights_bytes)}; "
                  + (f"{o.slots_that_fit} {per}; {o.tokens_per_s_at_one_user:.1f} tokens/s for one user"
                     if o.fits else "does not fit with one slot")
                  + (f"; {o.users_at_target} users at the target" if a.target_tokens_per_s_per_user else ""))
    t.add_row("recommendation", a.recommendation)
    if a.load_s is not None:
        t.add_row("cold start", f"{a.load_s:.1f} s to load the model; {a.cold_start_share:.1%} of requests arrive "
                  "after keep_alive of idleness")
    console.print(t)
    console.print()


# A run's requests that met every target, per second: `simulate` and `plan --simulate` both print it, per
# deployment and per replica. "goodput" is only the sizing's highest rate per replica within the SLO.
SLO_MET_RATE = "requests within the SLO, req/s"


def render_simulation(sim: Sizing, console: Console) -> None:
    """The sizing pipeline's answer: verdict, latency percentiles at the operating point, notes."""
    style = "bold" if sim.slo_met is None else "bold green" if sim.slo_met else "bold red"
    console.print(styled(("Sizing", "bold"), ": ", (sim.verdict, style)))
    point = sim.operating_point
    if point is not None:
        m = point.metrics
        t = Table(title=f"Simulated: one replica at {point.rate_per_s:.3g} req/s ({sim.target_rate_per_s:g} req/s over "
                        f"{count(sim.replicas, 'replica')}), {m.num_requests:,} requests", title_justify="left")
        for col in ("ms", "p50", "p95", "p99"):
            (text_column if col == "ms" else number_column)(t, col)
        for name in ("ttft", "itl", "tpot", "e2e", "queue"):
            lat = getattr(m, name)
            t.add_row(name.upper(), *(f"{v:,.1f}" if math.isfinite(v) else "-"      # no gap: one-token replies
                                      for v in (lat.p50_ms, lat.p95_ms, lat.p99_ms)))
        console.print(t)
        console.print(f"throughput per replica: {m.request_throughput_per_s:,.2f} req/s, "
                      f"{m.output_tokens_per_s:,.0f} output tokens/s, {m.total_tokens_per_s:,.0f} total tokens/s")
        if m.slo_met_requests_per_s is not None:
            console.print(f"{SLO_MET_RATE}: {m.slo_met_requests_per_s:,.2f} per replica, "
                          f"{m.slo_met_requests_per_s * sim.replicas:,.2f} per deployment of "
                          f"{count(sim.replicas, 'replica')}")
        if m.lora_holdbacks:
            console.print(f"LoRA hold-backs: {m.lora_holdbacks:,} request-steps waited for an adapter slot "
                          f"({m.lora_held_requests:,} requests; raise max_loras to remove them)")
        if m.num_rejected:
            console.print(rejections_line(m), highlight=False)
    if sim.suggestion:
        console.print(f"  fix: {sim.suggestion}", highlight=False)
    for line in sim.notes:
        console.print(f"  {line}", highlight=False)
    console.print()


def rejections_line(m: MetricsSummary) -> str:
    """How many requests the replica refused and why (they meet no SLO target; the latencies are the others')."""
    return (f"rejected: {count(m.num_rejected, 'request')} of {m.num_requests:,} "
            f"({m.num_rejected / m.num_requests:.1%}; they meet no target, the latencies are the others'): "
            + "; ".join(f"{why} ({n:,})" for why, n in m.rejections))


def render_simulation_metrics(name: str, m: MetricsSummary, console: Console, requests_csv: Path | None,
                              replicas: int = 1) -> None:
    """`sizer simulate`: latency percentiles, then throughput, resources and the SLO. Rates are the whole
    deployment's (`replicas` of them); the SLO-met rate is given per replica too, as `plan --simulate` gives it."""
    lat = Table(title=f"sizer simulate: {name} ({m.num_finished:,} finished, {m.num_rejected:,} rejected)")
    for col in ("latency", "p50 ms", "p95 ms", "p99 ms", "mean ms"):
        (text_column if col == "latency" else number_column)(lat, col)
    for label, lat_pct in (("TTFT", m.ttft), ("ITL", m.itl), ("TPOT", m.tpot), ("E2E", m.e2e), ("queueing", m.queue)):
        values = (lat_pct.p50_ms, lat_pct.p95_ms, lat_pct.p99_ms, lat_pct.mean_ms)
        lat.add_row(label, *(f"{v:,.1f}" if math.isfinite(v) else "-" for v in values))
    console.print(lat)
    if m.num_rejected:
        console.print(rejections_line(m), highlight=False)
    tp = Table(title="throughput and resources")
    text_column(tp, "measure")
    text_column(tp, "value", justify="right")       # a number, or a number with its words (the SLO's share)
    rows = [("requests / s", f"{m.request_throughput_per_s:,.2f}"),
            ("input tokens / s", f"{m.input_tokens_per_s:,.0f}"),
            ("output tokens / s", f"{m.output_tokens_per_s:,.0f}"),
            ("total tokens / s", f"{m.total_tokens_per_s:,.0f}"),
            ("prefix-cache hit rate", f"{m.prefix_cache_hit_rate:.1%}"), ("preemptions", f"{m.num_preemptions:,}"),
            ("mean batch size", f"{m.mean_batch_size:.1f}"),
            ("peak requests in flight (send to last token)", f"{m.peak_concurrent_requests:,}"),
            ("KV cache in use, mean / peak", f"{m.mean_kv_usage:.0%} / {m.peak_kv_usage:.0%}"),
            ("simulated span", f"{m.duration_s:,.1f} s")]
    if m.lora_holdbacks:
        rows.append(("LoRA hold-backs (no adapter slot)", f"{m.lora_holdbacks:,} request-steps, "
                     f"{m.lora_held_requests:,} requests"))
    if m.slo is not None:
        rows += [("requests meeting every SLO target", f"{m.slo_share:.1%} (need {m.slo.required_share:.0%}): "
                  + ("met" if m.slo_met else "NOT met"))]
        if m.itl_share is not None:
            rows.append(("token gaps within the ITL target", f"{m.itl_share:.1%} (need {m.slo.required_share:.0%})"))
        rows.append((SLO_MET_RATE, f"{m.slo_met_requests_per_s:,.2f} per deployment"
                     + (f" ({replicas} replicas: {m.slo_met_requests_per_s / replicas:,.2f} per replica)"
                        if replicas > 1 else " (1 replica)")))
    for row in rows:
        tp.add_row(*row)
    console.print(tp)
    if requests_csv is not None:
        console.print(f"per-request records: {requests_csv}")


def render_search(result: SearchResult, scenario_path: str, console: Console, show_rejected: bool,
                  traffic_flags: str) -> None:
    """`sizer search`: the ranked configurations, the rejected, the recommendation; `traffic_flags`: the workload and
    SLO flags the search was given, which its re-check command repeats."""
    ok = [o for o in result.outcomes if o.status == "ok"]
    rejected = [o for o in result.outcomes if o.status != "ok"]
    if result.by_device_memory:
        return _render_slot_search(result, scenario_path, console, show_rejected, ok, rejected, traffic_flags)
    narrow = console.width < WIDE_SEARCH
    table = Table(title=f"{result.scenario}: {len(result.outcomes)} configurations for "
                        f"{result.target_rate_per_s:g} req/s, "
                        f"{result.required_share:.0%} of requests within the SLO", title_justify="left",
                  caption="goodput: req/s per replica; rep: replicas; $/Mtok: $ per million output tokens; TTFT, "
                          + ("ITL (token gaps), E2E" if narrow else "ITL (token gaps), TPOT, E2E")
                          + ": p95 ms at the operating point; ◆ Pareto front of cost per hour against p95 E2E"
                          + ("; ranked by cost (--wide: rank, GPUs per replica and TPOT)" if narrow else ""),
                  caption_justify="left", box=None if narrow else box.HEAVY_HEAD, pad_edge=not narrow)
    money = lambda v: "-" if v is None else f"{v:,.2f}"  # noqa: E731
    # (header, cell, shown in fewer than WIDE_SEARCH columns): the rank is the row's order, GPUs per replica
    # GPUs / rep (and the label's TP x PP); TPOT, the per-request mean, is a wide column beside the ITL's gaps
    columns = [("#", lambda i, o: str(i), False),
               ("", lambda i, o: "◆" if o.pareto else "", True),
               ("configuration", lambda i, o: o.candidate.label, True),
               ("GPU/rep", lambda i, o: str(o.gpus_per_replica), False),
               ("goodput", lambda i, o: ("≥ " if o.binding == "none" else "") + f"{o.goodput_rate_per_s:.2f}", True),
               ("rep", lambda i, o: str(o.replicas), True), ("GPUs", lambda i, o: str(o.gpus), True),
               ("$/hour", lambda i, o: money(o.usd_per_hour), True),
               ("$/Mtok", lambda i, o: money(o.usd_per_million_output_tokens), True),
               ("TTFT", lambda i, o: f"{o.ttft_p95_ms:,.0f}", True),
               ("ITL", lambda i, o: "-" if o.itl_p95_ms is None else f"{o.itl_p95_ms:.1f}", True),
               ("TPOT", lambda i, o: f"{o.tpot_p95_ms:.1f}", False),
               ("E2E", lambda i, o: f"{o.e2e_p95_ms:,.0f}", True), ("binds", lambda i, o: o.binding, True)]
    columns = [c for c in columns if c[2] or not narrow]
    for name, _, _ in columns:
        (text_column if name in ("", "configuration", "binds") else number_column)(table, name)
    for i, o in enumerate(ok, 1):
        table.add_row(*(cell(i, o) for _, cell, _ in columns))
    console.print(table)
    _render_rejected(rejected, console, show_rejected)
    best = result.recommended
    if best:
        console.print(styled(("recommended", "bold green"), f": {best.replicas} x {best.candidate.label} = "
                             f"{count(best.gpus, 'GPU')}, ${best.usd_per_hour:,.2f}/hour; binds on {best.binding}"))
        console.print(f"re-check: sizer plan {scenario_path} {_rechecked(best, traffic_flags)} --simulate")
    else:
        console.print("no priced configuration meets the SLO", style="bold red")
    for note in result.notes:
        console.print(f"note: {note}", style="dim")


def _render_rejected(rejected: list[Outcome], console: Console, show_rejected: bool) -> None:
    """The rejected configurations counted by what binds, and each with its reason when asked (--all)."""
    counts = Counter(o.binding for o in rejected)
    console.print(f"rejected: {len(rejected)} ({', '.join(f'{k} {v}' for k, v in counts.most_common()) or 'none'})")
    if show_rejected:
        for o in rejected:
            console.print(f"  ✗ {o.candidate.label}: {o.binding}: {o.reason}")


def _rechecked(best: Outcome, traffic_flags: str) -> str:
    """The plan flags of the recommended configuration, and the search's own workload and SLO flags."""
    return " ".join(f for f in (best.candidate.plan_flags(), traffic_flags) if f)


def _render_slot_search(result: SearchResult, scenario_path: str, console: Console, show_rejected: bool,
                        ok: list[Outcome], rejected: list[Outcome], traffic_flags: str) -> None:
    """llama.cpp / Ollama: the passing configurations smallest machine first, in the slot answers' terms."""
    table = Table(title=f"{result.scenario}: {len(result.outcomes)} configurations for {result.target_rate_per_s:g} "
                        "req/s", title_justify="left",
                  caption="memory: the machine's (unified where the GPU shares it); left: what the engine leaves of "
                          "it; tokens/s: per user with every slot busy; TTFT: the mean prompt on an idle server",
                  caption_justify="left")
    gib = lambda nbytes: f"{nbytes / GiB:,.1f} GiB"  # noqa: E731
    for name in ("#", "configuration", "memory", "left", "tokens/s", "TTFT s", "binds"):
        (text_column if name in ("configuration", "binds") else number_column)(table, name)
    for i, o in enumerate(ok, 1):
        table.add_row(str(i), o.candidate.label, gib(o.device_memory_bytes), gib(o.slots.left_bytes),
                      f"{o.tokens_per_s_per_user:.1f}", f"{o.slot_ttft_ms / 1e3:.2f}", o.binding)
    console.print(table)
    _render_rejected(rejected, console, show_rejected)
    best = result.recommended
    if best:
        console.print(styled(("recommended", "bold green"), f": {best.candidate.label}: "
                             f"{best.tokens_per_s_per_user:.1f} tokens/s per user, first token in "
                             f"{best.slot_ttft_ms / 1e3:.2f} s; binds on {best.binding}"))
        console.print(f"re-check: sizer plan {scenario_path} {_rechecked(best, traffic_flags)} --simulate "
                      f"(the scenario set to {count(best.candidate.slots, 'slot')})")
    else:
        console.print("no configuration meets the targets", style="bold red")
    for note in result.notes:
        console.print(f"note: {note}", style="dim")


def render_validation(report, console: Console) -> None:
    """`sizer validate`: measured against predicted (`report` is engine.validate's ValidationReport)."""
    table = Table(title=f"sizer validate: {report.model} on {report.device}, {report.num_requests} requests")
    for col in ("metric", "measured\n(engine)", "predicted\n(simulator)", "relative\nerror",
                "at the engine's\nstep speed", "relative\nerror"):
        (text_column if col == "metric" else number_column)(table, col)
    for r in report.rows:
        table.add_row(r.metric, f"{r.measured:,.2f}", f"{r.predicted:,.2f}", f"{r.relative_error:+.1%}",
                      f"{r.at_engine_speed:,.2f}", f"{r.at_engine_speed_error:+.1%}")
    console.print(table)
    replay = report.replay
    console.print(f"The engine's own {replay.steps:,} steps priced at {replay.predicted_s:.2f} s against "
                  f"{replay.measured_s:.2f} s measured ({replay.relative_error:+.1%}: the step pricing's error); "
                  f"the last two columns price every step {replay.engine_speed:.3f} times: the scheduler's error "
                  "and the profile's shape alone.")
    pool = f"KV pool {report.num_blocks:,} blocks"
    if report.num_blocks_limit:
        pool += f" ({report.num_blocks_requested:,} from the memory budget or --num-blocks, {report.num_blocks_limit})"
    console.print(f"{pool}; profile {report.profile}; engine time {report.engine_time_s:.1f} s (device clock); "
                  f"{report.cached_prompt_tokens:,} prompt tokens from the prefix cache; "
                  f"{report.mixed_steps} steps mixed prefill chunks with decodes; {report.preemptions} preemptions")
    if report.out_of_range_steps:
        console.print(f"warning: {report.out_of_range_steps} of {report.steps_predicted} predicted steps fell "
                      "outside the profile's measured range and were extrapolated", style="yellow")


SOURCE_NAMES = {"model": "model", "gpu": "GPU", "gpus_per_replica": "GPUs per replica"}


def check_summary(result: CheckResult, columns: int = WIDE_COLUMNS) -> str:
    """What was checked, each rule's verdict, the fixes of failing rules, one closing line; each entry wrapped to
    `columns` under its own text (a word is split only when it is longer than a line: a long field path is folded)."""
    def wrap(first: str, text: str, indent: int | None = None) -> list[str]:
        return textwrap.wrap(text, columns, initial_indent=first, subsequent_indent=" " * (indent or len(first)),
                             break_long_words=True, break_on_hyphens=False) or [first]
    lines = wrap("", f"sizer check {result.file} ({result.kind}): {result.summary}", 2)
    lines += [line for s in result.sources
              for line in wrap("  ", f"{SOURCE_NAMES[s.setting]} {s.value}: from {s.source}", 4)]
    width = max(len(r.name) for r in result.rules)
    for r in result.rules:
        lines += wrap(f"  {MARKS[r.status]} {r.name:<{width}}  ", ("skipped: " if r.status == "skip" else "")
                      + r.message)
        if r.fixes:
            lines += wrap(f"    {' ' * width}  fix: ", r.fixes[0])
            for fix in r.fixes[1:]:
                lines += wrap(f"    {' ' * width}   or: ", fix)
    for note in result.notes:
        lines += wrap("  note: ", note)
    failed = [r.name for r in result.rules if r.status == "fail"]
    lines += wrap("", f"FAIL: {', '.join(failed)} ({len(failed)} of {len(result.rules)} rules)" if failed
                  else f"PASS: {sum(r.status == 'pass' for r in result.rules)} rules passed, "
                       f"{sum(r.status == 'skip' for r in result.rules)} skipped")
    return "\n".join(lines)


def render_comparison(c: Comparison, console: Console) -> None:
    """`sizer compare`: each measured metric beside sizer's prediction and the relative error."""
    which = f" ({c.benchmark})" if c.benchmark else ""
    notes = "".join(f"\nnot modelled: {note}" for note in c.not_modelled)
    t = Table(title=f"sizer compare: {c.result_file}{which} against {c.scenario}", title_justify="left",
              caption=f"simulated: {c.num_requests:,} requests, {c.workload}; lengths from {c.lengths_from}. "
                      f"error = (predicted - measured) / measured{notes}", caption_justify="left")
    for col in ("metric", "measured", "predicted", "error"):
        (text_column if col == "metric" else number_column)(t, col)
    for m in c.metrics:
        t.add_row(m.metric, f"{m.measured:,.2f}", "-" if m.predicted is None else f"{m.predicted:,.2f}",
                  "-" if m.error is None else f"{m.error:+.1%}")
    console.print(t)
