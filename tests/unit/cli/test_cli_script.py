"""The `crosstalk` command is bin/crosstalk, shipped as a wheel script, not a [project.scripts] entry point: the
launcher pip writes for an entry point imports `re` before crosstalk runs (docs/performance.md, "Lean send path")."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]


def test_the_script_imports_only_sys_and_the_cli() -> None:
    source = (REPO / "bin" / "crosstalk").read_text()
    assert source.startswith("#!python\n")  # the installer rewrites it to its interpreter
    imported = {
        alias.name if isinstance(node, ast.Import) else node.module
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported == {"sys", "crosstalk.cli.main"}


def test_the_wheel_ships_it_and_no_entry_point_of_that_name() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "crosstalk" not in project["project"]["scripts"]
    assert project["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-scripts"] == {"bin/crosstalk": "crosstalk"}
