"""The dispatcher's side of the wake across machines: a writer that pushed says so in its poke, the loop announces
it, and however many wakes other machines send, the ticks they cause stay within the gate's bound."""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from crosstalk.bus.dispatch import daemon
from crosstalk.bus.dispatch.remote import WakeGate
from crosstalk.bus.transport.state import PUSHED_BYTE, WAKE_BYTE, TransportState


def test_the_gate_lets_a_burst_through_then_one_a_period() -> None:
    gate = WakeGate(rate=1.0, burst=3.0)
    assert [gate.delay(100.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert gate.delay(100.0) == pytest.approx(1.0)  # empty: the next token is a second away
    assert gate.delay(101.0) == pytest.approx(1.0)  # that one was taken by the tick that waited for it
    assert gate.delay(110.0) == 0.0  # refilled after a quiet spell (up to the burst, never more)
    assert [gate.delay(110.0) for _ in range(2)] == [0.0, 0.0]
    assert gate.delay(110.0) > 0


def test_a_flood_of_wakes_buys_at_most_the_burst_plus_the_rate() -> None:
    gate = WakeGate(rate=2.0, burst=3.0)
    now, ticks = 0.0, 0
    while now < 10.0:  # a wake every millisecond for 10 s: the loop waits what the gate says before each tick
        now += max(0.001, gate.delay(now))
        ticks += 1
    assert ticks <= 3 + 2 * 10 + 1


def test_drain_says_whether_a_writer_pushed() -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with a, b:
        b.setblocking(False)
        assert daemon.drain(b) is False
        a.send(WAKE_BYTE)
        assert daemon.drain(b) is False
        for byte in (WAKE_BYTE, PUSHED_BYTE, WAKE_BYTE):
            a.send(byte)
        assert daemon.drain(b) is True
        assert daemon.drain(b) is False  # drained


class FloodingWake:
    """A RemoteWake whose other machines never stop waking it (readable for good), counting what it is asked."""

    def __init__(self) -> None:
        self.r, self.w = os.pipe()
        os.write(self.w, b"x")
        self.taken = 0
        self.announced = 0
        self.refreshed = 0

    def fileno(self) -> int:
        return self.r

    def take(self) -> list[str]:
        self.taken += 1
        return ["evil"]

    def announce(self) -> None:
        self.announced += 1

    def refresh(self) -> None:
        self.refreshed += 1

    def close(self) -> None:
        os.close(self.r)
        os.close(self.w)


class StubDispatcher:
    """What run_loop needs (daemon.Loopable), ticking into a list; it stops itself after `ticks` ticks."""

    def __init__(self, state: TransportState, remote: FloodingWake, ticks: int) -> None:
        self.state = state
        self.transport = SimpleNamespace(name="bus")
        self.alias = "b"
        self.interval = 60.0
        self.jobs = 1
        self.claimed: list[str] = []
        self.events: list[tuple[str, dict[str, object]]] = []
        self.remote_wake = remote
        self.ticks: list[float] = []
        self.told = 0
        self.limit = ticks
        self._stop = threading.Event()
        self._r, self._w = os.pipe()

    def log(self, event: str, level: str = "info", **fields: object) -> None:
        self.events.append((event, fields))

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def wake_fd(self) -> int:
        return self._r

    def next_wait(self) -> float:
        return self.interval  # the poll alone would tick once a minute

    def note_activity(self) -> None:
        pass

    def pushed_elsewhere(self) -> None:
        self.told += 1

    def stop(self) -> None:
        self._stop.set()
        os.write(self._w, b"x")

    def tick(self) -> None:
        self.ticks.append(time.monotonic())
        if len(self.ticks) >= self.limit:
            self.stop()

    def reload_registry(self, *, force: bool = False) -> bool:
        return False

    def recover(self) -> None:
        pass

    def record_error(self, event: str, **fields: object) -> None:
        self.events.append((event, fields))

    def write_heartbeat(self, *, running: bool = True) -> None:
        pass


@pytest.fixture
def state() -> Iterator[TransportState]:
    with tempfile.TemporaryDirectory(prefix="xtwake", dir="/tmp") as tmp:
        yield TransportState("bus", Path(tmp) / "state").ensure()


def test_the_loop_ticks_on_wakes_only_as_fast_as_the_gate_allows(
    state: TransportState, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(daemon, "WakeGate", lambda: WakeGate(rate=10.0, burst=2.0))
    remote = FloodingWake()
    stub = StubDispatcher(state, remote, ticks=12)
    try:
        started = time.monotonic()
        done = threading.Thread(target=daemon.run_loop, args=(stub,), daemon=True)
        done.start()
        done.join(20.0)
        assert not done.is_alive(), "the loop did not end"
    finally:
        remote.close()
    # 12 ticks: the first at boot, 2 from the burst, the other 9 a token each at 10 a second: never under 0.9 s,
    # although the wake was readable the whole time (and the poll alone would have ticked once a minute).
    assert len(stub.ticks) == 12
    assert stub.ticks[-1] - started >= 0.85
    woken = [fields for event, fields in stub.events if event == "relay_wake"]
    assert len(woken) == 11 and all(f["machines"] == "evil" for f in woken)
    assert stub.told == 11  # each of those ticks fetched without asking the remote first
    assert remote.announced == 0  # nobody here pushed


def test_the_loop_announces_a_local_push(state: TransportState) -> None:
    remote = FloodingWake()
    os.read(remote.r, 1)  # nobody else wakes it this time
    stub = StubDispatcher(state, remote, ticks=3)
    try:
        done = threading.Thread(target=daemon.run_loop, args=(stub,), daemon=True)
        done.start()
        deadline = time.monotonic() + 10.0
        while not state.wake_sock.exists() or not stub.ticks:
            assert time.monotonic() < deadline, "the loop did not bind wake.sock"
            time.sleep(0.01)
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as poke:
            poke.sendto(PUSHED_BYTE, os.fsencode(state.wake_sock))
            until = time.monotonic() + 10.0
            while remote.announced == 0:
                assert time.monotonic() < until, "the push was not announced"
                time.sleep(0.01)
            poke.sendto(WAKE_BYTE, os.fsencode(state.wake_sock))
        done.join(10.0)
        assert not done.is_alive()
    finally:
        remote.close()
    assert remote.announced == 1  # the plain poke (a writer that did not push) announces nothing
