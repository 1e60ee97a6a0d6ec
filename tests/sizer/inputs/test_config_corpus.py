"""Malformed config.json files give one line naming the file and the key, exit 2, never a traceback.

The corpus is tests/bad_inputs/config/, one file per case; its README's table says which field
each must name. The keys sizer reads are declared in `sizer.inputs.config_keys.KEYS` (and
`QUANT_KEYS`, `CT_WEIGHT_KEYS`); the property test at the end mutates them at random.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sizer.analytic.formats import scale_bytes, weight_format
from sizer.analytic.weights import LinearGroup
from sizer.cli import app
from sizer.inputs.config_keys import KEYS
from sizer.inputs.model_spec import CATALOG_DIR, catalog_names, from_hf_config, load_model
from sizer.inputs.quantization import CT_WEIGHT_KEYS, QUANT_KEYS
from validation.errors import FieldError

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "tests" / "bad_inputs" / "config"
ROW = re.compile(r"^\| `([^`]+)` \| (.+) \| `([^`]+)` \|$")


def corpus() -> list[tuple[str, str]]:
    rows = [ROW.match(line) for line in (CORPUS / "README.md").read_text().splitlines()]
    return [(m[1], m[3]) for m in rows if m]


CASES = corpus()


def plan(path: Path):
    return CliRunner().invoke(app, ["plan", "--model", str(path), "--gpu", "h100"])


def test_the_readme_lists_every_file_and_there_are_enough():
    listed = {name for name, _ in CASES}
    on_disk = {p.name for p in CORPUS.iterdir() if p.name != "README.md"}
    assert listed == on_disk
    assert len(CASES) >= 40


@pytest.mark.parametrize(("name", "field"), CASES, ids=[n for n, _ in CASES])
def test_each_bad_config_gives_one_line_naming_file_and_field(name, field):
    path = CORPUS / name
    result = plan(path)
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"{path}: {field}: " in lines[0], lines[0]
    assert "Traceback" not in result.output and len(lines[0]) < 400


# ---- what must still load ------------------------------------------------------------------

BASE = json.loads((CATALOG_DIR / "llama-3.1-8b.json").read_text())
BASE.pop("_sizer")


@pytest.mark.parametrize("name", catalog_names())
def test_every_catalog_model_loads(name):
    m = load_model(name)
    assert m.num_layers >= 1 and m.hidden_size >= 1 and len(m.layers) == m.num_layers
    # the catalog's configs hold only keys sizer reads or knows to be harmless, but for vision-tower extras
    assert all(k.startswith("vision_config.") or k.startswith("text_config._") for k in m.unread_keys), m.unread_keys


@pytest.mark.parametrize("change", [
    {"sliding_window": None, "head_dim": None, "rope_scaling": None},    # Mistral/Mixtral-style nulls
    {"q_lora_rank": None, "n_shared_experts": None},                     # DeepSeek-V2-Lite nulls
    {"tie_word_embeddings": None, "torch_dtype": None, "dtype": "float16"},
    {"hidden_size": 4096.0},                                             # an integer written as a float
    {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": -1, "desc_act": True}},
    {"quantization_config": {"quant_method": "gptq_marlin", "bits": 3, "group_size": 64}},
    {"quantization_config": {"quant_method": "awq", "w_bit": 4, "q_group_size": 128, "zero_point": True}},
    {"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {
        "group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "group_size": None,
                                                       "strategy": "channel"}}}}},
    {"model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 8,
     "first_k_dense_replace": 32},                                       # top-k = E, all dense
])
def test_real_world_variants_still_load(change):
    m = from_hf_config({**BASE, **change}, "variant")
    assert m.hidden_size == 4096


def test_gptq_group_size_minus_one_is_per_channel():
    """GPTQ's `group_size: -1`: one fp16 scale and one 4-bit zero per output row, never negative bytes."""
    m = from_hf_config({**BASE, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": -1}}, "g")
    fmt, group = weight_format(m, "auto", 128)
    assert (fmt.name, group) == ("gptq", -1)
    g = LinearGroup("q_proj", "attention", in_features=256, out_features=64, count=3)
    per_channel = scale_bytes(g, fmt, group)
    assert per_channel == 64 * (2 + 0.5) * 3          # 64 rows x (fp16 scale + 4-bit zero) x 3 matrices
    assert per_channel == scale_bytes(g, fmt, 256)  # the same as one group spanning the input
    assert 0 < per_channel < scale_bytes(g, fmt, 128)


def test_gptq_per_channel_plan_has_positive_scale_bytes(tmp_path):
    config = {**BASE, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": -1}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    result = CliRunner().invoke(app, ["plan", "--model", str(tmp_path), "--gpu", "h100", "--json"])
    assert result.exit_code == 0, result.output
    weights = json.loads(result.stdout)["weights"]
    assert weights["format"] == "gptq"
    scale = [v for k, v in weights.items() if "scale" in k and isinstance(v, (int, float))]
    assert scale and all(v > 0 for v in scale), weights


def test_a_non_json_quant_format_still_names_the_deployment():
    m = from_hf_config({**BASE, "quantization_config": {"quant_method": "bitsandbytes", "bits": 4}}, "bnb")
    with pytest.raises(FieldError, match="deployment.quantization"):
        weight_format(m, "auto", 128)


# ---- random mutations -----------------------------------------------------------------------

MOE_BASE = {**BASE, "model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2,
            "first_k_dense_replace": 1,
            "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128,
                                    "modules_to_not_convert": ["lm_head"]}}
CT_BASE = {**BASE, "quantization_config": {"quant_method": "compressed-tensors", "config_groups": {
    "group_0": {"weights": {"num_bits": 4, "type": "int", "group_size": 128}}}}}
TOP_KEYS = sorted({k for spec in KEYS.values() for k in spec.keys} - {"_sizer", "text_config"})
QUANT = sorted({k for spec in QUANT_KEYS.values() for k in spec.keys})
CT_WEIGHTS = sorted({k for spec in CT_WEIGHT_KEYS.values() for k in spec.keys})

NUMBERS = st.one_of(
    st.integers(-10, 10), st.integers(-2**70, 2**70), st.sampled_from([0, -1, 1, 10**6, 10**9, 10**30, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.5, 1e-300, 1e300, -0.0, math.nan, math.inf]))
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=20),
                    st.sampled_from(["4", "1e-5", "full_attention", "sliding_attention", "gptq", "awq", "fp8"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=8)


@st.composite
def mutated_configs(draw) -> dict:
    base = draw(st.sampled_from([BASE, MOE_BASE, CT_BASE]))
    config = json.loads(json.dumps(base))
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(["top", "top", "top", "quant", "ct"]))
        value = draw(VALUES)
        if where == "top":
            config[draw(st.sampled_from(TOP_KEYS))] = value
        elif where == "quant" and isinstance(config.get("quantization_config"), dict):
            config["quantization_config"][draw(st.sampled_from(QUANT))] = value
        elif where == "ct" and base is CT_BASE and isinstance(config.get("quantization_config"), dict):
            groups = config["quantization_config"].get("config_groups")
            weights = groups.get("group_0", {}).get("weights") if isinstance(groups, dict) else None
            if isinstance(weights, dict):
                weights[draw(st.sampled_from(CT_WEIGHTS))] = value
    return config


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(config=mutated_configs())
def test_random_mutations_plan_or_one_line(tmp_path, config):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))        # NaN and Infinity as Python writes them (and reads them back)
    result = plan(path)
    assert result.exit_code in (0, 2), (result.exit_code, repr(result.exception), config)
    assert "Traceback" not in result.output
    if result.exit_code == 0:
        assert result.stdout.strip(), config
    else:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, (result.stderr, config)
        # a bad key names the file; a valid quant_method sizer does not model asks for a format instead, by the
        # flag that sets it (a plan from flags alone: --weights)
        assert str(path) in lines[0] or lines[0].startswith("error: --weights: "), (lines[0], config)
