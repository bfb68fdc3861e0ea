"""Test modules are imported by basename (no packages under tests/), so two files of one name in different
directories stop collection of any run that holds both: a merge must rename one."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_module_has_a_unique_basename() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)
    assert [n for n, c in names.items() if c > 1] == []
