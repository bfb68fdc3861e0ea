"""The dispatcher's event log: line format, rotation past max_bytes (one old file kept), and the readers
(tail_lines reaching into the rotated file, follow across a rotation)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from crosstalk.bus.dispatch.eventlog import MAX_LOG_BYTES, EventLog, follow, rotated_path, tail_lines


def events(path: Path) -> list[int]:
    """The n= values of the lines in a log file that have one (missing file: none)."""
    if not path.exists():
        return []
    return [int(line.rsplit("n=", 1)[1]) for line in path.read_text().splitlines() if "n=" in line]


def test_line_format_quotes_values_with_spaces(tmp: Path) -> None:
    log = EventLog(tmp / "d.log")
    log("dispatch_failed", "warn", model="local/echo", error='exit 2: "bad" token', empty="", none=None)
    [line] = (tmp / "d.log").read_text().splitlines()
    stamp, level, event, *fields = line.split(" ", 3)
    assert (level, event) == ("warn", "dispatch_failed") and stamp.endswith("Z")
    assert fields == ['model=local/echo error="exit 2: \\"bad\\" token" empty="" none=-']
    assert os.stat(tmp / "d.log").st_mode & 0o777 == 0o600
    assert MAX_LOG_BYTES == 5 * 1024 * 1024


def test_rotates_past_max_bytes_and_keeps_one_old_file(tmp: Path) -> None:
    path = tmp / "dispatcher.log"
    log = EventLog(path, max_bytes=1000)
    for n in range(200):
        log("tick", n=n)
        assert path.stat().st_size <= 1000
    assert sorted(p.name for p in tmp.iterdir()) == ["dispatcher.log", "dispatcher.log.1"]
    old, current = events(rotated_path(path)), events(path)
    # Nothing between the old file and the current one is lost, and the old one is the latest full one.
    assert old + current == list(range(old[0], 200))
    assert 0 < rotated_path(path).stat().st_size <= 1000 and old[0] > 0


def test_no_rotation_below_the_limit_or_when_turned_off(tmp: Path) -> None:
    EventLog(tmp / "a.log", max_bytes=10**6)("boot", n=1)
    off = EventLog(tmp / "b.log", max_bytes=0)
    for n in range(100):
        off("tick", n=n)
    assert not rotated_path(tmp / "a.log").exists() and not rotated_path(tmp / "b.log").exists()
    assert events(tmp / "b.log") == list(range(100))


def test_one_line_larger_than_the_limit_still_gets_written(tmp: Path) -> None:
    path = tmp / "d.log"
    log = EventLog(path, max_bytes=50)
    log("big", value="x" * 200, n=0)
    log("big", value="y" * 200, n=1)
    assert events(path) == [1] and events(rotated_path(path)) == [0]


def test_rotation_repoints_follow_fds_at_the_new_file(tmp: Path) -> None:
    path = tmp / "d.log"
    path.touch(mode=0o600)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)  # like the daemon's stderr under `server start`
    try:
        log = EventLog(path, max_bytes=300, follow_fds=[fd])
        for n in range(20):
            log("tick", n=n)
        assert rotated_path(path).exists()
        os.write(fd, b"Traceback: after the rotation n=999\n")
    finally:
        os.close(fd)
    assert events(path)[-1] == 999


def test_tail_lines_reaches_into_the_rotated_file(tmp: Path) -> None:
    path = tmp / "d.log"
    log = EventLog(path, max_bytes=1000)
    for n in range(40):
        log("tick", n=n)
    current = events(path)
    assert 0 < len(current) < 30
    assert [int(x.rsplit("n=", 1)[1]) for x in tail_lines(path, 30)] == list(range(10, 40))
    assert [int(x.rsplit("n=", 1)[1]) for x in tail_lines(path, 3)] == [37, 38, 39]
    assert tail_lines(path, 0) == [] and tail_lines(tmp / "missing.log", 5) == []


def test_follow_continues_across_a_rotation(tmp: Path) -> None:
    path = tmp / "d.log"
    log = EventLog(path, max_bytes=1500)  # 50 lines of about 40 bytes: exactly one rotation
    log("tick", n=-1)  # before following: not printed
    stop = threading.Event()
    following = threading.Event()  # follow() printed a line: it has its starting offset
    seen: list[int] = []

    def reader() -> None:
        for line in follow(path, duration=30, stop=stop):
            if "n=" not in line:
                following.set()
                continue
            seen.append(int(line.rsplit("n=", 1)[1]))
            if seen[-1] == 49:
                stop.set()

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not following.wait(0.1):  # lines before follow() starts are not its business: say so until it hears
            assert time.monotonic() < deadline, "follow() never started"
            log("ready")
        for n in range(50):
            log("tick", n=n)
            if n % 5 == 0:
                time.sleep(0.05)  # the ticks arrive over several of follow()'s reads, across the rotation
        thread.join(timeout=30)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert rotated_path(path).exists() and -1 in events(rotated_path(path))
    # Every line after the start, in order, including the old file's last ones and the new file's first ones.
    assert seen and seen == list(range(seen[0], 50)) and seen[0] < events(path)[0]
