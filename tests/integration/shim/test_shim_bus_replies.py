"""reply to a message that came over the git bus (the bridge): the route is the channel it came from. The write to
the bus is stubbed here (tests/integration/bus/test_bridge.py runs it for real) so the paths around it can be
driven: a failed write, a repeat, a different second reply, and a reply journaled before a crash and resent."""

from __future__ import annotations

from typing import Any

from crosstalk.bus.live import bridge
from crosstalk.core.ids import new_message_id
from crosstalk.core.message import new_message
from crosstalk.core.sender import Sender
from crosstalk.journal import records as R
from crosstalk.shim import replying
from tests.support.shim_tools import BOB, call, receive_at, run_with_bob

TAG = "@bus:team/op-b"
CONTEXT = "bus:0b6f1c2e-4d5a-4e3b-9c1d-2f3e4a5b6c7d/2026/11/30/004500123Z-0123456789abcdef.md"


class BusStub:
    """Stands in for bridge.reply_from_live: records each call and answers what the test sets."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, str]] = []
        self.answer: dict[str, Any] = {"state": "replied", "via": "bus", "rel_path": "data/channels/x/y.md"}

    def __call__(self, paths: Any, agent: str, tag: str, context_id: str, text: str) -> dict[str, Any]:
        self.calls.append((agent, tag, context_id, text))
        return dict(self.answer)


async def bus_message_at(host: Any) -> str:
    """A message as the dispatcher's bridge delivers it: external sender @bus:<transport>/<from>, bus context."""
    msg = new_message("bob", "what is the build status?", from_=TAG, context_id=CONTEXT)
    assert await receive_at(host, msg, Sender.unverified(TAG)) == "accepted"
    return msg.message_id


def test_a_failed_bus_write_is_the_one_reply_and_says_so(monkeypatch):
    stub = BusStub()
    stub.answer = {"state": "unreachable", "reason": "bus_error", "detail": "git push failed"}
    monkeypatch.setattr(bridge, "reply_from_live", stub)

    async def body(root, a, b):
        bob = b.pool.hosts()[0]
        mid = await bus_message_at(bob)
        out, err = await call(b, "reply", BOB, message_id=mid, text="green")
        assert not err and out["state"] == "replied" and out["in_reply_to"] == mid, out
        assert out["forwarded"] == stub.answer and out["hint"] == replying.BUS_UNSENT_HINT
        assert stub.calls == [("bob", TAG, CONTEXT, "green")]
        # Journaled with its result: a repeat returns it and writes nothing; other text is a second reply.
        again, err = await call(b, "reply", BOB, message_id=mid, text="green")
        assert not err and again == out
        other, err = await call(b, "reply", BOB, message_id=mid, text="red")
        assert err and other["state"] == "rejected" and other["reason"] == "already_replied"
        assert len(stub.calls) == 1
        assert bob.state.obligations[mid]["to_agent"] == TAG

    run_with_bob(body)


def test_a_bus_reply_has_no_hour_limit_and_no_hint_when_written(monkeypatch):
    stub = BusStub()
    monkeypatch.setattr(bridge, "reply_from_live", stub)

    async def body(root, a, b):
        bob = b.pool.hosts()[0]
        mid = await bus_message_at(bob)
        delivered = bob.state.messages[mid].outcome_ts
        monkeypatch.setattr(replying, "now", lambda: delivered + replying.INFORM_ROUTE_TTL_S * 24)
        out, err = await call(b, "reply", BOB, message_id=mid, text="late but fine")
        assert not err and out["state"] == "replied" and "hint" not in out, out
        assert out["forwarded"]["via"] == "bus" and stub.calls == [("bob", TAG, CONTEXT, "late but fine")]

    run_with_bob(body)


def test_a_bus_reply_journaled_before_a_crash_is_written_again(monkeypatch):
    stub = BusStub()
    monkeypatch.setattr(bridge, "reply_from_live", stub)

    async def body(root, a, b):
        bob = b.pool.hosts()[0]
        mid = await bus_message_at(bob)
        rid = new_message_id()
        rec = R.inform_reply(mid, rid, "resend me", TAG)  # the first record only: the crash came before the result
        await bob.journal.append_async(rec)
        bob.state.apply(rec)
        out, err = await call(b, "reply", BOB, message_id=mid, text="resend me")
        assert not err and out["message_id"] == rid and out["forwarded"]["via"] == "bus", out
        assert stub.calls == [("bob", TAG, CONTEXT, "resend me")]
        assert (await call(b, "reply", BOB, message_id=mid, text="resend me"))[0] == out
        assert len(stub.calls) == 1

    run_with_bob(body)
