"""The benchmarks: scripts run from the repository root (`python3 benchmarks/NAME.py`) and, in `published/`, the
code only they and their tests use. A package so that tests import it from the repository root
(pyproject.toml's pytest `pythonpath`); not part of the wheel, and nothing in sizer, simulator, engine or validation
imports it (tests/test_architecture.py)."""
