"""`crosstalk capture`: a bounded, redacted recording of one agent's raw traffic with its harness (docs/capture.md).

- request.py: the request and spool files in <state root>/capture/ that the two sides share.
- tap.py: the recorder in the agent's process, behind ingress/taps.py's hook points (MCP stdio, socket ingress; a
  process that serves agents calls `install`) and the Codex app-server client's observer.
- redact.py: what is hidden, as pure functions.
- collect.py: the `crosstalk capture` side: start a capture, collect its spool into one file.
"""
