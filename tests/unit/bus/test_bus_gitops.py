"""The transport lock (flock under .git) and the wake poke, without a daemon."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from crosstalk.bus.errors import GitError
from crosstalk.bus.git.locks import git_dir, transport_lock
from crosstalk.bus.transport.state import transport_state, wake


def test_lock_is_reentrant_in_a_thread_and_exclusive_across_threads(tmp: Path) -> None:
    (tmp / ".git").mkdir()
    with transport_lock(tmp), transport_lock(tmp):  # a locked helper may call another locked helper
        outcome: list[str] = []  # what the other thread got (an assertion there would not fail this test)

        def other() -> None:
            try:
                with transport_lock(tmp, timeout=0.2):
                    outcome.append("acquired while held")
            except GitError as exc:
                outcome.append(exc.message)

        t = threading.Thread(target=other)
        t.start()
        t.join(timeout=30)
        assert len(outcome) == 1 and "is busy" in outcome[0], outcome
    with transport_lock(tmp, timeout=1):
        pass


def test_git_dir_follows_a_gitdir_file(tmp: Path) -> None:
    (tmp / "real").mkdir()
    (tmp / "wt").mkdir()
    (tmp / "wt" / ".git").write_text(f"gitdir: {tmp / 'real'}\n")
    assert git_dir(tmp / "wt") == tmp / "real"
    assert git_dir(tmp) == tmp / ".git"


def test_wake_without_and_with_a_listener(tmp: Path) -> None:
    env = {"CROSSTALK_HOME": str(tmp / "h")}
    assert wake("bus", env) is False  # nobody listening is not an error
    state = transport_state("bus", env).ensure()
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(state.wake_sock))
        sock.settimeout(10)
        assert wake("bus", env) is True
        assert sock.recv(8) == b"w"
