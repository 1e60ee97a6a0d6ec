"""A scenario's own kernel-tables folder (`hardware.kernel_tables`): it prices the steps like the bundled
tables, the plan names it, bad folders are one line, and sweeps and searches carry it to their points."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
import yaml
from sweephelp import sweep_of, write_sweep
from typer.testing import CliRunner

from simulator.step_batch import StepBatch
from sizer.cli import app
from sizer.inputs.gateway import load_gateway
from sizer.inputs.preloaded import Preloaded, installed
from sizer.inputs.scenario import load_scenario, scenario_from_dict
from sizer.sizing.gateway import resolve_gateway
from sizer.sizing.plan import make_plan
from sizer.sizing.resolve import resolve
from sizer.sizing.search import Candidate
from sizer.sizing.simulate import simulate_scenario
from sizer.sizing.sweep import tasks, variant_of
from sizer.timing.kernel_step import dense_gemms, gemm_curve
from sizer.timing.kernel_tables import CALIBRATED_ENGINE, bundled_tables_dir
from sizer.timing.step_model import bundled_tables, step_model_for
from validation.errors import FieldError, excerpt
from validation.safe_yaml import load_yaml

REPO = Path(__file__).resolve().parents[3]
SCENARIO = REPO / "scenarios" / "llama-3.1-8b-chat-h100.yaml"
GATEWAY = REPO / "scenarios" / "gateway-difficulty-routing.yaml"
H100 = bundled_tables_dir("h100-sxm", "vllm")
# a decode step of 1 and of 64 sequences, a 512-token prefill chunk, a mixed step (prefill chunk + decodes)
BATCHES = (StepBatch.from_seqs([(1, 1200)]), StepBatch.from_seqs([(1, 1200)] * 64),
           StepBatch.from_seqs([(512, 0)]), StepBatch.from_seqs([(512, 0)] + [(1, 1200)] * 32))


def own_tables(folder: Path, scale: dict[str, float] | None = None, **header) -> Path:
    """A copy of the bundled H100 vLLM tables with each named table's latencies multiplied, header fields changed."""
    shutil.copytree(H100, folder)
    for name, factor in (scale or {}).items():
        lines = gzip.decompress((folder / f"{name}.csv.gz").read_bytes()).decode().splitlines()
        rows = [lines[0]]
        for line in lines[1:]:
            prefix, grid, latencies = line.rsplit(",", 2)
            rows.append(f"{prefix},{grid}," + " ".join(repr(float(t) * factor) for t in latencies.split()))
        (folder / f"{name}.csv.gz").write_bytes(gzip.compress(("\n".join(rows) + "\n").encode()))
    if header:
        data = load_yaml(folder / "tables.yaml")
        (folder / "tables.yaml").write_text(yaml.safe_dump({**data, **header}))
    return folder


def scenario(tmp_path: Path, **hardware) -> Path:
    data = load_yaml(SCENARIO)
    data["hardware"] = {"gpu": "h100-sxm", **hardware}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_doubled_gemms_add_the_bundled_gemm_latencies_to_each_step(tmp_path):
    own_tables(tmp_path / "mine", {"gemm": 2.0})
    bundled = resolve(load_scenario(scenario(tmp_path, step_model="kernel_tables")))
    own = resolve(load_scenario(scenario(tmp_path, kernel_tables="mine")))
    before, after = step_model_for(bundled), step_model_for(own)
    tables, m = bundled_tables("h100-sxm", "vllm"), bundled.model
    for batch in BATCHES:
        # Llama 3.1 8B at TP1 (no all-reduce): 32 layers of QKV, o_proj, gate_up, down at m = new tokens and the
        # lm_head at m = sequences, every shape in the bundled H100 table (bf16); doubling the table doubles
        # them, so the step grows by their bundled sum and by nothing else (attention, element-wise, overhead)
        gemms = sum(s.per_stage * gemm_curve(tables, "bfloat16", s.n, s.k)(batch.new_tokens)
                    for s in dense_gemms(m, bundled.parallel))
        gemms += gemm_curve(tables, "bfloat16", m.vocab_size, m.hidden_size)(batch.num_seqs)
        assert after.step_time(batch) == pytest.approx(before.step_time(batch) + gemms, rel=1e-9)
        assert gemms > 0.3 * before.step_time(batch)          # a change the assertion could miss is not small
    # the plan's batch-1 decode is the same step model's: it grows by the GEMMs at m = 1
    one = sum(s.per_stage * gemm_curve(tables, "bfloat16", s.n, s.k)(1) for s in dense_gemms(m, bundled.parallel)) \
        + gemm_curve(tables, "bfloat16", m.vocab_size, m.hidden_size)(1)
    assert make_plan(own).step_times.decode_batch1_ms == pytest.approx(
        make_plan(bundled).step_times.decode_batch1_ms + one * 1e3, rel=1e-9)


