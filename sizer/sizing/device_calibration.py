"""`sizer calibrate` without `--model`: one calibration of a device that prices every model.

The bundled engine's operators are timed by shape on the device (engine/device_tables.py): every dense
GEMM and lm_head (n, k) and every attention head shape of the models asked for (by default the
catalog's) at the tensor-parallel sizes asked for (by default 1, 2, 4 and 8: `TP_SIZES`), the
all-reduce across the GPUs present, and the element-wise cost. They are written as kernel tables
(`sizer/timing/kernel_tables.py`), the format the bundled vLLM tables use, so a scenario on any model
with those shapes is priced from them (`hardware.kernel_tables`). Then whole engine steps of one
reference model are timed and what they cost beyond the tables (host work, sampling, launches) is fitted
once (`BundledEngine.overhead`): `sizer validate --kernel-tables` replays the engine on any model with
it. MoE experts are not timed (the roofline prices them: `KernelTableStepTimeModel.roofline_parts` names
them).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.config import engine_config
from sizer.inputs.hardware import HardwareSpec
from sizer.inputs.model_spec import ModelSpec
from sizer.inputs.scenario import scenario_from_dict
from sizer.sizing.resolve import Resolved, resolve
from sizer.sizing.torch_engine import TorchEngine
from sizer.timing.aiconfigurator_import import write_tables
from sizer.timing.calibrated_tables import tables_dir_name, tables_header
from sizer.timing.kernel_shapes import model_shapes
from sizer.timing.kernel_step import BundledEngineStepTimeModel, KernelTableStepTimeModel
from sizer.timing.kernel_tables import TABLES, TP_SIZES, BundledEngine, KernelTables, load_kernel_tables
from sizer.timing.overhead_fit import fit_overhead, step_error
from sizer.timing.profile import TABLES_ONLY, Limits, plain
from sizer.timing.step_model import engine_roofline


@dataclass(frozen=True)
class DeviceCalibration:
    models: tuple[ModelSpec, ...]       # whose shapes are timed
    reference: ModelSpec                # whose whole steps the engine overhead is fitted to
    device: Any                         # engine.device.Device (torch: loaded by torch_engine())
    device_id: str                      # 'cpu' or the hardware profile id
    hardware: HardwareSpec | None       # the GPU's profile (None on the CPU)
    kernels: Any                        # engine.kernels.Kernels
    limits: Limits
    allreduce_rows: tuple[dict, ...] = ()   # engine.collectives.allreduce_table's rows, across `gpus`
    gpus: int = 1
    seed: int = 0
    tp_sizes: tuple[int, ...] = TP_SIZES    # whose shards are timed (the reference's steps run at TP 1)


def reference_scenario(model: str, device_id: str, limits: Limits) -> Resolved:
    """The reference model served on the device as the overhead sweep runs it (one replica, TP 1)."""
    s = scenario_from_dict({
        "name": "calibration", "model": model, "hardware": device_id,
        "deployment": {"max_model_len": limits.max_model_len, "max_num_seqs": limits.max_num_seqs,
                       "max_num_batched_tokens": limits.max_num_batched_tokens, "block_size": limits.block_size,
                       "enable_chunked_prefill": True, "enable_prefix_caching": True,
                       "preemption_mode": "recompute"},
        "workload": {"arrival": {"process": "poisson", "rate_per_s": 1},
                     "prompt_tokens": {"distribution": "fixed", "value": 1},
                     "output_tokens": {"distribution": "fixed", "value": 1}}}, None)
    return resolve(s)


def _header(eng: TorchEngine, c: DeviceCalibration, ceilings: Any, engine: BundledEngine | None) -> dict:
    """A device's tables.yaml (`ceilings`: engine.device_tables.ElementwiseMeasured) with, once fitted, the
    bundled engine section."""
    header = tables_header(c.device_id, c.device.name, c.kernels.name, eng.torch.__version__,
                           ceilings.copy_bytes_per_s, ceilings.norm_latency_s, [], dt.date.today().isoformat())
    if engine is not None:
        header["bundled_engine"] = plain(engine)
    return header


def calibrate_device(eng: TorchEngine, c: DeviceCalibration, out: Path,
                     log: Callable[[str], None] = lambda _: None) -> KernelTables:
    """Time the shapes, write the tables, fit the engine overhead on the reference model; the tables as
    written (their `path`: the folder). `eng`: the torch engine (sizer/sizing/torch_engine.py)."""
    torch, dtab = eng.torch, eng.device_tables
    shapes = model_shapes(c.models, c.tp_sizes)
    lim = c.limits
    table_shapes = dtab.TableShapes(gemms=tuple(sorted(shapes.gemms)),
                                    heads=tuple(dtab.HeadShape(*a) for a in sorted(shapes.attention)),
                                    hidden_size=c.reference.hidden_size)
    grid = dtab.grid(lim.max_num_batched_tokens, lim.max_num_seqs, lim.max_model_len, lim.block_size)
    torch.manual_seed(c.seed)
    rows = dtab.measure(table_shapes, c.kernels, c.device, grid, log)
    rows["allreduce"] = dtab.allreduce_rows(list(c.allreduce_rows), c.gpus)
    log("copy bandwidth, matrix rate and a small kernel's latency")
    ceilings = dtab.elementwise(table_shapes, c.kernels, c.device)
    folder = out / tables_dir_name(c.device_id)
    for name in TABLES:                             # an earlier calibration's tables, which these replace
        (folder / f"{name}.csv.gz").unlink(missing_ok=True)
    write_tables(folder, _header(eng, c, ceilings, None), rows)

    log(f"whole steps of {c.reference.name} through the runner (the engine's overhead)")
    threads = torch.get_num_threads() if c.device.kind == "cpu" else None
    engine = BundledEngine(kernels=c.kernels.name, dtype=dtab.table_dtype(c.device),
                           matmul_flops_per_s=ceilings.matmul_flops_per_s, copy_bytes_per_s=ceilings.copy_bytes_per_s,
                           limits=lim, fitted_on=c.reference.name, fitted_layers=c.reference.num_layers,
                           overhead=TABLES_ONLY, threads=threads, tp_sizes=shapes.tp_sizes)
    tables = load_kernel_tables(folder)
    tables = dataclasses.replace(tables, header=dataclasses.replace(tables.header, bundled_engine=engine))
    r = reference_scenario(c.reference.name, c.device_id, lim)
    inner = KernelTableStepTimeModel(tables, engine_roofline(r, tables))
    model = eng.model.Transformer(engine_config(c.reference), c.device.dtype, c.device.torch_device, c.kernels,
                        lim.max_model_len, c.seed)
    records = eng.calibrate.step_sweep(model, c.device, lim, c.seed)
    components = [inner.step_time(rec.batch) for rec in records]
    fit = fit_overhead(records, components)
    fitted = BundledEngineStepTimeModel(inner, fit, c.reference.num_layers, lim.max_num_batched_tokens,
                                        lim.max_num_seqs)
    fit = dataclasses.replace(fit, step_error_p50=step_error(records, fitted))
    engine = dataclasses.replace(engine, overhead=fit)
    write_tables(folder, _header(eng, c, ceilings, engine), {})
    return dataclasses.replace(tables, header=dataclasses.replace(tables.header, bundled_engine=engine))
