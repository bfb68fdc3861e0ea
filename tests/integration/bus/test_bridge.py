"""The bridge between live agents and the bus, end to end on loopback: two machines (a bare remote,
two clones, two real dispatcher processes), a live fake-harness agent `alice` bound through the real shim tools on
machine a, and a script model `t/echo` claimed on machine b.

- alice's send_message to `t/echo@b` becomes a channel message; b's dispatcher runs the model; its reply reaches
  alice's session live, with in_reply_to = the id the send returned.
- `message send --to alice@a` from machine b reaches alice's session through her receiver chain; her `reply` becomes
  a channel message re: it, which `message replies` on b sees.
- a new task for a name nothing on a answers gets a failed reply naming the problem.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from crosstalk.registry.paths import StatePaths
from crosstalk.shim.tools import ShimRouter
from tests.support.bounded import run_bounded
from tests.support.bridge import ALICE, WAIT_S, until
from tests.support.bus_dispatch import (
    Daemon,
    channel_messages,
    commit_files,
    log_text,
    registry_yaml,
    replies_to,
    wait_replied,
    write_model,
)
from tests.support.bus_machines import init_and_clone

pytestmark = pytest.mark.slow

ECHO = 'import sys\nprint("echo: " + sys.argv[-1].strip().splitlines()[-1])'


@pytest.fixture
def bridged(bare_remote, make_machine):
    """Machines a and b on one transport, b claiming t/echo, both dispatching; yields (a, b, model path)."""
    a, b = make_machine("a"), make_machine("b")
    init_and_clone(a, b, bare_remote, "--alias", "a")
    model = write_model(b.base, "echo", ECHO)
    commit_files(b, {"data/crosstalk.yaml": registry_yaml({"t": {"echo": str(model)}})}, "test: registry")
    daemons = [Daemon(a, "--interval", "0.3"), Daemon(b, "--interval", "0.3")]
    try:
        for d in daemons:
            d.wait_ready()
        yield a, b, model
    finally:
        for d in daemons:
            d.stop()


def with_alice(a, body) -> Any:
    """Run `body(router, inbox)` with alice bound on machine a through the real shim tools (fake harness)."""
    inbox_dir = a.base / "inbox"
    inbox_dir.mkdir(exist_ok=True)

    def inbox() -> list[dict[str, Any]]:
        path = inbox_dir / "alice.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []

    async def main() -> Any:
        router = ShimRouter(
            "fake", StatePaths(a.home), environ={"CROSSTALK_FAKE_INBOX_DIR": str(inbox_dir)}, cwd=str(a.base)
        )
        try:
            res = await router.call("list_agents", {}, ALICE)  # binds alice: she is live from here on
            assert not res.is_error, res.data
            return await body(router, inbox)
        finally:
            await router.close()

    return run_bounded(main, WAIT_S * 3, what=getattr(body, "__qualname__", None))


def test_a_live_agent_asks_a_model_on_another_machine_and_gets_the_reply_live(bridged):
    a, _b, _model = bridged

    async def body(router, inbox):
        res = await router.call("send_message", {"to": "t/echo@b", "text": "ping 4711"}, ALICE)
        sent = dict(res.data)
        assert not res.is_error and sent["state"] == "queued" and sent["via"] == "bus", sent
        assert sent["rel_path"].startswith("data/channels/") and sent["pushed"] is True
        got = await until(lambda: [m for m in inbox() if m.get("in_reply_to") == sent["message_id"]], "the reply")
        # ask takes the same road: its answer arrives live too, linked to the id the ask returned.
        res = await router.call("ask", {"to": "t/echo@b", "text": "question 0815"}, ALICE)
        asked = dict(res.data)
        assert not res.is_error and asked["state"] == "queued" and asked["via"] == "bus", asked
        answer = await until(lambda: [m for m in inbox() if m.get("in_reply_to") == asked["message_id"]], "answer")
        assert "echo: question 0815" in answer[0]["text"]
        return sent, got

    sent, got = with_alice(a, body)
    assert len(got) == 1
    assert "echo: ping 4711" in got[0]["text"]
    assert got[0]["from"] == "@bus:bus/t/echo@b"
    # On the bus: alice's message (from alice@a) and the model's reply (to alice@a, re: it).
    channel, rel = sent["rel_path"].split("/")[2], "/".join(sent["rel_path"].split("/")[3:])
    a.git("pull", "-q", "--rebase")
    msgs = channel_messages(a.root, channel)
    assert msgs[rel].sender == "alice@a" and msgs[rel].to == "t/echo@b"
    replies = replies_to(a.root, channel, rel)
    assert [(r.sender, r.to) for r in replies] == [("t/echo@b", "alice@a")]


def test_a_bus_message_reaches_a_live_session_and_its_reply_goes_back_on_the_bus(bridged):
    a, b, _ = bridged
    res = b.cli("channel", "create", "general")
    assert res.returncode == 0, res.stderr

    async def body(router, inbox):
        out = await asyncio.to_thread(
            b.cli, "message", "send", "--to", "alice@a", "--channel", "general", "what is the build status?"
        )
        assert out.returncode == 0, out.stderr
        path = out.stdout.strip()
        got = await until(lambda: [m for m in inbox() if "build status" in m.get("text", "")], "delivery to alice")
        assert got[0]["from"] == "@bus:bus/op-b"
        res = await router.call("reply", {"message_id": got[0]["message_id"], "text": "green, 412 tests"}, ALICE)
        assert not res.is_error and res.data["state"] == "replied", res.data
        assert res.data["forwarded"]["via"] == "bus", res.data
        return path

    path = with_alice(a, body)
    [row] = wait_replied(b, [path], WAIT_S)
    assert row["state"] == "REPLIED", row
    channel, rel = path.split("/")[2], "/".join(path.split("/")[3:])
    reply = replies_to(b.root, channel, rel)
    assert [(r.sender, r.to, r.body.strip()) for r in reply] == [("alice@a", "op-b", "green, 412 tests")]
    # Delivered once, even though both machines' dispatchers saw the message and re-scans may happen.
    assert "bridged" in log_text(a)
    inbox = (a.base / "inbox" / "alice.jsonl").read_text().splitlines()
    assert sum("build status" in json.loads(line).get("text", "") for line in inbox if line.strip()) == 1


def test_a_task_for_a_name_nothing_answers_gets_a_failed_reply(bridged):
    _a, b, _ = bridged
    res = b.cli("channel", "create", "general")
    assert res.returncode == 0, res.stderr
    out = b.cli("message", "send", "--to", "ghost@a", "--channel", "general", "anyone?")
    assert out.returncode == 0, out.stderr
    path = out.stdout.strip()
    [row] = wait_replied(b, [path], WAIT_S)
    assert row["state"] == "FAILED", row
    channel, rel = path.split("/")[2], "/".join(path.split("/")[3:])
    (reply,) = replies_to(b.root, channel, rel)
    assert reply.failed and "no model and no live agent named 'ghost'" in (reply.error or "")


def test_crosstalk_send_to_a_bus_address_goes_over_the_bus(bridged):
    """`crosstalk send model@machine` (the live-messaging command): no live agent has that address, so the message
    goes over the git bus, and the model on the other machine answers it there."""
    a, _b, _ = bridged
    res = a.cli("send", "t/echo@b", "from the command line")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("queued via the git bus (bus) → t/echo@b: data/channels/"), res.stdout
    path = res.stdout.strip().rsplit(": ", 1)[1]
    [row] = wait_replied(a, [path], WAIT_S)
    assert row["state"] == "REPLIED", row
    channel, rel = path.split("/")[2], "/".join(path.split("/")[3:])
    (reply,) = replies_to(a.root, channel, rel)
    assert (reply.sender, reply.to) == ("t/echo@b", "op-a") and "echo: from the command line" in reply.body
    # A name with no '@' that no live agent has is still an error, not a bus message.
    res = a.cli("send", "nobody", "hello?")
    assert res.returncode == 4 and "nobody" in res.stderr
