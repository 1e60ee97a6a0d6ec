"""What prices an engine step for a resolved scenario: the roofline, or a calibrated profile."""

from __future__ import annotations

from engine.profile import CalibratedStepTimeModel
from simulator.step_batch import StepTimeModel
from sizer.analytic.roofline import RooflineStepTimeModel
from sizer.sizing.resolve import Resolved


def roofline_for(r: Resolved) -> RooflineStepTimeModel:
    """The roofline step-time model of a resolved scenario."""
    return RooflineStepTimeModel(r.model, r.hardware, r.weight_format, r.weights, r.kv, r.parallel, r.group_size,
                                 offload=r.offload, lora=r.lora)


def step_model_for(r: Resolved, roofline: RooflineStepTimeModel | None = None) -> StepTimeModel:
    """What prices a step: the calibrated profile when the scenario names one (roofline outside
    its measured range), else the roofline."""
    roofline = roofline or roofline_for(r)
    if r.calibrated_profile is None:
        return roofline
    return CalibratedStepTimeModel(r.calibrated_profile, num_layers=r.model.num_layers, fallback=roofline)
