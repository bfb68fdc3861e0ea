"""The crash tests' shared pieces: a stream of senders into one agent, and a journal grouped by record type."""

from __future__ import annotations

import threading
import time
from typing import Any

from crosstalk.core.errors import CrosstalkError
from crosstalk.core.message import new_message
from crosstalk.ingress.client import send
from crosstalk.registry.paths import StatePaths

SENDER = "@test:crash"
SENDERS = 4
SEND_TIMEOUT_S = 10.0


class Stream:
    """SENDERS threads sending to one agent by name until stopped; every answer (or error) is recorded."""

    def __init__(self, paths: StatePaths, to: str) -> None:
        self.paths = paths
        self.to = to
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.attempted: list[str] = []
        self.acked: dict[str, str] = {}  # message_id → state, for answers accepted/queued
        self.answers: dict[str, str] = {}  # message_id → state, every answer that came back
        self.errors: dict[str, str] = {}  # message_id → error, no answer (the agent was down or died)
        self.crashes: list[BaseException] = []  # unexpected exceptions in a sender thread
        self.threads = [threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(SENDERS)]

    def start(self) -> Stream:
        for t in self.threads:
            t.start()
        return self

    def _run(self, n: int) -> None:
        try:
            self._loop(n)
        except BaseException as exc:  # anything but a delivery error is a test failure, reported by join()
            with self.lock:
                self.crashes.append(exc)

    def _loop(self, n: int) -> None:
        i = 0
        while not self.stop.is_set():
            msg = new_message(self.to, f"stream t{n} m{i}", from_=SENDER)
            i += 1
            with self.lock:
                self.attempted.append(msg.message_id)
            try:
                outcome = send(self.paths, msg, timeout=SEND_TIMEOUT_S).outcome
            except CrosstalkError as exc:  # no such agent, unreachable, wire error: not acknowledged
                with self.lock:
                    self.errors[msg.message_id] = f"{type(exc).__name__}: {exc}"
                time.sleep(0.005)  # the agent is down: do not spin
                continue
            assert outcome.message_id == msg.message_id, (outcome, msg.message_id)
            with self.lock:
                self.answers[msg.message_id] = outcome.state.value
                if outcome.state.value in ("accepted", "queued"):
                    self.acked[msg.message_id] = outcome.state.value

    def n_acked(self) -> int:
        with self.lock:
            return len(self.acked)

    def n_errors(self) -> int:
        with self.lock:
            return len(self.errors)

    def join(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(SEND_TIMEOUT_S + 5)
        assert not any(t.is_alive() for t in self.threads), "a sender thread hung"
        assert not self.crashes, self.crashes[:3]


def by_type(records: list[dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """type → message_id → records of that type for it."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in records:
        mid = r["message"]["message_id"] if r["type"] == "received" else r.get("message_id")
        out.setdefault(r["type"], {}).setdefault(mid, []).append(r)
    return out
