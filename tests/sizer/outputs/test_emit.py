"""`--emit`: the planned configuration as a vLLM command, a Kubernetes manifest or an SGLang command.

Each writer's output is parsed back (shlex for commands, YAML for manifests, `sizer check`'s own
vLLM argument reader) and compared with the settings the plan resolved, so a flag dropped, renamed
or given the wrong value fails here."""

import json
import shlex

import pytest
import yaml
from typer.testing import CliRunner

from sizer.cli import app
from sizer.inputs.hardware import all_profiles
from sizer.inputs.manifests.commands import parse_vllm_args
from sizer.inputs.manifests.gpus import read_label
from sizer.inputs.scenario import load_scenario, scenario_from_dict
from sizer.outputs.emit import emit, k8s_name, serving_config, sglang_argv, vllm_argv
from sizer.sizing.plan import make_plan
from sizer.sizing.resolve import resolve
from validation.errors import FieldError

runner = CliRunner()


def config_of(r):
    plan = make_plan(r)
    return serving_config(r, plan.cost, plan.verdict)


def scenario(**deployment):
    return scenario_from_dict({"model": deployment.pop("model", "llama-3.1-70b"),
                               "hardware": deployment.pop("gpu", "h200"),
                               "deployment": deployment,
                               "workload": {"arrival": {"rate_per_s": 2},
                                            "prompt_tokens": {"distribution": "fixed", "value": 1000},
                                            "output_tokens": {"distribution": "fixed", "value": 200}}}, None)


def flags(argv: list[str]) -> dict[str, str | bool]:
    """`--flag value` and bare `--flag` pairs of a command line."""
    out, i = {}, 0
    while i < len(argv):
        takes = i + 1 < len(argv) and not argv[i + 1].startswith("--")
        out[argv[i]] = argv[i + 1] if takes else True
        i += 1 + takes
    return out


def command_of(script: str) -> list[str]:
    """A shell snippet's command: comments dropped, line continuations joined (as the shell does; shlex
    would keep the escaped newline)."""
    text = "\n".join(line for line in script.splitlines() if not line.startswith("#"))
    return shlex.split(text.replace("\\\n", " "))


