"""Kept connections for crosstalk frames on an agent's socket (ingress/uds_keeping.py): after the key, frames that
ask `"keep": true` are answered with `"kept": true` and the next frame is read on the same connection (no auth line
again); a frame without keep is answered and the connection closes, as ever; anything but a crosstalk frame after
one is refused and closes it; a frame without the key first is never kept."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable

import pytest

from crosstalk.core.ids import new_message_id
from tests.support.uds import WAIT_S, HostThread, auth_line, crosstalk_line, native_line


@pytest.fixture
def host(start_host: Callable[..., HostThread]) -> HostThread:
    return start_host()


def _lines(sock: socket.socket, n: int) -> list[dict[str, object]]:
    buf = b""
    while buf.count(b"\n") < n:
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
    return [json.loads(x) for x in buf.split(b"\n") if x.strip()]


def test_frames_ride_one_kept_connection_then_it_closes(host: HostThread) -> None:
    ids = [new_message_id() for _ in range(3)]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(WAIT_S)
        s.connect(str(host.sock))
        s.sendall(auth_line(host.token) + crosstalk_line("one", message_id=ids[0], keep=True))
        [first] = _lines(s, 1)
        assert (first["state"], first["message_id"], first["kept"]) == ("accepted", ids[0], True)
        s.sendall(crosstalk_line("two", message_id=ids[1], keep=True))
        [second] = _lines(s, 1)
        assert (second["state"], second["kept"]) == ("accepted", True)
        s.sendall(crosstalk_line("three", message_id=ids[2]))  # no keep: the last
        [third] = _lines(s, 1)
        assert third["state"] == "accepted" and "kept" not in third
        assert s.recv(1) == b""  # closed after it
    assert [r["message"]["message_id"] for r in host.records() if r.get("type") == "received"] == ids


def test_only_crosstalk_frames_follow_on_a_kept_connection(host: HostThread) -> None:
    mid = new_message_id()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(WAIT_S)
        s.connect(str(host.sock))
        s.sendall(auth_line(host.token) + crosstalk_line("one", message_id=mid, keep=True))
        [first] = _lines(s, 1)
        assert first["kept"] is True
        s.sendall(native_line("sneaking in"))
        [refused] = _lines(s, 1)
        assert refused["state"] == "rejected" and "only crosstalk user lines" in str(refused["reason"])
        assert s.recv(1) == b""
    assert host.fake.attempts == 1


def test_without_the_key_a_frame_is_never_kept(host: HostThread) -> None:
    mid = new_message_id()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(WAIT_S)
        s.connect(str(host.sock))
        s.sendall(crosstalk_line("no key", message_id=mid, keep=True))
        [answer] = _lines(s, 1)
        assert "kept" not in answer
        assert s.recv(1) == b""


def test_an_idle_kept_connection_is_shed_to_admit_a_new_sender_at_the_cap(
    start_host: Callable[..., HostThread], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The relay process's kept connections are shed like task frames' (uds_keeping.IdleKept): a socket at its cap
    admits a new sender by closing the idle kept one, which its sender reopens for its next frame."""
    from crosstalk.ingress import uds as uds_mod

    monkeypatch.setattr(uds_mod, "MAX_CONNECTIONS", 1)
    host = start_host()
    ids = [new_message_id() for _ in range(2)]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as kept:
        kept.settimeout(WAIT_S)
        kept.connect(str(host.sock))
        kept.sendall(auth_line(host.token) + crosstalk_line("one", message_id=ids[0], keep=True))
        [first] = _lines(kept, 1)
        assert first["kept"] is True
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as new:
            new.settimeout(WAIT_S)
            new.connect(str(host.sock))
            new.sendall(auth_line(host.token) + crosstalk_line("two", message_id=ids[1]))
            [second] = _lines(new, 1)
            assert second["state"] == "accepted", second
        assert kept.recv(1) == b""  # shed: closed with nothing read
    assert [r["message"]["message_id"] for r in host.records() if r.get("type") == "received"] == ids
