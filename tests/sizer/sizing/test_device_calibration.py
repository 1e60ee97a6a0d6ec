"""A device's kernel tables (`sizer calibrate` without --model) price any model with their shapes: the shapes
timed, the bundled engine's dtype, the engine overhead fitted on one model and scaled to another, and the
host CPU's measured ceilings in place of a datasheet. The tables used are the committed CPU calibration
(hardware_profiles/calibrated/cpu-sizer-engine-0.1.0: shapes of `tiny` and `tiny-wide`, overhead fitted
on `tiny`); the measurement itself is tested in tests/engine/."""

import dataclasses
import gzip
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import sizer.cli.calibrate
from hardware_profiles import CALIBRATED_DIR
from simulator.step_batch import StepBatch
from sizer.cli import app
from sizer.inputs.model_spec import load_model
from sizer.inputs.scenario import load_scenario
from sizer.sizing.validate import tables_pricing, validation_config
from sizer.timing.kernel_shapes import model_shapes
from sizer.timing.kernel_step import KernelTableStepTimeModel
from sizer.timing.kernel_tables import HEADER_FILE, KERNELS_DIR, load_kernel_tables
from sizer.timing.step_model import engine_roofline, engine_step_model
from validation.errors import FieldError

REPO = Path(__file__).resolve().parents[3]
WIDE = REPO / "engine" / "scenarios" / "tiny-wide-cpu.yaml"
TINY = REPO / "engine" / "scenarios" / "tiny-cpu.yaml"
TABLES = CALIBRATED_DIR / "cpu-sizer-engine-0.1.0"
cli = CliRunner()


def wide_resolved():
    tables = load_kernel_tables(TABLES)
    r, _ = validation_config(load_scenario(WIDE), tables_pricing(tables))
    return r, tables


def test_the_shapes_of_tiny_at_tp_1_2_4_8():
    shapes = model_shapes([load_model("tiny")])
    # 8 query / 2 KV heads of 32: split by TP, KV heads replicated once TP passes 2
    assert shapes.attention == {(8, 2, 32), (4, 1, 32), (2, 1, 32), (1, 1, 32)}
    # fused QKV (8 + 2 x 2) x 32 = 384 at TP1, (4 + 2 x 1) x 32 = 192 at TP2; the lm_head's 4096 rows split
    assert {(384, 256), (192, 256), (4096, 256), (2048, 256), (1024, 256), (512, 256)} <= shapes.gemms
    assert shapes.moe == frozenset()


def test_the_committed_tables_hold_both_models_shapes():
    tables = load_kernel_tables(TABLES)
    # tiny-wide's fused QKV at TP1: (12 + 2 x 4) x 32 = 640 outputs of its 384 hidden; tiny's: 384 x 256
    assert ("float32", 640, 384) in tables.gemm and ("float32", 384, 256) in tables.gemm
    assert {k[1:4] for k in tables.generation_attention} >= {(12, 4, 32), (8, 2, 32)}
    engine = tables.header.bundled_engine
    assert (engine.fitted_on, engine.fitted_layers, engine.dtype) == ("tiny", 4, "float32")


def test_the_bundled_engine_looks_a_16_bit_model_up_in_its_own_dtype():
    """tiny-wide's float32 checkpoint is served 16-bit (weights fp16), but the bundled engine on a CPU runs
    every model in float32: its tables price all of the step. The same tables without the engine section
    (another engine's) hold no 16-bit GEMM, and the roofline prices them."""
    r, tables = wide_resolved()
    assert r.weight_format.name == "fp16"
    model = KernelTableStepTimeModel(tables, engine_roofline(r, tables))
    assert model.ran_in == "float32" and model.roofline_parts == ()
    other = dataclasses.replace(tables, header=dataclasses.replace(tables.header, bundled_engine=None))
    model = KernelTableStepTimeModel(other, engine_roofline(r, tables))
    assert model.ran_in is None and "4 of 4 dense GEMM shapes (fp16 weights)" in model.roofline_parts


def test_the_host_cpu_roofline_takes_the_measured_ceilings():
    r, tables = wide_resolved()
    engine = tables.header.bundled_engine
    roofline = engine_roofline(r, tables)
    assert roofline.hardware.memory_bandwidth_bytes_per_s == engine.copy_bytes_per_s
    assert roofline.hardware.peak_flops("fp32") == engine.matmul_flops_per_s
    assert roofline.step_overhead_s == 0.0       # the fitted overhead holds the engine's own


