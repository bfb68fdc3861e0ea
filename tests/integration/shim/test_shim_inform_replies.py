"""reply to an inbound inform: a 1 h route back to the verified sender, one reply per inbound
message, journaled so both survive a restart. In-process routers over fake-harness agents on loopback."""

from __future__ import annotations

import asyncio
import time

from crosstalk.core.ids import new_message_id
from crosstalk.core.message import new_message
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import State
from crosstalk.journal import records as R
from crosstalk.shim import replying
from tests.support.shim_tools import ALICE, BOB, call, inbox, receive_at, router, run, run_with_bob, until


def replies_to(root, name: str, mid: str) -> list[dict]:
    return [x for x in inbox(root, name) if x.get("in_reply_to") == mid]


async def inform_bob(a, root, text: str) -> str:
    sent, err = await call(a, "send_message", ALICE, to="bob", text=text)
    assert not err and sent["state"] == "accepted", sent
    await until(lambda: any(x["message_id"] == sent["message_id"] for x in inbox(root, "bob")), "inform at bob")
    return sent["message_id"]


def test_reply_to_an_inform_reaches_the_sender_once():
    async def body(root, a, b):
        mid = await inform_bob(a, root, "fyi: the build is green")
        rep, err = await call(b, "reply", BOB, message_id=mid, text="thanks, merging")
        assert not err, rep
        assert rep["state"] == "replied" and rep["in_reply_to"] == mid and rep["message_id"]
        assert rep["forwarded"]["state"] == "accepted" and rep["forwarded"]["to"] == "alice"
        back = replies_to(root, "alice", mid)
        assert len(back) == 1, back
        assert back[0]["text"] == "thanks, merging" and back[0]["from"] == "bob"
        assert back[0]["sender_class"] == "verified" and back[0]["kind"] == "inform"
        assert back[0]["message_id"] == rep["message_id"]

        # The reply is journaled in bob's journal as a closed obligation: it never counts as an open ask.
        bob_host = b.pool.hosts()[0]
        rec = bob_host.state.obligations[mid]
        assert rec["type"] == R.OBLIGATION and rec["kind"] == "inform" and rec["state"] == "closed"
        assert rec["reply_id"] == rep["message_id"] and rec["text"] == "thanks, merging"
        assert bob_host.state.open_asks() == 0

        # One reply per inbound message: the same text returns the first result and sends nothing.
        again, err = await call(b, "reply", BOB, message_id=mid, text="thanks, merging")
        assert not err and again == rep
        other, err = await call(b, "reply", BOB, message_id=mid, text="actually, wait")
        assert err and other["state"] == "rejected" and other["reason"] == "already_replied" and other["hint"]
        await asyncio.sleep(0.1)  # what is tested is an absence: time for a (wrong) second send to show
        assert len(replies_to(root, "alice", mid)) == 1

        # Two concurrent replies with the same text: one send between them.
        mid2 = await inform_bob(a, root, "second note")
        r1, r2 = await asyncio.gather(
            call(b, "reply", BOB, message_id=mid2, text="ok"), call(b, "reply", BOB, message_id=mid2, text="ok")
        )
        assert r1 == r2 and r1[0]["state"] == "replied"
        await asyncio.sleep(0.1)  # what is tested is an absence: time for a (wrong) second send to show
        assert len(replies_to(root, "alice", mid2)) == 1

        # Asks keep their own path: a reply still completes the ask's task.
        asked, _ = await call(a, "ask", ALICE, to="bob", text="ship it?", deadline_seconds=60)
        amid = asked["message_id"]
        await until(
            lambda: (t := bob_host.tasks.table.holding(amid)) is not None and t.view.delivery == "accepted",
            "ask open at bob",
        )
        ans, err = await call(b, "reply", BOB, message_id=amid, text="yes")
        assert not err and ans["task_id"] == asked["task_id"]
        assert bob_host.tasks.table.holding(amid).view.state.value == "completed"

    run_with_bob(body)


