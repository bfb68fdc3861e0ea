"""The tests' shared helpers: fakes, process rigs, live-session scaffolds and wait helpers, imported as
`tests.support.<module>` (pytest puts the repository root on sys.path: `pythonpath` in pyproject.toml). A few are
also run as scripts in child processes (registry_child.py, uds_peer.py, hostile_appserver.py)."""
