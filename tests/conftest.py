"""Marks every test by the directory it lives in (tests/unit → unit, tests/integration → integration, tests/e2e →
e2e), so `-m unit` selects all of a directory whether or not its module says so. Explicit marks such as `slow` stay."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
BY_DIRECTORY = {"unit": pytest.mark.unit, "integration": pytest.mark.integration, "e2e": pytest.mark.e2e}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        try:
            top = item.path.resolve().relative_to(TESTS).parts[0]
        except (ValueError, IndexError):
            continue
        mark = BY_DIRECTORY.get(top)
        if mark is not None and item.get_closest_marker(mark.name) is None:
            item.add_marker(mark)
