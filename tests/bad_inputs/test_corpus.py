"""The whole malformed-input corpus (batches of inputs, each batch in one worker process): every kind's row all good."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("run_corpus", Path(__file__).with_name("run_corpus.py"))
run_corpus = sys.modules.setdefault("run_corpus", importlib.util.module_from_spec(_spec))
if not hasattr(run_corpus, "run_corpus"):
    _spec.loader.exec_module(run_corpus)


def test_classify():
    assert run_corpus.classify(2, "error: f: x: bad\n") == "good"
    assert run_corpus.classify(2, "a\nb\n") == "other"
    assert run_corpus.classify(1, "Traceback (most recent call last):\n  ...\nKeyError: 'x'\n") == "traceback"
    assert run_corpus.classify(1, "Traceback (most recent call last):\nMemoryError\n") == "memory"
    assert run_corpus.classify(-9, "") == "memory"
    assert run_corpus.classify(0, "") == "exit 0"
    assert run_corpus.classify(None, "") == "hang"


@pytest.mark.slow
def test_every_malformed_input_is_refused_in_one_line():
    table, bad, _ = run_corpus.run_corpus(jobs=2)
    print("\n" + run_corpus.format_table(table))
    assert table, "no corpus found"
    assert not bad, "\n".join(f"{o.verdict}: {o.run.kind} {o.run.case}: {o.detail}" for o in bad)
