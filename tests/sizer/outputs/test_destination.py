"""Output files (issue 9, item 4): every file a command writes is checked before the command does
its work, and a failure to write is one line naming the flag and the path, exit 2."""

from __future__ import annotations

import csv
import errno
import importlib.util
import io
import os
from pathlib import Path
from xml.etree import ElementTree as ET

import pandas as pd
import pytest
from typer.testing import CliRunner

import sizer.cli.report
from sizer.cli import app
from sizer.outputs import destination, sweep_store
from sizer.outputs.destination import check_destination, frame_to_csv, write_text
from validation.errors import FieldError, excerpt

ROOT = Path(__file__).resolve().parents[3]
CHAT = ROOT / "scenarios" / "llama-3.1-8b-chat-h100.yaml"
PASS = ROOT / "scenarios" / "deploy" / "pass-llama-8b-h100.yaml"
MEMORY = ROOT / "scenarios" / "deploy" / "fail-memory-llama-70b-h100.yaml"
runner = CliRunner()

# command line with OUT where the output path goes (the flag just before it)
COMMANDS = {
    "simulate --requests-csv": ["simulate", str(CHAT), "--num-requests", "50", "--requests-csv", "OUT"],
    "search --csv": ["search", str(CHAT), "--gpus", "h100", "--tp", "1", "--weights", "bf16", "--kv-cache-dtype",
                     "auto", "--num-requests", "50", "--workers", "1", "--csv", "OUT"],
    "report -o": ["report", str(CHAT), "--no-search", "-o", "OUT"],
    "check --junit": ["check", str(PASS), "--junit", "OUT"],
}
FLAG = {"simulate --requests-csv": "--requests-csv", "search --csv": "--csv", "report -o": "--output",
        "check --junit": "--junit"}


def invoke(args: list[str], out: Path | str, scenario: str | None = None):
    args = [str(out) if a == "OUT" else a for a in args]
    if scenario is not None:
        args[1] = scenario
    return runner.invoke(app, args)


