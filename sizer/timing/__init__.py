"""The step-time stage: what an engine step costs (inputs -> analytic -> timing -> sizing -> outputs -> cli).

One interface, the simulator's `StepTimeModel` (simulator/step_batch.py: `step_time(StepBatch)`), and its
implementations: the roofline (`roofline.py`, with llama.cpp's step costs in `llamacpp.py`), measured kernel
tables per GPU and engine (`kernel_tables.py` the format and reader, `kernel_step.py` the model) and a calibrated
profile (`profile.py`); which one prices a resolved deployment (`step_model.py`); the importers and converters
that write tables, and the comparison of two table folders (docs/architecture.md)."""
