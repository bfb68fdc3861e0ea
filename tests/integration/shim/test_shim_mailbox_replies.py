"""receive_message(state='replies'): the answers to the asks this agent sent, found through its journaled `sent`
asks, also after a restart (journal replay)."""

from __future__ import annotations

from crosstalk.journal import records as R
from tests.support.shim_tools import call, ctx, inbox, router, run, until

ALICE = ctx("s-alice", "alice")
BOB = ctx("s-bob", "bob")


def test_replies_filter_shows_answers_to_my_asks_only():
    async def main(root):
        a, b = router(root), router(root)
        try:
            await call(b, "list_agents", BOB)
            q1, _ = await call(a, "ask", ALICE, to="bob", text="q1?", deadline_seconds=60)
            q2, _ = await call(a, "ask", ALICE, to="bob", text="q2?", deadline_seconds=60)
            fyi, _ = await call(b, "send_message", BOB, to="alice", text="fyi, unrelated")
            bob_host = b.pool.hosts()[0]
            for q in (q1, q2):
                mid = q["message_id"]
                await until(
                    lambda mid=mid: (
                        (t := bob_host.tasks.table.holding(mid)) is not None and t.view.delivery == "accepted"
                    ),
                    "ask open at bob",
                )
            # Bob asks alice too: alice's answer is a reply to *bob's* ask, never in alice's replies.
            bq, _ = await call(b, "ask", BOB, to="alice", text="your turn?", deadline_seconds=60)
            await until(lambda: any(x["message_id"] == bq["message_id"] for x in inbox(root, "alice")), "bob's ask")

            r1, err = await call(b, "reply", BOB, message_id=q1["message_id"], text="a1")
            assert not err and r1["forwarded"]["state"] == "accepted", r1
            alice_host = a.pool.hosts()[0]
            await until(
                lambda: (
                    (t := alice_host.tasks.table.holding(bq["message_id"])) is not None
                    and t.view.delivery == "accepted"
                ),
                "bob's ask open at alice",
            )
            ra, err = await call(a, "reply", ALICE, message_id=bq["message_id"], text="mine")
            assert not err and ra["forwarded"]["state"] == "accepted", ra

            # The asks are journaled as sent by the asker.
            assert {q1["message_id"], q2["message_id"]} <= set(alice_host.state.sent)
            assert alice_host.state.sent[q1["message_id"]]["type"] == R.SENT
            assert bq["message_id"] not in alice_host.state.sent

            box, err = await call(a, "receive_message", ALICE, state="replies")
            assert not err and box["filter"] == "replies"
            got = [(e["in_reply_to"], e["text"], e["from"]) for e in box["entries"]]
            assert got == [(q1["message_id"], "a1", "bob")], box
            everything, _ = await call(a, "receive_message", ALICE, state="all")
            all_ids = {e["message_id"] for e in everything["entries"]}
            assert fyi["message_id"] in all_ids and bq["message_id"] in all_ids  # present, just not replies

            bob_box, _ = await call(b, "receive_message", BOB, state="replies")
            assert [(e["in_reply_to"], e["text"]) for e in bob_box["entries"]] == [(bq["message_id"], "mine")]

            # A restart replays the journal: the sent asks, and so the filter, survive it.
            await a.close()
            a = router(root)
            box, _ = await call(a, "receive_message", ALICE, state="replies")  # binds alice again: replay
            assert [e["text"] for e in box["entries"]] == ["a1"]
            r2, _ = await call(b, "reply", BOB, message_id=q2["message_id"], text="a2")
            assert r2["forwarded"]["state"] == "accepted", r2
            await until(lambda: any(x.get("text") == "a2" for x in inbox(root, "alice")), "a2 reaches alice")
            box, _ = await call(a, "receive_message", ALICE, state="replies")
            assert [e["text"] for e in box["entries"]] == ["a1", "a2"], box
            # The cursor walks on: from after the first reply, only the second.
            box2, _ = await call(a, "receive_message", ALICE, state="replies", cursor=box["entries"][0]["seq"])
            assert [e["text"] for e in box2["entries"]] == ["a2"]
        finally:
            await a.close()
            await b.close()

    run(main)
