"""What the property tests of bad input share (tests/sizer/*/test_fuzz_*.py): hostile values, a
wall-clock guard, and the one assertion every run must pass.

The property: a command given any input answers (exit 0, or `check`'s exit 1 verdict) or refuses
it in one line on stderr (exit 2); never a traceback (an exception other than SystemExit), another
exit code, a second line, or a hang.
"""

from __future__ import annotations

import contextlib
import json
import signal

from hypothesis import strategies as st

# Values of the wrong type, size or sign for any field: huge, tiny, negative, NaN, infinite,
# strings, lists, mappings, nulls.
HOSTILE = st.one_of(
    st.none(), st.booleans(),
    st.integers(), st.sampled_from([0, -1, 1, 2 ** 31, 2 ** 63, 10 ** 12, 10 ** 30, 10 ** 400]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e300, -1e300, 1e-300, 5e-324, 1e12, 0.5, float("nan"), float("inf"), -0.0]),
    st.text(max_size=20), st.sampled_from(["1e12", "inf", "nan", "-1", "auto", "", "fp8", "gamma", "uniform"]),
    st.lists(st.one_of(st.integers(-5, 10 ** 12), st.floats(), st.text(max_size=3)), max_size=4),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)

# Text as a command line carries it (a flag's value, a vLLM argument): numbers in every spelling,
# words, empty, control characters: any character a file or argv can hold (not NUL, no lone surrogate).
HOSTILE_TEXT = st.one_of(
    st.integers().map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12),
    st.sampled_from(["", " ", "0", "-1", "1e400", "nan", "inf", "-inf", "1_000", "0x10", "32k", "10M", "1,2",
                     "1,0", ",", "auto", "bf16", "fp8", "int3", "h100", "a\nb", "\x1b[31m", "9" * 30, "9" * 5000]),
)


@contextlib.contextmanager
def wall_clock(seconds: int):
    """Fail (TimeoutError) instead of hanging when the body runs past `seconds`."""
    def expire(*_):
        raise TimeoutError(f"ran past {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def answered_or_refused(result, context, answers: tuple[int, ...] = (0,)) -> str | None:
    """Assert the property for a CliRunner result; the refusal's one line, or None for an answer.
    An answer printed with --json must be JSON (no NaN or Infinity)."""
    assert result.exception is None or isinstance(result.exception, SystemExit), (context, repr(result.exception))
    assert result.exit_code in (*answers, 2), (context, result.exit_code, result.output)
    assert "Traceback" not in result.output, (context, result.output)
    if result.exit_code != 2:
        return None
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, (context, result.stderr)
    assert lines[0].startswith("error: ") and lines[0].isprintable(), (context, lines[0])
    # values are quoted as excerpts: a 5,000-character value never makes a line that long (the
    # longest lines list what was expected: the model catalog's names, several hundred characters)
    assert len(lines[0]) < 2000, (context, lines[0])
    return lines[0]


def json_answer(text: str):
    """The JSON a command printed, refusing NaN and Infinity (not JSON, however Python writes them)."""
    return json.loads(text, parse_constant=_no_constant)
