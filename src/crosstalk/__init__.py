"""crosstalk: messages between live AI coding-agent sessions, by name."""

__version__ = "0.1.0"