def test_the_plan_names_the_tables_and_their_folder(tmp_path):
    folder = own_tables(tmp_path / "mine")
    plan = make_plan(resolve(load_scenario(scenario(tmp_path, kernel_tables="mine"))))
    assert plan.step_times.model == ("kernel tables measured on NVIDIA H100 80GB HBM3 in vllm 0.24.0 "
                                     "(aiconfigurator-core 0.12.0)")
    notes = [a for a in plan.assumptions if "kernel tables" in a]
    assert notes == [f"step times: kernel tables measured on NVIDIA H100 80GB HBM3 in vllm 0.24.0 "
                     f"(aiconfigurator-core 0.12.0), from {folder.resolve()} (hardware.kernel_tables); the roofline "
                     "prices what they lack"]


def test_tables_sizer_calibrate_measured_price_any_engine_and_say_so(tmp_path):
    # sizer's own engine on the user's device: the only tables of that device, so they price a vLLM scenario too
    # (the engine as sizer calibrate writes it, which resolve's check lets through: checked_kernel_tables)
    own_tables(tmp_path / "mine", engine=CALIBRATED_ENGINE, engine_version="0.1.0")
    r = resolve(load_scenario(scenario(tmp_path, kernel_tables="mine")))
    note = next(a for a in make_plan(r).assumptions if "hardware.kernel_tables" in a)
    assert note.endswith("; measured in sizer-engine, the scenario serves vllm: the engines' kernels may differ and "
                         "the tables do not say by how much")
    assert step_model_for(r).name.startswith("kernel tables measured on NVIDIA H100 80GB HBM3 in sizer-engine 0.1.0")


