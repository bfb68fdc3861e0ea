"""docs/dev/architecture.md is drawn from the code: every file it names exists, and every function, class or
constant it names in backticks is defined in the source."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "crosstalk"
DOC = ROOT / "docs" / "dev" / "architecture.md"


def _defined() -> set[str]:
    names: set[str] = set()
    pattern = re.compile(r"^[ \t]*(?:async[ \t]+def|def|class)[ \t]+(\w+)|^[ \t]*(\w+)[ \t]*(?::[^=\n]+)?=", re.M)
    for path in SRC.rglob("*.py"):
        for m in pattern.finditer(path.read_text()):
            names.add(m.group(1) or m.group(2))
    return names


def test_every_file_the_page_names_exists() -> None:
    text = DOC.read_text()
    missing = []
    for rel in sorted(set(re.findall(r"\b([\w/]+\.py)\b", text))):
        # A bare file name follows the directory the sentence named: it must exist somewhere in the source.
        found = (SRC / rel).exists() or (ROOT / rel).exists() or ("/" not in rel and any(SRC.rglob(rel)))
        if not found:
            missing.append(rel)
    assert missing == [], f"docs/dev/architecture.md names files that do not exist: {missing}"


def test_every_name_the_page_puts_in_backticks_is_in_the_source() -> None:
    """A class, function or constant is defined; a package is a package; a wire value, reason or environment
    variable appears in the source; `a.b.name` is the module a/b.py defining name."""
    defined = _defined()
    source = "\n".join(p.read_text() for p in SRC.rglob("*.py"))
    packages = {p.parent.name for p in SRC.rglob("__init__.py")}
    missing = []
    for token in sorted(set(re.findall(r"`([^`\s]+)`", DOC.read_text()))):
        if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", token) or token.endswith((".py", ".md")):
            continue  # paths, flags, calls with arguments: the file test covers paths
        *module, name = token.split(".")
        if module and (SRC / Path(*module)).with_suffix(".py").exists():
            ok = name in defined
        elif module:
            ok = all(part in defined or part in source for part in (*module, name))
        else:
            ok = name in defined or name in packages or f'"{name}"' in source or (not name.islower() and name in source)
        if not ok:
            missing.append(token)
    assert missing == [], f"docs/dev/architecture.md names what the source lacks: {missing}"
