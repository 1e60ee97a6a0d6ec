"""`sizer calibrate`: microbenchmark the bundled engine on this machine's GPU (or CPU) and
write a calibrated profile into a user directory, never into the installed package (see
docs/engine.md). The flags are checked here; sizer/sizing/calibrate.py drives the engine."""

from __future__ import annotations

from pathlib import Path

import typer

from sizer.cli.flags import check_engine, check_model, check_range, parallel_sizes
from sizer.errors import InputError
from sizer.inputs.hardware import load_hardware, user_dir
from sizer.inputs.model_spec import catalog_names, load_model
from sizer.inputs.scenario import MAX_BATCH_TOKENS, MAX_SEQUENCES, MAX_TOKENS
from sizer.outputs.destination import check_folder_destination
from sizer.sizing.calibrate import StepBounds, Target, calibrate_device_tables, calibrate_profile
from sizer.timing.kernel_tables import TP_SIZES
from sizer.timing.profile import profile_dir_name, read_header
from sizer.timing.profile_kernels import KERNELS_SUBDIR
from sizer.words import count, listed
from validation.errors import excerpt


def user_calibrated_dir() -> Path:
    """Where `sizer calibrate` writes without `--out`: `$SIZER_HOME/calibrated`, else
    `$XDG_DATA_HOME/sizer/calibrated`, else `~/.local/share/sizer/calibrated`."""
    return user_dir() / "calibrated"


DEFAULT_REFERENCE = "llama-3.1-8b"    # a device's tables fit the engine overhead on this model's steps by default
# The shortest context the whole-step sweep runs in: a 1-token prompt and 2 output tokens, so that each wave has a
# step after its first, which waits on set-up and is dropped (engine/calibrate.py SWEEP_MIN_OUTPUT_TOKENS); at 2
# every wave is one step and no step is left to fit the overhead on
MIN_MAX_MODEL_LEN = 3
# torch's generators take an unsigned 64-bit seed (torch.manual_seed: "Overflow when unpacking long long" past it;
# a negative one wraps around): from 0, as a scenario's workload.seed
MAX_SEED = 2 ** 64 - 1


def command(
    model: str | None = typer.Option(None, help="catalog name, config.json, checkpoint folder or cached HF id: a "
                                                "profile of this model; without it, the device's kernel tables "
                                                "for every model (--shapes-of)"),
    shapes_of: list[str] | None = typer.Option(None, "--shapes-of", metavar="MODEL",
                                               help="without --model: time the GEMM and attention shapes of these "
                                                    "models at each of --tp-sizes (repeat the flag; the first one's "
                                                    "whole steps fit the engine overhead); default on a GPU: the "
                                                    "catalog's models"),
    tp_sizes: str | None = typer.Option(None, "--tp-sizes", metavar="1,2,...",
                                        help="without --model: the tensor-parallel sizes whose shards (one GPU's "
                                             "share of the heads and weights) are timed, comma-separated; must "
                                             "include 1 (the overhead fit runs at TP 1); a size that does not "
                                             "split a model is skipped for it. Default: "
                                             f"{','.join(map(str, TP_SIZES))}; one GPU or a CPU needs only 1"),
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
    max_model_len: int | None = typer.Option(None, min=MIN_MAX_MODEL_LEN,
                                             help="longest context to measure (GPU 8192, CPU 2048)"),
    block_size: int = typer.Option(16, min=1, help="KV block size"),
    kernels: str = typer.Option("auto", help="auto (Triton on a GPU, torch on a CPU), triton or torch"),
    seed: int = typer.Option(0, help=f"random seed for weights and inputs (0 to {MAX_SEED})"),
) -> None:
    """Measure the engine's kernels here: a model's profile (`<device>-<model>-tp<N>/`), or without --model
    the device's kernel tables for any model (`<device>-sizer-engine-<version>/`)."""
    check_engine("calibrate")
    # the sweep's shapes come from these: the scenario's own bounds keep them representable
    check_range(max_num_batched_tokens, "--max-num-batched-tokens", 1, MAX_BATCH_TOKENS)
    check_range(max_num_seqs, "--max-num-seqs", 1, MAX_SEQUENCES)
    check_range(max_model_len, "--max-model-len", MIN_MAX_MODEL_LEN, MAX_TOKENS)
    check_range(block_size, "--block-size", 1, MAX_TOKENS)
    _check_seed(seed)
    target = _target(gpu, device, kernels, tp)
    # checked before the minutes of measuring: a file or device there was an OSError only when the profile was written
    destination = check_folder_destination(out or user_calibrated_dir(), "--out")
    bounds = StepBounds(max_num_batched_tokens, max_num_seqs, max_model_len, block_size)
    if model is None:
        if scale != 1.0:
            raise InputError(None, "--scale", "applies to a model's profile (--model); a device's tables time "
                                              "each shape whole")
        _calibrate_device(target, shapes_of, _tp_sizes(tp_sizes), destination, bounds, seed)
        return
    if shapes_of:
        raise InputError(None, "--shapes-of", "applies without --model (a device's kernel tables); a profile "
                                              "times the one model's shapes")
    if tp_sizes is not None:
        raise InputError(None, "--tp-sizes", "applies without --model (a device's kernel tables); a profile "
                                             "times one split, --tp's")
    spec = load_model(check_model(model), None, "--model")
    check_folder_destination(destination / profile_dir_name(target.device_id, spec.name, tp), "--out")
    folder = calibrate_profile(spec, target, scale, destination, bounds, seed, log=_log)
    header = read_header(folder)
    a, o = header.achieved, header.overhead
    typer.echo(f"wrote {folder}")
    typer.echo(f"wrote {folder / KERNELS_SUBDIR} (the same measurements as kernel tables, keyed by shape)")
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
    _echo_overhead(o)


