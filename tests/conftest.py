"""Test-wide set-up. Without a CUDA device, Triton kernels can only run in Triton's
interpreter, which must be switched on before any kernel is defined (at import); torch is
not imported here to find out, so the device files and the driver's tool decide."""

import glob
import os
import shutil

if not glob.glob("/dev/nvidia[0-9]*") and not shutil.which("nvidia-smi"):
    os.environ.setdefault("TRITON_INTERPRET", "1")
