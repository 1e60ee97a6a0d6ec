"""How long a day over a schedule takes (issue 28: under 60 s on the project's 2-core machine): the bundled
scenarios/diurnal-chat-h100.yaml through `sizer plan --simulate --json`, wall and CPU time, and what the
day's parts cost (the steady sizing at the peak, the curve, the scale-up windows simulated).

    python3 benchmarks/day_speed.py [runs]
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "diurnal-chat-h100.yaml"
LIMIT_S = 60.0


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    for run in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "sizer", "plan", str(SCENARIO), "--simulate", "--json"],
                             cwd=REPO, check=True, capture_output=True, text=True, env={"PYTHONPATH": str(REPO)})
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        day = json.loads(out.stdout)["day"]
        simulated = sum(w["requests"] for w in day["windows"])
        print(f"run {run + 1}: wall {wall:.1f} s, CPU {cpu:.1f} s (limit {LIMIT_S:.0f} s wall); peak "
              f"{day['peak_rate_per_s']:g} req/s, {len(day['windows'])} scale-up windows, {simulated:,} requests "
              f"simulated in them; {'OK' if wall < LIMIT_S else 'OVER'}")


if __name__ == "__main__":
    main()
