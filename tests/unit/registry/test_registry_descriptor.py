from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from crosstalk.core.ids import new_message_id
from crosstalk.registry.descriptor import Descriptor, read_descriptor, write_descriptor
from crosstalk.registry.errors import RegistryError
from crosstalk.registry.paths import StatePaths

AID = "0123456789abcdef"


def make(**changes: object) -> Descriptor:
    base = Descriptor(
        agent_id=AID,
        name="alice",
        harness="fake",
        pid=1234,
        started_at="5678",
        cwd="/w/proj",
        session_ref="s-1",
        uds_path=f"/s/sock/{AID}.sock",
        instance_id=new_message_id(),
        registered_at="2026-11-29T21:04:05.123Z",
    )
    return base.with_(**changes)


def test_defaults_and_round_trip() -> None:
    d = make(peers=("bob",), accept_from=("parent", "peers"), harness_pid=99, harness_started_at="1")
    assert d.role == "primary" and d.owner is None and d.protocol == 1
    data = json.loads(json.dumps(d.to_dict()))
    assert data["peers"] == ["bob"]
    assert Descriptor.from_dict(data) == d
    assert Descriptor.from_dict({**data, "future_field": {"x": 1}}) == d  # unknown fields ignored
    assert d.inbound_reachable is True and d.inbound_reason is None  # an older descriptor: reachable as before
    del data["inbound_reachable"], data["inbound_reason"]
    assert Descriptor.from_dict(data) == d


def test_reachable_is_what_the_binding_published(tmp_root: Path) -> None:
    sock = tmp_root / "a.sock"
    sock.write_text("")  # stands in for the socket file: reachable() only asks whether it is there
    up = make(uds_path=str(sock), a2a_url="http://127.0.0.1:1")
    assert up.reachable()
    assert not make(
        uds_path=str(sock), a2a_url="http://127.0.0.1:1", inbound_reachable=False, inbound_reason="x"
    ).reachable()
    assert make(uds_path=str(sock), a2a_url=None).reachable()  # no A2A endpoint: sessions send on its socket
    assert not make(uds_path=str(tmp_root / "gone.sock"), a2a_url="http://127.0.0.1:1").reachable()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("agent_id", None, "'agent_id': is required"),
        ("agent_id", "XYZ", "'agent_id': not 16 lowercase hex"),
        ("name", "bad name", "'name': not a valid agent name"),
        ("pid", "12", "'pid': must be an integer"),
        ("pid", True, "'pid': must be an integer"),
        ("pid", 0, "'pid': must be a positive pid"),
        ("harness_pid", -3, "'harness_pid': must be a positive pid"),
        ("started_at", 5, "'started_at': must be a non-empty string"),
        ("peers", "bob", "'peers': must be a list"),
        ("accept_from", [1], "'accept_from': must be a list"),
        ("owner", "bob", "'owner': not an agent_id"),
        ("instance_id", "x", "'instance_id': not a UUID"),
        ("protocol", "1", "'protocol': must be an integer"),
        ("a2a_url", 7, "'a2a_url': must be a non-empty string"),
        ("inbound_reachable", "yes", "'inbound_reachable': must be true or false"),
        ("inbound_reachable", 1, "'inbound_reachable': must be true or false"),
        ("inbound_reason", 3, "'inbound_reason': must be a non-empty string"),
    ],
)
def test_from_dict_names_the_bad_field(field: str, value: object, message: str) -> None:
    data = make().to_dict()
    data[field] = value
    with pytest.raises(RegistryError, match=message):
        Descriptor.from_dict(data)


def test_from_dict_needs_an_object() -> None:
    with pytest.raises(RegistryError, match="JSON object"):
        Descriptor.from_dict([1])


def test_write_is_private_and_readable(paths: StatePaths) -> None:
    d = make()
    path = write_descriptor(paths, d)
    assert path == paths.descriptor(AID)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert read_descriptor(path) == d
    assert sorted(p.name for p in paths.agents.iterdir()) == [f"{AID}.json"]  # temp file renamed away


def test_read_is_forgiving(paths: StatePaths, tmp_root: Path) -> None:
    path = paths.descriptor(AID)
    assert read_descriptor(path) is None  # missing
    for junk in (b"", b"{", b"\xff\xfe", b"[]", b'{"agent_id": 1}', b"[" * 100_000, b" " * 70_000 + b"{}"):
        path.write_bytes(junk)
        assert read_descriptor(path) is None, junk[:20]
    path.unlink()
    path.mkdir()
    assert read_descriptor(path) is None  # a directory
    path.rmdir()
    os.mkfifo(path)
    assert read_descriptor(path) is None  # a FIFO must not hang a listing
    path.unlink()
    write_descriptor(paths, make())
    link = tmp_root / "link.json"
    link.symlink_to(path)
    assert read_descriptor(link) is None


def test_reader_never_sees_a_partial_descriptor(paths: StatePaths) -> None:
    # Rewrites of varying size while a reader polls: every read is a whole descriptor (old or new).
    path = paths.descriptor(AID)
    write_descriptor(paths, make())
    stop = threading.Event()
    failures: list[bytes] = []
    reads = 0

    def reader() -> None:
        nonlocal reads
        while not stop.is_set():
            raw = path.read_bytes()
            reads += 1
            try:
                Descriptor.from_dict(json.loads(raw))
            except (ValueError, RegistryError):
                failures.append(raw)

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(200):
            write_descriptor(paths, make(cwd="/w/" + "x" * (i * 37 % 5000), pid=1000 + i))
    finally:
        stop.set()
        t.join(timeout=10)
    assert not t.is_alive()
    assert reads > 0
    assert failures == []


def test_no_token_in_descriptor(paths: StatePaths) -> None:
    from crosstalk.registry.credentials import create_key

    key = paths.key_path(AID)
    token = create_key(key)
    write_descriptor(paths, make(credential_ref=str(key)))
    text = paths.descriptor(AID).read_text()
    assert token not in text
    assert str(key) in text
