"""The layers hold: each unit of crosstalk imports only what sits below it, and nothing imports in a circle.

The checker is plain functions over a {module: imported crosstalk modules} graph read from the source with `ast`
(every import: module level, in functions, under TYPE_CHECKING), so the tests below can prove it on a fake tree.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import crosstalk

SRC = Path(crosstalk.__file__).parent
# The README's layout, bottom up: a unit may import only units of a lower rank (and itself). The root package holds
# only __version__ and sits beneath everything; the top units are peers (the cli runs the others; a circle among them
# is still caught); __main__ is the entry point over all of them.
LAYOUT = (
    "core",
    "fs",
    "policy",
    "registry",
    "journal",
    "harness",
    "receiver",
    "tasks",
    "ingress",
    "agent",
    "bus",
    "relay",
    "exthost",
    "shim",
)
TOP = ("cli", "demo", "watch", "doctor", "capture")
README = Path(__file__).resolve().parents[2] / "README.md"
RANK = {"": -1, **{u: n for n, u in enumerate(LAYOUT)}, **dict.fromkeys(TOP, len(LAYOUT)), "__main__": len(LAYOUT) + 1}
# Upward imports allowed for now, each (importing unit, imported unit); none is left.
KNOWN_UPWARD: set[tuple[str, str]] = set()

Graph = dict[str, set[str]]


def build_graph(root: Path) -> Graph:
    """Each module under the package dir `root` -> the modules of that package it imports."""
    files = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: Graph = {}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: resolve against this module's package
                    anchor = package.rsplit(".", node.level - 1)[0]
                    base = f"{anchor}.{base}" if base else anchor
                for alias in node.names:
                    found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base)
        graph[mod] = {m for m in found if _in(m, root.name)}
    return graph


def _in(mod: str, *prefixes: str) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in prefixes)


def unit(mod: str) -> str:
    """The first component after the root package (`crosstalk.bus.daemon` -> `bus`); the root package itself is ""."""
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else ""


def _limits(mod: str) -> tuple[tuple[str, ...] | None, str, list[tuple[str, str]]]:
    """(the only prefixes mod may import or None, why, [(forbidden prefix, why)]) for one module."""
    root = mod.split(".")[0]

    def at(*names: str) -> tuple[str, ...]:
        return tuple(f"{root}.{n}" for n in names)

    only, why = None, ""
    if _in(mod, *at("core")):
        only, why = at("core"), "core imports only core"
    elif _in(mod, *at("fs")):
        only, why = at("fs", "core"), "fs imports only core"
    elif _in(mod, *at("policy")):
        only, why = at("policy", "core"), "policy imports only core"
    elif mod == f"{root}.harness":
        only, why = at("harness", "core"), "the kind registry imports only harness.* and core"
    elif _in(mod, *at("harness.base", "harness.errors")):
        only, why = at("harness.base", "harness.errors", "core"), "the harness seam imports only core"
    elif _in(mod, *at("harness.receipt_inbox")):
        only, why = at("core", "fs"), "the harnesses' receipt inbox imports only core and fs"
    elif _in(mod, *at("harness.header")):
        only, why = at("core", "harness.base"), "the header line imports only core and the seam"
    elif _in(mod, *at("harness.config_files")):
        only, why = at("core", "fs", "harness.base"), "the installers' shared steps import only core, fs, the seam"
    elif _in(mod, *at("harness")):
        # fs is the OS layer beside core (files, locks, /proc process identity): a harness may read its own files.
        seam = at(
            "core",
            "fs",
            "harness.base",
            "harness.errors",
            "harness.receipt_inbox",
            "harness.config_files",
            "harness.header",
        )
        only = (*seam, ".".join(mod.split(".")[:3]))
        why = "a harness imports only core, fs, the harness seam and itself"
    forbidden = []
    if unit(mod) == "ingress":  # stricter than the rank: A2A tasks are served through core's TaskApi protocol
        forbidden.append((f"{root}.tasks", "ingress reaches tasks only through core's TaskApi"))
    return only, why, forbidden


def rank_violation(mod: str, imp: str) -> str | None:
    """Why `mod` may not import `imp` by the layout's order, or None when the arrow points down (or stays in a unit).
    A unit the layout does not name is a violation too: a new package must take its place in the README first."""
    low, high = unit(imp), unit(mod)
    if low == high or (high, low) in KNOWN_UPWARD:
        return None
    for name in (high, low):
        if name not in RANK:
            return f"{name} has no place in the layout"
    if RANK[low] < RANK[high]:
        return None
    if RANK[low] == RANK[high] and high in TOP:
        return None
    return f"{high} sits below {low or 'the root package'}"


def rule_violations(graph: Graph) -> list[str]:
    problems = []
    for mod, imports in sorted(graph.items()):
        only, why, forbidden = _limits(mod)
        for imp in sorted(imports):
            if only is not None and not _in(imp, *only):
                problems.append(f"{mod} imports {imp}: {why}")
            problems += [f"{mod} imports {imp}: {reason}" for p, reason in forbidden if _in(imp, p)]
            ranked = rank_violation(mod, imp)
            if ranked is not None:
                problems.append(f"{mod} imports {imp}: {ranked}")
    return problems


def find_cycles(edges: Graph) -> list[list[str]]:
    """Every circle a depth-first walk meets, each as a path that ends where it starts (deduplicated)."""
    cycles: dict[frozenset[str], list[str]] = {}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                loop = [*path[path.index(nxt) :], nxt]
                cycles.setdefault(frozenset(loop), loop)
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return list(cycles.values())


def cycle_violations(graph: Graph) -> list[str]:
    units: Graph = {}
    modules: Graph = {}
    for mod, imports in graph.items():
        for imp in imports:
            if unit(imp) != unit(mod):
                units.setdefault(unit(mod), set()).add(unit(imp))
            elif not (_in(imp, mod) or _in(mod, imp)):  # a package and its own submodules: not a circle
                modules.setdefault(mod, set()).add(imp)
    found = [f"units import in a circle: {' -> '.join(c)}" for c in find_cycles(units)]
    return found + [f"modules import in a circle: {' -> '.join(c)}" for c in find_cycles(modules)]


def check(graph: Graph) -> list[str]:
    return rule_violations(graph) + cycle_violations(graph)


def test_the_ranks_are_the_readmes_layout() -> None:
    text = README.read_text(encoding="utf-8")
    paragraph = text[text.index("Layout, bottom up:") :].split("\n- ", 1)[0]
    assert re.findall(r"`(\w+)/`", paragraph) == [*LAYOUT, *TOP]
    assert re.search(r"`cli/`, `demo/`, `watch/`,\s+`doctor/`, `capture/` at the top", paragraph)


def test_crosstalk_layers_hold() -> None:
    problems = check(build_graph(SRC))
    assert not problems, "layering violations:\n" + "\n".join(problems)


FAKE_TREE = {
    "__init__.py": "",
    "core/__init__.py": "",
    "core/m.py": "from crosstalk.core import errors\n",
    "core/errors.py": "",
    "harness/__init__.py": "def load():\n    from crosstalk.harness.foo import KIND\n    return KIND\n",
    "harness/base.py": "from crosstalk.core.m import X\n",
    "harness/foo/__init__.py": "from crosstalk.harness.foo.impl import KIND\n",
    "harness/foo/impl.py": "from crosstalk.harness import foo\nfrom crosstalk.harness.base import Seam\n",
    "tasks/__init__.py": "",
    "tasks/service.py": "import crosstalk.core.m\n",
    "shim/__init__.py": "",
    "cli/main.py": "from crosstalk.tasks import service\nfrom crosstalk import shim\n",
}
BAD = {
    "core/bad.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import crosstalk.shim\n",
    "harness/bar/__init__.py": "def f():\n    from crosstalk.tasks.service import TaskService\n",
    "bus/__init__.py": "",
    "bus/a.py": "from crosstalk.bus import b\n",
    "bus/b.py": "from crosstalk.bus.a import A\n",
    "registry/x.py": "import crosstalk.journal.y\n",
    "journal/y.py": "from crosstalk.registry import x\n",
    "agent/host.py": "from crosstalk.exthost.core import ExtensionCore\n",
}


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / "crosstalk" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "crosstalk" / name).write_text(text, encoding="utf-8")
    return tmp_path / "crosstalk"


def test_checker_passes_a_clean_tree_and_names_each_violation(tmp_path: Path) -> None:
    assert check(build_graph(_tree(tmp_path / "clean", FAKE_TREE))) == []
    problems = check(build_graph(_tree(tmp_path / "bad", {**FAKE_TREE, **BAD})))
    assert problems == [
        "crosstalk.agent.host imports crosstalk.exthost.core: agent sits below exthost",
        "crosstalk.core.bad imports crosstalk.shim: core imports only core",
        "crosstalk.core.bad imports crosstalk.shim: core sits below shim",
        "crosstalk.harness.bar imports crosstalk.tasks.service: a harness imports only core, fs, the harness seam "
        "and itself",
        "crosstalk.harness.bar imports crosstalk.tasks.service: harness sits below tasks",
        "crosstalk.registry.x imports crosstalk.journal.y: registry sits below journal",
        "units import in a circle: journal -> registry -> journal",
        "modules import in a circle: crosstalk.bus.a -> crosstalk.bus.b -> crosstalk.bus.a",
    ]


# Imports planted one at a time in the clean tree: the upward ones the rules before the rank let through, each named
# by its rank, and three that point down or across the top, which pass.
PLANTED_UPWARD = {
    "registry/a.py": ("from crosstalk.journal.codec import read_journal\n", "registry sits below journal"),
    "registry/b.py": ("from crosstalk.harness.claude import adapter\n", "registry sits below harness"),
    "journal/a.py": ("from crosstalk.harness.base import Seam\n", "journal sits below harness"),
    "agent/a.py": ("def f():\n    import crosstalk.bus.daemon\n", "agent sits below bus"),
    "ingress/a.py": ("from crosstalk.agent.host import AgentHost\n", "ingress sits below agent"),
    "capture/a.py": ("from crosstalk import shim\n", None),  # downward: the top imports below it
    "cli/a.py": ("from crosstalk.watch import app\n", None),  # the top units are peers
    "receiver/a.py": ("from crosstalk import __version__\n", None),  # the root package holds only the version
}
TARGETS = {
    "journal/__init__.py": "",
    "journal/codec.py": "",
    "harness/claude/__init__.py": "",
    "harness/claude/adapter.py": "from crosstalk.harness.base import Seam\n",
    "agent/__init__.py": "",
    "agent/host.py": "",
    "bus/__init__.py": "",
    "bus/daemon.py": "",
    "watch/__init__.py": "",
    "watch/app.py": "",
}


@pytest.mark.parametrize("planted", sorted(PLANTED_UPWARD))
def test_checker_ranks_each_planted_import(tmp_path: Path, planted: str) -> None:
    text, reason = PLANTED_UPWARD[planted]
    problems = check(build_graph(_tree(tmp_path, {**FAKE_TREE, **TARGETS, planted: text})))
    if reason is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problems[0].endswith(f": {reason}"), problems


def test_an_unplaced_unit_is_a_violation(tmp_path: Path) -> None:
    problems = check(build_graph(_tree(tmp_path, {**FAKE_TREE, "newthing/a.py": "import crosstalk.core.m\n"})))
    assert problems == ["crosstalk.newthing.a imports crosstalk.core.m: newthing has no place in the layout"]
