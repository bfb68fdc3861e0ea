from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from crosstalk.fs.errors import LockHeld
from crosstalk.fs.locks import FileLock, is_locked


def test_two_locks_on_one_path_conflict_in_one_process(tmp_root: Path) -> None:
    path = tmp_root / "a.lock"
    first, second = FileLock(path), FileLock(path)
    assert first.try_acquire()
    assert first.try_acquire()  # idempotent for the holder
    assert not second.try_acquire()
    assert not second.try_acquire(grace=0.02)
    assert is_locked(path)
    first.release()
    assert not is_locked(path)
    assert second.try_acquire()
    second.release()
    second.release()  # idempotent


def test_lock_file_is_private_and_survives_release(tmp_root: Path) -> None:
    path = tmp_root / "a.lock"
    with FileLock(path) as lock:
        assert lock.held
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert not lock.held
    assert path.exists()  # never unlinked: a later opener must lock the same inode


def test_context_manager_raises_when_held(tmp_root: Path) -> None:
    path = tmp_root / "a.lock"
    with FileLock(path), pytest.raises(LockHeld, match=r"a\.lock"), FileLock(path):
        pass


def test_is_locked_never_creates_the_file(tmp_root: Path) -> None:
    path = tmp_root / "absent.lock"
    assert not is_locked(path)
    assert not path.exists()


def test_probe_leaves_a_free_lock_free(tmp_root: Path) -> None:
    # is_locked takes a shared lock for an instant and drops it: the lock is still free afterwards.
    path = tmp_root / "a.lock"
    path.touch()
    assert not is_locked(path)
    assert not is_locked(path)
    lock = FileLock(path)
    assert lock.try_acquire()
    lock.release()


def test_replaced_lock_file_is_not_trusted(tmp_root: Path) -> None:
    path = tmp_root / "a.lock"
    holder = FileLock(path)
    assert holder.try_acquire()
    os.unlink(path)  # someone removed it anyway: a newcomer locks the new inode, the holder still holds the old
    newcomer = FileLock(path)
    assert newcomer.try_acquire()
    assert holder.held
    holder.release()
    newcomer.release()
