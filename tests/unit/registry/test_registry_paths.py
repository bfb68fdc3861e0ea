from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from crosstalk.registry.errors import InvalidName, RegistryError
from crosstalk.registry.paths import MAX_SOCKET_PATH_BYTES, StatePaths, check_socket_path

AID = "0123456789abcdef"


def test_from_env_precedence(tmp_root: Path) -> None:
    env = {"CROSSTALK_HOME": str(tmp_root / "a"), "XDG_STATE_HOME": str(tmp_root / "x"), "HOME": "/home/u"}
    assert StatePaths.from_env(env).root == tmp_root / "a"
    del env["CROSSTALK_HOME"]
    assert StatePaths.from_env(env).root == tmp_root / "x" / "crosstalk"
    del env["XDG_STATE_HOME"]
    assert StatePaths.from_env(env).root == Path("/home/u/.local/state/crosstalk")
    # A relative XDG_STATE_HOME is ignored, as the XDG spec asks.
    assert StatePaths.from_env({"XDG_STATE_HOME": "rel", "HOME": "/h"}).root == Path("/h/.local/state/crosstalk")


def test_layout() -> None:
    p = StatePaths(Path("/s"))
    assert p.descriptor(AID) == Path(f"/s/agents/{AID}.json")
    assert p.agent_lock(AID) == Path(f"/s/agents/{AID}.lock")
    assert p.name_lock("alice") == Path("/s/names/alice.lock")
    assert p.journal_file(AID) == Path(f"/s/journal/{AID}.jsonl")
    assert p.journal_lock(AID) == Path(f"/s/journal/{AID}.lock")
    assert p.uds_path(AID) == Path(f"/s/sock/{AID}.sock")
    assert p.key_path(AID) == Path(f"/s/sock/{AID}.key")


@pytest.mark.parametrize("bad", ["../etc/passwd", "ABCDEF0123456789", "abc", ""])
def test_agent_id_cannot_escape(bad: str) -> None:
    with pytest.raises(RegistryError):
        StatePaths(Path("/s")).descriptor(bad)


@pytest.mark.parametrize("bad", ["../x", ".hidden", "a/b", ""])
def test_name_cannot_escape(bad: str) -> None:
    with pytest.raises(InvalidName):
        StatePaths(Path("/s")).name_lock(bad)


def test_ensure_creates_private_dirs(tmp_root: Path) -> None:
    p = StatePaths(tmp_root / "deep" / "st").ensure()
    for d in (p.root, p.agents, p.names, p.journal, p.sock):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700


def test_ensure_tightens_wide_dirs(tmp_root: Path) -> None:
    p = StatePaths(tmp_root / "st")
    p.agents.mkdir(parents=True)
    os.chmod(p.root, 0o755)
    os.chmod(p.agents, 0o777)
    p.ensure()
    assert stat.S_IMODE(os.stat(p.root).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(p.agents).st_mode) == 0o700


def test_ensure_refuses_a_file_in_the_way(tmp_root: Path) -> None:
    p = StatePaths(tmp_root / "st")
    p.root.mkdir()
    p.sock.write_text("x")
    with pytest.raises(RegistryError, match="not a directory"):
        p.ensure()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a dir to another uid")
def test_ensure_refuses_dir_of_another_uid(tmp_root: Path) -> None:
    p = StatePaths(tmp_root / "st")
    p.names.mkdir(parents=True)
    os.chown(p.names, 65534, 65534)
    with pytest.raises(RegistryError, match="owned by uid 65534"):
        p.ensure()


def test_socket_path_limit(tmp_root: Path) -> None:
    ok = "/" + "a" * (MAX_SOCKET_PATH_BYTES - 1)
    assert check_socket_path(ok) == Path(ok)
    with pytest.raises(RegistryError, match=r"108 bytes.*CROSSTALK_HOME"):
        check_socket_path(ok + "b")
    long_root = StatePaths(tmp_root / ("d" * 90))
    with pytest.raises(RegistryError, match="shorter directory"):
        long_root.ensure()
    assert not long_root.root.exists()  # checked before anything is created
