"""The headless harness: one agent CLI run per prompt under seed 001's argv contract (used by the bus dispatcher)."""
