"""claim and release through router.call between real shim-hosted agents (fake harness) over A2A.
The target's own process journals the claim, rewrites its descriptor and announces it in its session."""

from __future__ import annotations

from crosstalk.core.message import new_message
from crosstalk.registry.discovery import resolve
from tests.support.shim_tools import call, ctx, inbox, router, run

ALICE = ctx("s-alice", "alice")
BOB = ctx("s-bob", "bob")
CAROL = ctx("s-carol", "carol")


async def rows(r, c):
    out, err = await call(r, "list_agents", c)
    assert not err, out
    return {row["name"]: row for row in out["agents"]}


def notices(root, name):
    return [x for x in inbox(root, name) if x["from"] == "crosstalk"]


def test_claim_release_and_the_rules():
    async def main(root):
        a, b, c = router(root), router(root), router(root)
        b2 = None
        try:
            await call(b, "list_agents", BOB)
            await call(c, "list_agents", CAROL)

            # A primary claims an unclaimed agent: journaled there, announced there, listed as worker of alice.
            out, err = await call(a, "claim", ALICE, name="bob")
            assert not err and out["state"] == "claimed" and out["name"] == "bob" and out["hint"], out
            told = notices(root, "bob")
            assert len(told) == 1 and told[0]["kind"] == "inform"
            assert told[0]["text"].startswith("alice claimed you: you are now its worker")
            listed = await rows(c, CAROL)
            assert listed["bob"]["role"] == "worker" and listed["bob"]["owner"] == "alice"
            assert listed["alice"]["role"] == "primary" and listed["alice"]["owner"] is None
            bob_host = b.pool.hosts()[0]
            claims = [r for r in _journal(bob_host) if r["type"] == "claim"]
            assert len(claims) == 1 and claims[0]["action"] == "claimed"
            assert claims[0]["owner"] == a.pool.hosts()[0].agent_id
            # The notice ran the receiver chain: journaled as crosstalk's own notice, with its outcome.
            [notice] = [r for r in _journal(bob_host) if r["type"] == "received" and r["transport"] == "crosstalk"]
            assert notice["message"]["message_id"] == told[0]["message_id"] and notice["native"] is True
            outcomes = [
                r for r in _journal(bob_host) if r["type"] == "outcome" and r["message_id"] == told[0]["message_id"]
            ]
            assert [o["state"] for o in outcomes] == ["accepted"]

            # A command from the owner is accepted; from another primary it is rejected.
            out, err = await call(a, "send_message", ALICE, to="bob", text="run the tests", kind="command")
            assert not err and out["state"] == "accepted", out
            out, err = await call(c, "send_message", CAROL, to="bob", text="run mine", kind="command")
            # A worker listens to its parent only (policy/roles.py): refused by the ACL before the
            # kind table, which would refuse the command anyway.
            assert err and out["state"] == "rejected" and out["reason"] == "acl:agents", out

            # Only the owner releases; an owned agent cannot be claimed again; no one claims or releases itself.
            out, err = await call(c, "release", CAROL, name="bob")
            assert err and out == {**out, "state": "rejected", "reason": "not_owner"} and out["hint"], out
            out, err = await call(c, "claim", CAROL, name="bob")
            assert err and out["state"] == "rejected" and out["reason"] == "already_claimed", out
            out, err = await call(b, "claim", BOB, name="bob")
            assert err and out["reason"] == "self_claim", out
            out, err = await call(b, "release", BOB, name="bob")
            assert err and out["reason"] == "self_release", out
            # A worker cannot claim; releasing an unclaimed agent is refused; an unknown name is no_such_agent.
            out, err = await call(b, "claim", BOB, name="carol")
            assert err and out["reason"] == "worker_cannot_claim", out
            out, err = await call(a, "release", ALICE, name="carol")
            assert err and out["reason"] == "not_claimed", out
            out, err = await call(a, "claim", ALICE, name="nobody")
            assert err and out["reason"] == "no_such_agent", out
            # The owner's retry is answered claimed again, with no second record and no second notice.
            out, err = await call(a, "claim", ALICE, name="bob")
            assert not err and out["state"] == "claimed", out
            assert len(notices(root, "bob")) == 1
            assert len([r for r in _journal(bob_host) if r["type"] == "claim"]) == 1

            # The target enforces self-claim itself, whatever the caller's shim checks.
            me = resolve(b.paths, "bob")
            msg = new_message("bob", "claim myself", from_="bob")
            raw = await b.sender.send(bob_host, me, msg, return_immediately=False, op="claim")
            assert raw["state"] == "rejected" and raw["reason"] == "self_claim", raw

            # The claim survives a restart of the target's shim with the same session (journal replay).
            await b.close()
            b2 = router(root)
            listed = await rows(b2, BOB)
            assert listed["bob"]["role"] == "worker" and listed["bob"]["owner"] == "alice"
            out, err = await call(a, "send_message", ALICE, to="bob", text="still yours?", kind="command")
            assert not err and out["state"] == "accepted", out
            out, err = await call(c, "claim", CAROL, name="bob")
            assert err and out["reason"] == "already_claimed", out

            # Release by the owner: announced, and bob is a primary again (commands from alice refused again).
            out, err = await call(a, "release", ALICE, name="bob")
            assert not err and out["state"] == "released", out
            told = notices(root, "bob")
            assert len(told) == 2 and told[-1]["text"].startswith("alice released you")
            listed = await rows(c, CAROL)
            assert listed["bob"]["role"] == "primary" and listed["bob"]["owner"] is None
            out, err = await call(a, "send_message", ALICE, to="bob", text="one more", kind="command")
            assert err and out["reason"].startswith("kind:"), out
            out, err = await call(c, "claim", CAROL, name="bob")
            assert not err and out["state"] == "claimed", out
            assert (await rows(a, ALICE))["bob"]["owner"] == "carol"
        finally:
            await a.close()
            await b.close()
            await c.close()
            if b2 is not None:
                await b2.close()

    run(main)


def test_a_claim_ends_with_the_target_session():
    """A claim is keyed to the target's agent_id (a hash of its session): a new session under the same name is a
    new agent with a fresh journal and starts primary; the ended session is gone from list_agents."""

    async def main(root):
        a, b = router(root), router(root)
        b2 = None
        try:
            await call(b, "list_agents", BOB)
            out, _ = await call(a, "claim", ALICE, name="bob")
            assert out["state"] == "claimed", out
            old_id = b.pool.hosts()[0].agent_id
            await b.close()  # bob's session ends

            b2 = router(root)
            listed = await rows(b2, ctx("s-bob-next", "bob"))
            assert listed["bob"]["role"] == "primary" and listed["bob"]["owner"] is None
            assert old_id not in {row["agent_id"] for row in listed.values()}
            out, err = await call(a, "send_message", ALICE, to="bob", text="work", kind="command")
            assert err and out["reason"].startswith("kind:"), out
            out, err = await call(a, "claim", ALICE, name="bob")
            assert not err and out["state"] == "claimed", out
        finally:
            await a.close()
            await b.close()
            if b2 is not None:
                await b2.close()

    run(main)


def _journal(host):
    import json

    path = host.paths.journal_file(host.agent_id)
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
