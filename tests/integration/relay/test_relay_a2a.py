"""A2A across the relay: `crosstalk send --a2a --as alice bob@gpu` makes alice's task at bob, on gpu, through both
machines' relay processes (alice's bearer token proves her to laptop's; gpu's labels her `@relay:laptop/alice`), and
prints it as for a local target: an inform completes delivered, an ask completes with bob's reply (which a tool
reply also carries into alice's session), `--return-immediately` answers submitted, an ask's deadline fails the task
on gpu, a command is refused. Only gpu's relay process may bring such a task to an agent's socket. Two state roots
as two machines, a real nats-server, real `relay serve` processes and fake-harness agents."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

from crosstalk.core.message import new_message
from crosstalk.ingress.frames import encode_auth
from crosstalk.ingress.task_frames import encode_task_send
from crosstalk.registry.credentials import read_key
from crosstalk.relay.a2a_out import send_a2a_via_relay
from crosstalk.relay.config import RelayConfig
from crosstalk.relay.link import Link
from crosstalk.relay.send import request_on
from crosstalk.shim.tools import ShimRouter
from tests.support.bounded import run_bounded
from tests.support.nats_relay import NatsServer, join_and_serve
from tests.support.procs import Procs, one_error_line, procs
from tests.support.shim_tools import ALICE, BOB, call, until

SEND_BOUND_S = 30.0  # every CLI send below ends by itself well within this (the subprocess timeout enforces it)
TEST_S = 60.0


def a2a(machine: Procs, *args: str) -> tuple[int, Any, str]:
    res = machine.cli("send", "--a2a", "--as", "alice", *args, "--json", timeout=SEND_BOUND_S)
    return res.returncode, json.loads(res.stdout) if res.stdout.strip() else None, res.stderr


def test_an_a2a_task_crosses_the_relay_as_for_a_local_target(machines: tuple[Procs, Procs]) -> None:
    laptop, gpu = machines
    alice = laptop.start_agent("alice")
    bob = gpu.start_agent("bob", "--answer", "12.4")
    carol = gpu.start_agent("carol")

    code, task, err = a2a(laptop, "bob@gpu", "the gpu build is green")
    assert code == 0, err
    assert (task["state"], task["completion"], task["delivery"]) == ("completed", "delivered", "accepted"), task
    assert (task["to"], task["agent_id"], task["as"]) == ("bob@gpu", bob.agent_id, "alice")
    [line] = bob.inbox_lines()
    assert (line["message_id"], line["from"], line["sender_class"]) == (task["message_id"], "@relay:laptop/alice",
                                                                         "external")  # fmt: skip
    # The task is bob's, on gpu, owned by the agent gpu's relay process labelled: never a local agent.
    records = [r for r in gpu.journal_records(bob.agent_id) if r.get("type") == "task"]
    assert {r.get("creator") for r in records if r.get("creator")} == {"@relay:laptop/alice"}

    code, task, err = a2a(laptop, "bob@gpu", "which CUDA version?", "--kind", "ask", "--deadline", "60")
    assert code == 0, err
    assert (task["state"], task["completion"], task["reply"]) == ("completed", "replied", "12.4"), task
    assert task["answer"]["state"] == "replied"

    code, task, err = a2a(laptop, "carol@gpu", "later", "--return-immediately")
    assert code == 0 and task["state"] in ("submitted", "working"), (task, err)

    # An ask's deadline is kept on gpu, as a same-machine ask's: the task fails there, and the CLI says so.
    res = laptop.cli("send", "--a2a", "--as", "alice", "carol@gpu", "still there?", "--kind", "ask", "--deadline",
                     "1", timeout=SEND_BOUND_S)  # fmt: skip
    assert res.returncode == 3, res.stderr
    assert "deadline_passed" in one_error_line(res.stderr)

    # A command never crosses (policy/transport.py: the relay carries no work): a failed task, never injected.
    before = len(carol.inbox_lines())
    res = laptop.cli("send", "--a2a", "--as", "alice", "carol@gpu", "rm -rf", "--kind", "command",
                     timeout=SEND_BOUND_S)  # fmt: skip
    assert res.returncode == 3 and "kind:" in one_error_line(res.stderr), res.stderr
    assert len(carol.inbox_lines()) == before

    # No such agent there: said plainly, exit 4.
    res = laptop.cli("send", "--a2a", "--as", "alice", "nobody@gpu", "hi", timeout=SEND_BOUND_S)
    assert res.returncode == 4 and "no live agent" in one_error_line(res.stderr), res.stderr
    assert alice.inbox_lines() == []  # nothing came back to alice's session but through her tools


def test_a_token_that_names_no_agent_is_refused_by_the_sending_relay_process(machines: tuple[Procs, Procs]) -> None:
    laptop, gpu = machines
    gpu.start_agent("bob")
    msg = new_message("bob@gpu", "hello", from_="alice")
    result = send_a2a_via_relay(laptop.paths, "not-a-token", msg, return_immediately=False, task_id=None, timeout=10)
    assert (result.outcome.state.value, result.outcome.reason) == ("rejected", "relay:sender_refused")
    assert result.task is None


def test_only_the_relay_process_may_bring_another_machines_task(machines: tuple[Procs, Procs]) -> None:
    """A local process with bob's socket key (the same user) that claims a relayed task is refused: the relay
    process alone may (ingress/relay_peer.py), so `@relay:laptop/alice` at bob always came through the relay."""
    _laptop, gpu = machines
    bob = gpu.start_agent("bob")
    key = read_key(gpu.paths.key_file(bob.agent_id))
    msg = new_message("bob", "forged", from_="@relay:laptop/alice")
    line = json.loads(encode_task_send("-", msg, return_immediately=False))
    line["relay_from"] = "@relay:laptop/alice"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(gpu.paths.uds_path(bob.agent_id)))
        sock.sendall(encode_auth(key) + json.dumps(line).encode() + b"\n")
        answer = json.loads(sock.makefile("rb").readline())
    assert answer["error"]["kind"] == "unauthenticated", answer
    assert bob.inbox_lines() == []


def test_a_tool_reply_completes_the_task_and_reaches_the_askers_session(machines: tuple[Procs, Procs]) -> None:
    """bob (a session, on gpu) answers alice's A2A ask with its reply tool: the task alice's CLI waits on completes
    with the reply, and the reply is carried across the relay into alice's session, as on one machine."""
    laptop, gpu = machines

    def router(machine: Procs) -> ShimRouter:
        inbox = machine.root / "inbox"
        inbox.mkdir(exist_ok=True)
        env = {"CROSSTALK_FAKE_INBOX_DIR": str(inbox), "CLAUDE_CONFIG_DIR": str(machine.root / "claude")}
        return ShimRouter("fake", machine.paths, environ=env, cwd=str(machine.root))

    def lines(machine: Procs, name: str) -> list[dict[str, Any]]:
        path = machine.root / "inbox" / f"{name}.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []

    async def main() -> None:
        a, b = router(laptop), router(gpu)
        try:
            await call(a, "list_agents", ALICE)
            await call(b, "list_agents", BOB)
            asking = asyncio.create_task(asyncio.to_thread(
                a2a, laptop, "bob@gpu", "safe to merge?", "--kind", "ask", "--deadline", "30"))  # fmt: skip
            await until(lambda: lines(gpu, "bob"), "the ask at bob", timeout=SEND_BOUND_S)
            [ask] = lines(gpu, "bob")
            assert (ask["kind"], ask["from"]) == ("ask", "@relay:laptop/alice"), ask
            owed, _ = await call(b, "receive_message", BOB, cursor=0)
            assert [e.get("reply_owed") for e in owed["entries"]] == [True], owed
            rep, err = await call(b, "reply", BOB, message_id=ask["message_id"], text="yes, merge")
            assert not err and rep["state"] == "replied", rep
            assert (rep["forwarded"]["state"], rep["forwarded"]["to"]) == ("accepted", "alice@laptop"), rep
            code, task, stderr = await asyncio.wait_for(asking, SEND_BOUND_S)
            assert code == 0, stderr
            assert (task["state"], task["completion"], task["reply"]) == ("completed", "replied", "yes, merge")
            await until(lambda: lines(laptop, "alice"), "the reply in alice's session", timeout=SEND_BOUND_S)
            [back] = lines(laptop, "alice")
            assert (back["text"], back["in_reply_to"], back["from"]) == ("yes, merge", ask["message_id"],
                                                                         "@relay:gpu/bob")  # fmt: skip
            again, _ = await call(b, "reply", BOB, message_id=ask["message_id"], text="no")
            assert (again["state"], again["reason"]) == ("rejected", "already_replied"), again
        finally:
            await a.close()
            await b.close()

    run_bounded(main(), TEST_S)


