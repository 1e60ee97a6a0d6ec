#!/usr/bin/env bash
# The one device check of the bundled engine, for a session whose task is lent the H200
# (device tool `run`; 15 minutes of device time in all, machine start included). Not run by
# CI. It runs, from the repository root:
#   1. the kernel correctness tests natively on the GPU (Triton vs torch, fp32/fp16/bf16);
#   2. `sizer calibrate --gpu h200 --model llama-3.1-8b` (about 2 minutes);
#   3. `sizer validate engine/scenarios/llama-3.1-8b-h200.yaml` (200 requests, about 1 minute);
#   4. `sizer calibrate --gpu h200 --shapes-of llama-3.1-8b`: the device's kernel tables (Llama-3.1-8B's
#      shapes at TP 1, 2, 4, 8; about 3 minutes), compared point by point with the tables imported for
#      the H200 from vLLM 0.24.0 (benchmarks/kernel_tables_compare.py);
#   5. `sizer validate` of the same scenario with the simulator priced by those tables (`--kernel-tables`,
#      about 1 minute);
# and leaves under $OUT: run.log (everything printed), validate.json and validate-tables.json (the fidelity tables),
# h200-llama-3.1-8b-tp1.tgz (the calibrated profile folder, to unpack into
# hardware_profiles/calibrated/ and commit with the table, its date and device), compare.txt and
# h200-sizer-engine.tgz (the device's kernel tables).
#
# simpy is missing from the device image and its typer may predate 0.28 (typer.TyperException). Before the
# call, here (the wheels of 2026-12-04's run; pydantic and the rest are typer 0.29's own needs):
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux2014_x86_64 -d .whl simpy==4.1.2 typer==0.29.2 rich==15.0.0 pydantic==2.14.4 \
#       pydantic_core==2.50.5 annotated-doc==0.0.7 annotated-types==0.8.0 typing-inspection==0.4.5 \
#       typing_extensions==4.16.0
# then:  run(command="bash engine/gpu_check.sh", carry=[".whl"], timeout_s=600)
# The achieved HBM bandwidth of the decode attention kernel against the measured copy
# bandwidth is printed by calibrate and kept in profile.yaml (achieved:).
set -uo pipefail

OUT=${OUT:-out/gpu-check}
mkdir -p "$OUT/profile"
LOG="$OUT/run.log"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

step() { echo; echo "== $1 ($(date -u +%H:%M:%S))" | tee -a "$LOG"; }
# validate's JSON report as a table, into the log
fidelity_table() {
    python3 - "$1" <<'EOF' 2>&1 | tee -a "$LOG"
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{r['model']} on {r['device']}: {r['num_requests']} requests, engine time {r['engine_time_s']:.1f} s, "
      f"{r['cached_prompt_tokens']} cached prompt tokens, {r['out_of_range_steps']} of {r['steps_predicted']} steps out of range")
print(f"{'metric':22} {'measured':>11} {'predicted':>11} {'error':>8}")
for row in r["rows"]:
    print(f"{row['metric']:22} {row['measured']:11.2f} {row['predicted']:11.2f} {row['relative_error']:+8.1%}")
EOF
}

step "device"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  python3 -c "import torch, triton, simpy; print('torch', torch.__version__, 'triton', triton.__version__, 'simpy', simpy.__version__)"
} 2>&1 | tee -a "$LOG"

step "1. kernel correctness on the GPU"
# The whole pytest output goes to the log: every failure in full and the closing count line
# (the project's addopts already give -q -ra; a second -q would drop that line).
timeout 120 python3 -m pytest tests/engine/test_engine_kernels.py -p no:cacheprovider 2>&1 | tee -a "$LOG"
kernels=${PIPESTATUS[0]}

step "2. calibrate"
timeout 240 python3 -m sizer calibrate --gpu h200 --model llama-3.1-8b --out "$OUT/profile" 2>&1 | tee -a "$LOG"
calibrated=${PIPESTATUS[0]}
PROFILE="$OUT/profile/h200-llama-3.1-8b-tp1"
if [ -d "$PROFILE" ]; then
    tar czf "$OUT/h200-llama-3.1-8b-tp1.tgz" -C "$OUT/profile" h200-llama-3.1-8b-tp1
    sed -n '/^achieved:/,$p' "$PROFILE/profile.yaml" | tee -a "$LOG"
fi

step "3. validate"
validated=1
if [ "$calibrated" -eq 0 ]; then
    timeout 180 python3 -m sizer validate engine/scenarios/llama-3.1-8b-h200.yaml --profile "$PROFILE" --json \
        > "$OUT/validate.json" 2>> "$LOG"
    validated=$?
    fidelity_table "$OUT/validate.json"
fi
rm -rf "$OUT/profile"

step "4. the device's kernel tables, against the imported ones"
timeout 220 python3 -m sizer calibrate --gpu h200 --shapes-of llama-3.1-8b --out "$OUT/tables" 2>&1 | tee -a "$LOG"
tabled=${PIPESTATUS[0]}
TABLES=$(ls -d "$OUT"/tables/h200-sizer-engine-* 2>/dev/null | head -1)
if [ "$tabled" -eq 0 ] && [ -n "$TABLES" ]; then
    tar czf "$OUT/h200-sizer-engine.tgz" -C "$OUT/tables" "$(basename "$TABLES")"
    python3 benchmarks/kernel_tables_compare.py "$TABLES" hardware_profiles/kernels/h200-vllm-0.24.0 2>&1 \
        | tee "$OUT/compare.txt" | tee -a "$LOG"
fi

step "5. validate, the simulator priced by the device's kernel tables"
tables_validated=1
if [ "$tabled" -eq 0 ] && [ -n "$TABLES" ]; then
    timeout 180 python3 -m sizer validate engine/scenarios/llama-3.1-8b-h200.yaml --kernel-tables "$TABLES" --json \
        > "$OUT/validate-tables.json" 2>> "$LOG"
    tables_validated=$?
    fidelity_table "$OUT/validate-tables.json"
fi
rm -rf "$OUT/tables"
echo "kernels=$kernels calibrate=$calibrated validate=$validated tables=$tabled validate_tables=$tables_validated" \
    | tee -a "$LOG"
[ "$kernels" -eq 0 ] && [ "$calibrated" -eq 0 ] && [ "$validated" -eq 0 ] && [ "$tabled" -eq 0 ] \
    && [ "$tables_validated" -eq 0 ]
