"""Transport resolution: --transport NAME|DIR, $CROSSTALK_TRANSPORT, the enclosing transport, the only one known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crosstalk.bus.errors import AmbiguousTransport, BusError, UnknownTransport, VersionMismatch
from crosstalk.bus.protocol import layout
from crosstalk.bus.transport.transports import (
    effective_alias,
    load_entries,
    register,
    resolve_transport,
    unregister,
    validate_name,
)


def _fake_transport(path: Path, version: str = "7\n") -> Path:
    # Resolution only looks at files; a .git directory is enough to count as a work tree here.
    (path / ".git").mkdir(parents=True)
    (path / "CROSSTALK-VERSION").write_text(version)
    (path / "data").mkdir()
    return path.resolve()


def test_registry_entries_and_alias(tmp: Path) -> None:
    env = {"CROSSTALK_HOME": str(tmp / "home")}
    one = _fake_transport(tmp / "one")
    register("one", one, "lap", env)
    assert [(e.name, e.root, e.alias) for e in load_entries(env)] == [("one", one, "lap")]
    data = json.loads((tmp / "home" / "bus" / "transports" / "one.json").read_text())
    assert data == {"name": "one", "root": str(one), "alias": "lap"}
    with pytest.raises(BusError, match="already registered"):
        register("one", tmp, None, env)
    register("one", one, None, env)  # same dir: an update
    assert effective_alias("one", None, env) == "one"
    assert effective_alias("one", "lap", env) == "lap"
    assert effective_alias("one", "lap", {**env, "CROSSTALK_ALIAS": "gpu"}) == "gpu"
    with pytest.raises(BusError, match="CROSSTALK_ALIAS"):
        effective_alias("one", None, {"CROSSTALK_ALIAS": "Bad Alias"})
    unregister("one", env)
    assert load_entries(env) == []


@pytest.mark.parametrize("name", ["", "Upper", "-x", "a b", "x" * 64, "a/b"])
def test_bad_transport_names(name: str) -> None:
    with pytest.raises(BusError, match="not valid"):
        validate_name(name)


def test_resolution_order(tmp: Path) -> None:
    env = {"CROSSTALK_HOME": str(tmp / "home")}
    with pytest.raises(UnknownTransport, match="none known"):
        resolve_transport(tmp, None, env)
    one = _fake_transport(tmp / "one")
    register("one", one, None, env)
    assert resolve_transport(tmp, None, env).root == one  # the only one known
    two = _fake_transport(tmp / "two")
    register("two", two, "m9", env)
    with pytest.raises(AmbiguousTransport, match=r"no transport here and 2 known \(one, two\)"):
        resolve_transport(tmp, None, env)
    assert resolve_transport(two / "data", None, env).name == "two"  # the enclosing transport
    t = resolve_transport(two / "data", "one", env)  # --transport beats cwd
    assert (t.name, t.root, t.alias) == ("one", one, "one")
    assert resolve_transport(tmp, str(two), env).alias == "m9"  # a registered dir keeps its name and alias
    assert resolve_transport(tmp, None, {**env, "CROSSTALK_TRANSPORT": "two"}).name == "two"
    loose = _fake_transport(tmp / "loose")
    t = resolve_transport(tmp, "loose", env)  # an unregistered dir, relative to cwd
    assert (t.name, t.root, t.registered) == ("loose", loose, False)
    with pytest.raises(UnknownTransport, match="no transport named 'nope'"):
        resolve_transport(tmp, "nope", env)


def test_resolution_checks_the_version(tmp: Path) -> None:
    env = {"CROSSTALK_HOME": str(tmp / "home")}
    old = _fake_transport(tmp / "old", "6\n")
    register("old", old, None, env)
    with pytest.raises(VersionMismatch, match="speaks crosstalk protocol v6"):
        resolve_transport(tmp, None, env)
    assert layout.find_root(old) == old