def _echo_overhead(o) -> None:
    typer.echo(f"  step overhead {o.fixed_s * 1e3:.3g} ms + {o.per_seq_s * 1e3:.3g} ms per sequence; "
               f"whole-step median error {o.step_error_p50:.1%} over {o.fit_steps} steps")


def _target(gpu: str | None, device_kind: str | None, kernels_name: str, tp: int) -> Target:
    if (gpu is None) == (device_kind is None):
        raise InputError(None, "--gpu/--device", "give either --gpu NAME (the GPU here) or --device cpu")
    if device_kind is not None and device_kind != "cpu":
        raise InputError(None, "--device", f"expected 'cpu', got {excerpt(device_kind)} (name a GPU with --gpu)")
    if kernels_name not in ("auto", "triton", "torch"):
        raise InputError(None, "--kernels", f"expected auto, triton or torch, got {excerpt(kernels_name)}")
    return Target(load_hardware(gpu, None, "--gpu") if gpu else None, kernels_name, tp)


def _check_seed(seed: int) -> None:
    """--seed: a whole number torch's generators take (check_range would print 2^64 as 1.84467e+19)."""
    if not 0 <= seed <= MAX_SEED:
        raise InputError(None, "--seed", f"expected a whole number from 0 to {MAX_SEED} (2^64 - 1: torch's "
                                         f"generators take 64 bits), got {excerpt(seed)}")


def _tp_sizes(text: str | None) -> tuple[int, ...]:
    """--tp-sizes: whole numbers from 1, 1 among them (the reference model's whole steps run at TP 1, and the
    overhead is fitted against its TP-1 shards), in increasing order without repeats; default TP_SIZES."""
    sizes = tuple(sorted(set(parallel_sizes(text, "--tp-sizes") or TP_SIZES)))
    if 1 not in sizes:
        raise InputError(None, "--tp-sizes", f"expected a list that includes 1 (the engine overhead is fitted on "
                                             f"whole steps at TP 1), got {excerpt(text)}")
    return sizes


def _log(msg: str) -> None:
    typer.echo(f"  measuring {msg}", err=True)


def _calibrate_device(target: Target, shapes_of: list[str] | None, tp_sizes: tuple[int, ...], out: Path,
                      bounds: StepBounds, seed: int) -> None:
    """A device's kernel tables for the shapes of `shapes_of` (default on a GPU: the catalog's models) at
    `tp_sizes`."""
    if not shapes_of and target.hardware is None:
        raise InputError(None, "--shapes-of", "name the models whose shapes to time on a CPU (the catalog's "
                                              "largest would take hours there), e.g. --shapes-of tiny")
    names = shapes_of or catalog_names()
    models = [load_model(check_model(name, "--shapes-of"), None, "--shapes-of") for name in names]
    reference = models[0] if shapes_of else load_model(DEFAULT_REFERENCE)
    tables = calibrate_device_tables(models, reference, target, out, bounds, seed, tp_sizes, log=_log)
    engine = tables.header.bundled_engine
    typer.echo(f"wrote {tables.path}")
    heads = {key[1:4] for key in tables.generation_attention}
    typer.echo(f"  kernel tables of {tables.header.device_name} ({engine.dtype}, {engine.kernels} kernels): "
               f"{len(tables.gemm)} GEMM and {len(heads)} attention shapes")
    timed = f"TP {listed(engine.tp_sizes)}{_unsplit(tp_sizes, engine.tp_sizes)}"
    allreduce = f"all-reduce across {count(target.tp, 'device')}" if target.tp > 1 else "no all-reduce (one device)"
    typer.echo(f"  of {', '.join(m.name for m in models) if shapes_of else f'the {len(models)} catalog models'} "
               f"at {timed}; {allreduce}")
    typer.echo("  price a scenario with `hardware.kernel_tables`;")
    typer.echo("  replay the engine with `sizer validate --kernel-tables`")
    typer.echo(f"  engine overhead fitted on {engine.fitted_on}'s whole steps:")
    _echo_overhead(engine.overhead)


def _unsplit(asked: tuple[int, ...], timed: tuple[int, ...]) -> str:
    """' (TP 3 splits none of them)' for sizes asked for that no model's heads and widths divide, else ''."""
    skipped = [size for size in asked if size not in timed]
    return f" (TP {listed(skipped)} {'splits' if len(skipped) == 1 else 'split'} none of them)" if skipped else ""
