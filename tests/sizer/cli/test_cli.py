"""The CLI: flags-only plans, catalog listings, and a start-up path that loads only what a plan needs."""

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sizer.cli import app
from sizer.cli.app import input_errors_exit_2

runner = CliRunner()


def test_plan_from_flags_alone():
    result = runner.invoke(app, ["plan", "--model", "llama-3.1-70b", "--gpu", "h200", "--tp", "2", "--weights", "fp8",
                                 "--max-model-len", "32768", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["parallel"]["tensor_parallel_size"] == 2
    assert plan["weights"]["format"] == "fp8"
    assert plan["memory"]["max_model_len"] == 32768
    # fp8 halves the 16-bit weights, so each of 2 GPUs holds about 70.55e9 / 2 bytes (+ 16-bit embeddings)
    assert 35e9 < plan["memory"]["weights_bytes"] < 37e9


def test_flags_override_the_scenario_file():
    base = json.loads(runner.invoke(app, ["plan", "scenarios/llama-3.1-8b-chat-h100.yaml", "--json"]).stdout)
    tp2 = json.loads(runner.invoke(app, ["plan", "scenarios/llama-3.1-8b-chat-h100.yaml", "--json",
                                         "--tp", "2"]).stdout)
    assert base["parallel"]["tensor_parallel_size"] == 1 and tp2["parallel"]["tensor_parallel_size"] == 2
    # TP 2 halves the sliced weights per GPU (norms and nothing else stay whole)
    assert tp2["memory"]["weights_bytes"] < 0.51 * base["memory"]["weights_bytes"]


def test_flags_without_model_or_gpu_is_an_input_error():
    result = runner.invoke(app, ["plan", "--model", "llama-3.1-8b"])
    assert result.exit_code == 2
    assert "--model/--gpu" in result.stderr


def test_models_and_gpus_list_the_catalogs():
    models = runner.invoke(app, ["models"])
    assert models.exit_code == 0 and "deepseek-v3" in models.stdout and "mixtral-8x7b" in models.stdout
    gpus = runner.invoke(app, ["gpus"])
    assert gpus.exit_code == 0
    for gpu in ("h100-sxm", "h100-pcie", "h200", "a100-40gb", "a100-80gb", "l40s", "l4", "b200", "mi300x"):
        assert gpu in gpus.stdout


# What a plain `sizer plan` must not load (issue 21: start-up doubled when the plan path imported the gateway,
# the trace reader and all of numpy): the engine (torch, triton), the report (jinja2, matplotlib), tables
# (pandas, pyarrow), click (typer carries its own), the simulator's machinery (numpy, simpy), and sizer's
# gateway, sweep, report, search, check, --emit, --simulate, trace, calibrated-profile and manifest code,
# which load with their command or input kind (sizer/cli/app.py COMMANDS, sizer/kinds.py KINDS); pydantic, which
# Typer reads flags with where sizer/cli/flag_values.py does not (a fifth of a plan's CPU time); importlib.metadata
# (the version is sizer.__version__, not the package metadata)
NOT_ON_THE_PLAN_PATH = ("pydantic", "importlib.metadata", "torch", "triton", "jinja2", "matplotlib", "pandas",
                        "pyarrow", "click", "numpy", "simpy",
                        "simulator.run", "simulator.traces", "simulator.metrics", "sizer.timing.profile",
                        "sizer.sizing.pipeline", "sizer.sizing.workload",
                        "sizer.cli.gateway", "sizer.inputs.gateway", "sizer.sizing.gateway", "simulator.gateway",
                        "sizer.cli.sweep", "sizer.sizing.sweep", "sizer.inputs.sweep_file", "sizer.outputs.sweep_store",
                        "sizer.cli.report", "sizer.outputs.report", "sizer.cli.search", "sizer.sizing.search",
                        "sizer.cli.check", "sizer.outputs.check", "sizer.cli.emit", "sizer.outputs.emit",
                        "sizer.inputs.manifest", "sizer.inputs.manifests.kubernetes")


def loaded_by(*args: str) -> list[str]:
    """Which of NOT_ON_THE_PLAN_PATH a fresh process has imported after running `sizer ARGS`."""
    code = ("import sys; from typer.testing import CliRunner; from sizer.cli import app; "
            f"r = CliRunner().invoke(app, {list(args)!r}); "
            "assert r.exit_code == 0, r.output; "
            f"print(' '.join(m for m in {NOT_ON_THE_PLAN_PATH!r} if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_plan_loads_only_what_a_plan_needs():
    assert loaded_by("plan", "scenarios/llama-3.1-8b-chat-h100.yaml") == []
    assert loaded_by("plan", "scenarios/llama-3.1-8b-chat-h100.yaml", "--json") == []


# What `sizer simulate --json` in a pipe must not load (issue 21, its start-up): the plan and the sizing pipeline
# (plan --simulate's, sizer/cli/plan_simulate.py), the terminal's tables and live bar (rich: sizer/kinds.py
# "tables", "live progress"), the GGUF reader (a model given as a .gguf file) and the manifest code
NOT_ON_THE_SIMULATE_JSON_PATH = ("rich", "sizer.sizing.plan", "sizer.sizing.pipeline", "sizer.cli.render",
                                 "sizer.cli.progress_bar", "sizer.inputs.gguf_file", "sizer.inputs.manifests.fields")


def test_simulate_json_loads_no_plan_tables_nor_bar():
    code = ("import sys; from typer.testing import CliRunner; from sizer.cli import app; "
            "r = CliRunner().invoke(app, ['simulate', 'scenarios/llama-3.1-8b-chat-h100.yaml', '--num-requests', '20', "
            "'--json']); assert r.exit_code == 0, r.output; "
            f"print(' '.join(m for m in {NOT_ON_THE_SIMULATE_JSON_PATH!r} if m in sys.modules))")
    env = {k: v for k, v in os.environ.items() if k not in ("TTY_COMPATIBLE", "FORCE_COLOR")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == []
    # the other side: the terminal's tables load when they are printed
    table = runner.invoke(app, ["simulate", "scenarios/llama-3.1-8b-chat-h100.yaml", "--num-requests", "20"])
    assert table.exit_code == 0 and "TTFT" in table.stdout


def test_a_gateway_document_and_emit_load_their_code_when_given():
    # the other side of the boundary: the same check sees the modules once their kind is used
    gateway = loaded_by("plan", "scenarios/gateway-residency.yaml", "--json")
    assert {"sizer.cli.gateway", "sizer.inputs.gateway", "sizer.sizing.gateway"} <= set(gateway)
    assert "sizer.outputs.report" not in gateway and "sizer.cli.emit" not in gateway
    emitted = loaded_by("plan", "scenarios/llama-3.1-8b-chat-h100.yaml", "--emit", "vllm")
    assert {"sizer.cli.emit", "sizer.outputs.emit"} <= set(emitted) and "sizer.cli.gateway" not in emitted


def test_a_command_runs_with_garbage_collection_on_and_start_up_frozen():
    # main() pauses collection while the modules load; the command itself (a simulation of a million
    # requests) must run with it on again, start-up's objects frozen out of its scans (sizer/cli/app.py,
    # input_errors_exit_2)
    gc.disable()
    try:
        enabled, frozen = input_errors_exit_2(lambda: (gc.isenabled(), gc.get_freeze_count()))()
        assert enabled and frozen > 0
    finally:
        gc.unfreeze()
        gc.enable()
    # a command called with collection on (the tests' CliRunner) freezes nothing
    assert input_errors_exit_2(gc.get_freeze_count)() == 0


def test_plan_from_a_config_json_path_with_quantization(tmp_path):
    # a Qwen2-style config with an AWQ quantization_config, as a checkpoint folder would hold it
    config = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584,
              "intermediate_size": 18944,
              "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
              "max_position_embeddings": 32768, "tie_word_embeddings": False, "torch_dtype": "float16",
              "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    result = runner.invoke(app, ["plan", "--model", str(tmp_path), "--gpu", "l40s", "--max-model-len", "8192",
                                 "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["weights"]["format"] == "awq"               # taken from quantization_config
    # Qwen2 has q/k/v biases; 28 layers x (28 + 2 x 4) x 128 = 129,024 of them, counted unconverted
    assert plan["model"]["parameters_derived"] == 7_615_616_512
    # 2 x 28 layers x 4 KV heads x 128 x 2 bytes (fp16) = 57,344 B per token
    assert plan["kv"]["bytes_per_token"] == 57_344


def test_littles_law_counts_the_tokens_requests_really_hold():
    # flags-only workload: 1,024-token prompts and 256-token outputs -> 1,280 KV tokens per request at its end
    plan = json.loads(runner.invoke(app, ["plan", "--model", "gemma-3-27b", "--gpu", "h200", "--max-model-len", "32768",
                                          "--rate", "2", "--json"]).stdout)
    cap = plan["capacity"]
    assert cap["kv_tokens_per_request"] == 1280
    # Gemma 3 slides a 1,024-token window on 52 of 62 layers: a 1,280-token request needs 1,280 tokens on the
    # 10 global layers but only 1,024 + 16 on the sliding ones. Per layer and token 2 x 16 KV heads x 128 x 2 B
    # = 8,192 B: the pool's blocks hold the global layers' 16 tokens (10 x 8,192 B each), the sliding layers' window
    # comes out of the same bytes, in vLLM's groups of 10 layers: 6 of them, 60 slots for the 52 layers
    # (kv_cache_utils._get_kv_cache_groups_uniform_page_size)
    kv_bytes = plan["memory"]["kv_cache_bytes"]
    assert cap["kv_capacity_tokens"] == int(kv_bytes // (10 * 8192 * 16)) * 16
    assert cap["requests_held_per_replica"] == int(kv_bytes // (1280 * 10 * 8192 + 1040 * 60 * 8192))
    assert cap["replicas_for_memory"] == 1 and plan["verdict"] == "fits"


def test_an_unnamed_scenario_is_named_after_its_file():
    # search and report build scenarios from mappings; they must title them as plan does
    from sizer.inputs.scenario import scenario_from_dict
    data = {"model": "llama-3.1-8b", "hardware": "h100", "workload": {"arrival": {"rate_per_s": 1},
            "prompt_tokens": {"distribution": "fixed", "value": 64},
            "output_tokens": {"distribution": "fixed", "value": 8}}}
    assert scenario_from_dict(data, "scenarios/my-chat.yaml").name == "my-chat"
    assert scenario_from_dict(data, None).name == "scenario"


@pytest.mark.parametrize("argv, prefix, named", [
    # click's own usage errors, which Typer prints as a multi-line box, come out as one line too. The words
    # after our prefix are Typer's and click's, which change between versions: the line names the flag, the
    # option or the command, and that is what is asserted
    (["plan", "--tp", "two"], "error: --tp: ", "--tp"),
    (["plan", "--bogus"], "error: ", "--bogus"),
    (["no-such-command"], "error: ", "no-such-command"),
    (["check"], "error: file: ", "file"),
])
def test_usage_errors_are_one_line_exit_2(argv, prefix, named):
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(prefix) and named in line, line


def test_models_and_gpus_as_json():
    models = {m["name"]: m for m in json.loads(runner.invoke(app, ["models", "--json"]).stdout)}
    # the catalog's Hugging Face repo is what --emit serves; 8B: 32 layers, 128k context
    assert models["llama-3.1-8b"]["hf_repo"] == "meta-llama/Llama-3.1-8B"
    assert models["llama-3.1-8b"]["layers"] == 32 and models["llama-3.1-8b"]["max_position_embeddings"] == 131072
    gpus = {g["id"]: g for g in json.loads(runner.invoke(app, ["gpus", "--json"]).stdout)}
    assert gpus["h100-sxm"]["memory_bytes"] == 85_045_477_376      # deviceQuery's total on an H100 SXM, the profile's


def test_one_gpu_is_singular():
    out = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "8192"]).stdout
    assert "1 GPU per replica" in out and "1 replica x 1 GPU = 1 GPU" in out
    assert "1 GPUs" not in out and "replica(s)" not in out


@pytest.mark.parametrize("command", ["plan", "simulate"])
@pytest.mark.parametrize("flag, value, field", [("--rate", "4", "workload.arrival.rate_per_s"),
                                                ("--prompt-tokens", "100", "workload.prompt_tokens")])
def test_a_traffic_flag_on_a_trace_is_refused_naming_the_flag(tmp_path, command, flag, value, field):
    # a trace replays its own arrivals and lengths; `simulate` named the file's field, which the file did not have
    trace = Path(__file__).resolve().parents[2] / "data" / "traces" / "azure_conv_head500.csv"
    scenario = tmp_path / "traced.yaml"
    scenario.write_text(f"model: llama-3.1-8b\nhardware: h100\nworkload:\n  trace: {{path: {trace}, format: csv}}\n"
                        "  num_requests: 20\n")
    result = CliRunner().invoke(app, [command, str(scenario), flag, value])
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert line.startswith(f"error: {flag}: not with workload.trace") and line.endswith(f"(as {field})")


def test_a_profile_that_is_not_there_is_refused_naming_profile(tmp_path):
    # a folder without profile.yaml named neither the flag; a missing .yaml was blamed on --gpu, which was not given
    result = CliRunner().invoke(app, ["plan", "--model", "llama-3.1-8b", "--profile", str(tmp_path)])
    assert result.exit_code == 2 and result.stderr.startswith(f"error: {tmp_path}: --profile: a folder without "
                                                              "profile.yaml")
    missing = tmp_path / "mine.yaml"
    result = CliRunner().invoke(app, ["plan", "--model", "llama-3.1-8b", "--profile", str(missing)])
    assert result.exit_code == 2 and result.stderr.strip() == (
        f"error: {missing}: --profile: expected a hardware profile .yaml file or a calibrated profile folder, and "
        "nothing is there")
