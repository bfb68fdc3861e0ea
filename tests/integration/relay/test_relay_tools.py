"""Agents' own tool sends across the relay: `send_message`, `ask` and `reply` to NAME@ALIAS go through the
sending machine's relay process (its local socket: the agent's bearer token proves who sends; the NATS credentials
stay in that process), the receiving machine labels the sender `@relay:<machine>/<agent>`, and a reply (or a
send_message to that label) goes back across the relay into the asker's session. The `@relay:` tag is reserved at
the uds ingress for this machine's relay process; a hostile machine is labelled under its own alias, never as
another's agent. In-process shim routers (fake harness) on two state roots as two machines, a real nats-server and
real `relay serve` processes."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from crosstalk.core.message import new_message
from crosstalk.harness.fake.adapter import FakeHarness
from crosstalk.registry.paths import StatePaths
from crosstalk.relay.config import RelayConfig
from crosstalk.relay.link import Link
from crosstalk.relay.local import local_socket_path, send_via_local_relay
from crosstalk.relay.send import send_remote_async
from crosstalk.relay.wire import decode_answer, encode_request, msg_subject
from crosstalk.shim.tools import ShimRouter
from tests.support.bounded import run_bounded
from tests.support.nats_relay import NatsServer
from tests.support.procs import Procs, one_error_line
from tests.support.shim_tools import ALICE, BOB, call, ctx, until

TEST_S = 60.0
SEND_BOUND_S = 10.0


def router(machine: Procs) -> ShimRouter:
    inbox = machine.root / "inbox"
    inbox.mkdir(exist_ok=True)
    env = {"CROSSTALK_FAKE_INBOX_DIR": str(inbox), "CLAUDE_CONFIG_DIR": str(machine.root / "claude")}
    return ShimRouter("fake", machine.paths, environ=env, cwd=str(machine.root))


def inbox(machine: Procs, name: str) -> list[dict[str, Any]]:
    path = machine.root / "inbox" / f"{name}.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


Body = Callable[[ShimRouter, ShimRouter], Coroutine[Any, Any, None]]


def run_pair(laptop: Procs, gpu: Procs, body: Body, adapters: Any = None) -> None:
    """alice bound on laptop's shim, bob on gpu's (`adapters`: bob's harness, default the fake writing to gpu's
    inbox dir), then `body(a, b)`; both routers closed after."""

    async def main() -> None:
        a = router(laptop)
        b = router(gpu) if adapters is None else ShimRouter("fake", gpu.paths, adapters=adapters, cwd=str(gpu.root))
        try:
            await call(a, "list_agents", ALICE)
            await call(b, "list_agents", BOB)
            await body(a, b)
        finally:
            await a.close()
            await b.close()

    run_bounded(main(), TEST_S)


def test_send_message_crosses_and_the_reply_comes_back_by_tool(machines: tuple[Procs, Procs]) -> None:
    laptop, gpu = machines

    async def body(a: ShimRouter, b: ShimRouter) -> None:
        sent, err = await call(a, "send_message", ALICE, to="bob@gpu", text="is the gpu build green?")
        assert not err and sent["state"] == "accepted" and sent["to"] == "bob@gpu" and sent["via"] == "relay", sent
        mid = sent["message_id"]
        [line] = inbox(gpu, "bob")
        assert (line["message_id"], line["text"]) == (mid, "is the gpu build green?")
        assert (line["from"], line["sender_class"]) == ("@relay:laptop/alice", "external")
        rep, err = await call(b, "reply", BOB, message_id=mid, text="green, ship it")
        assert not err and rep["state"] == "replied", rep
        assert rep["forwarded"]["state"] == "accepted" and rep["forwarded"]["to"] == "alice@laptop", rep
        await until(lambda: inbox(laptop, "alice"), "the reply in alice's session")
        [back] = inbox(laptop, "alice")
        assert (back["text"], back["in_reply_to"], back["from"]) == ("green, ship it", mid, "@relay:gpu/bob")
        assert back["message_id"] == rep["message_id"]
        # One reply per inbound message, as on one machine: the same text returns the first result, sends nothing.
        again, _ = await call(b, "reply", BOB, message_id=mid, text="green, ship it")
        assert again == rep
        # send_message to the label the session saw reaches the same agent across the relay.
        more, err = await call(b, "send_message", BOB, to="@relay:laptop/alice", text="and the docs build too")
        assert not err and more["state"] == "accepted" and more["to"] == "alice@laptop", more
        await until(lambda: len(inbox(laptop, "alice")) == 2, "the second message at alice")

    run_pair(laptop, gpu, body)


def test_an_asks_answer_reaches_the_askers_replies(machines: tuple[Procs, Procs]) -> None:
    laptop, gpu = machines

    async def body(a: ShimRouter, b: ShimRouter) -> None:
        asked, err = await call(a, "ask", ALICE, to="bob@gpu", text="which CUDA version?", deadline_seconds=60)
        assert not err and asked["state"] == "accepted" and asked["hint"], asked
        amid = asked["message_id"]
        [line] = inbox(gpu, "bob")
        assert line["message_id"] == amid and line["from"] == "@relay:laptop/alice"
        # An ask at the receiving session, as a local one: its kind, and receive_message says a reply is owed.
        assert (line["kind"], line["sender_class"]) == ("ask", "external"), line
        owed, _ = await call(b, "receive_message", BOB, cursor=0)
        [entry] = [e for e in owed["entries"] if e["message_id"] == amid]
        assert entry.get("reply_owed") is True, owed
        rep, err = await call(b, "reply", BOB, message_id=amid, text="12.4")
        assert not err and rep["state"] == "replied" and rep["forwarded"]["state"] == "accepted", rep
        settled, _ = await call(b, "receive_message", BOB, cursor=0)
        assert not [e for e in settled["entries"] if e.get("reply_owed")], settled
        again, _ = await call(b, "reply", BOB, message_id=amid, text="13.0")  # one reply per ask, as on one machine
        assert again["state"] == "rejected" and again["reason"] == "already_replied", again
        await until(lambda: inbox(laptop, "alice"), "the answer in alice's session")
        [back] = inbox(laptop, "alice")
        assert (back["text"], back["in_reply_to"]) == ("12.4", amid)
        page, _ = await call(a, "receive_message", ALICE, cursor=0, state="replies")
        assert [(e["in_reply_to"], e["text"]) for e in page["entries"]] == [(amid, "12.4")], page

    run_pair(laptop, gpu, body)


def test_a_relayed_asks_deadline_is_kept_on_the_receiving_machine_as_a_local_asks(
    machines: tuple[Procs, Procs],
) -> None:
    """Parity with a same-machine ask: carol (on gpu) and alice (on laptop, across the relay) each ask bob with a
    1 s deadline; once it passed, bob owes neither a reply, and a late reply to either is `ask_closed` with the same
    hint, nothing sent. A reply in time still goes back (the first test above)."""
    laptop, gpu = machines
    carol = ctx("s-carol", "carol")

    async def owed(b: ShimRouter) -> set[str]:
        page, _ = await call(b, "receive_message", BOB, cursor=0, state="all")
        return {e["message_id"] for e in page["entries"] if e.get("reply_owed")}

    async def body(a: ShimRouter, b: ShimRouter) -> None:
        await call(b, "list_agents", carol)
        local, err = await call(b, "ask", carol, to="bob", text="local: which driver?", deadline_seconds=1)
        assert not err and local["state"] == "submitted", local  # a local ask answers once its task is journaled
        remote, err = await call(a, "ask", ALICE, to="bob@gpu", text="relayed: which driver?", deadline_seconds=1)
        assert not err and remote["state"] == "accepted", remote
        lmid, rmid = local["message_id"], remote["message_id"]
        await until(lambda: {lmid, rmid} <= {x["message_id"] for x in inbox(gpu, "bob")}, "both asks at bob")
        assert {lmid, rmid} <= await owed(b)  # both owed while the deadline runs
        [line] = [x for x in inbox(gpu, "bob") if x["message_id"] == rmid]
        assert line["kind"] == "ask"
        loop = asyncio.get_running_loop()
        bound = loop.time() + SEND_BOUND_S
        while await owed(b) & {lmid, rmid}:  # the deadline clears both, each kept on gpu
            assert loop.time() < bound, "the deadlines did not clear reply_owed"
            await asyncio.sleep(0.1)
        late_local, _ = await call(b, "reply", BOB, message_id=lmid, text="535")
        late_remote, _ = await call(b, "reply", BOB, message_id=rmid, text="535")
        for late in (late_local, late_remote):
            assert (late["state"], late["reason"]) == ("rejected", "ask_closed"), late
        assert late_remote["hint"] == late_local["hint"] and late_remote["hint"]
        again, _ = await call(b, "reply", BOB, message_id=rmid, text="535")  # asked again: the same answer
        assert again == late_remote
        await asyncio.sleep(0.3)  # nothing crossed back: alice's session holds only crosstalk's own notices
        assert not [x for x in inbox(laptop, "alice") if x.get("in_reply_to") == rmid and "535" in x["text"]]

    run_pair(laptop, gpu, body)


@pytest.mark.parametrize(
    ("restart", "word", "said"),
    [(False, "delivered", "was delivered"), (True, "denied", "was not delivered")],
    ids=["same-shim", "sender-restarted"],
)
def test_a_held_sends_final_word_crosses_back_to_the_sender(
    machines: tuple[Procs, Procs], restart: bool, word: str, said: str
) -> None:
    """bob's user holds alice's send, then decides; the final word reaches alice's session, also when alice's shim
    ended with the send still held (bound again, the watch resumes from the journal)."""
    laptop, gpu = machines
    fakes: list[FakeHarness] = []

    def holding(_ident: Any) -> FakeHarness:
        (gpu.root / "inbox").mkdir(exist_ok=True)
        fake = FakeHarness(script=["hold"], inbox_dir=gpu.root / "inbox")
        fakes.append(fake)
        return fake

    async def body(a: ShimRouter, b: ShimRouter) -> None:
        out, _ = await call(a, "send_message", ALICE, to="bob@gpu", text="for your user")
        assert out["state"] == "held" and out["via"] == "relay" and out["hint"], out
        mid = out["message_id"]
        assert a.pool.hosts()[0].state.held_sends[mid]["relay_message"]["message_id"] == mid
        watcher = a
        if restart:
            await a.close()  # alice's shim ends with the send still held
            watcher = router(laptop)
        try:
            if restart:
                await call(watcher, "list_agents", ALICE)  # bound again: the watch resumes from the journal
            fakes[0].settle(mid, word)
            told = lambda: [x for x in inbox(laptop, "alice") if mid in x["text"]]  # noqa: E731
            await until(told, "the final word told to alice's session", timeout=15)
            assert said in told()[0]["text"] and "bob@gpu" in told()[0]["text"], told()
            alice = watcher.pool.hosts()[0]
            await until(lambda: alice.state.held_sends[mid].get("notified"), "notified")
            # Asked again, never delivered twice (a denied send is never delivered at all).
            assert [x["message_id"] for x in inbox(gpu, "bob")] == ([mid] if word == "delivered" else [])
        finally:
            if watcher is not a:
                await watcher.close()

    run_pair(laptop, gpu, body, adapters=holding)


def test_a_shims_relay_sends_ride_kept_connections(machines: tuple[Procs, Procs]) -> None:
    """One connection to the relay process for sends one after another, several for sends at once, all closed when
    the shim closes; every message delivered once."""
    from crosstalk.ingress.uds_kept import KeptConnections
    from crosstalk.relay import local

    laptop, gpu = machines
    seen: list[KeptConnections] = []

    async def body(a: ShimRouter, b: ShimRouter) -> None:
        for i in range(3):
            out, err = await call(a, "send_message", ALICE, to="bob@gpu", text=f"kept {i}")
            assert not err and out["state"] == "accepted", out
        conns = local._kept(local_socket_path(laptop.paths))
        seen.append(conns)
        assert (conns.opened, conns.idle) == (1, 1)
        outs = await asyncio.gather(
            *(call(a, "send_message", ALICE, to="bob@gpu", text=f"at once {i}") for i in range(3))
        )
        assert [o["state"] for o, _err in outs] == ["accepted"] * 3
        assert conns.opened >= 2 and conns.idle >= 2  # sends at once took several, kept for the next

    run_pair(laptop, gpu, body)
    assert seen[0].idle == 0  # closed with the shim
    texts = sorted(x["text"] for x in inbox(gpu, "bob"))
    assert texts == sorted([f"kept {i}" for i in range(3)] + [f"at once {i}" for i in range(3)])


def test_no_such_agent_there_is_said_plainly(machines: tuple[Procs, Procs]) -> None:
    laptop, gpu = machines

    async def body(a: ShimRouter, b: ShimRouter) -> None:
        out, err = await call(a, "send_message", ALICE, to="carol@gpu", text="hi")
        assert err and out["reason"] == "no_such_agent" and "carol@gpu" in out["hint"], out
        out, err = await call(a, "send_message", ALICE, to="bob@mars", text="hi")
        assert err and (out["state"], out["reason"]) == ("unreachable", "relay:no_machine"), out

    run_pair(laptop, gpu, body)


def test_without_this_machines_relay_process_a_send_is_unreachable_at_once(machines: tuple[Procs, Procs]) -> None:
    laptop, gpu = machines
    [serving] = [p for p in laptop.procs if p.args[1:3] == ["relay", "serve"]]
    serving.kill()  # kill -9: its socket file stays behind, and no one listens there
    serving.wait(SEND_BOUND_S)

    async def body(a: ShimRouter, b: ShimRouter) -> None:
        out, err = await call(a, "send_message", ALICE, to="bob@gpu", text="anyone?")
        assert err and (out["state"], out["reason"]) == ("unreachable", "relay:not_serving"), out
        assert "no relay process serves this machine: `crosstalk relay join` starts it" in out["detail"]
        assert inbox(gpu, "bob") == []

    run_pair(laptop, gpu, body)


def test_the_relay_tag_is_reserved_for_this_machines_relay_process(machines: tuple[Procs, Procs]) -> None:
    laptop, gpu = machines

    async def body(a: ShimRouter, b: ShimRouter) -> None:
        res = await asyncio.to_thread(
            gpu.cli, "send", "bob", "I am laptop's alice", "--from", "@relay:laptop/alice", timeout=SEND_BOUND_S
        )
        assert res.returncode != 0 and "sender:relay_tag_reserved" in one_error_line(res.stderr), res
        assert inbox(gpu, "bob") == []
        # the same user's other tags still pass, and the relay process's own sends too
        res = await asyncio.to_thread(gpu.cli, "send", "bob", "from ci", "--from", "@ci:build", timeout=SEND_BOUND_S)
        assert res.returncode == 0, res.stderr

    run_pair(laptop, gpu, body)


def test_the_local_socket_takes_only_a_live_agents_own_proof(machines: tuple[Procs, Procs]) -> None:
    laptop, gpu = machines

    async def body(a: ShimRouter, b: ShimRouter) -> None:
        msg = new_message("bob@gpu", "who am I?", from_="bob")
        out = await send_via_local_relay(laptop.paths, "not-a-token", msg, timeout=SEND_BOUND_S)
        assert (out.outcome.state.value, out.outcome.reason) == ("rejected", "relay:sender_refused"), out
        # alice's real token, but from a process that is not alice's shim or harness: refused too
        host = a.pool.hosts()[0]
        token = laptop.paths.token_path(host.agent_id).read_text().strip()
        res = await asyncio.to_thread(_send_from_child, laptop.paths, token)
        assert res == "relay:sender_refused", res
        # a line that is not a request: said plainly, and the socket is the owner's alone
        path = local_socket_path(laptop.paths)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        reader, writer = await asyncio.open_unix_connection(str(path))
        writer.write(b'{"v": 2}\n')
        answer = json.loads(await asyncio.wait_for(reader.readline(), SEND_BOUND_S))
        writer.close()
        assert answer["error"] == "bad_frame" and "not a local relay request" in answer["detail"], answer
        assert inbox(gpu, "bob") == []

    run_pair(laptop, gpu, body)


def _send_from_child(paths: StatePaths, token: str) -> str:
    import subprocess
    import sys

    code = (
        "import asyncio,sys\n"
        "from crosstalk.core.message import new_message\n"
        "from crosstalk.registry.paths import StatePaths\n"
        "from crosstalk.relay.local import local_socket_path, send_via_local_relay\n"
        "m = new_message('bob@gpu', 'stolen token', from_='x')\n"
        "out = asyncio.run(send_via_local_relay(StatePaths(sys.argv[1]), sys.argv[2], m, timeout=5))\n"
        "print(out.outcome.reason)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, str(paths.root), token], capture_output=True, text=True, timeout=SEND_BOUND_S
    )
    return res.stdout.strip() or res.stderr


def test_a_hostile_machine_is_labelled_as_itself_never_as_anothers_agent(
    machines: tuple[Procs, Procs], relay: NatsServer
) -> None:
    laptop, gpu = machines
    creds = relay.creds_file(laptop, "evil")

    async def body(a: ShimRouter, b: ShimRouter) -> None:
        evil = RelayConfig(relay.url, "evil", str(creds))
        # a forged `from` naming laptop's agent, bare or as a relay tag: labelled under evil
        for forged in ("alice", "@relay:laptop/alice"):
            out = await send_remote_async(evil, new_message("bob@gpu", f"as {forged}", from_=forged), timeout=5)
            assert out.outcome.state.value == "accepted", out
        froms = [x["from"] for x in inbox(gpu, "bob")]
        assert froms == ["@relay:evil/alice", "@relay:evil/relay:laptop/alice"]
        # a reply to the first goes back to evil's "alice", never to laptop's; the second has no way back
        first, second = (x["message_id"] for x in inbox(gpu, "bob"))
        rep, _ = await call(b, "reply", BOB, message_id=first, text="who?")
        assert rep["forwarded"]["to"] == "alice@evil" and rep["forwarded"]["state"] == "unreachable", rep
        rep, err = await call(b, "reply", BOB, message_id=second, text="who?")
        assert err and rep["reason"] == "sender_unverified", rep
        assert inbox(laptop, "alice") == []
        # claiming laptop's alias on the subject: the server refuses the publish
        as_laptop = RelayConfig(relay.url, "laptop", str(creds))
        out = await send_remote_async(as_laptop, new_message("bob@gpu", "hi", from_="alice"), timeout=5)
        assert (out.outcome.state.value, out.outcome.reason) == ("rejected", "relay:permission_denied")
        # a frame addressed to another machine than the subject it came on: refused, nothing delivered
        wrong = new_message("bob@laptop", "misrouted", from_="alice")
        link = Link(evil)
        await link.connect(keep_trying=False, name="evil")
        try:
            reply = await link.nc.request(msg_subject("gpu", "evil"), encode_request(wrong), timeout=5)
        finally:
            await link.close()
        assert decode_answer(reply.data).error == "bad_frame"
        assert len(inbox(gpu, "bob")) == 2
        # wrong credentials: refused
        bad = relay.creds_file(gpu, "evil", password="nope")
        out = await send_remote_async(RelayConfig(relay.url, "evil", str(bad)), wrong, timeout=5)
        assert out.outcome.reason == "relay:unreachable" and "refused this machine's credentials" in str(
            out.outcome.evidence
        ), out

    run_pair(laptop, gpu, body)
