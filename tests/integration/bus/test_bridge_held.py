"""Bus messages for a live agent that is down are held and delivered when it comes back, exactly once:
two machines (a bare remote, two clones, two real dispatcher processes), the live fake-harness agent
`alice` on machine a bound through the real shim tools, and a gated script model `t/echo` on machine b (it answers
once the test lets it, so alice is surely down when the reply lands)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from crosstalk.registry.paths import StatePaths
from crosstalk.shim.tools import ShimRouter
from tests.support.bounded import run_bounded
from tests.support.bridge import ALICE, WAIT_S, until
from tests.support.bus_dispatch import (
    GIT_ID,
    Daemon,
    commit_files,
    log_text,
    registry_yaml,
    wait_for,
    wait_replied,
    write_model,
)
from tests.support.bus_machines import init_and_clone

pytestmark = pytest.mark.slow

GATED = """import os, sys, time
gate = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gate")
for _ in range(1200):
    if os.path.exists(gate):
        break
    time.sleep(0.05)
print("echo: " + sys.argv[-1].strip().splitlines()[-1])
"""


@pytest.fixture
def machines(bare_remote, make_machine):
    """Machines a and b on one transport, b claiming the gated t/echo, both dispatching; yields (a, b, gate)."""
    a, b = make_machine("a"), make_machine("b")
    init_and_clone(a, b, bare_remote, "--alias", "a")
    models = b.base / "models"
    models.mkdir()
    model = write_model(models, "echo", GATED)
    commit_files(b, {"data/crosstalk.yaml": registry_yaml({"t": {"echo": str(model)}})}, "test: registry")
    daemons = [Daemon(a, "--interval", "0.3"), Daemon(b, "--interval", "0.3")]
    try:
        for d in daemons:
            d.wait_ready()
        yield a, b, model.with_name("gate")
    finally:
        for d in daemons:
            d.stop()


def inbox(a) -> list[dict[str, Any]]:
    path = a.base / "inbox" / "alice.jsonl"
    raw = path.read_bytes() if path.exists() else b""
    return [json.loads(line) for line in raw.split(b"\n")[:-1] if line.strip()]


def as_alice(a, body) -> Any:
    """Run `body(router)` with alice live on machine a (bound through the real shim tools); she is down after."""
    (a.base / "inbox").mkdir(exist_ok=True)

    async def main() -> Any:
        env = {"CROSSTALK_FAKE_INBOX_DIR": str(a.base / "inbox")}
        router = ShimRouter("fake", StatePaths(a.home), environ=env, cwd=str(a.base))
        try:
            res = await router.call("list_agents", {}, ALICE)  # binds alice
            assert not res.is_error, res.data
            return await body(router)
        finally:
            await router.close()

    return run_bounded(main, WAIT_S * 3, what=getattr(body, "__qualname__", None))


def task_for_alice_down(a, b, text: str) -> str:
    """Alice registers on a (a known name) and goes down; b sends her a task, which a holds. Its path."""

    async def register(router):
        return None

    as_alice(a, register)
    res = b.cli("channel", "create", "general")
    assert res.returncode == 0, res.stderr
    out = b.cli("message", "send", "--to", "alice@a", "--channel", "general", text)
    assert out.returncode == 0, out.stderr
    wait_for(lambda: " held " in log_text(a), WAIT_S, "the task held on machine a")
    return out.stdout.strip()


def test_a_reply_to_an_agent_that_went_down_is_delivered_when_it_comes_back(machines) -> None:
    a, _b, gate = machines

    async def ask(router):
        res = await router.call("ask", {"to": "t/echo@b", "text": "question while I am here"}, ALICE)
        assert not res.is_error and res.data["via"] == "bus", res.data
        return dict(res.data)

    asked = as_alice(a, ask)  # alice is down from here on
    gate.write_text("")  # the model answers now
    wait_for(lambda: " held " in log_text(a), WAIT_S, "the reply held on machine a")
    assert not inbox(a)

    async def back(router):
        return await until(lambda: [m for m in inbox(a) if m.get("in_reply_to") == asked["message_id"]], "reply")

    [got] = as_alice(a, back)
    assert "echo: question while I am here" in got["text"] and got["from"] == "@bus:bus/t/echo@b"
    # The tick that delivered it writes its heartbeat when it ends: then nothing is held any more.
    wait_for(lambda: json.loads((a.state_dir / "heartbeat.json").read_text())["held"] == 0, WAIT_S, "held 0")
    # Offered once more by a later tick or not, it reached the session once.
    assert sum(m.get("in_reply_to") == asked["message_id"] for m in inbox(a)) == 1


def test_a_task_for_a_known_agent_that_is_down_waits_for_it_and_is_answered(machines) -> None:
    a, b, _gate = machines
    path = task_for_alice_down(a, b, "what is the build status?")
    res = b.cli("message", "replies", path, "--pull", "--json")
    assert res.returncode == 1 and json.loads(res.stdout)[0]["state"] == "PENDING", res.stdout  # no failed reply

    async def back(router):
        got = await until(lambda: [m for m in inbox(a) if "build status" in m.get("text", "")], "delivery")
        res = await router.call("reply", {"message_id": got[0]["message_id"], "text": "green"}, ALICE)
        assert not res.is_error and res.data["state"] == "replied", res.data
        return got

    got = as_alice(a, back)
    assert len(got) == 1 and got[0]["from"] == "@bus:bus/op-b"
    [row] = wait_replied(b, [path], WAIT_S)
    assert row["state"] == "REPLIED", row
    assert sum("build status" in m.get("text", "") for m in inbox(a)) == 1


def test_a_bus_ask_is_tracked_like_any_ask(machines) -> None:
    """An ask to model@machine is journaled before it is sent: receive_message(state="replies") finds its answer;
    its deadline passing unanswered is told to the session once, and the late answer still arrives."""
    a, _b, gate = machines

    async def body(router):
        res = await router.call("ask", {"to": "t/echo@b", "text": "slow question", "deadline_seconds": 1}, ALICE)
        asked = dict(res.data)
        assert not res.is_error and asked["state"] == "queued" and asked["via"] == "bus", asked
        mid = asked["message_id"]
        [notice] = await until(lambda: [m for m in inbox(a) if m.get("in_reply_to") == mid], "the deadline notice")
        assert "no answer within its 1 s deadline" in notice["text"] and notice["from"] == "crosstalk"
        gate.write_text("")
        await until(lambda: len([m for m in inbox(a) if m.get("in_reply_to") == mid]) == 2, "the late answer")
        res = await router.call("receive_message", {"state": "replies"}, ALICE)
        texts = [m["text"] for m in res.data["entries"] if m["in_reply_to"] == mid]
        assert any("echo: slow question" in t for t in texts), res.data
        return mid

    mid = as_alice(a, body)
    assert sum(m.get("in_reply_to") == mid and "deadline" in m["text"] for m in inbox(a)) == 1


def test_a_bus_asks_deadline_survives_the_session_going_away(machines) -> None:
    """The deadline is kept in the journal: an agent bound again after it passed is told at once."""
    a, _b, _gate = machines

    async def ask(router):
        res = await router.call("ask", {"to": "t/echo@b", "text": "asked, then gone", "deadline_seconds": 1}, ALICE)
        assert not res.is_error and res.data["state"] == "queued", res.data
        return res.data["message_id"]

    mid = as_alice(a, ask)  # down before the deadline passes
    time.sleep(1.5)  # the deadline passes while no shim holds the agent (what is tested: nothing armed it)
    assert not [m for m in inbox(a) if m.get("in_reply_to") == mid]

    async def back(router):
        return await until(lambda: [m for m in inbox(a) if m.get("in_reply_to") == mid], "the deadline notice")

    [notice] = as_alice(a, back)
    assert "no answer within its 1 s deadline" in notice["text"]


def test_a_held_message_rewritten_into_a_symlink_is_refused_and_the_next_one_still_delivered(machines) -> None:
    """A held task whose file a later (hostile) commit turns into a symlink out of the transport is refused when it
    is offered again (never read through the link, never a crash of the tick), and the dispatcher goes on: a task
    sent after it reaches alice once she is back."""
    a, b, _gate = machines
    path = task_for_alice_down(a, b, "first, soon rewritten")
    assert b.root is not None
    target = b.root / path
    assert target.is_file(), path
    secret = b.base / "secret.txt"
    secret.write_text("SECRET-NOT-FOR-ALICE\n")
    target.unlink()
    target.symlink_to(secret)
    b.git("add", "--", path)
    b.git(*GIT_ID, "commit", "-q", "-m", "test: rewrite a held message into a symlink")
    b.git("push", "-q", "origin", "HEAD:main")
    out = b.cli("message", "send", "--to", "alice@a", "--channel", "general", "second, the good one")
    assert out.returncode == 0, out.stderr
    wait_for(lambda: log_text(a).count(" held ") >= 2, WAIT_S, "the second task held on machine a")

    async def back(router):
        return await until(lambda: [m for m in inbox(a) if "second, the good one" in m.get("text", "")], "delivery")

    got = as_alice(a, back)
    assert len(got) == 1
    wait_for(lambda: "held_unreadable" in log_text(a), WAIT_S, "the rewritten message refused")
    assert not [m for m in inbox(a) if "SECRET" in m.get("text", "") or "soon rewritten" in m.get("text", "")]
