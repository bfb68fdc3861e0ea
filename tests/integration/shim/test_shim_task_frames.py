"""crosstalk → crosstalk sends over the receiver's unix socket (task frames, ingress/uds_tasks.py): the same tool
results, dedupe and journal records as A2A gave, a held send's final word carried back to the sender, the sender
authenticated by its token and its own process, and A2A for a peer too old for task frames."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from crosstalk.core.message import new_message
from crosstalk.harness.fake import FakeHarness
from crosstalk.ingress.a2a.client import A2AClient
from crosstalk.ingress.uds_task_client import UdsTaskClient
from crosstalk.journal.codec import read_journal
from crosstalk.registry.credentials import read_key
from crosstalk.registry.paths import StatePaths
from crosstalk.shim.tools import ShimRouter
from tests.support.shim_tools import alice_and_bob, call, ctx, inbox, router, run, until

pytestmark = pytest.mark.integration

ALICE = ctx("s-alice", "alice")
BOB = ctx("s-bob", "bob")


def journal(host: Any) -> list[dict[str, Any]]:
    return read_journal(host.paths.journal_file(host.agent_id)).records


def received(host: Any, mid: str) -> dict[str, Any]:
    [rec] = [r for r in journal(host) if r["type"] == "received" and r["message"]["message_id"] == mid]
    return rec


def test_sends_go_over_the_socket_with_the_a2a_results_dedupe_and_records():
    async def main(root: Path) -> None:
        async with alice_and_bob(root) as (a, b):
            out, err = await call(a, "send_message", ALICE, to="bob", text="over the socket")
            assert not err and out["state"] == "accepted" and out["task_id"] and out["to"] == "bob", out
            bob, alice = b.pool.hosts()[0], a.pool.hosts()[0]
            rec = received(bob, out["message_id"])
            # The task protocol (its kinds, its task) with the sender proven on the socket: token + SO_PEERCRED.
            assert rec["transport"] == "a2a" and rec["dedupe_key"] == f"agent:{alice.agent_id}"
            assert rec["sender"] == {
                "class": "verified",
                "agent_id": alice.agent_id,
                "name": "alice",
                "transport": "uds",
            }
            assert rec["message"]["task_id"] == out["task_id"]
            task = bob.tasks.table.get(out["task_id"]).view
            assert task.state.value == "completed" and task.creator == alice.agent_id

            # The same message again, by A2A and then by the socket: answered from the journal, never injected
            # twice, the same task and answer either way (dedupe is per verified agent, whatever carried it).
            token = read_key(a.paths.token_path(alice.agent_id))
            key = read_key(b.paths.key_path(bob.agent_id))
            msg = new_message("bob", "over the socket", from_="alice", message_id=out["message_id"])
            async with A2AClient(bob.a2a_url or "", token) as peer:
                by_a2a = await peer.send(msg)
            by_uds = await UdsTaskClient(bob.uds_path, key, token).send(msg)
            assert by_a2a.task_id == by_uds.task_id == out["task_id"]
            assert by_a2a.answer == by_uds.answer and by_uds.answer is not None
            assert by_uds.answer.state.value == "accepted"
            assert len([x for x in inbox(root, "bob") if x["message_id"] == out["message_id"]]) == 1
            # GetTask over the socket reads what A2A's GetTask reads.
            async with A2AClient(bob.a2a_url or "", token) as peer:
                got_a2a = await peer.get(out["task_id"])
            got_uds = await UdsTaskClient(bob.uds_path, key, token).get(out["task_id"])
            assert (got_uds.state, got_uds.delivery, got_uds.answer, got_uds.kind) == (
                got_a2a.state, got_a2a.delivery, got_a2a.answer, got_a2a.kind,
            )  # fmt: skip
            assert [(h.message_id, h.role, h.text) for h in got_uds.history] == [
                (h.message_id, h.role, h.text) for h in got_a2a.history
            ]

            # Asks travel too (the socket's plain frames carry informs only): submitted, then the reply comes back.
            asked, err = await call(a, "ask", ALICE, to="bob", text="2+2?", deadline_seconds=60)
            assert not err and asked["state"] in ("submitted", "accepted") and asked["task_id"], asked
            mid = asked["message_id"]
            await until(lambda: (t := bob.task_holding(mid)) is not None and t.view.delivery == "accepted", "ask in")
            rep, err = await call(b, "reply", BOB, message_id=mid, text="4")
            assert not err and rep["forwarded"]["state"] == "accepted", rep
            back = [x for x in inbox(root, "alice") if x["in_reply_to"] == mid]
            assert len(back) == 1 and back[0]["text"] == "4"
            assert received(alice, back[0]["message_id"])["sender"]["transport"] == "uds"

            # A refusal by bob's policy is the same answer as over A2A: rejected with the policy's reason.
            out, err = await call(a, "send_message", ALICE, to="bob", text="do it", kind="command")
            assert err and out["state"] == "rejected" and out["reason"].startswith("kind:"), out

    run(main)


def test_a_held_send_is_answered_held_and_its_final_word_reaches_the_sender():
    async def main(root: Path) -> None:
        fakes: list[FakeHarness] = []

        def holding(ident: Any) -> FakeHarness:
            fake = FakeHarness(script=["hold"], inbox_dir=root / "inbox")
            fakes.append(fake)
            return fake

        a = router(root)
        b = ShimRouter("fake", StatePaths(root / "st"), adapters=holding, environ={}, cwd=str(root))
        try:
            await call(b, "list_agents", BOB)
            out, _ = await call(a, "send_message", ALICE, to="bob", text="for your user")
            assert out["state"] == "held" and out["task_id"], out
            alice = a.pool.hosts()[0]
            assert alice.state.held_sends[out["message_id"]]["task_id"] == out["task_id"]
            fakes[0].settle(out["message_id"], "delivered")
            told = lambda: [x for x in inbox(root, "alice") if out["message_id"] in x["text"]]  # noqa: E731
            await until(told, "the final word told to alice's session", timeout=15)
            assert "was delivered" in told()[0]["text"]
            await until(lambda: alice.state.held_sends[out["message_id"]].get("notified"), "notified")
        finally:
            await a.close()
            await b.close()

    run(main)


CHILD = """
import asyncio, json, sys
from crosstalk.core.message import new_message
from crosstalk.ingress.uds_task_client import UdsTaskClient
from crosstalk.ingress.errors import A2AAuthError
uds, key, token = sys.argv[1:4]
async def main():
    try:
        await UdsTaskClient(uds, key, token).send(new_message("bob", "from elsewhere"))
    except A2AAuthError as exc:
        return str(exc)
    return "accepted"
