"""send_message, ask and reply through router.call, between real shim-hosted agents (fake harness) over A2A."""

from __future__ import annotations

from tests.support.shim_tools import alice_and_bob, call, ctx, inbox, router, run, until

ALICE = ctx("s-alice", "alice")
BOB = ctx("s-bob", "bob")


def test_send_message_lands_in_the_peer_session_with_a_verified_sender():
    async def main(root):
        async with alice_and_bob(root) as (a, _b):  # bob registers (a bound list_agents binds)
            out, err = await call(a, "send_message", ALICE, to="bob", text="hello bob")
            assert not err, out
            assert out["state"] == "accepted" and out["to"] == "bob" and out["task_id"]
            lines = inbox(root, "bob")
            assert len(lines) == 1
            line = lines[0]
            assert line["message_id"] == out["message_id"]
            assert line["text"] == "hello bob" and line["from"] == "alice"
            assert line["sender_class"] == "verified" and line["kind"] == "inform"
            # The delivery mode travels with the message.
            out, err = await call(a, "send_message", ALICE, to="bob", text="later", delivery="next_turn")
            assert out["state"] == "accepted" and inbox(root, "bob")[-1]["delivery"] == "next_turn"
            # A command bob's policy refuses (alice does not own bob) is rejected with the policy reason, never
            # injected, and the model is told so as an error.
            out, err = await call(a, "send_message", ALICE, to="bob", text="run it", kind="command")
            assert err and out["state"] == "rejected" and out["reason"].startswith("kind:"), out
            assert len(inbox(root, "bob")) == 2

    run(main)


def test_ask_then_reply_completes_the_task_and_reaches_the_asker():
    async def main(root):
        async with alice_and_bob(root) as (a, b):
            asked, err = await call(a, "ask", ALICE, to="bob", text="what is 2+2?", deadline_seconds=60)
            assert not err, asked
            assert asked["state"] in ("submitted", "accepted") and asked["task_id"] and asked["message_id"]
            mid = asked["message_id"]
            await until(lambda: any(x["message_id"] == mid for x in inbox(root, "bob")), "the ask injected")
            assert inbox(root, "bob")[-1]["kind"] == "ask"

            bob_host = b.pool.hosts()[0]
            # Delivered (its outcome journaled), not just dequeued: "working" is set before the harness call returns.
            await until(
                lambda: (
                    (v := bob_host.tasks.table.holding(mid).view).state.value == "working" and v.delivery == "accepted"
                ),
                "ask delivered, open",
            )
            box, _ = await call(b, "receive_message", BOB)
            owed = [e for e in box["entries"] if e["message_id"] == mid]
            assert owed and owed[0]["reply_owed"] and owed[0]["from"] == "alice" and owed[0]["kind"] == "ask"

            rep, err = await call(b, "reply", BOB, message_id=mid, text="4")
            assert not err, rep
            assert rep["state"] == "replied" and rep["in_reply_to"] == mid and rep["task_id"] == asked["task_id"]
            assert rep["forwarded"]["state"] == "accepted"
            task = bob_host.tasks.table.holding(mid).view
            assert task.state.value == "completed" and task.completion == "replied"
            back = [x for x in inbox(root, "alice") if x["in_reply_to"] == mid]
            assert len(back) == 1 and back[0]["text"] == "4" and back[0]["from"] == "bob"
            assert back[0]["message_id"] == rep["message_id"]

            # One reply per ask: the same text returns the first result and sends nothing again.
            again, err = await call(b, "reply", BOB, message_id=mid, text="4")
            assert not err and again == rep
            assert len([x for x in inbox(root, "alice") if x["in_reply_to"] == mid]) == 1
            other, err = await call(b, "reply", BOB, message_id=mid, text="five")
            assert err and other["reason"] == "already_replied" and other["hint"]
            # No longer owed: out of the default (unresolved) mailbox view.
            box, _ = await call(b, "receive_message", BOB)
            assert mid not in [e["message_id"] for e in box["entries"]]

    run(main)


def test_reply_errors():
    async def main(root):
        async with alice_and_bob(root) as (a, b):
            sent, _ = await call(a, "send_message", ALICE, to="bob", text="fyi")
            # An inform opens a 1 h route back to its sender (test_shim_inform_replies.py covers it in full).
            out, err = await call(b, "reply", BOB, message_id=sent["message_id"], text="thanks")
            assert not err and out["state"] == "replied" and out["in_reply_to"] == sent["message_id"], out
            out, err = await call(b, "reply", BOB, message_id="0190aaaa-0000-7000-8000-000000000000", text="x")
            assert err and out["reason"] == "no_such_message"

            asked, _ = await call(a, "ask", ALICE, to="bob", text="quick?", deadline_seconds=1)
            mid = asked["message_id"]
            bob_host = b.pool.hosts()[0]
            await until(
                lambda: (t := bob_host.tasks.table.holding(mid)) is not None and t.view.state.value == "failed",
                "the ask's deadline closes it",
            )
            out, err = await call(b, "reply", BOB, message_id=mid, text="too late")
            assert err and out["reason"] == "ask_closed"
            assert not [x for x in inbox(root, "alice") if x["in_reply_to"] == mid]

    run(main)


def test_scripted_answer_from_env_answers_asks():
    async def main(root):
        a, b = router(root), router(root, answer="scripted")
        try:
            await call(b, "list_agents", BOB)
            asked, _ = await call(a, "ask", ALICE, to="bob", text="anyone?", deadline_seconds=30)
            task = b.pool.hosts()[0].tasks.table
            await until(
                lambda: (t := task.holding(asked["message_id"])) is not None and t.view.state.value == "completed",
                "the fake's scripted answer completes the ask",
            )
            assert [h.text for h in task.holding(asked["message_id"]).view.history if h.role == "agent"] == ["scripted"]
        finally:
            await a.close()
            await b.close()

    run(main)
