"""Every flag `--emit` writes is one the engine's pinned release declares, with a value among its declared choices
(tests/data/engine_args/, extracted by benchmarks/extract_engine_args.py from vLLM 0.33.0, SGLang 0.5.23,
llama.cpp's common/arg.cpp and Ollama's envconfig and api types), for every bundled scenario and each feature
path (speculative decoding, LoRA, multi-node, quantisation, fp8 KV). Beyond parsing, each emitter carries what
the engine needs to start: a test per emitter below."""

import json
import shlex
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sizer.cli import app
from sizer.errors import InputError
from sizer.inputs.model_spec import CATALOG_DIR, catalog_names
from sizer.inputs.scenario import load_scenario, scenario_from_dict
from sizer.outputs import emit as emitter
from sizer.outputs.emit import emit, llamacpp_argv, serving_config, sglang_argv, vllm_argv
from sizer.sizing.plan import make_plan
from sizer.sizing.resolve import resolve
from validation.safe_load import load_json

DATA = Path(__file__).resolve().parents[2] / "data" / "engine_args"
HEADS = Path(__file__).resolve().parents[2] / "data" / "spec_heads"       # a head's own config (its README)
TABLES = {name: load_json(DATA / f"{name}.json") for name in ("vllm", "sglang", "llama-server", "ollama")}
SCENARIOS = sorted(p for p in Path("scenarios").rglob("*.yaml") if "deploy" not in p.parts
                   if "sweeps" not in p.parts and not p.name.startswith("gateway-"))


def config_of(r):
    plan = make_plan(r)
    return serving_config(r, plan.cost, plan.verdict)


def scenario(**deployment):
    return scenario_from_dict({"model": deployment.pop("model", "llama-3.1-70b"),
                               "hardware": deployment.pop("gpu", "h200"), "deployment": deployment,
                               "workload": {"arrival": {"rate_per_s": 2},
                                            "prompt_tokens": {"distribution": "fixed", "value": 1000},
                                            "output_tokens": {"distribution": "fixed", "value": 200}}}, None)


def checked_flags(engine: str, args: list[str]) -> dict[str, str | bool]:
    """`args` (after the command and any positional model) read as the engine's parser would: each option in
    its table, a value where it takes one and within its choices; the options as a dict."""
    options, out, i = TABLES[engine]["options"], {}, 0
    while i < len(args):
        flag = args[i]
        assert flag in options, f"{engine} {TABLES[engine]['source']['release']} has no option {flag}"
        spec = options[flag]
        if not spec["takes_value"]:
            out[flag], i = True, i + 1
            continue
        assert i + 1 < len(args), f"{flag} needs a value"
        value = args[i + 1]
        if spec["choices"] is not None:
            assert value in spec["choices"], f"{flag} {value}: not one of {spec['choices']}"
        for key, allowed in spec.get("json_choices", {}).items():
            assert json.loads(value)[key] in allowed, f"{flag} {key}: {json.loads(value)[key]} not in {allowed}"
        out[flag], i = value, i + 2
    return out


def vllm_flags(argv: list[str]) -> dict:
    assert argv[:2] == ["vllm", "serve"]
    return checked_flags("vllm", argv[3:])          # argv[2]: the model, vLLM's positional model_tag


def sglang_flags(argv: list[str]) -> dict:
    assert argv[:3] == ["python3", "-m", "sglang.launch_server"]
    return checked_flags("sglang", argv[3:])


def llama_flags(argv: list[str]) -> dict:
    assert argv[0] == "llama-server"
    return checked_flags("llama-server", argv[1:])


def ollama_names(script: str) -> set[str]:
    """The OLLAMA_* variables `ollama serve` is given and the Modelfile's PARAMETER names."""
    words = shlex.split(script, comments=True)
    env = {w.split("=", 1)[0] for w in words if w.startswith("OLLAMA_")}
    params = {"PARAMETER " + w.split()[1] for w in words if w.startswith("PARAMETER ")}
    return env | params


