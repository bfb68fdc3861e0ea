"""Test helpers live in the importable `tests.support` package: no test module imports another test module, and
none edits sys.path to reach a helper."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _imported(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level:
            names.append("." * node.level + (node.module or ""))
    return names


def test_no_test_module_imports_another_or_edits_sys_path() -> None:
    found: list[str] = []
    for path in sorted(TESTS.rglob("*.py")):
        text = path.read_text()
        rel = path.relative_to(TESTS.parent)
        for name in _imported(ast.parse(text)):
            last = name.rsplit(".", 1)[-1]
            if name.startswith(".") or last.startswith("test_") or last == "conftest":
                found.append(f"{rel}: imports {name}")
        if "sys.path.insert" in text or "sys.path.append" in text:
            found.append(f"{rel}: edits sys.path")
    assert [f for f in found if not f.startswith("tests/unit/test_support_only.py")] == []