def one_line_exit_2(result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


def bad_destinations(tmp_path: Path) -> dict[str, tuple[Path | str, str]]:
    (tmp_path / "a-file").write_text("x")
    return {
        "missing folder": (tmp_path / "missing" / "out.x", f"folder {tmp_path / 'missing'} does not exist"),
        "a directory": (tmp_path, "is a directory; expected a file name"),
        "under a regular file": (tmp_path / "a-file" / "out.x", f"{tmp_path / 'a-file'} is a file, not a folder"),
        # pathlib drops a trailing separator ('new/' and 'new' are one Path): written so, the path names a folder,
        # and writing a file called 'new' beside it would not be what was asked
        "a folder name": (f"{tmp_path / 'new'}/", "ends in a path separator, so names a folder; expected a file name"),
        # a link to nothing: writing through it would make its target elsewhere (or fail after the work)
        "a dangling link": (_dangling(tmp_path), f"is a symbolic link to {excerpt(str(tmp_path / 'gone' / 'x'))}, "
                                                 "which does not exist; expected a regular file or a new name"),
    }


def _dangling(tmp_path: Path) -> Path:
    link = tmp_path / "link.x"
    link.symlink_to(tmp_path / "gone" / "x")
    return link


@pytest.mark.parametrize("case", ["missing folder", "a directory", "under a regular file", "a folder name",
                                  "a dangling link"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_bad_destination_is_exit_2_before_any_work(tmp_path, command, case):
    out, why = bad_destinations(tmp_path)[case]
    # a scenario that does not exist: the destination is checked first, so its error is the one reported
    result = invoke(COMMANDS[command], out, scenario=str(tmp_path / "no-such-scenario.yaml"))
    assert one_line_exit_2(result) == f"error: {out}: {FLAG[command]}: {why}"
    # and with a real scenario too
    result = invoke(COMMANDS[command], out)
    assert one_line_exit_2(result) == f"error: {out}: {FLAG[command]}: {why}"


def test_report_pdf_sibling_is_checked_first(tmp_path):
    (tmp_path / "r.pdf").mkdir()
    result = runner.invoke(app, ["report", str(CHAT), "--no-search", "-o", str(tmp_path / "r.html"), "--pdf"])
    assert one_line_exit_2(result) == f"error: {tmp_path / 'r.pdf'}: --pdf: is a directory; expected a file name"
    assert not (tmp_path / "r.html").exists()
    result = runner.invoke(app, ["report", str(CHAT), "--no-search", "-o", str(tmp_path / "r.pdf"), "--pdf"])
    assert "--output" in one_line_exit_2(result)


def test_bad_junit_path_never_hides_the_verdict(tmp_path):
    # a failing deployment (exit 1) with a bad --junit: exit 2 naming the path, before checking anything
    bad = tmp_path / "nope" / "junit.xml"
    line = one_line_exit_2(runner.invoke(app, ["check", str(MEMORY), "--junit", str(bad)]))
    assert line == f"error: {bad}: --junit: folder {tmp_path / 'nope'} does not exist"
    # bad input with a bad --junit: the path is reported, and nothing is written
    line = one_line_exit_2(runner.invoke(app, ["check", "/dev/zero", "--junit", str(bad)]))
    assert "--junit" in line
    # bad input with a good --junit: the input's own error, and the JUnit file says why nothing was checked
    good = tmp_path / "junit.xml"
    line = one_line_exit_2(runner.invoke(app, ["check", "/dev/zero", "--junit", str(good)]))
    assert line == "error: /dev/zero: a character device, not a regular file"
    case = ET.parse(good).getroot().find("testsuite/testcase/error")
    assert case is not None and "a character device" in case.get("message")


class FullDisk(io.StringIO):
    """A file on a full disk: every write fails with ENOSPC, as /dev/full's do."""

    def write(self, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.fixture
def full_disk(monkeypatch):
    monkeypatch.setattr(destination, "open", lambda *a, **k: FullDisk(), raising=False)


def test_full_disk_while_writing(tmp_path, full_disk):
    out = tmp_path / "out.csv"
    result = runner.invoke(app, ["simulate", str(CHAT), "--num-requests", "50", "--requests-csv", str(out)])
    assert one_line_exit_2(result) == f"error: {out}: --requests-csv: cannot write: No space left on device"
    # check prints its verdict before writing JUnit: the failure to write cannot hide it
    result = runner.invoke(app, ["check", str(MEMORY), "--junit", str(out)])
    assert "FAIL: memory" in result.stdout
    assert one_line_exit_2(result) == f"error: {out}: --junit: cannot write: No space left on device"
    # bad input and a JUnit file that cannot be written: the input's own error is the one shown
    result = runner.invoke(app, ["check", "/dev/zero", "--junit", str(out)])
    assert one_line_exit_2(result) == "error: /dev/zero: a character device, not a regular file"


def test_emit_to_a_full_disk_is_exit_2(tmp_path, full_disk):
    out = tmp_path / "serve.sh"
    result = runner.invoke(app, ["plan", str(CHAT), "--emit", "vllm", "--emit-to", str(out)])
    assert one_line_exit_2(result) == f"error: {out}: --emit-to: cannot write: No space left on device"


@pytest.mark.parametrize("where", ["fifo", "/dev/full", "/dev/null", "/proc/self/fd/1", "/proc/nope/out.csv",
                                   "/sys/x.csv", "link to /dev/null"])
def test_only_regular_files_are_written(tmp_path, where):
    if where == "fifo":
        path = tmp_path / "pipe"
        os.mkfifo(path)
        why = "is a FIFO; expected a regular file to write"
    elif where == "link to /dev/null":
        path = tmp_path / "null-link"
        path.symlink_to("/dev/null")
        why = "is under /dev, a virtual file system; expected a regular file to write"
    else:
        path = Path(where)
        root = "/" + where.split("/")[1]
        why = f"is under {root}, a virtual file system; expected a regular file to write"
    with pytest.raises(FieldError) as caught:
        check_destination(path, "--results")
    assert caught.value.one_line() == f"{path}: --results: {why}"


def test_csv_cells_a_spreadsheet_would_evaluate_are_neutralised(tmp_path):
    out = tmp_path / "out.csv"
    assert [destination.neutralised(c) for c in ("\tx", "\rx", 3, None)] == ["'\tx", "'\rx", 3, None]
    cells = ["=cmd|' /C calc'!A0", "+1", "-2", "@SUM(A1)", "\tx", "=1+1", "plain", "a=b"]
    frame_to_csv(out, "--csv", pd.DataFrame({"name": cells, "n": [-1.5] * len(cells)}))
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))[1:]
    assert [r[0] for r in rows] == ["'" + c for c in cells[:6]] + ["plain", "a=b"]
    assert [r[1] for r in rows] == ["-1.5"] * len(cells)        # numbers are numbers, not text


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_folder_without_write_permission(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        with pytest.raises(FieldError, match="is not writable"):
            check_destination(locked / "out.csv", "--csv")
    finally:
        locked.chmod(0o700)


def test_writer_turns_os_errors_into_input_errors(tmp_path, monkeypatch):
    out = tmp_path / "out.txt"
    check_destination(out, "--x")                   # a new file in an existing folder is fine
    write_text(out, "--x", "hello")
    assert out.read_text() == "hello"
    check_destination(out, "--x")                   # and so is overwriting a file
    out.chmod(0o400)
    if os.geteuid() != 0:
        with pytest.raises(FieldError, match="exists and is not writable"):
            check_destination(out, "--x")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_normal_run_still_writes_its_file(tmp_path, command, simulations_once):
    # simulations_once (tests/sizer/conftest.py): report -o simulates its operating point again (the timeline)
    out = tmp_path / {"report -o": "report.html", "check --junit": "junit.xml"}.get(command, "out.csv")
    result = invoke(COMMANDS[command], out)
    assert result.exit_code == 0, result.output
    text = out.read_text()
    if command == "simulate --requests-csv":
        assert len(text.strip().splitlines()) == 51
    elif command == "search --csv":
        assert text.startswith("rank,") and len(text.strip().splitlines()) == 2
    elif command == "report -o":
        assert text.startswith("<!DOCTYPE html>") and f"wrote {out}" in result.stdout
    else:
        assert ET.fromstring(text.encode()).find("testsuite").get("failures") == "0"


def test_report_pdf_without_weasyprint_is_refused_before_the_work(tmp_path, monkeypatch):
    """`--pdf` looks weasyprint up (find_spec, no import) before reading the scenario or searching:
    a missing install is one line naming the flag, and no HTML is written (it used to come after
    minutes of search, as a traceback)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "weasyprint" else real(name, *a))

    def no_work(*args, **kwargs):
        raise AssertionError("the report was built before weasyprint was found missing")

    monkeypatch.setattr(sizer.cli.report, "build_report", no_work)
    out = tmp_path / "r.html"
    result = runner.invoke(app, ["report", str(CHAT), "-o", str(out), "--pdf"])
    assert one_line_exit_2(result) == "error: --pdf: weasyprint is not installed; pip install 'sizer[pdf]'"
    assert not out.exists()


def test_sweep_results_on_a_full_disk_is_one_line(tmp_path, monkeypatch):
    def full(table, where, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(sweep_store.pq, "write_table", full)
    store = sweep_store.ResultStore(tmp_path / "r.parquet", "--results")
    with pytest.raises(FieldError) as caught:
        store.close()
    assert caught.value.one_line() == f"{tmp_path / 'r.parquet'}: --results: cannot write: No space left on device"


def test_a_parts_folder_that_is_a_link_is_refused_before_anything_is_written(tmp_path):
    # the parts are written, read back and deleted in their folder: through a link, in whatever it points at
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "part-000000.parquet").write_text("not ours")
    (tmp_path / "r.parquet.parts").symlink_to(elsewhere)
    with pytest.raises(FieldError, match="got a symbolic link"):
        sweep_store.ResultStore(tmp_path / "r.parquet", "--results")
    assert (elsewhere / "part-000000.parquet").read_text() == "not ours"


def test_nothing_is_renamed_over_a_file_that_became_a_fifo(tmp_path):
    store = sweep_store.ResultStore(tmp_path / "r.parquet", "--results")
    os.mkfifo(tmp_path / "r.parquet")           # after the check before the work: checked again before renaming
    with pytest.raises(FieldError, match="is a FIFO"):
        store.close()
    assert (tmp_path / "r.parquet").is_fifo() and not (tmp_path / "r.parquet.tmp").exists()


@pytest.mark.parametrize("command", [*COMMANDS, "plan --emit-to"])
def test_an_output_is_never_a_file_the_command_reads(tmp_path, command):
    # `--emit-to` naming the scenario replaced it with the script; `--junit` naming the manifest with JUnit XML:
    # each command's input, given again as its output (a copy, or a hard link to it: the same file), is refused
    # before any work and left as it was
    source = PASS if command == "check --junit" else CHAT
    copy = tmp_path / source.name
    copy.write_bytes(source.read_bytes())
    (tmp_path / "linked.yaml").hardlink_to(copy)
    args = (["plan", str(copy), "--emit", "vllm", "--emit-to", "OUT"] if command == "plan --emit-to"
            else COMMANDS[command])
    flag = FLAG.get(command, "--emit-to")
    for out in (copy, tmp_path / "linked.yaml"):
        line = one_line_exit_2(invoke(args, out, str(copy)))
        assert line == f"error: {out}: {flag}: is {copy}, which this command reads; expected another file to write"
        assert copy.read_bytes() == source.read_bytes()


def test_dash_names_no_output_file(tmp_path, monkeypatch):
    # '-' is standard input to sizer's readers (`check -`); as an output it wrote a file named '-' in the folder
    monkeypatch.chdir(tmp_path)
    line = one_line_exit_2(runner.invoke(app, ["plan", str(CHAT), "--emit", "vllm", "--emit-to", "-"]))
    assert line.startswith("error: -: --emit-to: names no file here") and not (tmp_path / "-").exists()


# ---- a fresh adversarial pass (issue 25 follow-up): partial files, link tricks, names holding a newline ----------


class FillsUp:
    """A real file on a disk that fills up: the first write gets 10 bytes in, then ENOSPC."""

    def __init__(self, f):
        self.f = f

    def write(self, data):
        self.f.write(data[:10])
        self.f.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


@pytest.mark.parametrize("command", ["report -o", "check --junit", "plan --emit-to"])
def test_a_failed_write_leaves_the_old_file_and_no_part_file(tmp_path, command, monkeypatch):
    # report -o, --emit-to and --junit truncated the file and wrote into it: a full disk left a partial HTML report
    # or a cut-off `vllm serve ... \` script (12 KB of 30 on a 12 KB tmpfs) in place of the old file
    monkeypatch.setattr(destination, "open", lambda *a, **k: FillsUp(open(*a, **k)), raising=False)
    out = tmp_path / "out.txt"
    out.write_text("OLD\n")
    args = (["plan", str(CHAT), "--emit", "vllm", "--emit-to", "OUT"] if command == "plan --emit-to"
            else COMMANDS[command])
    result = invoke(args, out)
    assert "cannot write: No space left on device" in result.stderr.strip().splitlines()[-1]
    assert out.read_text() == "OLD\n" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_an_interrupted_write_leaves_the_old_file_and_no_part_file(tmp_path):
    out = tmp_path / "junit.xml"
    out.write_text("OLD\n")

    def interrupted(f):
        f.write(b"<partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        destination.write_with(out, "--junit", interrupted, binary=True)
    assert out.read_text() == "OLD\n" and [p.name for p in tmp_path.iterdir()] == ["junit.xml"]


def test_a_name_holding_a_newline_is_named_in_one_line(tmp_path):
    # a path is the user's to choose (a newline in it is written as asked), but a refusal naming it stays one line
    bad = tmp_path / "no\nthere" / "x.sh"
    line = one_line_exit_2(runner.invoke(app, ["plan", str(CHAT), "--emit", "vllm", "--emit-to", str(bad)]))
    shown = str(bad).replace("\n", "\\n")
    assert line == f"error: {shown}: --emit-to: folder {shown.removesuffix('/x.sh')} does not exist"
    good = tmp_path / "a\nb.sh"
    assert runner.invoke(app, ["plan", str(CHAT), "--emit", "vllm", "--emit-to", str(good)]).exit_code == 0
    assert good.read_text().startswith("# sizer: ")


@pytest.mark.skipif(os.geteuid() != 0, reason="makes a link owned by another user")
def test_another_users_link_in_a_shared_sticky_folder_is_not_written_through(tmp_path):
    # a link left in /tmp by someone else at the name a user writes to: writing through it replaced the file it leads
    # to (the rename resolves the link itself, so fs.protected_symlinks, which guards open(), did not apply)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = shared / "report.html"
    link.symlink_to(victim)
    os.lchown(link, 65534, 65534)
    line = one_line_exit_2(runner.invoke(app, ["plan", str(CHAT), "--emit", "vllm", "--emit-to", str(link)]))
    assert "is a symbolic link of another user's" in line and victim.read_text() == "precious\n"
    os.lchown(link, os.geteuid(), os.getegid())         # one's own link is followed, as the shell's `>` follows it
    assert runner.invoke(app, ["plan", str(CHAT), "--emit", "vllm", "--emit-to", str(link)]).exit_code == 0
    assert link.is_symlink() and victim.read_text().startswith("# sizer: ")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_file_of_another_user_is_not_replaced(tmp_path, command, monkeypatch):
    # audit finding: os.access(W_OK) is always true for root, so another user's file was renamed over (a new inode,
    # owned by root); a file (or a link to one) whose owner is not this user is refused, one's own replaced as before
    out = tmp_path / "theirs.out"
    out.write_text("theirs\n")
    real = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: real + 1)     # the file is now another user's
    line = one_line_exit_2(invoke(COMMANDS[command], out))
    assert line == (f"error: {out}: {FLAG[command]}: is a file of another user's (uid {real}); replacing it (a new "
                    "file renamed onto it) would make it this user's; expected a file of one's own or a new name")
    link = tmp_path / "mine.out"
    link.symlink_to(out)
    assert "is a file of another user's" in one_line_exit_2(invoke(COMMANDS[command], link))
    assert out.read_text() == "theirs\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="makes a file owned by another user")
def test_root_never_replaces_another_users_file(tmp_path):
    out = tmp_path / "r.sh"
    out.write_text("theirs\n")
    os.chown(out, 12345, 12345)
    before = os.stat(out)
    line = one_line_exit_2(runner.invoke(app, ["plan", str(CHAT), "--emit", "vllm", "--emit-to", str(out)]))
    assert "--emit-to: is a file of another user's (uid 12345)" in line
    after = os.stat(out)
    assert (after.st_ino, after.st_uid, after.st_mtime_ns) == (before.st_ino, 12345, before.st_mtime_ns)
    os.chown(out, 0, 0)                                   # one's own: replaced as before
    assert runner.invoke(app, ["plan", str(CHAT), "--emit", "vllm", "--emit-to", str(out)]).exit_code == 0
    assert out.read_text().startswith("# sizer: ")


def test_a_stale_part_name_that_is_a_link_is_never_written_through(tmp_path):
    # the results were written to `r.parquet.tmp` and renamed: a link of that name already there had its target
    # overwritten with Parquet, and the link itself renamed onto the results
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("not ours\n")
    (tmp_path / "r.parquet.tmp").symlink_to(elsewhere)
    store = sweep_store.ResultStore(tmp_path / "r.parquet", "--results")
    store.close()
    assert elsewhere.read_text() == "not ours\n"
    assert (tmp_path / "r.parquet").is_file() and not (tmp_path / "r.parquet").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere.txt", "r.parquet", "r.parquet.tmp"]


def test_a_part_that_cannot_be_written_leaves_no_empty_parts_folder(tmp_path, monkeypatch):
    def full(table, where, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(sweep_store.pq, "write_table", full)
    store = sweep_store.ResultStore(tmp_path / "r.parquet", "--results")
    store.buffer.append({})
    with pytest.raises(FieldError, match="No space left on device"):
        store.flush()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("missing", sweep_store.LATER_COLUMNS)
def test_results_written_before_a_later_column_still_report(tmp_path, missing):
    # the enable_attention_dp column came after files were written without it: such a file (the outputs corpus's
    # RESULTS among them) was refused, "expected sweep result columns; missing enable_attention_dp"
    path = tmp_path / "old.parquet"
    sweep_store.pq.write_table(sweep_store.schema().empty_table().drop_columns([missing]), path)
    assert missing in sweep_store.read_rows(path, "--results").column_names
    corpus = ROOT / "tests" / "bad_inputs" / "outputs" / "results.parquet"
    result = runner.invoke(app, ["report", "--sweep", str(corpus), "--csv", str(tmp_path / "out.csv")])
    assert result.exit_code == 0, result.output
    assert len((tmp_path / "out.csv").read_text().splitlines()) == 2


@pytest.mark.parametrize("case", ["dangling link", "name too long", "under /dev/shm"])
def test_bad_folder_destinations_are_one_line(tmp_path, case):
    if case == "dangling link":
        path = tmp_path / "out"
        path.symlink_to(tmp_path / "gone")
        why = f"is a symbolic link to {excerpt(str(tmp_path / 'gone'))}, which does not exist; expected a folder " \
              "or a new name"
    elif case == "name too long":
        path = tmp_path / ("a" * 300)
        why = "cannot write here: File name too long"
    else:
        path = Path("/dev/shm/sizer-out")
        why = "is under /dev, a virtual file system; expected a folder to write into"
    with pytest.raises(FieldError) as caught:
        destination.check_folder_destination(path, "--out")
    assert caught.value.one_line() == f"{path}: --out: {why}"


@pytest.mark.parametrize("kind", ["a file", "a FIFO"])
def test_a_parts_folder_that_is_not_a_folder_is_named_as_what_it_is(tmp_path, kind):
    parts = tmp_path / "r.parquet.parts"
    parts.write_text("x") if kind == "a file" else os.mkfifo(parts)
    with pytest.raises(FieldError) as caught:
        sweep_store.ResultStore(tmp_path / "r.parquet", "--results")
    assert caught.value.one_line() == (f"{parts}: --results: expected the folder of this results file's parts, "
                                       f"got {kind}")


@pytest.mark.parametrize(("args", "flag", "other"), [
    (["report", str(CHAT), "--no-search", "-o", "FIRST", "--emit", "k8s", "--emit-to", "SECOND"], "--emit-to",
     "--output"),
    (["report", str(CHAT), "--no-search", "-o", "r.html", "--pdf", "--emit", "vllm", "--emit-to", "r.pdf"],
     "--emit-to", "--pdf"),
    (COMMANDS["search --csv"][:-1] + ["FIRST", "--emit", "vllm", "--emit-to", "SECOND"], "--emit-to", "--csv"),
    (["report", "--sweep", str(ROOT / "tests" / "bad_inputs" / "outputs" / "results.parquet"), "-o", "FIRST",
      "--csv", "SECOND"], "--csv", "--output"),
])
def test_two_outputs_naming_one_file_are_refused_before_the_work(tmp_path, monkeypatch, args, flag, other):
    # the second output replaced the first: `report -o r.html --emit-to r.html` left a manifest named r.html.
    # FIRST is a link to SECOND: one file under two names
    monkeypatch.chdir(tmp_path)
    (tmp_path / "second.x").write_text("")
    (tmp_path / "first.x").symlink_to(tmp_path / "second.x")
    args = [{"FIRST": "first.x", "SECOND": "second.x"}.get(a, a) for a in args]
    line = one_line_exit_2(runner.invoke(app, args))
    assert line == f"error: {args[-1]}: {flag}: is also {other}'s file; expected another file for each output"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first.x", "second.x"]
