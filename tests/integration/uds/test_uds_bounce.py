"""A native frame from the agent's own session (a native reply to our address) is never forwarded: it is
journaled bounced and the session is told, with the open messages it may answer with the reply tool."""

from __future__ import annotations

from crosstalk.core.message import new_message
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import State
from crosstalk.receiver import Inbound
from tests.support.uds import HostThread, envelope, exchange, native_line

ALICE = Sender(SenderClass.VERIFIED, "a11ce0a11ce0a11c", "alice", "uds")


def test_a_native_reply_from_our_own_session_is_bounced_with_the_open_messages(host: HostThread) -> None:
    # An inform from a verified agent, delivered: its reply route is open for an hour.
    inform = new_message(host.name, "can you check the flaky test?", from_="alice")
    out = host.call(host.host.receiver.receive(Inbound(inform, ALICE, "uds")))
    assert out.state is State.ACCEPTED
    writes_before = len(host.fake.writes)

    # This test process is the host's own process, so the socket verifies the frame as the agent's own session.
    raw = exchange(host.sock, native_line(envelope("sure, on it\nsecond line", **{"from-name": "bob"})))
    assert raw == b""  # native frames get bare EOF, bounce or not

    records = host.records()
    bounced = [r for r in records if r["type"] == "outcome" and r.get("state") == "bounced"]
    assert len(bounced) == 1 and bounced[0]["reason"] == "native_reply_bounced"
    entry = host.host.state.messages[bounced[0]["message_id"]]
    assert entry.state is State.BOUNCED and entry.native

    # Exactly one injection: the bounce notice into our own session, from crosstalk; nothing was forwarded.
    notices = host.fake.writes[writes_before:]
    assert len(notices) == 1 and notices[0]["from"] == "crosstalk"
    text = notices[0]["text"]
    assert "'sure, on it'" in text and inform.message_id in text and "from alice (inform)" in text
    assert "reply tool" in text


def test_a_bounce_with_nothing_open_says_to_use_send_message(host: HostThread) -> None:
    raw = exchange(host.sock, native_line("just a thought"))
    assert raw == b""
    notices = [w for w in host.fake.writes if w["from"] == "crosstalk"]
    assert len(notices) == 1 and "send_message" in notices[0]["text"]
    assert host.host.open_inbound() == []  # a bounce opens no route
