"""The `crosstalk` command."""
