"""`sizer calibrate`: microbenchmark the bundled engine on this machine's GPU (or CPU) and
write a calibrated profile into a user directory, never into the installed package (see
docs/engine.md)."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from engine.profile import Limits, ProfileHeader, load_profile, read_header
from simulator.errors import excerpt
from sizer.cli.flags import check_model, check_range
from sizer.errors import InputError
from sizer.inputs.hardware import load_hardware
from sizer.inputs.model_spec import load_model
from sizer.inputs.scenario import MAX_BATCH_TOKENS, MAX_SEQUENCES, MAX_TOKENS
from sizer.sizing.aiconfigurator_import import write_tables
from sizer.sizing.profile_kernels import KERNELS_SUBDIR, kernel_tables_from_profile


def user_calibrated_dir() -> Path:
    """Where `sizer calibrate` writes without `--out`: `$SIZER_HOME/calibrated`, else
    `$XDG_DATA_HOME/sizer/calibrated`, else `~/.local/share/sizer/calibrated`."""
    if os.environ.get("SIZER_HOME"):
        return Path(os.environ["SIZER_HOME"]) / "calibrated"
    data = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data) / "sizer" / "calibrated"


# Largest step covered: (max_num_batched_tokens, max_num_seqs, max_model_len) by device kind.
DEFAULT_LIMITS = {"cuda": (2048, 256, 8192), "cpu": (256, 64, 2048)}


def command(
    model: str = typer.Option(..., help="catalog name, config.json, checkpoint folder or cached HF id"),
    gpu: str | None = typer.Option(None, help="the GPU in this machine, by profile id or alias (h100, h200); "
                                              "refuses if it is absent or another"),
    device: str | None = typer.Option(None, help="'cpu' to calibrate on the CPU instead of a GPU"),
    tp: int = typer.Option(1, "--tp", min=1, help="tensor_parallel_size: shapes are one GPU's shard; "
                                                  "all-reduce is timed across tp devices"),
    scale: float = typer.Option(1.0, help="share of the model's layers to build (0-1], for CPU runs of big models; "
                                          "the profile records it"),
    out: Path | None = typer.Option(None, "--out", help="folder the profile folder is written into "
                                       "(default $SIZER_HOME/calibrated, else $XDG_DATA_HOME/sizer/calibrated, "
                                       "else ~/.local/share/sizer/calibrated)"),
    max_num_batched_tokens: int | None = typer.Option(None, min=1,
                                                      help="largest step in tokens to measure (GPU 2048, CPU 256)"),
    max_num_seqs: int | None = typer.Option(None, min=1, help="most sequences per step to measure (GPU 256, CPU 64)"),
    max_model_len: int | None = typer.Option(None, min=2, help="longest context to measure (GPU 8192, CPU 2048)"),
    block_size: int = typer.Option(16, min=1, help="KV block size"),
    kernels: str = typer.Option("auto", help="auto (Triton on a GPU, torch on a CPU), triton or torch"),
    seed: int = typer.Option(0, help="random seed for weights and inputs"),
) -> None:
    """Measure the engine's kernels here and write `<device>-<model>-tp<N>/profile.yaml` + CSV tables."""
    # the sweep's shapes come from these: the scenario's own bounds keep them representable
    check_range(max_num_batched_tokens, "--max-num-batched-tokens", 1, MAX_BATCH_TOKENS)
    check_range(max_num_seqs, "--max-num-seqs", 1, MAX_SEQUENCES)
    check_range(max_model_len, "--max-model-len", 2, MAX_TOKENS)
    check_range(block_size, "--block-size", 1, MAX_TOKENS)
    folder, header = _calibrate(model, gpu, device, tp, scale, out or user_calibrated_dir(), max_num_batched_tokens,
                                max_num_seqs, max_model_len, block_size, kernels, seed)
    a, o = header.achieved, header.overhead
    typer.echo(f"wrote {folder}")
    kernels = _write_kernel_tables(folder, model)
    typer.echo(f"wrote {kernels} (the same measurements as kernel tables, keyed by shape)")
    typer.echo(f"  device {header.device.name}, {header.dtype}, kernels {header.kernels}, "
               f"{header.model.engine_num_layers} of {header.model.model_num_layers} layers")
    typer.echo(f"  GEMMs {a.gemm_flops_per_s / 1e12:.3g} TFLOP/s at {a.gemm_at_tokens} tokens "
               f"({a.gemm_fraction_of_measured_matmul:.0%} of the measured matrix rate)")
    typer.echo(f"  decode attention {a.decode_attention_bytes_per_s / 1e9:.3g} GB/s "
               f"({a.decode_attention_fraction_of_copy:.0%} of the measured copy bandwidth "
               f"{a.copy_bytes_per_s / 1e9:.3g} GB/s)")
    if a.compute_fraction_of_peak is not None:
        typer.echo(f"  of datasheet peak: compute {a.compute_fraction_of_peak:.0%}, "
                   f"weight streaming {a.bandwidth_fraction_of_peak:.0%}")
    typer.echo(f"  step overhead {o.fixed_s * 1e3:.3g} ms + {o.per_seq_s * 1e3:.3g} ms per sequence; "
               f"whole-step median error {o.step_error_p50:.1%} over {o.fit_steps} steps")


