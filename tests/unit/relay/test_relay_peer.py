"""The `@relay:` tag's one sender: the uds ingress finds this machine's relay process where relay/ keeps it (the
same files), and only that live process, holding the serve lock, is it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from crosstalk.fs.locks import FileLock
from crosstalk.fs.procinfo import proc_start_time
from crosstalk.ingress.relay_peer import claims_relay_tag, is_relay_process, relay_lock_file, relay_status_file
from crosstalk.registry.paths import StatePaths
from crosstalk.relay.config import serve_lock_path, status_path


def test_the_ingress_reads_the_relays_own_files(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    assert relay_status_file(tmp_path) == status_path(paths)
    assert relay_lock_file(tmp_path) == serve_lock_path(paths)


def test_only_the_live_lock_holder_named_in_the_status_is_the_relay_process(tmp_path: Path) -> None:
    (tmp_path / "relay").mkdir()
    me = os.getpid()
    status = {"pid": me, "pid_started": proc_start_time(me), "state": "connected"}
    relay_status_file(tmp_path).write_text(json.dumps(status))
    assert not is_relay_process(tmp_path, me)  # no lock held: no relay process serves
    lock = FileLock(relay_lock_file(tmp_path))
    assert lock.try_acquire()
    try:
        assert is_relay_process(tmp_path, me)
        assert not is_relay_process(tmp_path, os.getppid())  # another process of this user
        relay_status_file(tmp_path).write_text(json.dumps({**status, "pid_started": 1}))  # a reused pid
        assert not is_relay_process(tmp_path, me)
        relay_status_file(tmp_path).write_text("not json")
        assert not is_relay_process(tmp_path, me)
    finally:
        lock.release()


def test_the_tag() -> None:
    assert claims_relay_tag("@relay:laptop/alice")
    assert not claims_relay_tag("@cli:relay") and not claims_relay_tag(None)