def test_inform_route_expires_an_hour_after_delivery(monkeypatch):
    async def body(root, a, b):
        early = await inform_bob(a, root, "replied in time")
        before = time.time()
        late = await inform_bob(a, root, "answered too late")
        first, err = await call(b, "reply", BOB, message_id=early, text="got it")
        assert not err and first["state"] == "replied"

        delivered = b.pool.hosts()[0].state.messages[late].outcome_ts
        assert delivered is not None and before <= delivered <= time.time()  # stamped at delivery
        monkeypatch.setattr(replying, "now", lambda: delivered + replying.INFORM_ROUTE_TTL_S + 1)
        out, err = await call(b, "reply", BOB, message_id=late, text="sorry, late")
        assert err and out["state"] == "rejected" and out["reason"] == "route_expired", out
        assert "send_message" in out["hint"]
        assert not replies_to(root, "alice", late)
        # A repeat of a reply made in time still returns its first result.
        again, err = await call(b, "reply", BOB, message_id=early, text="got it")
        assert not err and again == first

    run_with_bob(body)


def test_inform_route_is_open_until_the_hour_is_up(monkeypatch):
    async def body(root, a, b):
        mid = await inform_bob(a, root, "edge of the window")
        delivered = b.pool.hosts()[0].state.messages[mid].outcome_ts
        monkeypatch.setattr(replying, "now", lambda: delivered + replying.INFORM_ROUTE_TTL_S - 1)
        out, err = await call(b, "reply", BOB, message_id=mid, text="just in time")
        assert not err and out["state"] == "replied", out
        await until(lambda: len(replies_to(root, "alice", mid)) == 1, "the reply at alice")

    run_with_bob(body)


def test_unverified_and_external_senders_cannot_be_replied_to():
    async def body(root, a, b):
        await call(a, "list_agents", ALICE)
        bob_host = b.pool.hosts()[0]
        ext = new_message("bob", "note from ci", from_="@ci:build")
        assert await receive_at(bob_host, ext, Sender.unverified("@ci:build")) == "accepted"
        # The default policy refuses an unnamed unverified sender at the door; journal one as delivered (a
        # policy that admits it) to check that the reply tool still has no address for it.
        anon = new_message("bob", "note from someone", from_="someone")
        bind = bob_host.receiver.identity.binding
        got = R.received(anon, Sender.unverified("someone"), dedupe_key=None, transport="uds", bind=bind)
        done = R.outcome(anon.message_id, State.ACCEPTED, None, bind)
        for rec in (got, done):
            await bob_host.journal.append_async(rec)
            bob_host.state.apply(rec)
        for msg in (ext, anon):
            out, err = await call(b, "reply", BOB, message_id=msg.message_id, text="who is this?")
            assert err and out["state"] == "rejected" and out["reason"] == "sender_unverified", out
            assert "no address" in out["hint"]
        assert not [x for x in inbox(root, "alice") if x.get("in_reply_to")]
        # An id bob never received.
        out, err = await call(b, "reply", BOB, message_id=new_message_id(), text="x")
        assert err and out["reason"] == "no_such_message"

    run_with_bob(body)


def test_uds_inform_from_a_verified_agent_is_repliable():
    async def body(root, a, b):
        await call(a, "list_agents", ALICE)
        alice_host, bob_host = a.pool.hosts()[0], b.pool.hosts()[0]
        msg = new_message("bob", "over the socket", from_="alice")
        verified = Sender(SenderClass.VERIFIED, alice_host.agent_id, "alice", "uds")
        assert await receive_at(bob_host, msg, verified) == "accepted"
        assert bob_host.tasks.table.holding(msg.message_id) is None  # no task: a uds frame
        out, err = await call(b, "reply", BOB, message_id=msg.message_id, text="heard you")
        assert not err and out["state"] == "replied" and out["forwarded"]["state"] == "accepted", out
        back = replies_to(root, "alice", msg.message_id)
        assert len(back) == 1 and back[0]["text"] == "heard you" and back[0]["from"] == "bob"

    run_with_bob(body)