@pytest.mark.parametrize("batch,decode_only", [
    (StepBatch.from_seqs([(1, 300), (1, 120), (1, 40)]), True),
    (StepBatch.from_seqs([(1, 300), (200, 128)]), False),
])
def test_the_engine_overhead_fitted_on_tiny_scales_its_forward_part_to_tiny_wides_layers(batch, decode_only):
    """A whole step = kernel factor x the tables' step + host fixed + forward fixed x 6 / 4 layers + per
    sequence; the decode-only line for a decode-only step (sizer/timing/overhead_fit.py fit_overhead)."""
    r, tables = wide_resolved()
    o = tables.header.bundled_engine.overhead
    model = engine_step_model(r, tables)
    assert model.layers_ratio == 6 / 4
    factor = o.decode_kernel_factor if decode_only else o.kernel_factor
    fixed = o.decode_fixed_s if decode_only else o.fixed_s
    expected = (factor * model.tables_model.step_time(batch) + o.host_fixed_s + (fixed - o.host_fixed_s) * 1.5
                + o.per_seq_s * batch.num_seqs)
    assert model.step_time(batch) == pytest.approx(expected, rel=1e-12)
    assert model.out_of_range_steps == 0


def test_steps_past_the_measured_range_are_counted():
    r, tables = wide_resolved()
    model = engine_step_model(r, tables)
    model.step_time(StepBatch.from_seqs([(300, 0)]))        # 300 new tokens: the tables went to 256
    assert (model.steps, model.out_of_range_steps) == (1, 1)