print(json.dumps(asyncio.run(main())))
"""


def test_a_token_used_from_another_process_or_a_wrong_key_is_refused():
    async def main(root: Path) -> None:
        async with alice_and_bob(root) as (a, b):
            await call(a, "list_agents", ALICE)
            bob, alice = b.pool.hosts()[0], a.pool.hosts()[0]
            token = read_key(a.paths.token_path(alice.agent_id))
            key = read_key(b.paths.key_path(bob.agent_id))
            # alice's token, from a process that is not alice's: the socket checks who is on the other end.
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", CHILD, bob.uds_path, key, token, stdout=subprocess.PIPE
            )
            stdout, _ = await asyncio.wait_for(proc.communicate(), 30)
            assert "not alice's own" in json.loads(stdout), stdout
            assert inbox(root, "bob") == []
            from crosstalk.ingress.errors import A2AAuthError

            with pytest.raises(A2AAuthError):
                await UdsTaskClient(bob.uds_path, "wrong-key", token).send(new_message("bob", "x"))
            with pytest.raises(A2AAuthError):
                await UdsTaskClient(bob.uds_path, key, "not-a-token").send(new_message("bob", "x"))
            assert inbox(root, "bob") == []

    run(main)


def test_a_peer_without_task_frames_is_sent_over_a2a(monkeypatch: pytest.MonkeyPatch):
    from crosstalk.ingress import uds
    from crosstalk.ingress.frames import encode_error_answer

    async def old_agent(self: Any, line: Any, pid: int, *streams: Any) -> bytes:
        return encode_error_answer("frame: unknown frame type 'task' (expected 'auth' or 'user')")

    monkeypatch.setattr(uds.UdsIngress, "_serve_task", old_agent)

    async def main(root: Path) -> None:
        async with alice_and_bob(root) as (a, b):
            out, err = await call(a, "send_message", ALICE, to="bob", text="the old way")
            assert not err and out["state"] == "accepted" and out["task_id"], out
            assert received(b.pool.hosts()[0], out["message_id"])["sender"]["transport"] == "a2a"

    run(main)


def test_a_queued_send_whose_hand_over_comes_later_is_told_to_the_sender():
    """A harness that hands a queued message to its model later (Gemini's hooks: `settles_queued`, evidence
    `settles`): the sender reads `queued`, the task stays working, and the hand-over is told to the sender's session."""
    from crosstalk.core.states import State
    from crosstalk.harness.base import InjectRequest, InjectResult

    class Later(FakeHarness):
        settles_queued = True

        async def inject(self, request: InjectRequest) -> InjectResult:
            return InjectResult(State.QUEUED, "queued for the next prompt", {"settles": "told later"})

    async def main(root: Path) -> None:
        fakes: list[Later] = []

        def later(ident: Any) -> Later:
            fakes.append(Later(inbox_dir=root / "inbox"))
            return fakes[-1]

        a = router(root)
        b = ShimRouter("fake", StatePaths(root / "st"), adapters=later, environ={}, cwd=str(root))
        try:
            await call(b, "list_agents", BOB)
            out, _ = await call(a, "send_message", ALICE, to="bob", text="for the next prompt")
            assert out["state"] == "queued" and out["settles"] == "told later" and out["task_id"], out
            bob = b.pool.hosts()[0]
            assert bob.tasks.table.get(out["task_id"]).view.state.value == "working"
            assert fakes[0]._sink is not None
            fakes[0]._sink(out["message_id"], InjectResult(State.ACCEPTED, "handed over", {"gemini": "BeforeAgent"}))
            told = lambda: [x for x in inbox(root, "alice") if out["message_id"] in x["text"]]  # noqa: E731
            await until(told, "the hand-over told to alice's session", timeout=15)
            assert "queued for its model, was delivered (handed over)" in told()[0]["text"]
            assert bob.tasks.table.get(out["task_id"]).view.state.value == "completed"
        finally:
            await a.close()
            await b.close()

    run(main)
