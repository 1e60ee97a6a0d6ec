"""`sizer check FILE`: CI gate. Exit 0 when every rule passes, 1 when one fails, 2 on bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Optional
from xml.etree import ElementTree as ET

import typer

from sizer.errors import InputError
from sizer.outputs.check import CheckResult, check_file
from sizer.outputs.serialise import to_json

MARKS = {"pass": "✓", "fail": "✗", "skip": "-"}


def command(
    file: Path = typer.Argument(..., help="scenario YAML, or a Kubernetes Deployment / Helm values file running `vllm serve`"),
    junit: Optional[Path] = typer.Option(None, "--junit", help="write JUnit XML here (one testcase per rule)"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON instead of the summary"),
    kv_share: Optional[float] = typer.Option(None, "--kv-share", min=0.0, max=1.0,
                                             help="share of max_num_seqs the KV cache must hold at max_model_len"),
    budget: Optional[float] = typer.Option(None, "--budget", min=0.0, help="most the deployment may cost, USD per hour"),
) -> None:
    """Check a deployment against memory, max_model_len, SLO and cost rules (for CI pipelines)."""
    try:
        result = check_file(str(file), kv_share, budget)
    except InputError as error:
        if junit:
            write_junit_error(junit, str(file), error)
        raise                       # the CLI prints it as one line, exit 2
    if junit:
        write_junit(junit, result)
    if as_json:
        typer.echo(to_json(to_dict(result)))
    else:
        typer.echo(summary(result))
    raise typer.Exit(result.exit_code)


def to_dict(result: CheckResult) -> dict:
    """The result with its verdict (passed, exit_code) and the sizing pipeline's answer (replicas, cost)."""
    return {"file": result.file, "kind": result.kind, "summary": result.summary, "passed": result.passed,
            "exit_code": result.exit_code, "notes": result.notes, "rules": result.rules, "sizing": result.sizing}


def summary(result) -> str:
    """What was checked, each rule's verdict, the fixes of failing rules, one closing line."""
    lines = [f"sizer check {result.file} ({result.kind}): {result.summary}"]
    width = max(len(r.name) for r in result.rules)
    for r in result.rules:
        lines.append(f"  {MARKS[r.status]} {r.name:<{width}}  {'skipped: ' if r.status == 'skip' else ''}{r.message}")
        if r.fixes:
            lines.append(f"    {' ' * width}  fix: {r.fixes[0]}")
            lines += [f"    {' ' * width}   or: {fix}" for fix in r.fixes[1:]]
    lines += [f"  note: {note}" for note in result.notes]
    failed = [r.name for r in result.rules if r.status == "fail"]
    lines.append(f"FAIL: {', '.join(failed)} ({len(failed)} of {len(result.rules)} rules)" if failed
                 else f"PASS: {sum(r.status == 'pass' for r in result.rules)} rules passed, "
                      f"{sum(r.status == 'skip' for r in result.rules)} skipped")
    return "\n".join(lines)


def _suite(file: str, tests: int, failures: int, errors: int, skipped: int) -> tuple[ET.Element, ET.Element]:
    root = ET.Element("testsuites")
    return root, ET.SubElement(root, "testsuite", name=f"sizer check {file}", tests=str(tests), failures=str(failures),
                         errors=str(errors), skipped=str(skipped))


def write_junit(path: Path, result) -> None:
    """One testcase per rule: <failure> with the fixes as text, <skipped> with the reason."""
    root, suite = _suite(result.file, len(result.rules), sum(r.status == "fail" for r in result.rules), 0,
                   sum(r.status == "skip" for r in result.rules))
    for r in result.rules:
        case = ET.SubElement(suite, "testcase", classname=f"sizer.outputs.check.{Path(result.file).stem}", name=r.name)
        if r.status == "fail":
            failure = ET.SubElement(case, "failure", message=r.message, type="RuleFailed")
            failure.text = "\n".join(["fix: " + f for f in r.fixes])
        elif r.status == "skip":
            ET.SubElement(case, "skipped", message=r.message)
        else:
            ET.SubElement(case, "system-out").text = r.message
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def write_junit_error(path: Path, file: str, error: InputError) -> None:
    """Bad input: one testcase `input` with an <error>, so CI shows why nothing was checked."""
    root, suite = _suite(file, 1, 0, 1, 0)
    case = ET.SubElement(suite, "testcase", classname=f"sizer.outputs.check.{Path(file).stem}", name="input")
    ET.SubElement(case, "error", message=error.one_line(), type="InputError")
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
