"""How close the simulator's prediction comes to the bundled engine's measurement.

    python3 benchmarks/fidelity.py                       # calibrate tiny on this CPU, then validate 3 times
    python3 benchmarks/fidelity.py --profile DIR --runs 5 [--scenario engine/scenarios/tiny-cpu.yaml]
    python3 benchmarks/fidelity.py --device [--calibrations 3] [--runs 1]   # a device's kernel tables, tiny-wide

Calibrates (unless --profile names a profile), replays the scenario through the engine and
the simulator `--runs` times, and prints each metric's relative error per run and its
median. The target: under 10% for TTFT, ITL and E2E at p50 (the CI test asserts 30%).
`--device` calibrates the CPU's kernel tables for tiny's and tiny-wide's shapes instead (the engine
overhead fitted on tiny only) and replays engine/scenarios/tiny-wide-cpu.yaml with them,
`--calibrations` times over: how well one calibration of a device prices a model it was not fitted on.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(REPO / "engine" / "scenarios" / "tiny-cpu.yaml"))
    parser.add_argument("--profile", help="a calibrated profile folder; default: calibrate tiny on this CPU first")
    parser.add_argument("--runs", type=int, default=3, help="replays of each calibration")
    parser.add_argument("--device", action="store_true", help="a device's kernel tables (tiny + tiny-wide shapes)")
    parser.add_argument("--calibrations", type=int, default=1, help="with --device: calibrations, each replayed")
    args = parser.parse_args()
    if args.device:
        reports = device_reports(args.calibrations, args.runs)
    else:
        reports = profile_reports(args)
    print_table(reports)


def device_reports(calibrations: int, runs: int) -> list:
    from sizer.inputs.model_spec import load_model
    from sizer.sizing.calibrate import StepBounds, Target, calibrate_device_tables
    from sizer.sizing.validate import run_validation

    scenario = REPO / "engine" / "scenarios" / "tiny-wide-cpu.yaml"
    models = [load_model("tiny"), load_model(str(scenario.parent / "tiny-wide" / "config.json"))]
    reports = []
    for c in range(calibrations):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            # as tests/engine/test_engine_device_calibration.py calibrates: 16 sequences, TP 1 (the replay's)
            tables = calibrate_device_tables(models, models[0], Target(None, "torch", 1), Path(tmp),
                                             StepBounds(None, 16, None, 16), seed=0, tp_sizes=(1,))
            print(f"calibration {c + 1}: {time.perf_counter() - start:.0f} s")
            for i in range(runs):
                reports.append(run_validation(scenario, None, None, None, tables_path=tables.path))
                print(f"  run {i + 1} replayed")
    return reports


def profile_reports(args) -> list:
    from sizer.inputs.model_spec import load_model
    from sizer.sizing.calibrate import StepBounds, Target, calibrate_profile
    from sizer.sizing.validate import run_validation

    with tempfile.TemporaryDirectory() as tmp:
        profile = Path(args.profile) if args.profile else None
        if profile is None:
            start = time.perf_counter()
            profile = calibrate_profile(load_model("tiny"), Target(None, "torch", 1), 1.0, Path(tmp),
                                        StepBounds(256, 64, 2048, 16), seed=0)
            print(f"calibrated {profile.name} in {time.perf_counter() - start:.0f} s")
        reports = []
        for i in range(args.runs):
            start = time.perf_counter()
            reports.append(run_validation(Path(args.scenario), profile, None, None))
            print(f"run {i + 1}: validate took {time.perf_counter() - start:.0f} s")
    return reports


def print_table(reports: list) -> None:
    first = reports[0]
    print(f"\n{first.model} on {first.device}: {first.num_requests} requests, "
          f"{first.cached_prompt_tokens} cached prompt tokens, {first.mixed_steps} mixed steps, "
          f"{first.out_of_range_steps} steps outside the profile")
    print("relative error (predicted - measured) / measured per run, its median, the median at the engine's step")
    print("speed (every step priced at the run's replayed measured/priced ratio: the scheduler's and the shape's")
    print("error alone), and the spread of the engine's own measurement across runs ((max - min) / median): the noise")
    print("floor of this machine")
    print(f"{'metric':22} {'measured':>10} {'predicted':>10}  "
          + "  ".join(f"{'run ' + str(i + 1):>7}" for i in range(len(reports)))
          + f"  {'median':>7}  {'at speed':>8}  {'spread':>7}")
    replays = [r.replay for r in reports]
    print(f"{'replayed steps (s)':22} {first.replay.measured_s:10.2f} {first.replay.predicted_s:10.2f}  "
          + "  ".join(f"{r.relative_error:+7.1%}" for r in replays)
          + f"  {statistics.median(r.relative_error for r in replays):+7.1%}")
    for k, row in enumerate(first.rows):
        errors = [r.rows[k].relative_error for r in reports]
        at_speed = statistics.median(r.rows[k].at_engine_speed_error for r in reports)
        measured = [r.rows[k].measured for r in reports]
        spread = (max(measured) - min(measured)) / statistics.median(measured)
        print(f"{row.metric:22} {row.measured:10.2f} {row.predicted:10.2f}  " + "  ".join(f"{e:+7.1%}" for e in errors)
              + f"  {statistics.median(errors):+7.1%}  {at_speed:+8.1%}  {spread:7.1%}")


if __name__ == "__main__":
    main()
