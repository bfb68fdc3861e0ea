"""Harness adapters: one per agent CLI (Claude Code, Codex, pi, headless) plus the scriptable fake."""
