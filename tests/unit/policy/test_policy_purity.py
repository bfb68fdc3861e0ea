"""The policy package stays pure: it imports only the stdlib, crosstalk.core and itself."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import crosstalk.policy

POLICY_DIR = Path(crosstalk.policy.__file__).parent
ALLOWED_PREFIXES = ("crosstalk.core", "crosstalk.policy")
FORBIDDEN_CALLS = {"open", "print", "input", "exec", "eval", "__import__"}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: use absolute imports"
            names.append(node.module or "")
    return names


def test_modules_present() -> None:
    expected = {
        "__init__",
        "roles",
        "view",
        "classify",
        "acl",
        "kinds",
        "admission",
        "hop",
        "claims",
        "decide",
        "notices",
    }
    assert expected <= {p.stem for p in POLICY_DIR.glob("*.py")}


def test_imports_are_stdlib_or_core() -> None:
    for path in sorted(POLICY_DIR.glob("*.py")):
        for name in _imports(path):
            top = name.split(".")[0]
            ok = name.startswith(ALLOWED_PREFIXES) or top == "__future__" or top in sys.stdlib_module_names
            assert ok, f"{path.name} imports {name}"
            assert top not in {"os", "socket", "subprocess", "pathlib", "io", "time", "random"}, (
                f"{path.name} imports {name}: policy does no I/O"
            )


def test_no_io_calls() -> None:
    for path in sorted(POLICY_DIR.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in FORBIDDEN_CALLS, f"{path.name} calls {node.func.id}"


def test_public_names_exported() -> None:
    for name in crosstalk.policy.__all__:
        assert hasattr(crosstalk.policy, name), name
