"""`plan`'s flags are declared once (sizer/cli/plan.py PLAN_FLAGS, issue 22 item 3): Typer's options, the Variant
field each sets, the refusal that names it and a gateway document's refusal all come from that one table."""

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from sizer.cli import app
from sizer.cli.plan import FLAGS, PLAN_FLAGS, command
from sizer.inputs.variant import Variant

REPO = Path(__file__).resolve().parents[3]
runner = CliRunner()


def said(result) -> str:
    return " ".join(result.output.split())


def test_the_commands_options_are_the_table_in_its_order():
    # Typer builds the command from its signature: the scenario argument, then each row's option (24 of them)
    params = typer.main.get_command_from_info(typer.models.CommandInfo(callback=command), pretty_exceptions_short=True,
                                              rich_markup_mode=None).params
    assert [p.name for p in params] == ["scenario"] + [f.param for f in PLAN_FLAGS]
    assert [p.opts for p in params[1:]] == [[f.flag] for f in PLAN_FLAGS]
    assert len(PLAN_FLAGS) == 24


def test_every_field_a_flag_sets_is_a_variant_field_and_named_back():
    # a refusal of a field a flag set names the flag (naming_flags): FLAGS is the table read backwards; --concurrency
    # also names the arrival process it makes closed, --profile the calibrated profile it sets
    fields = set(Variant.__dataclass_fields__)
    assert {f.field for f in PLAN_FLAGS if f.field} <= fields
    assert FLAGS["tensor_parallel_size"] == "--tp" and FLAGS["quantization"] == "--weights"
    assert FLAGS["arrival_process"] == "--concurrency" and FLAGS["calibrated_profile"] == "--profile"


def test_a_refused_value_names_the_flag_not_the_field():
    # --tp 0 is below tensor_parallel_size's bound of 1: the row's check refuses it before any work
    result = runner.invoke(app, ["plan", str(REPO / "scenarios" / "llama-3.1-8b-chat-h100.yaml"), "--tp", "0"])
    assert result.exit_code == 2 and "--tp: expected a value from 1 to" in said(result)


@pytest.mark.parametrize("row", [f for f in PLAN_FLAGS if not f.on_gateway], ids=lambda f: f.flag)
def test_a_gateway_document_refuses_every_deployment_flag(row):
    # each pool of a gateway states its own deployment: every flag but --json, --simulate and --wide is refused,
    # from the table (a flag added there is refused without another list)
    value = [] if row.annotation is bool else ["2"]
    result = runner.invoke(app, ["plan", str(REPO / "scenarios" / "gateway-residency.yaml"), row.flag, *value])
    assert result.exit_code == 2
    assert f"{row.flag}: does not apply to a gateway scenario" in said(result)