def test_a_plan_on_the_host_cpu_prices_steps_from_its_tables(tmp_path):
    data = yaml.safe_load(WIDE.read_text())
    data["model"] = str(WIDE.parent / "tiny-wide" / "config.json")
    data["hardware"] = {"gpu": "cpu", "kernel_tables": str(TABLES)}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    result = cli.invoke(app, ["plan", str(tmp_path / "s.yaml")], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "measured by sizer calibrate" in result.stdout and "kernel tables measured on" in result.stdout
    # without tables the host CPU has nothing to price steps with
    data["hardware"] = "cpu"
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    result = cli.invoke(app, ["plan", str(tmp_path / "s.yaml")])
    assert result.exit_code == 2 and "host CPU has no datasheet figures" in result.stderr


@pytest.mark.parametrize("args,words", [
    (["calibrate", "--device", "cpu"], "--shapes-of: name the models whose shapes to time on a CPU"),
    (["calibrate", "--device", "cpu", "--model", "tiny", "--shapes-of", "tiny"], "--shapes-of: applies without"),
    (["calibrate", "--device", "cpu", "--shapes-of", "tiny", "--scale", "0.5"], "--scale: applies to a model's"),
    (["calibrate", "--device", "cpu", "--shapes-of", "deepseek-v3"], "does not support MLA"),
    (["calibrate", "--device", "cpu", "--shapes-of", "no-such-model"], "--shapes-of: unknown model"),  # not --model
    # --tp-sizes: whole numbers from 1 (sizer/cli/flags.py parallel_sizes), 1 among them (the overhead fit's)
    (["calibrate", "--device", "cpu", "--shapes-of", "tiny", "--tp-sizes", "0"],
     "--tp-sizes: expected a value from 1 to 10000, got 0"),
    (["calibrate", "--device", "cpu", "--shapes-of", "tiny", "--tp-sizes", "x"],
     "--tp-sizes: expected a comma-separated list of whole numbers, got 'x'"),
    (["calibrate", "--device", "cpu", "--shapes-of", "tiny", "--tp-sizes", ""], "--tp-sizes: expected at least one"),
    (["calibrate", "--device", "cpu", "--shapes-of", "tiny", "--tp-sizes", "2,4"],
     "--tp-sizes: expected a list that includes 1"),
    (["calibrate", "--device", "cpu", "--model", "tiny", "--tp-sizes", "1"], "--tp-sizes: applies without --model"),
    (["validate", str(TINY)], "--profile/--kernel-tables: give one"),
    (["validate", str(TINY), "--profile", str(CALIBRATED_DIR / "cpu-tiny-tp1"), "--kernel-tables", str(TABLES)],
     "--profile/--kernel-tables: give one"),
    (["validate", str(TINY), "--kernel-tables", str(KERNELS_DIR / "h100-sxm-vllm-0.24.0")],
     "tables of another engine"),
    (["validate", str(REPO / "engine" / "scenarios" / "llama-3.1-8b-h200.yaml"), "--kernel-tables", str(TABLES)],
     "hardware.gpu: 'h200', but the kernel-table folder was measured on 'cpu'"),
])
def test_device_calibration_flags_are_checked_in_one_line(args, words, tmp_path):
    result = cli.invoke(app, [*args, *(["--out", str(tmp_path)] if args[0] == "calibrate" else [])])
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and words in result.stderr, result.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("what", ["--model", "--shapes-of"])
@pytest.mark.parametrize("out, words", [
    ("FILE", "--out: is a file; expected a folder to write into"),
    ("FILE/sub", "--out: {file} is a file, not a folder"),
    ("/dev/null", "--out: is under /dev, a virtual file system; expected a folder to write into"),
])
def test_an_out_that_is_no_folder_is_refused_before_measuring(tmp_path, what, out, words):
    # it was an OSError traceback when the profile or tables were written, after the minutes of measuring; now
    # one line before the first measurement (which would print "measuring ..." on stderr: a second line)
    file = tmp_path / "f"
    file.write_text("")
    out = out.replace("FILE", str(file))
    result = cli.invoke(app, ["calibrate", "--device", "cpu", what, "tiny", "--out", out])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line == f"error: {out}: " + words.format(file=file)


def tables_at_tp_1(folder: Path) -> Path:
    """A copy of the committed tables with only the TP-1 shards of tiny and tiny-wide and its header's `tp_sizes`
    [1]: what `sizer calibrate --shapes-of tiny --shapes-of tiny-wide --tp-sizes 1` writes."""
    shapes = model_shapes([load_model("tiny"), load_model(str(WIDE.parent / "tiny-wide" / "config.json"))], (1,))
    keep = {"gemm": lambda row: (int(row[1]), int(row[2])) in shapes.gemms,
            "context_attention": lambda row: tuple(map(int, row[1:4])) in shapes.attention,
            "generation_attention": lambda row: tuple(map(int, row[1:4])) in shapes.attention}
    folder.mkdir()
    header = yaml.safe_load((TABLES / HEADER_FILE).read_text())
    header["bundled_engine"]["tp_sizes"] = [1]
    (folder / HEADER_FILE).write_text(yaml.safe_dump(header))
    for name, kept in keep.items():
        lines = gzip.decompress((TABLES / f"{name}.csv.gz").read_bytes()).decode().splitlines()
        rows = [line for line in lines[1:] if kept(line.split(","))]
        (folder / f"{name}.csv.gz").write_bytes(gzip.compress("\n".join([lines[0], *rows, ""]).encode()))
    return folder


def plan_output(tmp_path: Path, tables: Path, tp: int) -> str:
    data = yaml.safe_load(WIDE.read_text())
    data["model"] = str(WIDE.parent / "tiny-wide" / "config.json")
    data["hardware"] = {"gpu": "cpu", "kernel_tables": str(tables)}
    data["deployment"]["tensor_parallel_size"] = tp
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    result = cli.invoke(app, ["plan", str(tmp_path / "s.yaml")], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_shard_the_tables_lack_is_said(tmp_path):
    """Tables timed at TP 1 only (`--tp-sizes 1`), a plan of tiny-wide at TP 4: its lm_head shard (4096 / 4 =
    1024 rows of 384) and attention shard (12 / 4 = 3 query heads on 4 / 4 = 1 KV head, between no measured head
    counts of 1 KV head: TP 1 has 8 x 2 and 12 x 4) are not in them and the plan names the roofline for both
    (KernelTableStepTimeModel.roofline_parts); its dense GEMMs (QKV (3 + 2) x 32 = 160 of 384, o_proj 384 of 96,
    ...) are read off the TP-1 rows where a bracket holds (kernel_step.gemm_curve), and the plan's note says the
    tables timed TP 1 only. At TP 1 the same tables price every operator, with no such note; the committed tables
    (no tp_sizes: written before the flag, all of 1, 2, 4 and 8 timed) carry none at TP 4 either."""
    folder = tables_at_tp_1(tmp_path / "tp1")
    tables = load_kernel_tables(folder)
    assert tables.header.bundled_engine.tp_sizes == (1,)
    assert ("float32", 640, 384) in tables.gemm and ("float32", 160, 384) not in tables.gemm   # TP-1 QKV only
    note = "sizer calibrate timed the shards of TP 1 only: TP 4's are read off other shapes"
    at_1 = plan_output(tmp_path, folder, 1)
    assert "lm_head: kernel tables; attention: kernel tables" in at_1 and "timed the shards" not in at_1
    at_4 = plan_output(tmp_path, folder, 4)
    assert "lm_head: roofline; attention: roofline" in at_4 and note in at_4, at_4
    assert "timed the shards" not in plan_output(tmp_path, TABLES, 4)


@pytest.mark.parametrize("sizes", [[], [2, 4]])
def test_tables_whose_header_lacks_tp_1_are_refused_in_one_line(sizes, tmp_path):
    """The engine overhead is fitted on the reference's TP-1 steps priced from the tables' TP-1 shards: a header
    that says none were timed is refused when read, naming the field (not a plan note reading "TP  only")."""
    folder = tables_at_tp_1(tmp_path / "tp1")
    header = yaml.safe_load((folder / HEADER_FILE).read_text())
    header["bundled_engine"]["tp_sizes"] = sizes
    (folder / HEADER_FILE).write_text(yaml.safe_dump(header))
    with pytest.raises(FieldError, match=r"bundled_engine\.tp_sizes: expected a list holding 1, got \["):
        load_kernel_tables(folder)


def test_the_shapes_of_tiny_at_the_tp_sizes_asked_for():
    """`--tp-sizes 1`: tiny's 8 x 2 heads and TP-1 GEMMs alone (the TP 2/4/8 shards of the test above gone); a
    size that splits none of its heads (3 of 8) is skipped, as validate_split skips TP 8 of a small model's KV
    heads elsewhere, and left out of the sizes recorded."""
    tiny = load_model("tiny")
    shapes = model_shapes([tiny], (1,))
    assert shapes.attention == {(8, 2, 32)} and shapes.tp_sizes == (1,)
    # fused QKV (8 + 2 x 2) x 32 = 384 of 256; no TP-2 shard (192 of 256) nor the lm_head's halves (2048)
    assert (384, 256) in shapes.gemms and not {(192, 256), (2048, 256)} & shapes.gemms
    assert model_shapes([tiny], (1, 3)) == shapes
    assert model_shapes([tiny]).tp_sizes == (1, 2, 4, 8)


@pytest.mark.parametrize("asked,reached,summary", [
    ([], (1, 2, 4, 8), "of tiny at TP 1, 2, 4 and 8; no all-reduce"),
    (["--tp-sizes", "2,1,2"], (1, 2), "of tiny at TP 1 and 2; no all-reduce"),
    (["--tp-sizes", "1,3"], (1, 3), "of tiny at TP 1 (TP 3 splits none of them); no all-reduce"),
])
def test_calibrate_times_the_tp_sizes_asked_for(asked, reached, summary, tmp_path, monkeypatch):
    """--tp-sizes reaches the calibration sorted without repeats (default 1, 2, 4, 8), and the summary prints the
    sizes the tables' header records as timed. The measurement is stubbed: the committed tables with the
    header's tp_sizes as calibrate_device records them (model_shapes' sizes that split a model)."""
    asked_for = []

    def measured(models, reference, target, out, bounds, seed, tp_sizes, log):
        asked_for.append(tp_sizes)
        tables = load_kernel_tables(TABLES)
        engine = dataclasses.replace(tables.header.bundled_engine, tp_sizes=model_shapes(models, tp_sizes).tp_sizes)
        return dataclasses.replace(tables, header=dataclasses.replace(tables.header, bundled_engine=engine))

    monkeypatch.setattr(sizer.cli.calibrate, "calibrate_device_tables", measured)
    result = cli.invoke(app, ["calibrate", "--device", "cpu", "--shapes-of", "tiny", "--out", str(tmp_path), *asked])
    assert result.exit_code == 0, result.output
    assert asked_for == [reached]
    assert summary in result.stdout, result.stdout
