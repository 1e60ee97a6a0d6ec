"""What prices an engine step for a resolved scenario: a calibrated profile, kernel tables (the scenario's own
folder or the bundled ones), or the roofline; and the bundled engine's whole step on a device's own tables."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Protocol

from simulator.step_batch import StepTimeModel
from sizer.analytic.format_support import Execution
from sizer.analytic.formats import WeightFormat
from sizer.analytic.memory import KVLayout, LoraMemory, WeightMemory
from sizer.analytic.offload import Offload
from sizer.analytic.parallel import ParallelConfig
from sizer.errors import InputError
from sizer.inputs import preloaded
from sizer.inputs.hardware import HardwareSpec, measured_host_cpu
from sizer.inputs.model_spec import ModelSpec
from sizer.inputs.scenario import ENGINE_NAMES
from sizer.kinds import kind
from sizer.timing.cuda_graphs import CudaGraphPadding
from sizer.timing.kernel_step import BundledEngineStepTimeModel, KernelTableStepTimeModel, SharedMoeRows
from sizer.timing.kernel_tables import (
    KernelTables,
    KernelTablesHeader,
    bundled_folders,
    bundled_tables_dir,
    cached_kernel_tables,
    read_header,
)
from sizer.timing.roofline import (
    MXFP8_ACTIVATED_MOE_DTYPE,
    STEP_OVERHEAD_S,
    TABLES_STEP_OVERHEAD_S,
    RooflineStepTimeModel,
    moe_dtype,
)
from sizer.words import listed

if TYPE_CHECKING:      # the type only: a scenario without a calibrated profile loads none (sizer/kinds.py)
    from sizer.timing.profile import CalibrationProfile


class EngineName(Protocol):
    engine: str                     # vllm, sglang, tensorrt-llm, llama.cpp, ...
    max_num_seqs: int               # sequences a step (an attention-DP rank's share) holds at most
    max_num_batched_tokens: int     # its token budget


class Deployment(Protocol):
    """What the step-time stage reads of a resolved deployment (sizer/sizing/resolve.py `Resolved`, a later stage,
    has these fields)."""
    file: str | None                # the scenario's file, what a refusal names
    step_model_mode: str            # hardware.step_model: auto, kernel_tables or roofline
    model: ModelSpec
    hardware: HardwareSpec
    parallel: ParallelConfig
    weight_format: WeightFormat
    execution: Execution            # how the engine runs the format: its MXFP4 MoE kernel (moe_kernel)
    group_size: int
    engine: EngineName
    weights: WeightMemory
    kv: KVLayout
    calibrated_profile: CalibrationProfile | None
    offload: Offload | None
    lora: LoraMemory | None
    kernel_tables: KernelTables | None
    cuda_graph_batch_sizes: tuple[int, ...]   # deployment.cuda_graph_batch_sizes; () when not stated


def pricing_hardware(r: Deployment) -> HardwareSpec:
    """The GPU's datasheet figures; on the host CPU, with kernel tables `sizer calibrate` measured there, the
    ceilings it measured (the roofline then prices only what the tables lack)."""
    engine = r.kernel_tables.header.bundled_engine if r.kernel_tables is not None else None
    if r.hardware.has_datasheet or engine is None:
        return r.hardware
    return measured_host_cpu(engine.matmul_flops_per_s, engine.copy_bytes_per_s,
                             f"measured by sizer calibrate ({r.kernel_tables.path})")


def roofline_for(r: Deployment, step_overhead_s: float = STEP_OVERHEAD_S) -> RooflineStepTimeModel:
    """The roofline step-time model of a resolved scenario."""
    return RooflineStepTimeModel(r.model, pricing_hardware(r), r.weight_format, r.weights, r.kv, r.parallel,
                                 r.group_size, step_overhead_s=step_overhead_s, offload=r.offload, lora=r.lora,
                                 runs=r.execution)


# How close the tables and the roofline come, per engine (docs/fidelity.md): benchmarks/fidelity_vllm.py on the 15
# public vLLM 0.15.1 H100 runs and benchmarks/saturation.py on TensorRT-LLM's published max-load rows
TABLES_VS_ROOFLINE = {
    "vllm": ("on the public vLLM 0.15.1 H100 runs the tables give E2E 4.1%, TTFT 4.5%, ITL 4.8% median error, the "
             "roofline 5.9%, 6.8%, 5.8%; TTFT p99 comes out low on 14 of the 15 runs (18.8% median error: the long "
             "tails of the runs' first stages have no cause found and are not modelled); on InferenceMAX's public "
             "closed-loop gpt-oss-120b points TPOT is 1-3% slow median on H100, H200 and B200 (3-4% median absolute "
             "error), TTFT 5-21% low (docs/fidelity.md)"),
    "tensorrt-llm": ("on TensorRT-LLM's published maximum-load rows the tables give 3.6% median error in "
                     "throughput on the dense rows (the roofline 11.5% when last measured), 3.1% on the MoE rows with "
                     "attention DP, two of them beyond 20%; on InferenceMAX's public closed-loop gpt-oss-120b B200 "
                     "points TPOT is 8% slow median (docs/fidelity.md, docs/moe.md)"),
}


def kernel_tables_for(r: Deployment) -> KernelTables | None:
    """The bundled kernel tables measured on the scenario's GPU in its engine, if any (a sweep worker: as its
    driver loaded them, sizer/inputs/preloaded.py)."""
    return engine_tables(r.hardware.id, r.engine.engine)


def engine_tables(gpu: str, engine: str) -> KernelTables | None:
    """The bundled kernel tables of a GPU profile id and an engine, if any; a sweep worker's as its driver loaded
    them (sizer/inputs/preloaded.py)."""
    if preloaded.has_kernel_tables(gpu, engine):
        return preloaded.kernel_tables(gpu, engine)
    return bundled_tables(gpu, engine)


def bundled_tables(gpu: str, engine: str) -> KernelTables | None:
    """The kernel tables bundled for a GPU profile id and an engine, if any: each row's numbers read on its first
    lookup (tests check the bundled folders whole)."""
    folder = bundled_tables_dir(gpu, engine)
    return cached_kernel_tables(folder, whole=False) if folder else None


def bundled_header(gpu: str, engine: str) -> KernelTablesHeader | None:
    """The header of the kernel tables bundled for a GPU profile id and an engine, if any (a sweep worker: as its
    driver read it)."""
    if preloaded.has_kernel_header(gpu, engine):
        return preloaded.kernel_header(gpu, engine)
    folder = bundled_tables_dir(gpu, engine)
    return read_header(folder) if folder else None


def step_model_for(r: Deployment, roofline: RooflineStepTimeModel | None = None) -> StepTimeModel:
    """What prices a step: the calibrated profile when the scenario names one (roofline outside
    its measured range); else the scenario's own kernel-tables folder (`hardware.kernel_tables`); else, unless
    `hardware.step_model: roofline`, the bundled kernel tables of the GPU and engine (roofline for what they
    lack; `kernel_tables` refused where none are bundled); else the roofline. Decode steps padded to the
    CUDA-graph batch sizes the deployment states (`deployment.cuda_graph_batch_sizes`, sizer/timing/cuda_graphs.py)."""
    step = _unpadded_step_model(r, roofline or roofline_for(r))
    if not r.cuda_graph_batch_sizes:
        return step
    p = r.parallel
    return CudaGraphPadding(step, r.cuda_graph_batch_sizes, p.dp if p.experts_span_dp else 1,
                            r.engine.max_num_seqs, r.engine.max_num_batched_tokens)


def _unpadded_step_model(r: Deployment, roofline: RooflineStepTimeModel) -> StepTimeModel:
    if r.calibrated_profile is not None:
        return kind("calibrated profile").CalibratedStepTimeModel(r.calibrated_profile, num_layers=r.model.num_layers,
                                                                  fallback=roofline)
    tables = r.kernel_tables
    if tables is None and r.step_model_mode != "roofline":
        tables = kernel_tables_for(r)
        if tables is None:
            refuse_missing_tables(r)
    if tables is not None:
        return KernelTableStepTimeModel(tables, roofline, shared_moe_rows(r),
                                        TABLES_STEP_OVERHEAD_S.get(r.engine.engine))
    return roofline


# MoE kernels an engine runs that another engine's bundled tables measured in more expert shapes, by (engine, the
# experts' table dtype): vLLM feeds MXFP4 experts MXFP8 activations on Blackwell and runs FlashInfer's TRT-LLM-gen
# MoE (trtllm_fp4_block_scale_moe: format_support.MXFP4_MOE), as SGLang's flashinfer_mxfp4 runner does; vLLM
# 0.24.0's B200 and GB200 tables measured it for DeepSeek-V4-Flash's and -Pro's expert shapes only, SGLang 0.5.14's
# for gpt-oss's too. On those two shapes (aiconfigurator-core 0.12.0, balanced, every split and token count both
# hold: 648 points a GPU; SGLang's rows there are its DeepSeek-V4 MXFP4 lane, sglang_mxfp4_flashinfer_trtllm_moe,
# gpt-oss's its sglang_flashinfer_trtllm_moe) SGLang's latency is 0.90x vLLM's on the B200 and on the GB200 (median;
# 0.89-0.97 per token count from 16 to 1,024 tokens, 0.85 from 2,048 on, 0.62-0.89 at one token): the borrowed rows
# may price a prompt's experts some 15% fast.
SHARED_MOE_KERNELS = {("vllm", MXFP8_ACTIVATED_MOE_DTYPE): "sglang"}


def shared_moe_rows(r: Deployment) -> SharedMoeRows | None:
    """The rows of the MoE kernel the scenario's engine shares with another engine's bundled tables
    (SHARED_MOE_KERNELS), for the shapes its own tables lack; None where it shares none, or for tables the scenario
    brought (hardware.kernel_tables: measured as they were)."""
    runs = r.execution
    dtype = moe_dtype(r.weight_format.name, r.weight_format.scheme.scales, runs.expert_activations, runs.moe_kernel)
    other = SHARED_MOE_KERNELS.get((r.engine.engine, dtype))
    if other is None or r.kernel_tables is not None or r.model.moe is None:
        return None
    shared = engine_tables(r.hardware.id, other)
    if shared is None:
        return None
    return SharedMoeRows(f"{ENGINE_NAMES.get(other, other)}'s {shared.header.engine_version} tables",
                         {key: shared.moe[key] for key in shared.moe if key[0] == dtype},      # only these rows read
                         {key: shared.moe_skewed[key] for key in shared.moe_skewed if key[1] == dtype})


def refuse_missing_tables(r: Deployment) -> None:
    """`hardware.step_model: kernel_tables` where no tables are bundled for the GPU and engine: refused, never
    priced otherwise."""
    if r.step_model_mode == "kernel_tables":
        raise InputError(r.file, "hardware.step_model",
                         f"kernel_tables: none are bundled for {r.hardware.id} in {r.engine.engine} "
                         f"(bundled for it: {', '.join(bundled_folders(r.hardware.id)) or 'none'}); use auto or "
                         "roofline, or measure them (sizer calibrate, sizer import-kernels)")


def step_sources(step: StepTimeModel) -> dict[str, str]:
    """Operator family -> what prices it, for the plan (a calibrated profile prices every operator it measured)."""
    return getattr(step, "sources", None) or {"all operators": step.name}


def kernel_tables_note(r: Deployment) -> str | None:
    """What the plan says about kernel tables: which priced the steps, or that the GPU has some unused
    (read from the header alone: a roofline plan does not load the tables)."""
    if r.calibrated_profile is not None:
        return None
    if r.kernel_tables is not None:
        return own_tables_note(r)
    header = bundled_header(r.hardware.id, r.engine.engine)
    mode = r.step_model_mode
    if header is None:          # (kernel_tables asked for here was refused by step_model_for)
        return (f"step times: the roofline; no kernel tables are bundled for {r.hardware.id} in {r.engine.engine}"
                + (" (hardware.step_model: auto)" if mode == "auto" else ""))
    tables = header.description
    if mode == "roofline":
        note = (f"step times: the roofline (hardware.step_model: roofline); {tables} are bundled for this GPU "
                "(hardware.step_model: auto uses them)")
    else:
        note = f"step times: {tables} (hardware.step_model: {mode}), the roofline for what they lack"
    checked = TABLES_VS_ROOFLINE.get(r.engine.engine)
    return f"{note}; {checked}" if checked else note


def own_tables_note(r: Deployment) -> str:
    """The scenario's own kernel-tables folder: what it is, where, a tensor-parallel size its shards were not
    timed at (`sizer calibrate --tp-sizes`), and an engine it was not measured in."""
    h = r.kernel_tables.header
    note = (f"step times: {h.description}, from {r.kernel_tables.path} (hardware.kernel_tables); the roofline "
            "prices what they lack")
    timed = h.bundled_engine.tp_sizes if h.bundled_engine is not None else None
    if timed is not None and r.parallel.tp not in timed:
        note += (f"; sizer calibrate timed the shards of TP {listed(timed)} only: TP {r.parallel.tp}'s "
                 "are read off other shapes (interpolated, or the smallest measured below it) or priced by the "
                 "roofline (the 'priced by' line says which)")
    if h.engine != r.engine.engine:         # sizer calibrate's (resolve.checked_kernel_tables)
        note += (f"; measured in {h.engine}, the scenario serves {r.engine.engine}: the engines' kernels may differ "
                 "and the tables do not say by how much")
    return note


def engine_roofline(r: Deployment, tables: KernelTables) -> RooflineStepTimeModel:
    """The roofline that prices what a device's tables lack, for the bundled engine: the GPU's datasheet, or on
    the host CPU the ceilings calibrate measured (pricing_hardware); no per-step sampler constant (the fitted
    overhead holds the engine's own)."""
    return roofline_for(dataclasses.replace(r, kernel_tables=tables), step_overhead_s=0.0)


def engine_step_model(r: Deployment, tables: KernelTables) -> BundledEngineStepTimeModel:
    """The bundled engine's whole step on the device the tables were calibrated on."""
    engine = tables.header.bundled_engine
    assert engine is not None, "only tables sizer calibrate measured describe the bundled engine"
    inner = KernelTableStepTimeModel(tables, engine_roofline(r, tables))
    return BundledEngineStepTimeModel(inner, engine.overhead, engine.fitted_layers,
                                      engine.limits.max_num_batched_tokens, engine.limits.max_num_seqs)
