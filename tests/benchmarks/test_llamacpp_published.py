"""sizer's llama.cpp step times against published llama-bench runs (tests/data/llamacpp/, sources in its README).

Analytic only: each row is one roofline evaluation per step (512 prompt tokens, 128 decode steps).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.published.llamacpp_published import median_errors, read_runs, replay

DATA = Path(__file__).resolve().parents[1] / "data" / "llamacpp" / "published.csv"


def test_tg128_median_error_within_15_percent():
    runs = read_runs(DATA)
    assert len(runs) >= 8 and len({r.device for r in runs}) >= 4
    rows = [replay(run) for run in runs]
    pp, tg = median_errors(rows)
    assert tg <= 0.15            # the target for generation
    assert pp <= 0.25            # prompt processing: compute efficiency and the quantised-format share


def test_decode_never_beats_the_bandwidth():
    """A generated token reads every weight once: on an Apple M4 (120 GB/s) llama-3.1-8b q4_k_m (4.91 GB,
    test_gguf_formats) cannot exceed 120 / 4.91 = 24.4 tokens/s, whatever the efficiencies."""
    (m4,) = [r for r in read_runs(DATA) if r.device == "apple-m4"]
    assert replay(m4).tg128_tok_per_s < 120e9 / 4.913e9
