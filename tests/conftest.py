"""Test-wide set-up. Without a CUDA device, Triton kernels can only run in Triton's
interpreter, which must be switched on before any kernel is defined (at import); torch is
not imported here to find out, so the device files and the driver's tool decide."""

import glob
import os
import shutil
import tempfile

from hypothesis import settings

if not glob.glob("/dev/nvidia[0-9]*") and not shutil.which("nvidia-smi"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

# sizer's user folder (own hardware profiles, calibrations: sizer/inputs/hardware.py user_dir) is an empty one of
# the run's own, never the developer's: a profile there would change what the tests read.
os.environ["SIZER_HOME"] = tempfile.mkdtemp(prefix="sizer-home-")

# The property tests draw new examples on every run, so that a developer's runs keep searching; CI (`.ci/run` sets
# SIZER_TEST_PROFILE=ci) draws the same examples for the same tests, so that whether main lands does not depend on
# the draw (a run of a clean clone once failed on a draw that no earlier run had made).
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("SIZER_TEST_PROFILE") == "ci":
    settings.load_profile("ci")


def pytest_collection_modifyitems(items):
    """The slow tier (`@pytest.mark.slow`) first: the suite is spread over the cores file by file (addopts), so
    the files holding long end-to-end tests start at once and the short files fill in around them, rather than
    a long file starting last and running alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
