"""Fixtures for the simulator tests (helpers live in simhelp.py)."""

import pytest
from simhelp import LinearStepModel


@pytest.fixture
def linear() -> LinearStepModel:
    return LinearStepModel()
