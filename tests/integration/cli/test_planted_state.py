"""Something other than a regular file planted in the state root (a FIFO, a symlink to /dev/null, a directory) where a
live agent's lock, key, token, journal or another agent's descriptor belongs: `list`, `send`, `watch --once`,
`doctor` and `doctor --fix` finish within a timeout, and `send` names the planted path and what it is.

Opening a FIFO for reading without O_NONBLOCK waits for a writer forever: before fs.reading.open_regular, the agent
lock probe hung every command that lists agents."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.procs import Agent, Procs, one_error_line

COMMAND_TIMEOUT_S = 20.0  # a hang is the failure; a loaded machine finishes each in a few seconds
OTHER_ID = "0123456789abcdef"


def _fifo(path: Path) -> None:
    os.mkfifo(path, 0o600)


def _devnull(path: Path) -> None:
    os.symlink("/dev/null", path)


def _directory(path: Path) -> None:
    os.mkdir(path, 0o700)


PLANTS: dict[str, Callable[[Path], None]] = {"fifo": _fifo, "devnull": _devnull, "directory": _directory}
WHAT = {"fifo": "a FIFO", "devnull": "a symlink", "directory": "a directory"}


def _replace(path: Path, plant: Callable[[Path], None]) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    plant(path)


def _commands_finish(xt: Procs, target: str) -> dict[str, str]:
    """Run each command under the timeout (subprocess.run raises TimeoutExpired on a hang); their stderr."""
    out = {}
    for args in (("list",), ("send", target, "hello"), ("watch", "--once"), ("doctor",), ("doctor", "--fix")):
        res = xt.cli(*args, timeout=COMMAND_TIMEOUT_S)
        assert "Traceback" not in res.stderr, (args, res.stderr)
        out[" ".join(args)] = res.stderr
    return out


@pytest.mark.parametrize("kind", sorted(PLANTS))
def test_a_planted_agent_lock_never_hangs_a_command(xt: Procs, alice: Agent, kind: str) -> None:
    lock = xt.paths.agent_lock(alice.agent_id)
    _replace(lock, PLANTS[kind])  # alice's process still runs: its descriptor names a live pid
    errors = _commands_finish(xt, "alice")
    line = one_error_line(errors["send alice hello"])
    assert str(lock) in line and WHAT[kind] in line and "not a regular file" in line, line


@pytest.mark.parametrize("kind", sorted(PLANTS))
def test_planted_key_token_journal_and_descriptor_never_hang_a_command(xt: Procs, alice: Agent, kind: str) -> None:
    paths = xt.paths
    plant = PLANTS[kind]
    for path in (paths.key_path(alice.agent_id), paths.token_path(alice.agent_id), paths.journal_file(alice.agent_id)):
        _replace(path, plant)
    plant(paths.descriptor(OTHER_ID))  # a descriptor that is not a file: listed as nothing
    plant(paths.agent_lock(OTHER_ID))
    errors = _commands_finish(xt, "alice")
    line = one_error_line(errors["send alice hello"])
    assert str(paths.key_path(alice.agent_id)) in line and ("not a regular file" in line or "symlink" in line), line
