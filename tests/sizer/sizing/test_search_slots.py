"""`sizer search` on llama.cpp and Ollama scenarios: the engine's own default space (local devices of the
scenario's kind, GGUF presets, slot counts), candidates judged on the plan's slot answers, ranked by the
machine's memory; vLLM's default space without local devices; --slots refused for other engines."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from sizer.analytic.lengths import mean_length
from sizer.cli import app
from sizer.inputs.gguf_types import PRESETS
from sizer.inputs.hardware import load_hardware, local_profiles
from sizer.inputs.scenario import load_scenario, scenario_from_dict
from sizer.sizing.plan import make_plan
from sizer.sizing.resolve import resolve
from sizer.sizing.search import BY_DEVICE_MEMORY, Candidate, SearchSpace, default_space, search

ROOT = Path(__file__).resolve().parents[3]
RTX = ROOT / "scenarios" / "llamacpp-rtx4090-slots.yaml"
MAC = ROOT / "scenarios" / "llamacpp-laptop-m4-pro.yaml"
VLLM = ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml"


def test_llamacpp_default_space_is_local_devices_of_its_kind_gguf_presets_and_slots():
    space = default_space(load_scenario(RTX))
    # the discrete (and Jetson) GPU profiles of hardware_profiles/local/, the scenario's RTX 4090 among them
    assert "rtx-4090" in space.gpus and "jetson-agx-orin-64gb" in space.gpus
    assert set(space.gpus) <= set(local_profiles())
    assert {load_hardware(g).device_kind for g in space.gpus} == {"gpu"}
    assert all(q in PRESETS for q in space.weight_formats)               # GGUF presets only
    assert space.tensor_parallel_sizes == (1,) and space.slots == (1, 2, 4, 8)
    mac = default_space(load_scenario(MAC))
    assert "apple-m4-pro" in mac.gpus and {load_hardware(g).device_kind for g in mac.gpus} == {"apple-gpu"}


def test_vllm_default_space_has_no_local_device():
    space = default_space(load_scenario(VLLM))
    assert "h100-sxm" in space.gpus and "b200" in space.gpus
    assert not set(space.gpus) & set(local_profiles())
    assert "bf16" in space.weight_formats and space.slots == (None,)


def test_slots_flag_refused_for_vllm_in_one_line():
    result = CliRunner().invoke(app, ["search", str(VLLM), "--slots", "1,2"])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --slots: ") and "vllm" in lines[0]


def test_slot_count_keeps_each_slots_context():
    # the scenario: -c 65536 -np 8, 8,192 tokens a slot; 2 slots keep 8,192 each: -c 16384
    s = load_scenario(RTX)
    r = resolve(scenario_from_dict(yaml.safe_load(RTX.read_text()), str(RTX),
                                   Candidate("rtx-4090", 1, 1, "q4_k_m", "auto", False, 2).variant(s)))
    assert (r.slots.slots, r.slots.ctx_per_slot_tokens, r.slots.ctx_total_tokens) == (2, 8192, 16384)


def test_candidates_judged_on_slot_answers_and_ranked_by_machine_memory():
    data = yaml.safe_load(RTX.read_text())
    space = SearchSpace(gpus=("rtx-5090", "rtx-4090"), tensor_parallel_sizes=(1,), weight_formats=("q4_k_m",),
                        kv_cache_dtypes=("auto",), slots=(1, 8))
    result = search(data, str(RTX), space)
    assert result.ranked_by == BY_DEVICE_MEMORY
    by_label = {o.candidate.label: o for o in result.outcomes}
    base = load_scenario(RTX)
    w, slo = base.workload, base.slo
    for o in result.outcomes:
        plan = make_plan(resolve(scenario_from_dict(data, str(RTX), o.candidate.variant(base))))
        a = plan.slots
        # the outcome's figures are the plan's slot answers for that configuration
        assert o.tokens_per_s_per_user == a.speeds[-1].tokens_per_s_per_user
        assert o.slot_ttft_ms == a.ttft_s * 1e3
        # passes iff: every slot at >= 1000 / itl_ms tokens/s, TTFT within target, and busy slots by Little's law
        # (rate x (TTFT + mean output / speed)) within the slots
        busy = w.arrival.rate_per_s * (a.ttft_s + mean_length(w.output_tokens) / a.speeds[-1].tokens_per_s_per_user)
        meets = (a.speeds[-1].tokens_per_s_per_user >= 1e3 / slo.itl_ms and a.ttft_s * 1e3 <= slo.ttft_ms
                 and busy <= a.slots)
        assert (o.status == "ok") == meets, o.reason
    # one slot at 0.5 req/s: a 300-token answer alone takes well over 2 s at ~100 tokens/s, so > 1 slot is busy
    assert by_label["rtx-4090 q4_k_m 1 slot"].binding == "load"
    assert by_label["rtx-4090 q4_k_m 8 slots"].status == "ok"
    # both GPUs pass with 8 slots: the 24 GiB RTX 4090 ranks above the 32 GiB RTX 5090 (no price: smaller machine)
    assert result.recommended.candidate.label == "rtx-4090 q4_k_m 8 slots"
    assert by_label["rtx-5090 q4_k_m 8 slots"].status == "ok"
    assert result.outcomes.index(by_label["rtx-5090 q4_k_m 8 slots"]) == 1


def test_slots_whose_context_does_not_fit_are_rejected_on_memory():
    from sizer.sizing.search import SearchSettings, evaluate

    data = yaml.safe_load(MAC.read_text())      # 8,192-token slots, q8_0 K and V
    o = evaluate(Candidate("apple-m4", 1, 1, "q8_0", "auto", False, 8), data, str(MAC), SearchSettings())
    # 8 x 8,192 = 65,536 tokens x (32 layers x 8 KV heads x 128 x 2 (K, V) x 34/32 bytes (q8_0)) = 4.25 GiB
    assert (o.status, o.binding) == ("rejected", "memory")
    assert "65,536 tokens of q8_0 KV need 4.25 GiB" in o.reason


def test_emit_writes_the_recommended_slot_count():
    ollama = ROOT / "scenarios" / "ollama-jetson-orin-edge.yaml"     # num_parallel 2 in the scenario
    result = CliRunner().invoke(app, ["search", str(ollama), "--gpus", "jetson-agx-orin-64gb", "--weights", "q4_k_m",
                                      "--slots", "4", "--workers", "1", "--num-requests", "50", "--emit", "ollama"])
    assert result.exit_code == 0, result.output
    assert "OLLAMA_NUM_PARALLEL=4" in result.stdout


def test_the_re_check_command_repeats_the_searchs_workload_and_slo_flags():
    # review finding: the re-check line dropped --rate and the SLO flags, so it re-checked the scenario's own
    # workload (6 req/s: 1 replica) where the search had sized --rate 40 (2 replicas)
    ollama = ROOT / "scenarios" / "ollama-jetson-orin-edge.yaml"
    result = CliRunner().invoke(app, ["search", str(ollama), "--gpus", "jetson-agx-orin-64gb", "--weights", "q4_k_m",
                                      "--slots", "4", "--workers", "1", "--num-requests", "50", "--rate", "0.05",
                                      "--ttft-ms", "60000"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())        # the line as the terminal wraps it, joined
    assert ("re-check: sizer plan " + str(ollama) + " --gpu jetson-agx-orin-64gb --weights q4_k_m --rate 0.05 "
            "--ttft-ms 60000 --simulate") in text, text
