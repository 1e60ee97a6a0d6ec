"""One CLI: every command's --help runs, and a flag name means one thing in every command that has it.

FLAGS is the one table of flag names: each flag's meaning and words its help must use wherever it
appears. A new flag must be added here (so its name is chosen against the others), and a flag
whose help no longer says what the table says (`--weights` as a folder, say) fails."""

import pytest
import typer
from typer.testing import CliRunner

from sizer.cli import app
from sizer.cli.app import COMMANDS

runner = CliRunner()

# flag -> (meaning, words its help contains in every command; any one of them)
FLAGS = {
    "--json": ("print the result as JSON", ("JSON",)),
    "--model": ("the model: catalog name, config.json, checkpoint folder or HF id", ("catalog name",)),
    "--gpu": ("one accelerator profile", ("profile",)),
    "--gpus": ("accelerator profiles a search tries", ("profiles",)),
    "--gpus-per-replica": ("GPUs one replica has, all its pods", ("GPUs one replica has",)),
    "--slots": ("llama.cpp / Ollama parallel slot counts a search tries", ("slot counts",)),
    "--tp": ("tensor parallel size (a list where a search runs)", ("tensor_parallel_size", "tensor parallel")),
    "--pp": ("pipeline parallel size (a list where a search runs)", ("pipeline_parallel_size", "pipeline parallel")),
    "--attention-dp": ("MoE: attention data-parallel, experts spread over the GPUs (DEP)", ("enable_attention_dp",)),
    "--weights": ("weight format(s), never a folder", ("weight format",)),
    "--checkpoint": ("folder of real weights", ("checkpoint",)),
    "--kv-cache-dtype": ("KV cache format(s)", ("fp8",)),
    "--max-model-len": ("longest context per sequence", ("context",)),
    "--max-num-batched-tokens": ("tokens per step", ("step",)),
    "--max-num-seqs": ("sequences per step", ("sequences per step",)),
    "--block-size": ("KV block size", ("KV block",)),
    "--rate": ("arrival rate, requests per second", ("requests per second",)),
    "--concurrency": ("clients of a closed loop", ("closed loop", "clients")),
    "--prompt-tokens": ("prompt length in tokens", ("prompt length",)),
    "--output-tokens": ("output length in tokens", ("output length",)),
    "--ttft-ms": ("time to first token target, ms", ("time to first token",)),
    "--itl-ms": ("inter-token latency target, ms", ("inter-token latency",)),
    "--tpot-ms": ("time-per-output-token target, ms", ("time-per-output-token",)),
    "--num-requests": ("how many requests are simulated or replayed", ("requests",)),
    "--replicas": ("replicas behind the router", ("replicas",)),
    "--max-replicas": ("most replicas a configuration may need", ("replicas",)),
    "--profile": ("calibrated profile folder (plan: or a hardware profile file)", ("calibrated profile",)),
    "--engine": ("serving engine", ("serving engine",)),
    "--memory-gb": ("the device's memory as sold", ("memory as sold",)),
    "--ctx-size": ("llama.cpp: total context of all slots", ("total context",)),
    "--benchmark": ("one benchmark of a GuideLLM report, by index", ("GuideLLM report",)),
    "--kernel-tables": ("a device's kernel-table folder", ("kernel-table folder",)),
    "--shapes-of": ("models whose shapes a device calibration times", ("shapes of",)),
    "--tp-sizes": ("tensor-parallel sizes whose shards a device calibration times", ("tensor-parallel sizes",)),
    "--simulate": ("add the simulated sizing", ("simulated",)),
    "--emit": ("runnable configuration: vllm, k8s, sglang", ("vllm, k8s, sglang",)),
    "--emit-to": ("file for --emit", ("--emit",)),
    "--workers": ("parallel processes", ("parallel processes",)),
    "--speculative": ("try speculative decoding on and off", ("speculative",)),
    "--csv": ("CSV file to write", ("row per",)),
    "--requests-csv": ("CSV file of per-request records", ("row per request",)),
    "--all": ("list every rejected configuration", ("rejected",)),
    "--router": ("routing policy", ("round_robin",)),
    "-o": ("the report's HTML file", ("HTML",)),
    "--output": ("the report's HTML file", ("HTML",)),
    "--pdf": ("also write a PDF", ("PDF",)),
    "--no-search": ("no search", ("only",)),
    "--date": ("date in the header", ("date",)),
    "--junit": ("JUnit XML file", ("JUnit",)),
    "--kv-share": ("share of max_num_seqs held at max_model_len", ("share of max_num_seqs",)),
    "--budget": ("most the deployment may cost per hour", ("USD per hour",)),
    "--scenario": ("a side scenario file giving the workload and SLO", ("scenario YAML",)),
    "--share": ("share of the workload's requests this deployment serves", ("share of the workload",)),
    "--device": ("cpu instead of a GPU", ("cpu",)),
    "--scale": ("share of the model's layers", ("share of the model's layers",)),
    "--out": ("folder the profile is written into", ("folder",)),
    "--kernels": ("kernel implementation", ("triton",)),
    "--seed": ("random seed", ("seed",)),
    "--num-blocks": ("KV blocks", ("KV blocks",)),
    "--framework": ("the serving framework whose measurements are read", ("framework",)),
    "--all-shapes": ("every measured shape, not only the catalog's", ("every measured shape",)),
    "--results": ("the sweep's Parquet file of results", ("Parquet",)),
    "--sweep": ("a sweep's Parquet file of results", ("Parquet",)),
    "--backend": ("where a sweep's points run: local or ray", ("ray",)),
    "--address": ("the Ray cluster a sweep joins", ("Ray",)),
    "--wide": ("every table in full, not fitted to the terminal", ("wide",)),
    "--help": ("help", ("help",)),
}


def options() -> list[tuple[str, str, str]]:
    """(command, flag, help) of every option of every command."""
    group = typer.main.get_command(app)
    ctx = typer.Context(group)
    out = []
    for name in COMMANDS:
        command = group.get_command(ctx, name)
        for param in command.get_params(ctx):
            if param.param_type_name == "option":
                out += [(name, flag, param.help or "") for flag in param.opts]
    return out


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_has_help(command):
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


def test_every_flag_is_in_the_table_and_means_what_it_says():
    unknown = sorted({(c, f) for c, f, _ in options() if f not in FLAGS})
    assert unknown == [], "name these flags in FLAGS (or reuse a name that means the same)"
    wrong = [(c, f, h) for c, f, h in options() if f != "--help" and not any(w in h for w in FLAGS[f][1])]
    assert wrong == []


def test_one_name_for_request_counts_and_weights_is_always_a_format():
    flags = {(c, f) for c, f, _ in options()}
    # search, simulate and validate count requests with the same flag
    assert {("search", "--num-requests"), ("simulate", "--num-requests"), ("validate", "--num-requests")} <= flags
    assert not any(f == "--requests" for _, f in flags)
    assert ("validate", "--checkpoint") in flags and ("validate", "--weights") not in flags


def test_version_and_completion_are_the_apps():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.startswith("sizer ")
    top = runner.invoke(app, ["--help"]).output
    assert "--install-completion" in top
    # not repeated on each command
    assert not any(f == "--install-completion" for _, f, _ in options())
