"""The ctypes inotify wrapper on real directories: which directory changed, replaced files, gone directories."""

from __future__ import annotations

import os
import select
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk.fs.atomic import atomic_write
from crosstalk.watch.inotify import Inotify

WAIT_MS = 5000


@pytest.fixture
def ino() -> Iterator[Inotify]:
    found = Inotify.create()
    assert found is not None, "inotify is part of every Linux kernel crosstalk runs on"
    yield found
    found.close()


def _events(ino: Inotify) -> set[Path] | None:
    poller = select.poll()
    poller.register(ino.fd, select.POLLIN)
    assert poller.poll(WAIT_MS), "no event within the wait"
    return ino.read()


def watched(ino: Inotify) -> list[Path]:
    """The directories `ino` holds a watch on."""
    return sorted(ino._path)


def test_quiet_directories_have_no_events(ino: Inotify, tmp_path: Path) -> None:
    ino.watch([tmp_path])
    assert ino.read() == set()
    assert watched(ino) == [tmp_path]


def test_a_write_or_an_atomic_replace_names_its_directory(ino: Inotify, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    ino.watch([a, b])
    (a / "journal.jsonl").write_text("x\n")
    assert _events(ino) == {a}
    atomic_write(b / "heartbeat.json", b"{}\n", mode=0o600)
    assert _events(ino) == {b}


def test_a_missing_directory_is_skipped_and_a_removed_one_forgotten(ino: Inotify, tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    ino.watch([tmp_path / "not-yet", gone])
    assert watched(ino) == [gone]
    os.rmdir(gone)
    assert _events(ino) == {gone}
    assert watched(ino) == []
    ino.watch([gone])  # still missing: nothing watched, no error
    assert watched(ino) == []
