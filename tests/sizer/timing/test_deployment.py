"""The step-time stage reads a resolved deployment through a protocol (sizer/timing/step_model.py `Deployment`), as
it comes before sizing; sizing's `Resolved` must keep every field it names, or step_model_for fails at run time."""

import dataclasses

from sizer.sizing.resolve import EngineSettings, Resolved
from sizer.timing.step_model import Deployment, EngineName


def test_resolved_has_every_field_the_step_time_stage_reads():
    assert set(Deployment.__annotations__) - {f.name for f in dataclasses.fields(Resolved)} == set()
    assert set(EngineName.__annotations__) - {f.name for f in dataclasses.fields(EngineSettings)} == set()
    # and the protocol is not empty: the roofline alone reads the model, GPU, format, weights, KV layout and split
    assert {"model", "hardware", "weight_format", "weights", "kv", "parallel"} <= set(Deployment.__annotations__)
