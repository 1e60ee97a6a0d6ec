"""`sizer check FILE`: CI gate. Exit 0 when every rule passes, 1 when one fails, 2 on bad input."""

from __future__ import annotations

from pathlib import Path

import typer

from sizer.cli.flags import check_gpu, check_range
from sizer.cli.options import (
    GPU,
    GPUS_PER_REPLICA,
    ITL_MS,
    MODEL,
    OUTPUT_TOKENS,
    PROMPT_TOKENS,
    RATE,
    TPOT_MS,
    TTFT_MS,
    WIDE,
    naming_traffic_flags,
    traffic_from_flags,
)
from sizer.cli.progress import progress
from sizer.cli.render import check_summary, terminal
from sizer.inputs.manifest import CheckFlags, SizerBlock
from sizer.inputs.manifests.fields import MAX_GPUS_PER_POD
from sizer.outputs.check import CheckResult, check_file
from sizer.outputs.destination import check_destination
from sizer.outputs.junit import write_junit, write_junit_error
from sizer.outputs.serialise import to_json
from validation.errors import FieldError
from validation.schema import check_key, key_for


def as_block(value: float | None, field: str, flag: str) -> float | None:
    """A flag that replaces a `sizer:` block field, held to that field's declaration (SizerBlock): what the file
    refuses, the flag refuses (`--budget inf` and `--budget 0` were taken where `budget_usd_per_hour: 0` was not)."""
    return None if value is None else check_key(key_for(SizerBlock, field, flag), value, None, flag)


def command(
    file: Path = typer.Argument(..., help="scenario YAML, or a manifest running vLLM, SGLang or TensorRT-LLM "
                                          "(Kubernetes objects, KServe, LeaderWorkerSet, RayService, Dynamo, "
                                          "Helm values; docs/deploy.md); - reads standard input"),
    junit: Path | None = typer.Option(None, "--junit", help="write JUnit XML here (one testcase per rule)"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON instead of the summary"),
    kv_share: float | None = typer.Option(None, "--kv-share", help="share of max_num_seqs the KV cache must hold at "
                                                                     "max_model_len, 0 to 1"),
    budget: float | None = typer.Option(None, "--budget", help="most the deployment may cost, USD per hour (> 0)"),
    rate: float | None = RATE,
    prompt_tokens: str | None = PROMPT_TOKENS,
    output_tokens: str | None = OUTPUT_TOKENS,
    ttft_ms: float | None = TTFT_MS,
    itl_ms: float | None = ITL_MS,
    tpot_ms: float | None = TPOT_MS,
    scenario: Path | None = typer.Option(None, "--scenario", help="side scenario YAML: its workload, SLO and price "
                                                                  "replace the `sizer:` block's (flags replace both)"),
    share: float | None = typer.Option(None, "--share", help="share of the workload's requests this deployment "
                                                             "serves, 0 to 1 (deployments splitting one workload)"),
    model: str | None = MODEL,
    gpu: str | None = GPU,
    gpus_per_replica: int | None = GPUS_PER_REPLICA,
    wide: bool = WIDE,
) -> None:
    """Check a deployment against memory, max_model_len, SLO and cost rules (for CI pipelines).

    Without a workload (a `sizer:` block, --scenario, or --rate, --prompt-tokens and --output-tokens) the
    memory and max_model_len rules decide and the slo rule is skipped. With --share F the deployment
    serves F of the workload's requests (its arrival rate times F), as one of several deployments
    behind a router that splits the workload. --model, --gpu and --gpus-per-replica replace what the
    `sizer:` block and the manifest say (the GPU type is rarely in a manifest); each value's source is
    printed."""
    kv_share, budget = as_block(kv_share, "kv_share", "--kv-share"), as_block(budget, "budget_usd_per_hour", "--budget")
    check_range(share, "--share", MIN_SHARE, 1.0)
    check_range(gpus_per_replica, "--gpus-per-replica", 1, MAX_GPUS_PER_POD)
    check_gpu(gpu)
    flags = CheckFlags(model, gpu, gpus_per_replica)
    traffic = traffic_from_flags(rate, prompt_tokens, output_tokens, ttft_ms, itl_ms, share, tpot_ms=tpot_ms)
    if junit:
        # first: a JUnit path that cannot be written is exit 2 before anything is checked, so a
        # failure to write it can never stand in for the verdict or for the input's own error
        check_destination(junit, "--junit", (file, scenario))
    try:
        with progress("sizing", "simulations") as update, naming_traffic_flags(traffic, str(file)):
            result = check_file(str(file), kv_share, budget, traffic, scenario=str(scenario) if scenario else None,
                                flags=flags, progress=update)
    except FieldError as error:
        if junit:
            try:
                write_junit_error(junit, str(file), error)
            except FieldError:
                pass                # the disk filled since the check: the input's own error is the one to show
        raise error                 # the CLI prints it as one line, exit 2
    if as_json:
        typer.echo(to_json(to_dict(result)))
    else:
        typer.echo(check_summary(result, terminal(wide).width))
    if junit:
        write_junit(junit, result)  # after the verdict is printed: a full disk cannot hide it
    raise typer.Exit(result.exit_code)


# --share: the smallest share a deployment may take, 1e-6 (one request in a million).
MIN_SHARE = 1e-6


def to_dict(result: CheckResult) -> dict:
    """The result with its verdict (passed, exit_code) and the sizing pipeline's answer (replicas, cost)."""
    return {"file": result.file, "kind": result.kind, "summary": result.summary, "passed": result.passed,
            "exit_code": result.exit_code, "sources": {s.setting: {"value": s.value, "from": s.source}
                                                      for s in result.sources},
            "notes": result.notes, "rules": result.rules, "sizing": result.sizing}
