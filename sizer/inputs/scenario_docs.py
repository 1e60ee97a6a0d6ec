"""Generate docs/scenario.md from the scenario dataclasses: `python -m sizer.inputs.scenario_docs > docs/scenario.md`.

A test checks the committed page equals this output, so the reference never drifts from the code.
"""

from __future__ import annotations

from sizer.inputs.scenario import Scenario
from validation.schema import describe

HEADER = """# Scenario reference

A scenario is a YAML file with the sections below. Fields left out take the defaults shown;
deployment fields shown as `None` take the chosen engine's documented default (vLLM's unless
`deployment.engine` says otherwise; see docs/engines.md), and `sizer plan` prints where each
value came from. Names follow vLLM's engine arguments where one exists. Shorthands:
`model: llama-3.1-8b` means `model: {name: llama-3.1-8b}`, `hardware: h100` means
`hardware: {gpu: h100}`. Numbers like `8e9` are read as numbers (in a whole-number field too:
`num_requests: 4e1` is 40). Your own device:
`hardware: {base: m3-max, memory_gb: 64}` (a bundled profile with your figures), a profile file
(`hardware: ./my-gpu.yaml`, fields as hardware_profiles/README.md), or a file in
`$SIZER_HOME/profiles` (default `~/.local/share/sizer/profiles`), searched before the bundled ones.

Bad input (unknown keys, wrong types, values out of range, unknown model or GPU, a split that
does not divide the model, a missing trace file) stops with one line naming the file, the
field and what was expected, and exit code 2. So does a field that does not apply where it is
given, rather than being ignored: `cv` without gamma arrivals, `mean` on a uniform distribution,
`weights` on any but an empirical one, a speculative `model` for ngram or mtp (eagle, eagle3 and
medusa take their head's, which `plan --emit` names), `replicas` above 1 beside `disaggregated`,
synthetic arrivals or lengths beside a trace; a shared prefix longer than the longest prompt; and
a length its own `min` and `max` would change: a normal or lognormal `mean`, a `fixed` value or any
`empirical` value outside them (the plan's lengths are the ones the simulation sends).
The engine refuses a request whose prompt + output exceed `max_model_len` (vLLM answers HTTP
400): a workload whose every request does is refused, and where only some do, the plan states
their share, sizes Little's law for the served ones (their rate, and their mean lengths given that
prompt + output fit: sizer/analytic/lengths.py `served_means`), and the simulation counts them
rejected. A trace follows the same rule, counted over the requests it replays (all of them, unless
`workload.trace.max_requests` or a stated `workload.num_requests` cuts it to its first N).
The file itself is read safely (validation/safe_yaml.py), like every YAML and JSON file
sizer reads: a path that is not a
regular file (a folder, a device, a FIFO), a file over 1 MiB (JSON: 16 MiB), a key written
twice in one mapping, nesting deeper than 50 levels, more than 100 aliases or aliases that
expand to more than a million nodes are refused the same way, naming the line.

Flags that change a scenario (`plan --tp`, `--gpu`, `--engine`, `--prompt-tokens`, `--ttft-ms`, ...;
`simulate --rate`, `--concurrency`), and likewise search candidates, `check`'s fixes and sweep
points, change the scenario read from the file: each value is checked by the same field
declaration as in the table below, and a refusal names the flag (`error: --tp: ...`); the rules
between fields are then checked again on the result.
A value the file itself states is checked as the file is read, so an invalid one (say
`tensor_parallel_size: 0`) is refused naming the file even when a flag would replace it: correct the
file. A flag may create a section the file lacks only where the section has no other required field.
`--model` and `--gpu` without a file make a scenario of their own (with a default workload).

Closed-loop workloads (`workload.arrival: {process: closed, concurrency: N}`, or `--concurrency N`
on `plan` and `simulate`) model `vllm bench serve --max-concurrency N` at its default infinite
request rate, and GuideLLM's concurrent profile: N clients each send their first request at
time 0 and their next one `think_time_s` (default 0) after the last token of the previous answer
reaches them, until `num_requests` requests have been sent (`--num-prompts`). No warm-up is
simulated, as `vllm bench serve` runs none unless `--num-warmups` is given, and its requests are
not measured. Throughput is finished requests over the span from the first send to the last token
seen, as that tool reports it; `peak_concurrent_requests` counts requests in flight from send to
last token, never more than N. A `--max-concurrency` run at a finite `--request-rate` (open
arrivals held back by N clients) is not modelled. `plan` sizes a closed loop for the rate its
clients send at, N / (time in system + think time), and its goodput search probes Poisson arrivals.

This page is generated: `python -m sizer.inputs.scenario_docs > docs/scenario.md`.

| field | type | default | meaning |
| --- | --- | --- | --- |
"""


def render() -> str:
    rows = []
    for path, type_name, default, doc in describe(Scenario):
        if type_name == "section":
            rows.append(f"| **{path}** | section | | {doc} |")
        else:
            rows.append(f"| `{path}` | {type_name} | {default} | {doc} |")
    return HEADER + "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(render(), end="")