def test_vllm_command_carries_every_resolved_setting():
    r = resolve(load_scenario("scenarios/llama-3.1-70b-h200.yaml"))
    argv = command_of(emit("vllm", config_of(r)))
    assert argv[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-70B"]    # the catalog's HF repo, not its name
    f = flags(argv[3:])
    e = r.engine
    # the scenario states TP 4, fp8 weights and 32k context; the rest are vLLM's defaults on an H200 as
    # resolve applied them: written out so a different vLLM version's default cannot change what was sized
    assert f["--tensor-parallel-size"] == "4" and f["--pipeline-parallel-size"] == "1"
    assert f["--quantization"] == "fp8" and f["--kv-cache-dtype"] == "auto" and f["--max-model-len"] == "32768"
    assert f["--gpu-memory-utilization"] == "0.9" and f["--block-size"] == str(e.block_size)
    assert f["--max-num-seqs"] == str(e.max_num_seqs)
    assert f["--max-num-batched-tokens"] == str(e.max_num_batched_tokens)
    assert f["--enable-prefix-caching"] is e.enable_prefix_caching is True
    assert f["--enable-chunked-prefill"] is e.enable_chunked_prefill is True


def test_sizer_check_reads_the_vllm_command_back_to_the_same_deployment():
    r = resolve(scenario(tensor_parallel_size=2, quantization="fp8", kv_cache_dtype="fp8", max_model_len=16384,
                         max_num_seqs=64, enable_prefix_caching=False,
                         speculative_config={"method": "ngram", "num_speculative_tokens": 4,
                                             "acceptance_rate": 0.6}))
    fields, model, notes = parse_vllm_args(vllm_argv(config_of(r)), "emitted")
    assert model == "meta-llama/Llama-3.1-70B" and notes == []          # every flag written is one check reads
    assert fields == {"tensor_parallel_size": 2, "pipeline_parallel_size": 1, "data_parallel_size": 1,
                      "quantization": "fp8", "kv_cache_dtype": "fp8", "max_model_len": 16384,
                      "gpu_memory_utilization": 0.9, "block_size": 16, "max_num_seqs": 64,
                      "max_num_batched_tokens": r.engine.max_num_batched_tokens, "enable_prefix_caching": False,
                      "enable_chunked_prefill": True,
                      "speculative_config": {"method": "ngram", "num_speculative_tokens": 4}}


def test_a_hybrid_models_block_is_left_to_vllm_which_aligns_it():
    # review finding: Qwen3-Next at TP 2 takes 544-token blocks (vLLM's hybrid alignment, memory.hybrid_block_tokens);
    # writing --block-size 544 gave a command vLLM refuses (its --block-size takes 1, 8, ..., 256) and check refused
    r = resolve(scenario(model="qwen3-next-80b-a3b", tensor_parallel_size=2))
    assert r.engine.block_size == 544
    c = config_of(r)
    fields, _, notes = parse_vllm_args(vllm_argv(c), "emitted")
    assert "block_size" not in fields and notes == []
    assert any("left to the engine (it aligns a hybrid model's block" in line and "544-token" in line
               for line in emit("vllm", c).splitlines())


def test_speculative_config_is_json_vllm_parses():
    r = resolve(scenario(speculative_config={"method": "draft_model", "model": "llama-3.2-1b",
                                             "num_speculative_tokens": 3, "acceptance_rate": 0.7}, max_model_len=8192,
                         model="llama-3.1-8b", gpu="h100"))
    f = flags(vllm_argv(config_of(r))[3:])
    # the draft model by its Hugging Face repo, as vLLM loads it
    assert json.loads(f["--speculative-config"]) == {"method": "draft_model", "num_speculative_tokens": 3,
                                                     "model": "meta-llama/Llama-3.2-1B"}


def test_a_format_the_checkpoint_states_is_left_to_the_checkpoint():
    # gpt-oss ships MXFP4: vLLM reads it from quantization_config, and refuses a --quantization that differs
    r = resolve(scenario(model="gpt-oss-120b", max_model_len=8192))
    argv = vllm_argv(config_of(r))
    assert "--quantization" not in argv and "--dtype" not in argv
    # a 16-bit plan names its dtype
    assert flags(vllm_argv(config_of(resolve(scenario(max_model_len=8192, tensor_parallel_size=2))))[3:])[
        "--dtype"] == "bfloat16"


def test_sglang_command_carries_the_same_settings_in_its_names():
    r = resolve(scenario(tensor_parallel_size=2, quantization="fp8", kv_cache_dtype="fp8", max_model_len=16384,
                         max_num_seqs=64, enable_prefix_caching=False))
    argv = sglang_argv(config_of(r))
    assert argv[:3] == ["python3", "-m", "sglang.launch_server"]
    f = flags(argv[3:])
    assert f["--model-path"] == "meta-llama/Llama-3.1-70B" and f["--tp-size"] == "2" and f["--pp-size"] == "1"
    assert f["--quantization"] == "fp8" and f["--kv-cache-dtype"] == "fp8_e4m3"    # SGLang has no bare fp8
    assert f["--context-length"] == "16384" and f["--mem-fraction-static"] == "0.9"
    assert f["--max-running-requests"] == "64"
    assert f["--chunked-prefill-size"] == str(r.engine.max_num_batched_tokens)
    assert f["--disable-radix-cache"] is True                      # prefix caching off


def test_kubernetes_deployment_is_valid_yaml_with_the_gpu_resource_and_node_label():
    r = resolve(load_scenario("scenarios/llama-3.1-70b-h200.yaml"))
    config = config_of(r)
    (doc,) = list(yaml.safe_load_all(emit("k8s", config)))
    assert doc["kind"] == "Deployment" and doc["spec"]["replicas"] == config.replicas
    assert doc["spec"]["selector"]["matchLabels"] == doc["spec"]["template"]["metadata"]["labels"]
    pod = doc["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 4}          # TP 4 x PP 1 x DP 1
    assert read_label("nvidia.com/gpu.product", pod["nodeSelector"]["nvidia.com/gpu.product"], {}).profile == "h200"
    assert container["command"] + container["args"] == vllm_argv(config)


def test_a_replica_larger_than_a_node_is_a_leaderworkerset():
    # 405B bf16 at TP 8 x PP 2 = 16 GPUs: two nodes of 8 H100s per replica
    r = resolve(scenario(model="llama-3.1-405b", gpu="h100", tensor_parallel_size=8, pipeline_parallel_size=2,
                         max_model_len=8192))
    text = emit("k8s", config_of(r))
    assert "node size assumed: 8 x" in text
    (doc,) = list(yaml.safe_load_all(text))
    assert doc["kind"] == "LeaderWorkerSet"
    lws = doc["spec"]["leaderWorkerTemplate"]
    assert lws["size"] == 2
    for role in ("leaderTemplate", "workerTemplate"):
        (container,) = lws[role]["spec"]["containers"]
        assert container["resources"]["limits"] == {"nvidia.com/gpu": 8}
    leader = lws["leaderTemplate"]["spec"]["containers"][0]["command"][2]
    f = flags(shlex.split(leader.split("; ", 1)[1])[3:])
    assert f["--tensor-parallel-size"] == "8" and f["--pipeline-parallel-size"] == "2"


def test_amd_gpus_get_amd_resources():
    (doc,) = list(yaml.safe_load_all(emit("k8s", config_of(resolve(scenario(gpu="mi300x", max_model_len=8192))))))
    pod = doc["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"] == {"amd.com/gpu": 1}
    assert "amd.com/gpu.product-name" in pod["nodeSelector"]


def test_every_node_label_names_its_own_profile_back():
    # sizer check finds the GPU from the labels --emit k8s writes (each profile's kubernetes.schedule): each must
    # map to the profile it was written for; 15 bundled GPUs have one (NVIDIA A100 to GB200, L4, L40S, MI300X-MI355X)
    written = {gpu: spec.kubernetes.schedule for gpu, spec in all_profiles().items()
               if spec.kubernetes and spec.kubernetes.schedule}
    assert len(written) == 15
    for gpu, schedule in written.items():
        assert read_label(schedule.label_key, schedule.label_value, {}).profile == gpu, gpu


def test_kubernetes_names():
    assert k8s_name("Llama_3.1 70B (H200)") == "llama-3-1-70b-h200"


def test_plan_emit_prints_only_the_manifest_on_stdout():
    result = runner.invoke(app, ["plan", "scenarios/llama-3.1-70b-h200.yaml", "--emit", "k8s"])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["kind"] == "Deployment"     # `| kubectl apply -f -` works
    assert "Memory per GPU" in result.stderr                          # the plan itself went to stderr


def test_plan_emit_to_a_file(tmp_path):
    out = tmp_path / "serve.sh"
    result = runner.invoke(app, ["plan", "scenarios/llama-3.1-70b-h200.yaml", "--emit", "vllm", "--emit-to", str(out)])
    assert result.exit_code == 0, result.output
    assert "Memory per GPU" in result.stdout and f"wrote {out}" in result.stdout
    assert command_of(out.read_text())[:2] == ["vllm", "serve"]


@pytest.mark.parametrize("argv, says", [
    (["--emit", "docker"], "--emit: 'docker' is not one of vllm, k8s, sglang"),
    (["--emit", "vllm", "--json"], "--emit: --json and --emit both print to stdout"),
    (["--emit-to", "x.yaml"], "--emit-to: needs --emit"),
    # a bundled profile without a schedule or GKE type is sizer's gap: the flag is named with the GPUs it does
    # emit for (as before issue 22's merge: "gke is emitted for a100-40gb, a100-80gb, h100-sxm, ..."), not the
    # bundled file; the lists are the bundled profiles whose kubernetes.schedule is set (gaudi3, the TPUs, V100s
    # and local devices have none) and, of those, whose gke_accelerators list is not empty
    (["--gpu", "gaudi3", "--emit", "k8s"], "error: --emit: no Kubernetes resource known for gaudi3; k8s is emitted "
                                           "for a100-40gb, a100-80gb, a100-pcie-80gb, b200, b300, gb200, h100-pcie, "
                                           "h100-sxm, h20, h200, l4, l40s, mi300x, mi325x, mi355x"),
    (["--gpu", "l40s", "--emit", "gke"], "error: --emit: no GKE accelerator type known for l40s; gke is emitted "
                                         "for a100-40gb, a100-80gb, b200, gb200, h100-sxm, h200, l4"),
    # gke asked of a GPU with no Kubernetes resource at all: the gke list, not the k8s one
    (["--gpu", "gaudi3", "--emit", "gke"], "error: --emit: no GKE accelerator type known for gaudi3; gke is emitted "
                                           "for a100-40gb, a100-80gb, b200, gb200, h100-sxm, h200, l4"),
])
def test_bad_emit_flags_are_one_line(argv, says):
    result = runner.invoke(app, ["plan", "scenarios/llama-3.1-70b-h200.yaml", *argv])
    assert result.exit_code == 2
    assert says in " ".join(result.stderr.split()) and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "hardware_profiles" not in result.stderr


@pytest.mark.parametrize("engine", ["tensorrt-llm", "lmdeploy", "tgi"])
@pytest.mark.parametrize("fmt", ["vllm", "k8s", "gke", "sglang"])
def test_another_engines_plan_is_not_written_as_a_vllm_or_sglang_configuration(engine, fmt):
    # audit: a TensorRT-LLM plan emitted as `vllm serve` carried TensorRT-LLM's defaults (--block-size 32,
    # --max-num-seqs 2048 and its gpu_memory_utilization, a share of the memory left free there) without a word
    # --max-model-len 8192: TensorRT-LLM's own step budget (8,192, chunking off) takes a whole prompt that long
    result = runner.invoke(app, ["plan", "scenarios/llama-3.1-70b-h200.yaml", "--engine", engine, "--max-model-len",
                                 "8192", "--emit", fmt])
    assert result.exit_code == 2 and not result.stdout, result.output
    (line,) = result.stderr.strip().splitlines()
    line = " ".join(line.split())
    assert line.startswith("error: --emit: ") and f"deployment.engine {engine}" in line
    assert "plan with deployment.engine" in line and "(--engine)" in line


def test_vllm_and_sglang_plans_emit_as_each_other_and_slot_plans_only_as_their_own():
    # vLLM's and SGLang's plans write every setting out, which both engines read alike (EMIT_ENGINES)
    for engine, fmt in (("sglang", "vllm"), ("vllm", "sglang")):
        result = runner.invoke(app, ["plan", "scenarios/llama-3.1-70b-h200.yaml", "--engine", engine, "--emit", fmt])
        assert result.exit_code == 0, result.output
    laptop = runner.invoke(app, ["plan", "scenarios/llamacpp-laptop-m4-pro.yaml", "--emit", "ollama"])
    assert laptop.exit_code == 2 and "deployment.engine llama.cpp" in laptop.stderr
    assert " ".join(laptop.stderr.split()).endswith("; emit llamacpp")


def test_search_emits_its_recommendation():
    result = runner.invoke(app, ["search", "scenarios/llama-3.1-70b-h200.yaml", "--gpus", "h200", "--tp", "4",
                                 "--weights", "fp8", "--kv-cache-dtype", "auto", "--workers", "1",
                                 "--num-requests", "50", "--emit", "vllm"])
    assert result.exit_code == 0, result.output
    script = result.stdout
    # the one configuration searched is the recommendation; its replicas are the sizing pipeline's
    assert "recommended" in result.stderr and script.startswith("# sizer: llama-3.1-70b-h200 on 4 x NVIDIA H200")
    f = flags(command_of(script)[3:])
    assert f["--tensor-parallel-size"] == "4" and f["--quantization"] == "fp8"


def test_model_overrides_reach_the_engine_and_come_back():
    # a plan of Qwen3-8B with the YaRN fields of its model card: vLLM serves the 131,072 tokens sized only when the
    # same keys reach its config (--hf-overrides; SGLang's --json-model-override-args), and check reads them back
    yarn = {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
    r = resolve(scenario(model={"name": "qwen3-8b", "overrides": yarn}, gpu="h100"))
    c = config_of(r)
    f = flags(command_of(emit("vllm", c))[3:])
    assert f["--max-model-len"] == "131072" and json.loads(f["--hf-overrides"]) == yarn
    # SGLang does not extend the context for a yarn scaling with its original length (get_context_length: factor 1):
    # the 131,072 vLLM serves is refused for it, a plan within its 40,960 carries the overrides
    with pytest.raises(FieldError, match="past the model's max_position_embeddings 40,960"):
        sglang_argv(c)
    within = config_of(resolve(scenario(model={"name": "qwen3-8b", "overrides": yarn}, gpu="h100",
                                        max_model_len=40960)))
    assert json.loads(flags(sglang_argv(within)[3:])["--json-model-override-args"]) == yarn
    fields, _, notes = parse_vllm_args(vllm_argv(c), "emitted")
    assert fields["model_overrides"] == yarn and notes == []
    # without overrides nothing is added
    assert "--hf-overrides" not in vllm_argv(config_of(resolve(scenario(model="qwen3-8b", gpu="h100"))))


def test_overrides_llama_cpp_cannot_take_are_refused():
    r = resolve(scenario_from_dict({"model": {"name": "llama-3.2-1b", "overrides": {"num_hidden_layers": 8}},
                                    "hardware": "rtx-4090", "deployment": {"engine": "llama.cpp"},
                                    "workload": {"arrival": {"rate_per_s": 1},
                                                 "prompt_tokens": {"distribution": "fixed", "value": 100},
                                                 "output_tokens": {"distribution": "fixed", "value": 10}}}, None))
    with pytest.raises(FieldError) as err:
        emit("llamacpp", config_of(r))
    assert err.value.field == "--emit" and "llama.cpp does not read" in err.value.message


@pytest.mark.parametrize("utilisation", [0.9, 0.9999999, 0.523456789, 1.0])
def test_gpu_memory_utilization_is_written_as_planned(utilisation):
    # audit: `:g` kept 6 significant digits, so a plan at 0.9999999 was emitted as 1 (a different KV pool);
    # the shortest decimal that reads back as the same float is written, and check reads back the planned value
    c = config_of(resolve(scenario(model="llama-3.1-8b", gpu_memory_utilization=utilisation, max_model_len=4096)))
    argv = vllm_argv(c)
    written = flags(argv[3:])["--gpu-memory-utilization"]
    assert float(written) == utilisation and "e" not in written
    assert parse_vllm_args(argv, "x.yaml")[0]["gpu_memory_utilization"] == utilisation
    assert float(flags(sglang_argv(c)[3:])["--mem-fraction-static"]) == utilisation


def test_ollama_keep_alive_is_a_duration_go_parses():
    # `:g` wrote 1,234,567 s as 1.23457e+06s, which Go's time.ParseDuration (Ollama's envconfig) refuses
    r = resolve(scenario_from_dict({"model": "llama-3.1-8b", "hardware": "l4",
                                    "deployment": {"engine": "ollama", "quantization": "q4_k_m",
                                                   "keep_alive_s": 1234567},
                                    "workload": {"arrival": {"rate_per_s": 0.1},
                                                 "prompt_tokens": {"distribution": "fixed", "value": 100},
                                                 "output_tokens": {"distribution": "fixed", "value": 10}}}, None))
    assert "OLLAMA_KEEP_ALIVE=1234567s" in emit("ollama", config_of(r))
