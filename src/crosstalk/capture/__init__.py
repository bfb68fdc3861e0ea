"""`crosstalk capture`: a bounded, redacted recording of one agent's raw traffic with its harness (docs/capture.md).

- request.py: the request and spool files in <state root>/capture/ that the two sides share.
- tap.py: the hooks in the agent's process (MCP stdio, socket ingress, Codex app-server client) and the recorder.
- redact.py: what is hidden, as pure functions.
- collect.py: the `crosstalk capture` side: start a capture, collect its spool into one file.
"""