def test_inform_replies_survive_a_restart_of_the_replying_agent(monkeypatch):
    async def main(root):
        a, b = router(root), router(root)
        try:
            await call(b, "list_agents", BOB)
            replied = await inform_bob(a, root, "one")
            open_ = await inform_bob(a, root, "two")
            first, err = await call(b, "reply", BOB, message_id=replied, text="ack one")
            assert not err and first["forwarded"]["state"] == "accepted"
            delivered = b.pool.hosts()[0].state.messages[open_].outcome_ts

            await b.close()
            b = router(root)
            await call(b, "list_agents", BOB)  # binds bob again: journal replay
            bob_host = b.pool.hosts()[0]
            assert bob_host.state.messages[open_].outcome_ts == delivered  # the window is the journal's

            again, err = await call(b, "reply", BOB, message_id=replied, text="ack one")
            assert not err and again == first
            other, err = await call(b, "reply", BOB, message_id=replied, text="ack one, again")
            assert err and other["reason"] == "already_replied"
            await asyncio.sleep(0.1)  # what is tested is an absence: time for a (wrong) second send to show
            assert len(replies_to(root, "alice", replied)) == 1

            # A reply journaled but with no result recorded (a crash between the two records): the repeat sends
            # the same reply id, so alice gets it once.
            pending = await inform_bob(a, root, "three")
            rid = new_message_id()
            rec = R.inform_reply(pending, rid, "ack three", a.pool.hosts()[0].agent_id)
            await bob_host.journal.append_async(rec)
            bob_host.state.apply(rec)
            resent, err = await call(b, "reply", BOB, message_id=pending, text="ack three")
            assert not err and resent["message_id"] == rid and resent["forwarded"]["state"] == "accepted", resent
            assert (await call(b, "reply", BOB, message_id=pending, text="ack three"))[0] == resent
            await asyncio.sleep(0.1)  # what is tested is an absence: time for a (wrong) second send to show
            assert [x["message_id"] for x in replies_to(root, "alice", pending)] == [rid]

            # The expiry counts from the journaled delivery, after the restart too.
            monkeypatch.setattr(replying, "now", lambda: delivered + replying.INFORM_ROUTE_TTL_S + 1)
            out, err = await call(b, "reply", BOB, message_id=open_, text="ack two")
            assert err and out["reason"] == "route_expired"
            monkeypatch.setattr(replying, "now", lambda: delivered + 60)
            out, err = await call(b, "reply", BOB, message_id=open_, text="ack two")
            assert not err and out["state"] == "replied" and out["forwarded"]["state"] == "accepted", out
        finally:
            await a.close()
            await b.close()

    run(main)


def test_a_reply_made_while_its_message_is_still_being_delivered_waits_for_the_outcome():
    """The session sees a message when the harness write lands, before its outcome is journaled: a reply in that
    window (held open here by putting the entry back to dispatching) waits for the outcome instead of being
    refused no_such_message."""

    async def body(root, a, b):
        mid = await inform_bob(a, root, "fyi: deploy started")
        entry = b.pool.hosts()[0].state.messages[mid]
        delivered, entry.state = entry.state, State.DISPATCHING

        async def outcome() -> None:
            await asyncio.sleep(0.3)  # the outcome comes late: the reply under test must wait for it
            entry.state = delivered

        task = asyncio.create_task(outcome())
        rep, err = await call(b, "reply", BOB, message_id=mid, text="watching it")
        await task
        assert not err and rep["state"] == "replied" and rep["in_reply_to"] == mid, rep
        assert [x["text"] for x in replies_to(root, "alice", mid)] == ["watching it"]

    run_with_bob(body)
