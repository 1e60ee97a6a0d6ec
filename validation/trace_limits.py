"""Bounds on what a trace may hold, and why: the trace readers (simulator/traces.py) check every row against
them, and the scenario's own fields share them (sizer/inputs/scenario.py). A module of numbers alone, so a
plan reads them without loading the readers (and numpy).
"""

# -- Bounds on what a trace may hold, and why. Checked row by row while reading, so nothing
# -- larger is ever allocated and no loop runs longer than these allow.
#
# Tokens of one request, prompt and output together (they share one context window):
# 10 x 2^20 = 10,485,760, the longest context any released model advertises (Llama 4 Scout's
# 10M), 64x the longest in sizer's catalog (DeepSeek-V3, 163,840). No deployment can serve a
# longer request, and it bounds the KV blocks one request asks of the simulator (655,360
# blocks of 16 tokens) and its prefix-block hashes (20,480 of 512 tokens).
MAX_REQUEST_TOKENS = 10 * 2 ** 20
# Requests in one trace: 1,000,000. Reading a Mooncake trace keeps ~1.5 kB of Python
# objects a request (measured on the one-hour Mooncake trace, 24 block hashes a request), so
# 1.5 GB at the bound; and the simulator replays a few hundred such requests a second
# (measured: that trace's 12,031 requests on four H100 replicas of Llama 3.1 8B take a
# minute), so a million is an hour or more. The public traces this project replays (at most
# 19,366 requests, an hour of Azure conversation traffic) fit 50 times over; a longer one is
# replayed in slices (`limit`; a scenario's workload.trace.max_requests).
MAX_TRACE_REQUESTS = 1_000_000
# Lines in one file: the requests, a CSV header and as many blank lines again (blank lines
# are skipped, but reading them is a loop too).
MAX_TRACE_LINES = 2 * MAX_TRACE_REQUESTS + 1
# Bytes in one line: 1 MiB holds a Mooncake record of the longest request (20,480 hashes of
# up to 19 digits, ~430 kB) twice over.
MAX_LINE_BYTES = 2 ** 20
# Prefix-block hashes in one trace, all requests together: 50,000,000, about 2 GB as Python
# ints in tuples (~40 bytes each); 170x the one-hour Mooncake trace's 290,000.
MAX_TRACE_HASH_IDS = 50_000_000
# Block hashes are 64-bit: 0 <= id < 2^63.
MAX_HASH_ID = 2 ** 63 - 1
# Timestamps, in seconds, within +-1e11 s (3,000 years: Unix time in seconds or milliseconds
# fits) so that float64 seconds keep every arrival to 15 microseconds or better; finite.
MAX_TIMESTAMP_S = 1e11
