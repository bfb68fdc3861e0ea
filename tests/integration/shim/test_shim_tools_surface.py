"""list_agents, unbound calls, unknown and ambiguous names, argument errors, the nudge, receive_message, pooling."""

from __future__ import annotations

import asyncio
import os

from crosstalk.core.ids import new_message_id
from crosstalk.fs.locks import FileLock
from crosstalk.fs.procinfo import proc_start_time
from crosstalk.registry.descriptor import Descriptor, write_descriptor
from crosstalk.shim.router import CallContext
from crosstalk.shim.sending import is_nudge_count
from crosstalk.shim.tools import ShimRouter
from tests.support.shim_tools import alice_and_bob, call, ctx, inbox, router, run, until

ALICE = ctx("s-alice", "alice")
BOB = ctx("s-bob", "bob")
NOBODY = ctx(None)


def test_tools_listed_for_a_model():
    async def main(root):
        r = router(root)
        try:
            names = [t["name"] for t in r.tools()]
            assert names == ["list_agents", "send_message", "ask", "reply", "receive_message", "claim", "release"]
            for t in r.tools():  # short (their size is held in tests/unit/shim/test_shim_token_budget.py), not empty
                assert len(t["description"]) > 40 and t["inputSchema"]["type"] == "object"
                assert t["description"].endswith(".") and t["inputSchema"].get("additionalProperties") is False
        finally:
            await r.close()

    run(main)


def test_unbound_calls_get_list_agents_only():
    async def main(root):
        a, r = router(root), router(root)
        try:
            await call(a, "list_agents", ALICE)
            listed, err = await call(r, "list_agents", NOBODY)
            assert not err and [row["name"] for row in listed["agents"]] == ["alice"]
            assert "self" not in listed["agents"][0] and listed["hint"]
            for tool, args in (
                ("send_message", {"to": "alice", "text": "hi"}),
                ("ask", {"to": "alice", "text": "hi?"}),
                ("reply", {"message_id": new_message_id(), "text": "x"}),
                ("receive_message", {}),
            ):
                out, err = await call(r, tool, NOBODY, **args)
                assert err and out["state"] == "unbound" and out["reason"] and out["hint"], (tool, out)
            assert r.pool.hosts() == [] and inbox(root, "alice") == []
        finally:
            await a.close()
            await r.close()

    run(main)


def test_list_agents_rows():
    async def main(root):
        a, b = router(root), router(root)
        try:
            first, _ = await call(a, "list_agents", ALICE)
            assert "registered as 'alice'" in first["note"]
            await call(b, "list_agents", BOB)
            out, err = await call(a, "list_agents", ALICE)
            assert not err and "note" not in out
            rows = {row["name"]: row for row in out["agents"]}
            assert set(rows) == {"alice", "bob"}
            bob = rows["bob"]
            assert set(bob) == {
                "name", "agent_id", "harness", "cwd", "status", "crosstalk", "reachable", "role", "owner"
            }  # fmt: skip
            assert bob["harness"] == "fake" and bob["crosstalk"] and bob["reachable"] and bob["status"] == "live"
            assert bob["role"] == "primary" and bob["owner"] is None and bob["cwd"] == str(root)
            assert rows["alice"]["self"] is True
            await b.close()  # bob's shim exits: its descriptor goes
            out, _ = await call(a, "list_agents", ALICE)
            assert [row["name"] for row in out["agents"]] == ["alice"]
        finally:
            await a.close()
            await b.close()

    run(main)


