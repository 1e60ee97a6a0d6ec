"""Published measurements replayed through sizer, used only by the benchmark scripts and their tests
(tests/benchmarks/): `replay_vllm` (the public vLLM runs, tests/data/fidelity/), `replay_saturation`
(TensorRT-LLM's published maximum-load rows) and `llamacpp_published` (public llama-bench runs,
tests/data/llamacpp/)."""
