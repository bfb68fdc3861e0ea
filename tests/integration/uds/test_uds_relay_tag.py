"""The `@relay:` sender tag is reserved for this machine's relay process: any other local process of the user
claiming it on an agent's socket, in a crosstalk frame or a native envelope, is refused and nothing is delivered."""

from __future__ import annotations

from crosstalk.core.ids import new_message_id
from crosstalk.journal import records as R
from tests.support.uds import answer_of, auth_line, crosstalk_line, native_line, run_peer


def test_a_crosstalk_frame_claiming_a_relay_sender_is_refused(host):
    mid = new_message_id()
    out = run_peer(host.sock, data=auth_line(host.token) + crosstalk_line("hi", message_id=mid, from_="@relay:gpu/bob"))
    ans = answer_of(out["answer"])
    assert (ans["state"], ans["reason"]) == ("rejected", "sender:relay_tag_reserved")
    assert host.fake.attempts == 0
    assert [r["reason"] for r in host.records() if r["type"] == R.REJECTED] == ["sender:relay_tag_reserved"]
    # any other external tag from the same process still passes
    out = run_peer(host.sock, data=auth_line(host.token) + crosstalk_line("hi", message_id=new_message_id()))
    assert answer_of(out["answer"])["state"] == "accepted"


def test_a_native_envelope_claiming_a_relay_sender_is_refused(host):
    content = '<cross-session-message from="uds:/x" from-name="@relay:gpu/bob">hi</cross-session-message>'
    out = run_peer(host.sock, data=auth_line(host.token) + native_line(content))
    assert out["answer"] == b""
    assert host.fake.attempts == 0
    assert [r["reason"] for r in host.records() if r["type"] == R.REJECTED] == ["sender:relay_tag_reserved"]
