"""Shell completion (Typer's `--install-completion` / `--show-completion`) completes the lazily loaded
commands and their flags."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("words, cword, expected", [
    ("sizer pl", 1, "plan"),                        # a command, found though commands load on first use
    ("sizer check --sha", 2, "--share"),            # a command's flag
    ("sizer plan --prompt", 2, "--prompt-tokens"),
])
def test_bash_completion_completes_commands_and_flags(words, cword, expected):
    env = {**os.environ, "_SIZER_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
    code = "import sys; sys.argv[0] = 'sizer'; from sizer.cli.app import main; main()"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [expected]
