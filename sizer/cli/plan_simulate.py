"""`plan --simulate` (kind "simulate", sizer/kinds.py): the sizing pipeline's answer and a schedule's day, their
simulations counted on stderr. Apart from `sizer simulate` (sizer/cli/simulate.py), which sizes nothing: that
command so imports neither the plan nor the pipeline."""

from __future__ import annotations

from sizer.cli.progress import progress
from sizer.kinds import kind
from sizer.sizing import pipeline
from sizer.sizing.plan import Plan
from sizer.sizing.resolve import Resolved


def add_simulation(plan: Plan, resolved: Resolved) -> Plan:
    """`plan --simulate`: the sizing pipeline's answer, its simulations counted on stderr."""
    with progress("sizing", "simulations") as update:
        return pipeline.add_simulation(plan, resolved, progress=update)


def add_day(plan: Plan, resolved: Resolved) -> Plan:
    """`plan --simulate` on a workload.schedule: the day (sizer.sizing.day), its simulations counted on stderr."""
    with progress("the day", "simulations") as update:
        return kind("day").add_day(plan, resolved, progress=update)
