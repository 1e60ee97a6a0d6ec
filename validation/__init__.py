"""The input-validation leaf that sizer, the simulator and the engine all read their inputs through.

`errors` (`FieldError`: file, field path, expectation; `excerpt`), `input_files` (regular files only, a size
bound, UTF-8), `safe_yaml` (duplicate-key, alias, expansion, depth and size bounds while parsing), `safe_load`
(JSON under the same bounds), `safetensors` (a safetensors header and its byte ranges), `schema` (fields
declared once with their types and bounds) and `trace_limits` (what a trace may hold, which the scenario's
fields share). It imports the standard library and PyYAML only, nothing of sizer, the simulator or the engine
(docs/architecture.md, "Where validation lives"; tests/test_architecture.py).
"""
