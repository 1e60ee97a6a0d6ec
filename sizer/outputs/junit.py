"""`sizer check --junit`: the rules as JUnit XML, one testcase per rule, for CI dashboards."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree as ET

from sizer.outputs.check import CheckResult
from sizer.outputs.destination import write_with
from validation.errors import FieldError


def _suite(file: str, tests: int, failures: int, errors: int, skipped: int) -> tuple[ET.Element, ET.Element]:
    root = ET.Element("testsuites")
    return root, ET.SubElement(root, "testsuite", name=f"sizer check {file}", tests=str(tests), failures=str(failures),
                         errors=str(errors), skipped=str(skipped))


def write_junit(path: Path, result: CheckResult) -> None:
    """One testcase per rule: <failure> with the fixes as text, <skipped> with the reason."""
    root, suite = _suite(result.file, len(result.rules), sum(r.status == "fail" for r in result.rules), 0,
                   sum(r.status == "skip" for r in result.rules))
    if result.sources:              # what was checked, and where each setting came from
        properties = ET.SubElement(suite, "properties")
        for s in result.sources:
            ET.SubElement(properties, "property", name=s.setting, value=f"{s.value} (from {s.source})")
    for r in result.rules:
        case = ET.SubElement(suite, "testcase", classname=f"sizer.check.{Path(result.file).stem}", name=r.name)
        if r.status == "fail":
            failure = ET.SubElement(case, "failure", message=r.message, type="RuleFailed")
            failure.text = "\n".join(["fix: " + f for f in r.fixes])
        elif r.status == "skip":
            ET.SubElement(case, "skipped", message=r.message)
        else:
            ET.SubElement(case, "system-out").text = r.message
    _write(path, root)


def write_junit_error(path: Path, file: str, error: FieldError) -> None:
    """Bad input: one testcase `input` with an <error>, so CI shows why nothing was checked."""
    root, suite = _suite(file, 1, 0, 1, 0)
    case = ET.SubElement(suite, "testcase", classname=f"sizer.check.{Path(file).stem}", name="input")
    ET.SubElement(case, "error", message=error.one_line(), type="InputError")
    _write(path, root)


def _write(path: Path, root: ET.Element) -> None:
    write_with(path, "--junit", lambda f: ET.ElementTree(root).write(f, encoding="utf-8", xml_declaration=True),
               binary=True)