def _write_kernel_tables(folder: Path, model_name: str) -> Path:
    profile = load_profile(folder)
    header, rows = kernel_tables_from_profile(profile, load_model(check_model(model_name), None, "--model"))
    write_tables(folder / KERNELS_SUBDIR, header, rows)
    return folder / KERNELS_SUBDIR


def _calibrate(model_name, gpu, device_kind, tp, scale, out: Path, max_tokens, max_seqs, max_len, block_size,
               kernels_name, seed) -> tuple[Path, ProfileHeader]:
    if (gpu is None) == (device_kind is None):
        raise InputError(None, "--gpu/--device", "give either --gpu NAME (the GPU here) or --device cpu")
    if device_kind is not None and device_kind != "cpu":
        raise InputError(None, "--device", f"expected 'cpu', got {excerpt(device_kind)} (name a GPU with --gpu)")
    if kernels_name not in ("auto", "triton", "torch"):
        raise InputError(None, "--kernels", f"expected auto, triton or torch, got {excerpt(kernels_name)}")
    spec = load_model(check_model(model_name), None, "--model")
    hardware = load_hardware(gpu, None, "--gpu") if gpu else None

    from engine.calibrate import CalibrationRequest, calibrate
    from engine.config import engine_config
    from engine.device import cpu_device, gpu_device
    from engine.kernels import select

    cfg = engine_config(spec, tp, scale, fields=("--tp", "--scale"))
    dev = gpu_device(hardware) if hardware else cpu_device()
    d_tokens, d_seqs, d_len = DEFAULT_LIMITS[dev.kind]
    length = min(max_len or d_len, spec.max_position_embeddings or d_len)
    limits = Limits(max_tokens or d_tokens, min(max_seqs or d_seqs, max_tokens or d_tokens), length, block_size)
    allreduce = None
    if tp > 1:
        import torch

        from engine.collectives import allreduce_table

        if dev.kind == "cuda" and torch.cuda.device_count() < tp:
            raise InputError(None, "--tp", f"timing the all-reduce of TP {tp} needs {tp} GPUs; "
                                           f"{torch.cuda.device_count()} present")
        max_bytes = limits.max_num_batched_tokens * cfg.hidden_size * dev.dtype.itemsize
        allreduce = allreduce_table(tp, dev.kind, dev.dtype, max_bytes)
    req = CalibrationRequest(cfg, dev, select(kernels_name), limits, hardware.id if hardware else "cpu", hardware,
                             scale, seed)
    folder = calibrate(req, out, log=lambda msg: typer.echo(f"  measuring {msg}", err=True), allreduce_rows=allreduce)
    return folder, read_header(folder)
