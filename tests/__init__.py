"""The test suite; a package so its helpers import as `tests.support` (and no other `tests` package shadows it)."""
