"""Comments explain the code; none cites a document the repository lacks.

A reader of `src/`, `tests/` or `bench/` has the repository and nothing else, so "seed 000 §5", "ADR 0009",
"decision 4", "R7" or "issue 15" point nowhere. Public specifications stay citable (RFC 8259 §8.1, A2A 1.0 §3.1.1,
the MCP spec), and so does any `.md` file the repository holds.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import crosstalk

ROOT = Path(crosstalk.__file__).resolve().parents[2]
SCANNED = ("src", "tests", "bench")
SKIP_DIRS = {".git", ".venv", "node_modules", ".harnesses", "__pycache__"}

CITATIONS: dict[str, re.Pattern[str]] = {
    "seed document": re.compile(r"\bseed(?:[ -]?\d+|\s+test\b|'s\b)", re.IGNORECASE),
    "ADR": re.compile(r"\bADR[ -]?\d+"),
    "numbered decision": re.compile(r"\bdecision \d+\b", re.IGNORECASE),
    "numbered requirement": re.compile(r"\bR\d{1,2}\b"),
    "issue number": re.compile(r"\bissue\s*#?\d+", re.IGNORECASE),
    "path of the workplace outside the repository": re.compile(r"/work/(?:shared|main|wt)\b"),
}
SECTION = "§"
PUBLIC_SPEC = re.compile(r"\bRFC \d+|\bA2A \d+\.\d+|\bMCP\b")
DESIGN_DOC = re.compile(r"(?<![\w/-])((?:ARCHITECTURE|DESIGN|DECISIONS?|SPEC|SEED)[\w-]*\.md)\b", re.IGNORECASE)
DOCS_PATH = re.compile(r"(?<![\w/.'\"-])(docs/[\w/.-]+\.md)\b")


def repo_markdown(root: Path) -> set[str]:
    """Every .md file the repository holds, by its path from the root and by its name (outside tool and cache
    directories)."""
    names: set[str] = set()
    stack = [root]
    while stack:
        for entry in stack.pop().iterdir():
            if entry.is_dir():
                if entry.name not in SKIP_DIRS:
                    stack.append(entry)
            elif entry.suffix == ".md":
                names |= {entry.name, entry.relative_to(root).as_posix()}
    return names


def citations(line: str, known_md: set[str]) -> list[str]:
    """What on one line cites a document the repository lacks; empty when nothing does."""
    found = [name for name, pattern in CITATIONS.items() if pattern.search(line)]
    if SECTION in line and not PUBLIC_SPEC.search(line):
        found.append("section sign without a public specification")
    for pattern in (DESIGN_DOC, DOCS_PATH):
        found += [f"absent {m.group(1)}" for m in pattern.finditer(line) if m.group(1) not in known_md]
    return found


def scanned_files(root: Path) -> list[Path]:
    files: list[Path] = []
    for top in SCANNED:
        files += [p for p in (root / top).rglob("*") if p.suffix in (".py", ".md") and p.is_file()]
    return sorted(p for p in files if p.resolve() != Path(__file__).resolve())


def test_no_source_line_cites_an_absent_document() -> None:
    known = repo_markdown(ROOT)
    hits = [
        f"{path.relative_to(ROOT)}:{number}: {', '.join(found)}: {line.strip()}"
        for path in scanned_files(ROOT)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if (found := citations(line, known))
    ]
    assert not hits, "explain the code instead of citing a document the repository lacks:\n" + "\n".join(hits)


@pytest.mark.parametrize(
    "line",
    [
        '"""The hop guard (seed 000 §5 receiver order)."""',
        "# A native reply carries no correlation (ADR 0009).",
        "# the kind table (ARCHITECTURE.md decision 4)",
        "# see R7",
        "Target (issue 5): median <= 1.5 s.",
        "# a mailbox-only state (§8)",
        "# the descriptor (ARCHITECTURE.md)",
        "# see docs/dev/gone.md",
        "# Seed test 6 over the wire.",
    ],
)
def test_the_scan_catches_each_kind_of_citation(line: str) -> None:
    assert citations(line, {"README.md"})


@pytest.mark.parametrize(
    "line",
    [
        "# UTF-8 JSON (RFC 8259 §8.1)",
        "# A2A 1.0 §3.4.3: a message whose contextId differs must be rejected.",
        '"""The harness seam (docs/dev/harness-seam.md)."""',
        "# C0, DEL, C1 and the bidi overrides",
        'steer = {"turnId": "turn-9"}',
        'files.append(f"{base}/CHANNEL.md")',
        'assert not is_codex(["less", "docs/codex-adapter.md"])',
    ],
)
def test_the_scan_lets_real_references_through(line: str) -> None:
    assert not citations(line, {"harness-seam.md", "docs/dev/harness-seam.md"})