def test_without_this_machines_relay_process_the_task_is_unreachable_at_once(relay: NatsServer) -> None:
    with procs() as laptop, procs() as gpu:
        creds = str(relay.creds_file(laptop, "laptop"))
        res = laptop.cli("relay", "join", relay.url, "--alias", "laptop", "--creds", creds, "--no-start")
        assert res.returncode == 0, res.stderr
        join_and_serve(gpu, relay, "gpu")
        laptop.start_agent("alice")
        gpu.start_agent("bob")
        res = laptop.cli("send", "--a2a", "--as", "alice", "bob@gpu", "hi", timeout=SEND_BOUND_S)
        assert res.returncode == 4 and "relay:not_serving" in one_error_line(res.stderr), res.stderr


def test_a_hostile_machine_can_neither_own_nor_continue_another_machines_task(
    machines: tuple[Procs, Procs], relay: NatsServer
) -> None:
    """evil, a machine of its own, sends a task naming laptop's alice: the task is `@relay:evil/alice`'s, and a
    continuation of alice's task from evil is refused as not its own (the task service's not-found)."""
    laptop, gpu = machines
    laptop.start_agent("alice")
    bob = gpu.start_agent("bob")
    code, mine, err = a2a(laptop, "bob@gpu", "the first", "--return-immediately")
    assert code == 0, err

    async def as_evil() -> tuple[Any, Any]:
        link = Link(RelayConfig(relay.url, "evil", str(relay.creds_file(laptop, "evil"))))
        await link.connect(keep_trying=False, name="evil")
        try:
            fresh = new_message("bob@gpu", "as alice", from_="alice")
            own = await request_on(link, fresh, timeout=10, task={"return_immediately": False, "task_id": None})
            again = new_message("bob@gpu", "continue hers", from_="alice")
            task = {"return_immediately": False, "task_id": mine["task_id"]}
            return own, await request_on(link, again, timeout=10, task=task)
        finally:
            await link.close()

    own, theirs = run_bounded(as_evil(), TEST_S)
    assert own.task is not None and own.task["state"] == "completed", own
    assert theirs.task is None and theirs.outcome.reason == "relay:task_refused", theirs
    assert theirs.task_error is not None and theirs.task_error["kind"] == "task_not_found", theirs
    creators = {r.get("creator") for r in gpu.journal_records(bob.agent_id) if r.get("type") == "task"}
    assert {"@relay:laptop/alice", "@relay:evil/alice"} <= creators
    assert [x["from"] for x in bob.inbox_lines()] == ["@relay:laptop/alice", "@relay:evil/alice"]
