"""bus's sub-packages keep their order: each imports only the ones below it (every import: module level, in
functions, under TYPE_CHECKING), so the protocol never learns of git's users and the dispatcher sits on top."""

from __future__ import annotations

import ast
from pathlib import Path

import crosstalk.bus

BUS = Path(crosstalk.bus.__file__).parent
# Bottom to top; `errors` is a module, the rest are packages.
ORDER = ("errors", "git", "protocol", "transport", "runs", "live", "workflow", "dispatch")


def part_of(module: str) -> str | None:
    """`crosstalk.bus.runs.scan` -> "runs"; None for a module outside crosstalk.bus (or the package itself)."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["crosstalk", "bus"] and len(parts) > 2 else None


def bus_imports(source: str) -> set[str]:
    """The crosstalk.bus modules (or names in them) a source imports; absolute imports only (the project's style)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, f"relative import of {node.module}"
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if part_of(name) is not None}


def upward(files: dict[str, str]) -> list[str]:
    """'part/file -> module' for every import of a sub-package above the importer's own (or of one not in ORDER)."""
    bad = []
    for rel, source in sorted(files.items()):
        own = rel.split("/")[0].removesuffix(".py")
        if own == "__init__":
            continue
        for name in sorted(bus_imports(source)):
            target = part_of(name)
            if target not in ORDER or own not in ORDER or ORDER.index(target) > ORDER.index(own):
                bad.append(f"{rel} -> {name}")
    return bad


def test_every_bus_module_belongs_to_a_known_part() -> None:
    parts = {p.name.removesuffix(".py") for p in BUS.iterdir() if p.name != "__init__.py" and p.name != "__pycache__"}
    assert parts == set(ORDER)
    assert all((BUS / p / "__init__.py").read_text(encoding="utf-8").strip() for p in ORDER if (BUS / p).is_dir())


def test_bus_sub_packages_import_only_downwards() -> None:
    files = {p.relative_to(BUS).as_posix(): p.read_text(encoding="utf-8") for p in BUS.rglob("*.py")}
    assert upward(files) == []


def test_the_check_catches_an_upward_import() -> None:
    files = {
        "protocol/message.py": "from crosstalk.bus.transport.store import publish\n",
        "runs/scan.py": "def f():\n    from crosstalk.bus.dispatch import relay\n",
        "dispatch/tick.py": "from crosstalk.bus.protocol.message import BusMessage\nimport crosstalk.bus.errors\n",
        "live/bridge.py": "from crosstalk.bus.runs.reader import ScannedMessage\n",
    }
    assert upward(files) == [
        "protocol/message.py -> crosstalk.bus.transport.store.publish",
        "runs/scan.py -> crosstalk.bus.dispatch.relay",
    ]