def test_unknown_and_ambiguous_names_and_bad_arguments():
    async def main(root):
        a = router(root)
        locks: list[FileLock] = []
        try:
            out, err = await call(a, "send_message", ALICE, to="nobody", text="hi")
            assert err and out["state"] == "unknown" and out["reason"] == "no_such_agent" and out["hint"]
            out, err = await call(a, "ask", ALICE, to="nobody", text="hi?")
            assert err and out["reason"] == "no_such_agent"
            # Two live descriptors under one name (the name lock normally prevents it): ambiguous, with agent_ids.
            me, started = os.getpid(), proc_start_time(os.getpid())
            for n in (1, 2):
                aid = f"{n:016x}"
                write_descriptor(
                    a.paths,
                    Descriptor(
                        agent_id=aid, name="twin", harness="fake", cwd=f"/w/{n}", session_ref=f"t{n}", pid=me,
                        started_at=started, uds_path=str(a.paths.uds_path(aid)), instance_id=new_message_id(),
                        registered_at="2026-11-29T21:04:05.123Z",
                    ),
                )  # fmt: skip
                lock = FileLock(a.paths.agent_lock(aid))
                assert lock.try_acquire()
                locks.append(lock)
            out, err = await call(a, "send_message", ALICE, to="twin", text="which one?")
            assert err and out["state"] == "unknown" and out["reason"] == "ambiguous_name"
            assert [c["agent_id"] for c in out["candidates"]] == [f"{1:016x}", f"{2:016x}"]
            assert "agent_id" in out["hint"]
            # Bad arguments are answered, not raised.
            for tool, args in (
                ("send_message", {"to": "x"}),
                ("send_message", {"to": "x", "text": "y", "kind": "ask"}),
                ("send_message", {"to": "x", "text": "y", "colour": "red"}),
                ("ask", {"to": "x", "text": "y", "deadline_seconds": -1}),
                ("receive_message", {"state": "everything"}),
                ("receive_message", {"cursor": "abc"}),
            ):
                out, err = await call(a, tool, ALICE, **args)
                assert err and out["state"] == "invalid_arguments", (tool, args, out)
            res = await a.call("no_such_tool", {}, ALICE)
            assert res.is_error and res.data["reason"] == "unknown_tool"
        finally:
            for lock in locks:
                lock.release()
            await a.close()

    run(main)


def test_nudge_fires_at_the_30th_counted_send_to_one_peer():
    assert [n for n in range(1, 500) if is_nudge_count(n)] == [30, 60, 120, 240, 480]

    async def main(root):
        async with alice_and_bob(root) as (a, _b):
            out, _ = await call(a, "send_message", ALICE, to="nobody", text="uncounted")  # reached no peer
            for i in range(1, 31):
                out, err = await call(a, "send_message", ALICE, to="bob", text=f"msg {i}")
                assert out["state"] == "accepted", out
                if i < 30:
                    assert "hint" not in out, (i, out)
            assert "30 messages to bob" in out["hint"] and not err
            assert len(inbox(root, "bob")) == 30  # still delivered
            alice = a.pool.hosts()[0]
            from crosstalk.journal.codec import read_journal

            nudges = [r for r in read_journal(alice.journal.path).records if r.get("type") == "nudge"]
            assert [(r["peer_name"], r["count"]) for r in nudges] == [("bob", 30)]
            out, _ = await call(a, "send_message", ALICE, to="bob", text="31")
            assert "hint" not in out

    run(main, timeout=120)


def test_receive_message_pages_and_filters():
    async def main(root):
        async with alice_and_bob(root) as (a, b):
            sent = []
            for i in range(25):
                out, _ = await call(a, "send_message", ALICE, to="bob", text=f"m{i}")
                sent.append(out["message_id"])
            asked, _ = await call(a, "ask", ALICE, to="bob", text="q?", deadline_seconds=60)
            bob = b.pool.hosts()[0]
            await until(
                lambda: bob.tasks.table.holding(asked["message_id"]).view.delivery == "accepted", "ask delivered"
            )
            page1, err = await call(b, "receive_message", BOB, state="all")
            assert not err and page1["more"] and len(page1["entries"]) == 20
            assert [e["message_id"] for e in page1["entries"]] == sent[:20]
            e = page1["entries"][0]
            assert e["from"] == "alice" and e["sender_class"] == "verified" and e["kind"] == "inform"
            assert e["state"] == "accepted" and e["text"] == "m0" and e["in_reply_to"] is None
            page2, _ = await call(b, "receive_message", BOB, state="all", cursor=page1["next_cursor"])
            assert [x["message_id"] for x in page2["entries"]] == [*sent[20:], asked["message_id"]]
            assert not page2["more"]
            page3, _ = await call(b, "receive_message", BOB, state="all", cursor=page2["next_cursor"])
            assert page3["entries"] == [] and page3["next_cursor"] == page2["next_cursor"]
            # Default filter: only what needs attention (the open ask), across the whole journal.
            unresolved, _ = await call(b, "receive_message", BOB)
            assert unresolved["filter"] == "unresolved"
            assert [x["message_id"] for x in unresolved["entries"]] == [asked["message_id"]]
            assert unresolved["entries"][0]["reply_owed"] and "reply" in unresolved["hint"]
            for f in ("recovered", "bounced"):
                out, _ = await call(b, "receive_message", BOB, state=f)
                assert out["entries"] == []

    run(main, timeout=120)