@pytest.mark.parametrize("hardware, make, expected", [
    # paths are quoted as excerpts (at most 80 characters): a worker's tmp_path can be longer
    ({"kernel_tables": "nowhere"}, None, "hardware.kernel_tables: kernel-tables folder {nowhere} not found"),
    ({"kernel_tables": "x" * 300}, None, "not readable (File name too long)"),     # Linux NAME_MAX is 255
    # a file where the folder goes (here the scenario itself) was "not found", which it is not
    ({"kernel_tables": "s.yaml"}, None, "hardware.kernel_tables: kernel-tables folder {scenario} is not a folder "
                                        "(tables.yaml and gzip CSVs in one)"),
    ({"kernel_tables": ""}, None, "is not a kernel-tables folder"),     # the scenario's own folder, not "unset"
    ({"kernel_tables": "."}, None, "hardware.kernel_tables: {tmp} is not a kernel-tables folder: expected "
                                   "tables.yaml in it"),
    ({"kernel_tables": "mine", "gpu": "h200"}, {},
     "hardware.kernel_tables: measured on h100-sxm; the scenario runs on h200 (tables price only the device they "
     "were measured on)"),
    # another serving engine's tables (or an engine sizer does not know) would price vLLM's steps with SGLang's
    # kernels: refused as another GPU's are, not used with a note
    ({"kernel_tables": "mine"}, {"engine": "sglang"},
     "hardware.kernel_tables: measured in sglang; the scenario serves vllm (tables price only the engine they were "
     "measured in; sizer calibrate's, engine sizer-engine, price any)"),
    ({"kernel_tables": "mine"}, {"engine": "foo"}, "hardware.kernel_tables: measured in foo; the scenario serves vllm"),
    ({"kernel_tables": "mine", "calibrated_profile": "mine"}, {},
     "hardware.kernel_tables: not together with hardware.calibrated_profile: expected one source of step times"),
    ({"kernel_tables": "mine"}, {"schema_version": 9},
     "mine/tables.yaml: schema_version: expected a value <= 1, got 9"),
])
def test_a_bad_folder_is_one_line_naming_the_field_or_the_file(tmp_path, hardware, make, expected):
    if make is not None:
        own_tables(tmp_path / "mine", **make)
    path = scenario(tmp_path, **hardware)
    result = CliRunner().invoke(app, ["plan", str(path)])
    assert result.exit_code == 2, result.output
    quoted = {"tmp": excerpt(str(tmp_path)), "nowhere": excerpt(str(tmp_path / "nowhere")),
              "scenario": excerpt(str(path))}
    assert result.output.count("\n") == 1 and expected.format(**quoted) in result.output


def test_a_folder_without_tables_is_refused(tmp_path):
    folder = own_tables(tmp_path / "mine")
    for table in folder.glob("*.csv.gz"):
        table.unlink()
    with pytest.raises(FieldError, match="holds no table: expected at least one of gemm.csv.gz"):
        resolve(load_scenario(scenario(tmp_path, kernel_tables="mine")))


def test_a_sweep_reads_the_folder_once_and_keys_its_points_by_it(tmp_path):
    path = write_sweep(tmp_path, {"gpu": ["h100-sxm", "h200"]})
    base = load_yaml(tmp_path / "base.yaml")
    base["hardware"] = {"gpu": "h100-sxm", "kernel_tables": "mine"}
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    own_tables(tmp_path / "mine", {"gemm": 2.0})
    sweep = sweep_of(path)
    keys = [t.point_hash for t in tasks(sweep)]
    shutil.rmtree(tmp_path / "mine")              # read by the driver: its points resolve without the folder
    with installed(sweep.inputs):
        h100, h200 = (resolve(scenario_from_dict(sweep.data, sweep.scenario_file, variant_of(sweep, t.point)))
                      for t in tasks(sweep))
    assert h100.kernel_tables is not None and h100.kernel_tables.header.gpu == "h100-sxm"
    assert h200.kernel_tables is None             # the H100's tables do not price the H200 point
    with installed(Preloaded()), pytest.raises(FieldError, match="kernel-tables folder .* not found"):
        resolve(scenario_from_dict(sweep.data, sweep.scenario_file, variant_of(sweep, tasks(sweep)[0].point)))
    # the folder measured again (other latencies) changes the H100 point's key, not the H200 point's
    own_tables(tmp_path / "mine", {"gemm": 3.0})
    remeasured = sweep_of(path)
    again = [t.point_hash for t in tasks(remeasured)]
    assert again[0] != keys[0] and again[1] == keys[1]
    # and the driver ships the new latencies (3x the bundled), not the ones it read before
    (shipped,) = remeasured.inputs.kernel_folders.values()
    key, row = next(iter(bundled_tables("h100-sxm", "vllm").gemm.items()))
    assert shipped.gemm[key] == pytest.approx({m: 3 * t for m, t in row.items()}, rel=1e-12)


def test_a_search_candidate_on_another_gpu_drops_the_folder(tmp_path):
    own_tables(tmp_path / "mine")
    s = load_scenario(scenario(tmp_path, kernel_tables="mine"))
    for gpu, kept in (("h100-sxm", "mine"), ("h200", None)):
        variant = Candidate(gpu, 1, 1, "bf16", "bf16", False).variant(s)
        assert load_scenario(s.file, variant).hardware.kernel_tables == kept


