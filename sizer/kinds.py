"""The code of an input or output kind that few runs need, loaded when a run has one: with the CLI's commands
(sizer/cli/app.py, COMMANDS) the only deferred imports of sizer's own code. Each module keeps its imports at
the top; a plain `sizer plan` so never imports the gateway's, --emit's, --simulate's, a GGUF file's, a trace's
or a calibrated profile's modules, nor what they import (the simulator, simpy, numpy)."""

from __future__ import annotations

import importlib
from types import ModuleType

# kind -> the module that handles it
KINDS = {
    "gateway": "sizer.cli.gateway",             # a gateway document (a top-level `gateway:`): plan, simulate
    "emit": "sizer.cli.emit",                   # plan --emit / --emit-to: a serving command or a manifest
    "simulate": "sizer.cli.plan_simulate",      # plan --simulate: the sizing pipeline, the simulator, progress
    "day": "sizer.sizing.day",                  # plan --simulate: energy; with workload.schedule, the day
    "gguf": "sizer.inputs.gguf_file",           # a model given as a .gguf file: its header and tensor table
    "trace": "sizer.sizing.workload",           # workload.trace: the trace readers
    "calibrated profile": "sizer.timing.profile",  # hardware.calibrated_profile: measured kernel tables
    "tables": "sizer.cli.render",               # simulate's terminal tables (rich); --json prints none
    "live progress": "sizer.cli.progress_bar",  # stderr a terminal: rich's live bar (a pipe or a log: plain lines)
}


def kind(name: str) -> ModuleType:
    """The module of an input or output kind (KINDS), imported on first use."""
    return importlib.import_module(KINDS[name])