def test_undeliverable_messages_surface_as_unresolved():
    async def main(root):
        async with alice_and_bob(root) as (a, b):
            b.pool.hosts()[0].config.harness.push("presend")
            out, err = await call(a, "send_message", ALICE, to="bob", text="lost")
            assert err and out["state"] == "unreachable"
            box, _ = await call(b, "receive_message", BOB)
            assert [(e["message_id"], e["state"]) for e in box["entries"]] == [(out["message_id"], "unreachable")]
            assert box["entries"][0]["reason"]

    run(main)


def test_two_sessions_in_one_shim_get_two_agents_never_cross_bound():
    async def main(root):
        r = router(root)
        try:
            await call(r, "list_agents", ALICE)
            await call(r, "list_agents", BOB)
            hosts = {h.name: h for h in r.pool.hosts()}
            assert set(hosts) == {"alice", "bob"}
            assert hosts["alice"].agent_id != hosts["bob"].agent_id
            out, _ = await call(r, "send_message", ALICE, to="bob", text="from alice")
            assert out["state"] == "accepted"
            out, _ = await call(r, "send_message", BOB, to="alice", text="from bob")
            assert out["state"] == "accepted"
            assert [(x["from"], x["text"]) for x in inbox(root, "bob")] == [("alice", "from alice")]
            assert [(x["from"], x["text"]) for x in inbox(root, "alice")] == [("bob", "from bob")]
            # Each call is served by its own session's agent.
            a_box, _ = await call(r, "receive_message", ALICE, state="all")
            b_box, _ = await call(r, "receive_message", BOB, state="all")
            assert [e["text"] for e in a_box["entries"]] == ["from bob"]
            assert [e["text"] for e in b_box["entries"]] == ["from alice"]
            assert r.pool.created == 2
        finally:
            await r.close()
        assert not list((root / "st" / "agents").glob("*.json"))  # descriptors removed on close
        assert list((root / "st" / "journal").glob("*.jsonl"))  # journals kept

    run(main)


def test_concurrent_first_calls_create_one_agent():
    async def main(root):
        r = router(root)
        try:
            results = await asyncio.gather(*(call(r, "receive_message", ALICE) for _ in range(8)))
            assert all(not err for _, err in results)
            assert r.pool.created == 1 and len(r.pool.hosts()) == 1
            assert sum("note" in out for out, _ in results) == 1  # the creating call tells the model its name
        finally:
            await r.close()

    run(main)


def test_a_codex_thread_no_app_server_has_loaded_sends_but_cannot_receive():
    """`codex exec`, or a TUI without a control socket: the thread's agent sends; inbound is unreachable, saying why
    (its binding published it, list_agents shows it)."""

    async def main(root):
        fake = router(root)
        codex = ShimRouter("codex", fake.paths, environ={"CODEX_HOME": str(root / "codex")}, cwd=str(root))
        thread = CallContext(meta={"threadId": "019a-thread-1"})
        try:
            await call(fake, "list_agents", BOB)
            first, err = await call(codex, "receive_message", thread)
            assert (
                not err and "cannot be delivered into it (no Codex app-server has this thread loaded" in first["note"]
            )
            name = codex.pool.hosts()[0].name
            assert name.startswith("codex-")  # no harness name: the fallback name
            out, _ = await call(codex, "send_message", thread, to="bob", text="from codex")
            assert out["state"] == "accepted" and inbox(root, "bob")[-1]["from"] == name
            out, err = await call(fake, "send_message", BOB, to=name, text="to codex")
            assert err and out["state"] == "unreachable" and "no Codex app-server" in out["reason"]
            assert out["hint"] == f"{name} cannot receive messages: {out['reason']}"
            rows = {row["name"]: row for row in (await call(fake, "list_agents", BOB))[0]["agents"]}
            # Reachability is what each agent's binding published in its descriptor.
            assert rows[name]["reachable"] is False and rows[name]["reason"] == out["reason"]
            assert rows["bob"]["reachable"] is True and "reason" not in rows["bob"]
            assert codex.tools() == fake.tools()  # the tools read the same for every harness
        finally:
            await codex.close()
            await fake.close()

    run(main)