def test_a_gateway_pool_takes_its_own_tables_and_the_same_refusals(tmp_path):
    own_tables(tmp_path / "mine", {"gemm": 2.0})
    data = load_yaml(GATEWAY)
    pool = data["gateway"]["pools"][0]
    assert pool["hardware"] == "h100-sxm"
    pool["hardware"] = {"gpu": "h100-sxm", "kernel_tables": "mine"}
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(data))
    r = resolve_gateway(*load_gateway(path), str(path)).pools[pool["name"]]
    assert r.kernel_tables is not None and r.kernel_tables.path == (tmp_path / "mine").resolve()
    pool["hardware"]["calibrated_profile"] = "mine"        # a pool is not checked as a scenario: resolve refuses it
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(FieldError) as error:
        resolve_gateway(*load_gateway(path), str(path))
    assert error.value.field == "gateway.pools[0].hardware.kernel_tables"
    assert error.value.message.startswith("not together with hardware.calibrated_profile")


def test_search_says_the_tables_price_their_gpu_only(tmp_path):
    own_tables(tmp_path / "mine")
    path = scenario(tmp_path, kernel_tables="mine")
    result = CliRunner().invoke(app, ["search", str(path), "--gpus", "h100-sxm", "--tp", "1", "--weights", "bf16",
                                      "--kv-cache-dtype", "auto", "--workers", "1", "--num-requests", "50", "--json"])
    assert result.exit_code == 0, result.output
    notes = json.loads(result.stdout)["notes"]
    assert "hardware.kernel_tables price h100-sxm only; other GPUs' steps are priced as hardware.step_model " \
           "(auto) says" in notes


def test_a_simulated_request_takes_exactly_the_doubled_gemms_longer(tmp_path):
    own_tables(tmp_path / "mine", {"gemm": 2.0})
    data = load_yaml(SCENARIO)
    data["workload"] = {"arrival": {"process": "poisson", "rate_per_s": 1}, "num_requests": 1,
                        "prompt_tokens": {"distribution": "fixed", "value": 512},
                        "output_tokens": {"distribution": "fixed", "value": 64}}
    runs = {}
    for name, hardware in (("bundled", {"step_model": "kernel_tables"}), ("own", {"kernel_tables": "mine"})):
        data["hardware"] = {"gpu": "h100-sxm", **hardware}
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(data))
        r = resolve(load_scenario(tmp_path / f"{name}.yaml"))
        runs[name] = simulate_scenario(r).columns
    tables, m = bundled_tables("h100-sxm", "vllm"), r.model

    def gemms(tokens: int) -> float:
        """The bundled GEMM latencies of one step of `tokens` new tokens of one sequence (ms)."""
        return 1e3 * (sum(s.per_stage * gemm_curve(tables, "bfloat16", s.n, s.k)(tokens)
                          for s in dense_gemms(m, r.parallel))
                      + gemm_curve(tables, "bfloat16", m.vocab_size, m.hidden_size)(1))

    # one request alone: its prompt in one step (512 tokens, within the token budget), then 63 decode steps of one
    # token; vLLM's asynchronous loop hides its CPU work under these GPU-bound steps, so each step's extra GEMM time
    # is the request's: TTFT + GEMMs(512), E2E + GEMMs(512) + 63 x GEMMs(1)
    ttft = runs["own"]["engine_ttft_ms"][0] - runs["bundled"]["engine_ttft_ms"][0]
    e2e = runs["own"]["engine_e2e_ms"][0] - runs["bundled"]["engine_e2e_ms"][0]
    assert ttft == pytest.approx(gemms(512), rel=1e-6)
    assert e2e == pytest.approx(gemms(512) + 63 * gemms(1), rel=1e-6)
