"""StatePaths keeps its root as the string pathlib would write, and builds the send path's file names without
pathlib (registry/paths.py): the strings and the Paths other callers get are the same paths pathlib gives."""

from __future__ import annotations

import os
import pickle
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crosstalk.registry.paths import StatePaths, plain

pytestmark = pytest.mark.unit

AGENT = "0123456789abcdef"
PARTS = st.lists(st.sampled_from(["", ".", "..", "a", "b c", "~", "~x", "x.json", "é"]), max_size=6)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(["", "/", "//", "///"]), PARTS, st.sampled_from(["", "/", "//", "/."]))
def test_plain_writes_a_path_as_pathlib_does(lead: str, parts: list[str], tail: str) -> None:
    path = lead + "/".join(parts) + tail
    assert plain(path) == str(PurePosixPath(path))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["", "/", "//"]), PARTS)
def test_every_path_is_the_string_as_a_path(lead: str, parts: list[str]) -> None:
    root = lead + "/".join(parts)
    paths = StatePaths(root)
    assert paths.root == Path(root)
    assert paths.agents_dir() == str(Path(root) / "agents") == str(paths.agents)
    assert paths.sock_dir() == str(Path(root) / "sock") == str(paths.sock)
    assert paths.descriptor_file(AGENT) == str(Path(root) / "agents" / f"{AGENT}.json") == str(paths.descriptor(AGENT))
    assert paths.agent_lock_file(AGENT) == str(Path(root) / "agents" / f"{AGENT}.lock") == str(paths.agent_lock(AGENT))
    assert paths.key_file(AGENT) == str(Path(root) / "sock" / f"{AGENT}.key") == str(paths.key_path(AGENT))
    assert paths.uds_path(AGENT) == Path(root) / "sock" / f"{AGENT}.sock"


def test_a_path_and_its_string_are_one_record() -> None:
    a, b = StatePaths(Path("/x/y")), StatePaths("/x//y/")
    assert a == b and hash(a) == hash(b)
    assert repr(a) == "StatePaths(root=PosixPath('/x/y'))"
    assert pickle.loads(pickle.dumps(a)) == a
    assert a.with_(root=Path("/z")).root == Path("/z")


@pytest.mark.parametrize(
    "environ",
    [
        {"CROSSTALK_HOME": "/s//t/"},
        {"CROSSTALK_HOME": "rel/./x"},
        {"CROSSTALK_HOME": "~/st"},
        {"XDG_STATE_HOME": "/xdg//state/"},
        {"XDG_STATE_HOME": "relative", "HOME": "/h/"},
        {"HOME": "/home/u"},
        {"HOME": "/"},
        {"HOME": ""},
        {},
    ],
)
def test_from_env_is_the_root_pathlib_gave(environ: dict[str, str]) -> None:
    def pathlib_root() -> Path:  # StatePaths.from_env as it was, with pathlib
        home = environ.get("CROSSTALK_HOME")
        if home:
            return Path(home).expanduser().absolute()
        xdg = environ.get("XDG_STATE_HOME")
        if xdg and os.path.isabs(xdg):
            return Path(xdg) / "crosstalk"
        user_home = environ.get("HOME")
        base = Path(user_home) if user_home else Path.home()
        return base / ".local" / "state" / "crosstalk"

    assert StatePaths.from_env(environ).root == pathlib_root()
    assert StatePaths.from_env(environ).root_dir() == str(pathlib_root())
