"""What max_loras does to the 50-adapter gateway: adapter memory, KV left, hold-backs and latency.

    python3 benchmarks/lora_slots.py [--scenario scenarios/gateway-lora-50-adapters.yaml] [--requests 1000]

Simulates the scenario once per max_loras (1, 2, 4, 8, 16, 32, 50) and prints a table: the
slots' memory per GPU, the KV blocks left, the hold-backs (request-steps and requests that
waited for an adapter slot), adapter loads, and p50/p99 TTFT and mean TPOT.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(REPO / "scenarios" / "gateway-lora-50-adapters.yaml"))
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()

    from simulator.metrics import summarise
    from sizer.inputs.scenario import scenario_from_dict
    from sizer.sizing.resolve import resolve
    from sizer.sizing.simulate import simulate_scenario
    from validation.safe_yaml import load_yaml

    print(f"{'max_loras':>9} {'LoRA MiB':>9} {'KV blocks':>10} {'hold-backs':>11} {'held req':>9} "
          f"{'TTFT p50 ms':>12} {'TTFT p99 ms':>12} {'TPOT mean ms':>13}")
    for max_loras in (1, 2, 4, 8, 16, 32, 50):
        data = load_yaml(Path(args.scenario))
        data["deployment"].update(max_loras=max_loras, max_cpu_loras=max(max_loras, 50))
        r = resolve(scenario_from_dict(data, args.scenario))
        m = summarise(simulate_scenario(r, args.requests))
        print(f"{max_loras:>9} {r.memory.lora_bytes / 2**20:>9,.0f} {r.memory.kv_blocks:>10,} "
              f"{m.lora_holdbacks:>11,} {m.lora_held_requests:>9,} {m.ttft.p50_ms:>12,.1f} {m.ttft.p99_ms:>12,.1f} "
              f"{m.tpot.mean_ms:>13,.2f}")


if __name__ == "__main__":
    main()
