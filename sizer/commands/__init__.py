"""One module per CLI command with a `command(...)` function; sizer/cli.py registers them."""