def kubernetes_argvs(text: str) -> list[list[str]]:
    """The vLLM command lines in an emitted manifest (a Deployment's command + args; an LWS leader's script)."""
    (doc,) = list(yaml.safe_load_all(text))
    if doc["kind"] == "Deployment":
        (c,) = doc["spec"]["template"]["spec"]["containers"]
        return [[a.replace("$$", "$") for a in c["command"] + c["args"]]]
    script = doc["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["command"][2]
    return [shlex.split(script.replace("$$", "$").split("; ", 1)[1])]


def every_emitted(r) -> None:
    """Each format the plan can be emitted as, every flag checked against its engine's table."""
    c = config_of(r)
    if c.slots and c.slots.engine == "llama.cpp":
        llama_flags(llamacpp_argv(c))
        return
    if c.slots:
        names = ollama_names(emit("ollama", c))
        assert names and names <= set(TABLES["ollama"]["options"]), names - set(TABLES["ollama"]["options"])
        return
    if c.speculative and c.speculative.method == "medusa":      # neither vLLM 0.33.0 nor SGLang runs Medusa
        return
    vllm_flags(vllm_argv(c))
    sglang_flags(sglang_argv(c))
    try:
        text = emit("k8s", c)
    except InputError:              # a GPU with no Kubernetes device plugin known (TPU, Gaudi, laptops)
        return
    for argv in kubernetes_argvs(text):
        vllm_flags(argv)


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_every_flag_emitted_for_every_bundled_scenario_is_in_the_pinned_tables(path):
    r = resolve(load_scenario(str(path)))
    if not r.memory.fits:
        pytest.skip("nothing to emit: the scenario does not fit (by design)")
    every_emitted(r)


FEATURES = {
    "eagle": dict(model="llama-3.1-8b", gpu="h100-sxm", max_model_len=8192,
                  speculative_config={"method": "eagle", "num_speculative_tokens": 3, "acceptance_rate": 0.7}),
    "eagle3-own-head": dict(model="llama-3.1-8b", gpu="h100-sxm", max_model_len=8192,
                            speculative_config={"method": "eagle3", "num_speculative_tokens": 3,
                                                "acceptance_rate": 0.7,
                                                "model": str(HEADS / "eagle3-llama3.1-instruct-8b")}),
    "ngram": dict(max_model_len=8192, tensor_parallel_size=2,
                  speculative_config={"method": "ngram", "num_speculative_tokens": 4, "acceptance_rate": 0.5}),
    "draft": dict(model="llama-3.1-8b", gpu="h100-sxm", max_model_len=8192,
                  speculative_config={"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 3,
                                      "acceptance_rate": 0.6}),
    "lora": dict(model="llama-3.1-8b", gpu="h100-sxm", max_model_len=8192, enable_lora=True, max_loras=4,
                 max_lora_rank=16),
    "multi-node": dict(model="llama-3.1-405b", gpu="h100-sxm", tensor_parallel_size=8, pipeline_parallel_size=2,
                       max_model_len=8192),
    "fp8-weights-fp8-kv": dict(quantization="fp8", kv_cache_dtype="fp8", tensor_parallel_size=2, max_model_len=8192),
    "awq": dict(model="llama-3.1-8b", gpu="l4", quantization="awq", max_model_len=8192),
    "gptq": dict(model="llama-3.1-8b", gpu="a100-80gb", quantization="gptq", max_model_len=8192),
    "nvfp4-blackwell": dict(gpu="b200", quantization="nvfp4", max_model_len=8192),
    "mxfp4-checkpoint": dict(model="gpt-oss-120b", max_model_len=8192),
    "marlin-moe": dict(model="gpt-oss-120b", max_model_len=8192, moe_backend="marlin"),
    "expert-parallel": dict(model="mixtral-8x7b", gpu="h100-sxm", tensor_parallel_size=2, enable_expert_parallel=True,
                            max_model_len=8192),
    "amd": dict(gpu="mi325x", max_model_len=8192, tensor_parallel_size=2),
    "prefix-cache-off": dict(enable_prefix_caching=False, enable_chunked_prefill=False, max_model_len=8192,
                             tensor_parallel_size=2),
}


@pytest.mark.parametrize("name", FEATURES)
def test_every_feature_path_emits_only_declared_flags(name):
    every_emitted(resolve(scenario(**dict(FEATURES[name]))))


# ---- what each emitted configuration needs to start ------------------------------------------------


def test_multi_node_leader_runs_over_ray_and_sglang_names_its_nodes():
    c = config_of(resolve(scenario(**FEATURES["multi-node"])))
    # 16 GPUs per replica on nodes of 8 H100s (h100-sxm.yaml kubernetes.schedule.gpus_per_node): two nodes
    assert c.nodes == 2
    (leader,) = kubernetes_argvs(emit("k8s", c))
    # vLLM's default multiprocessing backend stays on one node: a world size of 16 needs the Ray backend
    assert vllm_flags(leader)["--distributed-executor-backend"] == "ray"
    f = sglang_flags(sglang_argv(c))
    assert f["--nnodes"] == "2" and f["--node-rank"] == "0" and f["--dist-init-addr"].endswith(":20000")
    # one node: no backend forced, no node flags
    single = config_of(resolve(scenario(tensor_parallel_size=4, max_model_len=8192)))
    assert "--distributed-executor-backend" not in vllm_argv(single) and "--nnodes" not in sglang_argv(single)


def test_eagle_is_emitted_with_its_draft_head():
    c = config_of(resolve(scenario(**FEATURES["eagle"])))
    spec = json.loads(vllm_flags(vllm_argv(c))["--speculative-config"])
    # vLLM refuses method eagle without a model: the published head for Llama-3.1-8B (huggingface.co/yuhuili)
    assert spec == {"method": "eagle", "num_speculative_tokens": 3, "model": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"}
    f = sglang_flags(sglang_argv(c))
    assert f["--speculative-algorithm"] == "EAGLE"
    assert f["--speculative-draft-model-path"] == "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"


def test_medusa_is_refused_for_the_vllm_release_the_image_pins():
    # the pinned vLLM's --speculative-config methods (tests/data/engine_args/vllm.json, read from the 0.33.0 wheel's
    # SpeculativeMethod) hold no "medusa": a command naming it would not start
    assert "medusa" not in TABLES["vllm"]["options"]["--speculative-config"]["json_choices"]["method"]
    c = config_of(resolve(scenario(model="llama-2-7b", max_model_len=4096, speculative_config={
        "method": "medusa", "num_speculative_tokens": 3, "acceptance_rate": 0.7,
        "model": str(HEADS / "medusa-vicuna-7b-v1.3")})))
    with pytest.raises(InputError) as err:
        vllm_argv(c)
    line = str(err.value)
    assert line.startswith("--emit: vLLM 0.33.0 has no medusa speculative decoding") and "\n" not in line


def test_eagle_without_a_known_head_is_refused_in_one_line():
    r = resolve(scenario(max_model_len=8192, tensor_parallel_size=2,
                         speculative_config={"method": "eagle3", "num_speculative_tokens": 3, "acceptance_rate": 0.7}))
    with pytest.raises(InputError) as err:
        config_of(r)
    assert "deployment.speculative_config.model" in str(err.value) and "\n" not in str(err.value)


def test_sglang_lora_names_its_target_modules_and_vllm_loads_adapters_at_run_time():
    c = config_of(resolve(scenario(**FEATURES["lora"])))
    f = sglang_flags(sglang_argv(c))
    # SGLang asserts at start-up without target modules or adapter paths; `all` is in its declared choices
    assert f["--lora-target-modules"] == "all" and f["--max-loras-per-batch"] == "4" and f["--max-lora-rank"] == "16"
    (doc,) = list(yaml.safe_load_all(emit("k8s", c)))
    env = {e["name"]: e for e in doc["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"]["value"] == "True"
    assert "load_lora_adapter" in emit("vllm", c)


@pytest.mark.parametrize("model, optional", [("llama-3.1-8b", False), ("qwen3-8b", True)])
def test_the_hugging_face_token_comes_from_a_secret_required_for_gated_models(model, optional):
    c = config_of(resolve(scenario(model=model, gpu="h100-sxm", max_model_len=8192)))
    (doc,) = list(yaml.safe_load_all(emit("k8s", c)))
    env = {e["name"]: e for e in doc["spec"]["template"]["spec"]["containers"][0]["env"]}
    # meta-llama's repositories ask every user to accept the licence (gated); Qwen's do not
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "hf-token", "key": "token", "optional": optional}


def test_llama_server_listens_on_every_interface():
    c = config_of(resolve(load_scenario("scenarios/llamacpp-rtx4090-slots.yaml")))
    f = llama_flags(llamacpp_argv(c))
    # llama-server's default --host is 127.0.0.1: unreachable from outside its container
    assert f["--host"] == "0.0.0.0" and f["--port"] == "8080"


def test_images_are_pinned_to_the_release_of_the_argument_tables():
    # the image runs the release the flags were checked against, not whatever :latest is when deployed
    release = TABLES["vllm"]["source"]["release"]
    assert release == f"v{emitter.VLLM_RELEASE}"
    assert emitter.VLLM_IMAGE == f"vllm/vllm-openai:{release}"
    assert emitter.VLLM_ROCM_IMAGE == f"vllm/vllm-openai-rocm:{release}"
    for gpu, image in (("h200", emitter.VLLM_IMAGE), ("mi325x", emitter.VLLM_ROCM_IMAGE)):
        r = resolve(scenario(gpu=gpu, max_model_len=8192, tensor_parallel_size=2))
        (doc,) = list(yaml.safe_load_all(emit("k8s", config_of(r))))
        assert doc["spec"]["template"]["spec"]["containers"][0]["image"] == image


def test_assumed_defaults_are_explicit_and_blackwell_keeps_its_own_block_size():
    hopper = vllm_flags(vllm_argv(config_of(resolve(scenario(max_model_len=8192, tensor_parallel_size=2)))))
    # vLLM defaults sizer assumed, written out: 0.9 memory share, its 16-token block, the H200 token budget
    assert hopper["--gpu-memory-utilization"] == "0.9" and hopper["--block-size"] == "16"
    assert "--max-num-batched-tokens" in hopper and "--max-num-seqs" in hopper
    # on Blackwell vLLM's attention backends pick the page size; a forced 16 selects slower kernels
    blackwell = config_of(resolve(scenario(gpu="b200", max_model_len=8192)))
    assert "--block-size" not in vllm_argv(blackwell) and "--block-size left to the engine" in emit("vllm", blackwell)
    stated = config_of(resolve(scenario(gpu="b200", max_model_len=8192, block_size=32)))
    assert vllm_flags(vllm_argv(stated))["--block-size"] == "32"          # a scenario's own choice is kept


def test_every_catalog_repo_id_is_a_hugging_face_id():
    # owner/name of letters, digits, '-', '_', '.' (Hugging Face's repo id rule); no note or comment inside
    import re

    for name in catalog_names():
        repo = load_json(CATALOG_DIR / f"{name}.json").get("_sizer", {}).get("hf_repo")
        if repo is not None:
            assert re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", repo), (name, repo)
    facts = (Path(__file__).resolve().parents[2] / "data" / "models" / "facts.yaml").read_text()
    assert "(same bytes" not in facts


# ---- one table per engine, read and written ---------------------------------------------------------


def test_each_engine_flag_table_names_only_flags_its_pinned_release_declares():
    from sizer.inputs.manifests.commands import TABLES as FLAG_TABLES

    for engine in ("vllm", "sglang"):
        declared = TABLES[engine]["options"]
        values, switches = FLAG_TABLES[engine]
        # the first flag of each field (or field and value, for a switch) is the one --emit writes: declared by
        # the pinned release; later ones are older spellings still read (vLLM's --no-enable-prefix-caching)
        first = {}
        for flag, (field, _) in values.items():
            first.setdefault(field, flag)
        for flag, key in switches.items():
            first.setdefault(key, flag)
        for written in first.values():
            assert written in declared, (engine, written)
        for flag in [*values, *switches]:
            if flag in first.values() or flag == "--model-id":     # KServe huggingfaceserver's own flag
                continue
            # argparse also takes a unique prefix of a long option (SGLang's --tp for --tp-size)
            later = flag in declared or len([o for o in declared if o.startswith(flag)]) == 1
            assert later or flag.startswith("--no-enable-"), (engine, flag)


@pytest.mark.parametrize("engine, argv_of", [("vllm", vllm_argv), ("sglang", sglang_argv)])
def test_what_emit_writes_check_reads_back_through_the_same_table(engine, argv_of):
    from sizer.inputs.manifests.commands import parse_server_args

    c = config_of(resolve(scenario(model="llama-3.1-8b", gpu="h100-sxm", max_model_len=8192, enable_lora=True,
                                   max_loras=4, max_lora_rank=16, enable_prefix_caching=False,
                                   enable_chunked_prefill=True, max_num_seqs=64)))
    read, fields, model, _ = parse_server_args(argv_of(c), "emitted")
    assert read == engine and model == "meta-llama/Llama-3.1-8B"
    # every setting written is read back to the field it came from (vLLM 0.33 spells "off" --disable-...)
    assert fields["enable_prefix_caching"] is False and fields["enable_chunked_prefill"] is True
    assert fields["max_num_seqs"] == 64 and fields["max_model_len"] == 8192 and fields["max_loras"] == 4
    assert fields["max_lora_rank"] == 16 and fields["enable_lora"] is True
    assert fields["max_num_batched_tokens"] == c.max_num_batched_tokens
    assert fields["gpu_memory_utilization"] == c.gpu_memory_utilization


def test_sglangs_scheduler_recv_interval_is_emitted_and_read_back():
    from sizer.inputs.manifests.commands import parse_server_args

    # SGLang 0.5.23's --scheduler-recv-interval (tests/data/engine_args/sglang.json): InferenceMAX's B200 DeepSeek-R1
    # servers poll every 10th decode step below 16 clients, every 30th from 16
    argv = sglang_argv(config_of(resolve(scenario(engine="sglang", max_model_len=8192, tensor_parallel_size=2,
                                                  scheduler_recv_interval=30))))
    assert sglang_flags(argv)["--scheduler-recv-interval"] == "30"
    assert parse_server_args(argv, "emitted")[1]["scheduler_recv_interval"] == 30
    assert "--scheduler-recv-interval" not in sglang_flags(sglang_argv(config_of(resolve(scenario(
        engine="sglang", max_model_len=8192, tensor_parallel_size=2)))))


def test_vllms_moe_backend_is_emitted_read_back_and_refused_where_not_modelled():
    from sizer.inputs.manifests.commands import parse_server_args

    # vLLM 0.33's --moe-backend (its choices include auto and marlin: tests/data/engine_args/vllm.json)
    argv = vllm_argv(config_of(resolve(scenario(**FEATURES["marlin-moe"]))))
    assert vllm_flags(argv)["--moe-backend"] == "marlin"
    assert parse_server_args(argv, "emitted")[1]["moe_backend"] == "marlin"
    assert "--moe-backend" not in vllm_flags(vllm_argv(config_of(resolve(scenario(**FEATURES["mxfp4-checkpoint"])))))
    # another of vLLM's MoE kernels is not priced: named with what is, never read as vLLM's default
    with pytest.raises(InputError, match="--moe-backend: 'flashinfer_cutlass' is not modelled; expected one of: "
                                         "auto, marlin"):
        parse_server_args(["vllm", "serve", "openai/gpt-oss-120b", "--moe-backend", "flashinfer_cutlass"], "m.yaml")


@pytest.mark.parametrize("feature, spec", [
    ("eagle", {"method": "eagle", "num_speculative_tokens": 3}),      # the EAGLE head is the engine's, not priced
    ("ngram", {"method": "ngram", "num_speculative_tokens": 4}),
    ("draft", {"method": "draft_model", "num_speculative_tokens": 3, "model": "llama-3.2-1b"}),
])
def test_sglang_speculative_flags_are_read_back_through_the_same_table(feature, spec):
    # --emit sglang writes speculative decoding as SGLang's separate flags (its table in commands.py); check reads
    # them back to the scenario's speculative_config: method, draft length and, for a draft model, its catalog name
    from sizer.inputs.manifests.commands import parse_server_args

    _, fields, _, notes = parse_server_args(sglang_argv(config_of(resolve(scenario(**FEATURES[feature])))), "emitted")
    assert fields["speculative_config"] == spec
    assert not [n for n in notes if "speculative" in n]


def test_sglang_speculative_flags_sizer_does_not_model_are_named():
    from sizer.inputs.manifests.commands import parse_server_args

    base = ["python3", "-m", "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-8B-Instruct"]
    # a tree of drafts (top-k 4, 16 draft tokens for 3 steps) is noted; a chain (top-k 1, steps + 1 tokens) is not
    _, fields, _, notes = parse_server_args(base + ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3",
                                                    "--speculative-eagle-topk", "4",
                                                    "--speculative-num-draft-tokens", "16"], "m.yaml")
    assert fields["speculative_config"] == {"method": "eagle", "num_speculative_tokens": 3}
    assert any("a tree of drafts, not modelled" in n for n in notes)
    # an algorithm sizer does not model is one line naming the flag
    with pytest.raises(InputError, match="--speculative-algorithm: 'LOOKAHEAD' is not modelled"):
        parse_server_args(base + ["--speculative-algorithm", "LOOKAHEAD", "--speculative-num-steps", "3"], "m.yaml")


# SGLang v0.5.23 chooses the draft length itself when --speculative-num-steps is not given
# (`_auto_choose_speculative_params`, python/sglang/srt/arg_groups/speculative_hook.py): STANDALONE (3, 1, 4);
# the EAGLE family by the target's architecture, LlamaForCausalLM (5, 4, 8), GptOssForCausalLM and
# DeepseekV3ForCausalLM (3, 1, 4), as (steps, top-k, draft tokens). Before issue 22's merge check ran on such a
# command; after it, check refused it.
SGLANG_BASE = ["python3", "-m", "sglang.launch_server", "--model-path"]


@pytest.mark.parametrize("argv, spec, tree", [
    # mlcommons/inference language/gpt-oss/run_server.sh (commit 531c37c36dd1227c558e7e7a983f4e1f9932a9bb) passes
    # only the algorithm and the draft: gpt-oss's (3, 1, 4) is a chain of 3
    (["openai/gpt-oss-120b", "--speculative-draft-model-path", "lmsys/EAGLE3-gpt-oss-120b-bf16",
      "--speculative-algorithm", "EAGLE3"], {"method": "eagle3", "num_speculative_tokens": 3}, False),
    # Llama's (5, 4, 8) is a tree of 8 drafts: priced as a chain of 5, and said
    (["meta-llama/Llama-3.1-8B-Instruct", "--speculative-algorithm", "EAGLE"],
     {"method": "eagle", "num_speculative_tokens": 5}, True),
    (["deepseek-ai/DeepSeek-V3", "--speculative-algorithm", "NEXTN"], {"method": "mtp", "num_speculative_tokens": 3},
     False),
    (["meta-llama/Llama-3.1-8B-Instruct", "--speculative-algorithm", "STANDALONE",
      "--speculative-draft-model-path", "meta-llama/Llama-3.2-1B-Instruct"],
     {"method": "draft_model", "num_speculative_tokens": 3, "model": "llama-3.2-1b"}, False),
])
def test_sglang_chooses_the_draft_length_when_steps_are_not_given(argv, spec, tree):
    from sizer.inputs.manifests.commands import parse_server_args

    _, fields, _, notes = parse_server_args(SGLANG_BASE + argv, "m.yaml")
    assert fields["speculative_config"] == spec
    assert any(f"SGLang chooses {spec['num_speculative_tokens']} steps" in n for n in notes), notes
    assert any("a tree of drafts, not modelled" in n for n in notes) == tree


def test_sglang_draft_length_sizer_cannot_tell_is_named_and_not_planned():
    from sizer.inputs.manifests.commands import parse_server_args

    # NGRAM picks by its own BFS breadth (SGLang's _handle_ngram), and a target whose config.json sizer cannot read
    # has no architecture to choose by: a note, and no speculative_config (the plan runs without it)
    for argv in (["meta-llama/Llama-3.1-8B-Instruct", "--speculative-algorithm", "NGRAM"],
                 ["someorg/not-a-model-sizer-knows", "--speculative-algorithm", "EAGLE"]):
        _, fields, _, notes = parse_server_args(SGLANG_BASE + argv, "m.yaml")
        assert "speculative_config" not in fields
        assert any("without --speculative-num-steps: SGLang chooses the draft length itself" in n for n in notes)
    # SGLang asserts all three or none: top-k without steps does not start, and check says so naming the flag
    with pytest.raises(InputError, match="--speculative-num-steps: expected beside --speculative-eagle-topk"):
        parse_server_args(SGLANG_BASE + ["meta-llama/Llama-3.1-8B-Instruct", "--speculative-algorithm", "EAGLE",
                                         "--speculative-eagle-topk", "4"], "m.yaml")


def test_check_runs_on_an_sglang_manifest_that_leaves_the_draft_length_to_sglang(tmp_path):
    # the mlcommons gpt-oss server's flags (above) on Llama-3.1-8B: check plans SGLang's (5, 4, 8) choice; the
    # acceptance rate is the user's, as for any speculative command line (docs/ci.md). 50 requests: the note is read
    # from the command line, not from the simulation (the default 2,000 made this a 6-17 s test)
    manifest = tmp_path / "sglang.yaml"
    manifest.write_text("""apiVersion: apps/v1
kind: Deployment
metadata:
  name: sg
  annotations:
    sizer.dev/check: |
      speculative_acceptance_rate: 0.6
      workload:
        arrival: {process: poisson, rate_per_s: 2}
        prompt_tokens: {distribution: fixed, value: 1000}
        output_tokens: {distribution: fixed, value: 200}
        num_requests: 50
spec:
  replicas: 1
  template:
    spec:
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
      containers:
      - name: s
        image: lmsysorg/sglang:v0.5.23
        command: ["python3", "-m", "sglang.launch_server"]
        args: ["--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--speculative-algorithm", "EAGLE3",
               "--speculative-draft-model-path", "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B"]
        resources: {limits: {nvidia.com/gpu: 1}}
""")
    result = CliRunner().invoke(app, ["check", str(manifest), "--json"])
    assert result.exit_code in (0, 1), result.output
    notes = json.loads(result.stdout)["notes"]
    assert any("SGLang chooses 5 steps, top-k 4, 8 draft tokens for LlamaForCausalLM" in n for n in notes), notes
