"""A file read on every message is parsed once and reused only while its stat proves it unchanged; read_capped's
refusals (symlinks, FIFOs, directories, over the cap) hold on every call, cached or not."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from crosstalk.fs import reading
from crosstalk.fs.reading import RACY_NS, StatCache


@pytest.fixture
def no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test's files were all just written (their ctime is now, whatever mtime they are given): trust them at once,
    as the window would once they are a few seconds old."""
    monkeypatch.setattr(reading, "RACY_NS", -(10**12))


def parse(raw: bytes) -> dict[str, object] | None:
    data = json.loads(raw)
    return data if isinstance(data, dict) else None


def settled(path: Path, age_s: float = 60.0) -> None:
    """A distinct, older mtime (nanoseconds from the clock: never the same twice)."""
    then = time.time() - age_s
    os.utime(path, (then, then))


def test_an_unchanged_file_is_read_once_and_any_change_is_read_on_the_next_call(
    tmp_path: Path, no_racy_window: None
) -> None:
    cache = StatCache(parse, 1024)
    path = tmp_path / "settings.json"
    path.write_text('{"v": "accept"}')
    settled(path)
    assert cache.get(path) == {"v": "accept"} and cache.get(path) == {"v": "accept"}
    assert cache.reads == 1
    path.write_text('{"v": "refuse"}')  # the same inode and size, rewritten in place
    settled(path)  # even given the old mtime back: the ctime moved
    assert cache.get(path) == {"v": "refuse"} and cache.reads == 2
    replaced = tmp_path / "new.json"
    replaced.write_text('{"v": "hold"}')
    settled(replaced)
    replaced.replace(path)  # an editor's atomic save: a new inode
    assert cache.get(path) == {"v": "hold"} and cache.reads == 3
    path.unlink()
    assert cache.get(path) is None


def test_a_file_changed_within_the_racy_window_is_read_again_every_time(tmp_path: Path) -> None:
    assert RACY_NS >= 2_000_000_000  # coarser than any timestamp tick (FAT's 2 s)
    cache = StatCache(parse, 1024)
    path = tmp_path / "record.json"
    path.write_text('{"status": "idle"}')
    assert cache.get(path) == {"status": "idle"}
    assert cache.get(path) == {"status": "idle"}
    assert cache.reads == 2  # too fresh to trust its stat: a same-size rewrite in the same tick would look unchanged


def test_what_read_capped_refuses_is_refused_cached_or_not(tmp_path: Path, no_racy_window: None) -> None:
    cache = StatCache(parse, 64)
    real = tmp_path / "real.json"
    real.write_text('{"v": 1}')
    settled(real)
    assert cache.get(real) == {"v": 1}
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert cache.get(link) is None  # never through a symlink
    real.rename(tmp_path / "moved.json")
    real.symlink_to(tmp_path / "moved.json")  # the cached path is now a symlink to the same content
    assert cache.get(real) is None
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert cache.get(fifo) is None  # never blocks
    assert cache.get(tmp_path) is None
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"v": "x" * 100}))
    settled(big)
    assert cache.get(big) is None  # over the cap


def test_a_mode_or_owner_change_is_a_change(tmp_path: Path, no_racy_window: None) -> None:
    cache = StatCache(parse, 1024)
    path = tmp_path / "s.json"
    path.write_text('{"v": 1}')
    settled(path)
    cache.get(path)
    mtime = path.stat().st_mtime_ns
    path.chmod(0o640)
    os.utime(path, ns=(mtime, mtime))  # the same mtime and size: only the mode (and ctime) say it changed
    cache.get(path)
    assert cache.reads == 2
