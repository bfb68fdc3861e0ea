"""FileLock.acquire waits in the kernel's queue: it gets the lock the moment the holder lets go, gives up at its
timeout, and a wait it gave up on never keeps the lock."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from crosstalk.fs.locks import FileLock, is_locked
from tests.support.waiting import until


def test_a_free_lock_is_taken_at_once(tmp_path: Path) -> None:
    lock = FileLock(tmp_path / "l")
    assert lock.acquire(5.0) and lock.held
    lock.release()
    assert not is_locked(tmp_path / "l")


def test_a_waiter_gets_the_lock_when_the_holder_lets_go(tmp_path: Path) -> None:
    holder, waiter = FileLock(tmp_path / "l"), FileLock(tmp_path / "l")
    assert holder.try_acquire()
    got: list[bool] = []
    started = threading.Event()

    def wait() -> None:
        started.set()
        got.append(waiter.acquire(30.0))

    thread = threading.Thread(target=wait)
    thread.start()
    assert started.wait(10)
    assert not got  # still waiting while the holder holds
    holder.release()
    thread.join(30)
    assert got == [True] and waiter.held
    assert not holder.try_acquire()
    waiter.release()


def test_a_waiter_that_times_out_never_keeps_the_lock(tmp_path: Path) -> None:
    holder, waiter = FileLock(tmp_path / "l"), FileLock(tmp_path / "l")
    assert holder.try_acquire()
    before = time.monotonic()
    assert waiter.acquire(0.2) is False and not waiter.held
    assert time.monotonic() - before >= 0.2
    holder.release()
    # The abandoned wait takes the lock when the holder lets go, and lets it go again at once.
    until(lambda: not is_locked(tmp_path / "l"), "the abandoned wait to release the lock")
    third = FileLock(tmp_path / "l")
    assert third.acquire(10.0)
    third.release()


def test_a_relocking_holder_cannot_starve_a_waiter(tmp_path: Path) -> None:
    """A holder that lets go and takes the lock again in a loop, as a burst of `message send`s does: a queued
    waiter is woken by the release itself, so it gets a turn long before its timeout."""
    path = tmp_path / "l"
    stop = threading.Event()
    rounds = [0]

    def relock() -> None:
        lock = FileLock(path)
        while not stop.is_set() and rounds[0] < 5000:
            if lock.acquire(10.0):
                rounds[0] += 1
                stop.wait(0.005)
                lock.release()

    holder = threading.Thread(target=relock)
    holder.start()
    try:
        until(lambda: rounds[0] > 3, "the holder to start its loop")
        waiter = FileLock(path)
        assert waiter.acquire(20.0), "the waiter never got a turn"
        waiter.release()
    finally:
        stop.set()
        holder.join(30)
