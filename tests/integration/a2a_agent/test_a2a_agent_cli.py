"""Two (and three) agents started with the real CLI (`crosstalk agent run`, A2A on by default) exchange messages
over A2A with `crosstalk send --a2a --as SENDER TARGET`: identity is the sender's bearer token, so the receiver's
session sees a verified sender with the right name; a forged token is refused."""

from __future__ import annotations

import json
import os
import stat

import httpx
from a2a.types import a2a_pb2 as pb

from crosstalk.core.ids import new_message_id
from crosstalk.registry.discovery import resolve
from tests.support.a2a_agents import WAIT_S, ct_meta, rpc, sdk, send_request, text_message, until_token_refused
from tests.support.bounded import run_bounded
from tests.support.procs import procs, wait_for


def last_line(agent) -> dict:
    lines = agent.inbox_lines()
    assert lines, f"{agent.name}'s inbox is empty"
    return lines[-1]


def test_cli_agents_exchange_messages_over_a2a_with_verified_identity():
    with procs() as p:
        alice = p.start_agent("alice")
        bob = p.start_agent("bob")
        carol = p.start_agent("carol", "--answer", "forty-two")
        for agent in (alice, bob, carol):
            assert agent.ready["a2a_url"].startswith("http://127.0.0.1:")
            assert resolve(p.paths, agent.name).a2a_url == agent.ready["a2a_url"]
            cred = p.paths.token_path(agent.agent_id)
            assert stat.S_IMODE(os.stat(cred).st_mode) == 0o600

        # alice → bob
        res = p.cli("send", "--a2a", "--as", "alice", "bob", "hello bob, over A2A")
        assert res.returncode == 0, res.stderr
        assert res.stdout.startswith("completed task ") and "bob" in res.stdout and "delivered" in res.stdout
        wait_for(lambda: len(bob.inbox_lines()) == 1, WAIT_S, "bob's inbox")
        line = last_line(bob)
        assert (line["text"], line["from"], line["sender_class"]) == ("hello bob, over A2A", "alice", "verified")

        # bob → alice, as JSON
        res = p.cli("send", "--a2a", "--as", "bob", "--json", "alice", "hi alice, bob here")
        assert res.returncode == 0, res.stderr
        answer = json.loads(res.stdout)
        assert (answer["state"], answer["completion"], answer["as"], answer["to"]) == (
            "completed",
            "delivered",
            "bob",
            "alice",
        )
        wait_for(lambda: len(alice.inbox_lines()) == 1, WAIT_S, "alice's inbox")
        line = last_line(alice)
        assert (line["text"], line["from"], line["sender_class"], line["message_id"]) == (
            "hi alice, bob here",
            "bob",
            "verified",
            answer["message_id"],
        )

        # An ask to an agent that answers: the reply is printed.
        res = p.cli("send", "--a2a", "--as", "alice", "--kind", "ask", "carol", "what is the answer?")
        assert res.returncode == 0, res.stderr
        assert res.stdout.splitlines()[-1] == "forty-two"
        assert "replied" in res.stdout.splitlines()[0]
        line = last_line(carol)
        assert (line["kind"], line["from"], line["sender_class"]) == ("ask", "alice", "verified")

        # The same over JSON, and an ask sent with --return-immediately to an agent that does not answer.
        res = p.cli("send", "--a2a", "--as", "bob", "--kind", "ask", "--json", "carol", "and again?")
        assert res.returncode == 0 and json.loads(res.stdout)["reply"] == "forty-two"
        res = p.cli("send", "--a2a", "--as", "carol", "--kind", "ask", "--return-immediately", "bob", "later?")
        assert res.returncode == 0, res.stderr
        assert res.stdout.startswith("submitted task ")

        # A command between primaries is refused (a failed task), never injected.
        before = len(bob.inbox_lines())
        res = p.cli("send", "--a2a", "--as", "alice", "--kind", "command", "bob", "rm -rf /")
        assert res.returncode != 0 and "command_needs_parent" in res.stderr
        assert "rm -rf /" not in [x["text"] for x in bob.inbox_lines()]
        assert len(bob.inbox_lines()) <= before + 1  # at most carol's ask arriving late; never the command

        # Sending as an agent that is not running: refused by the CLI before anything is sent.
        res = p.cli("send", "--a2a", "--as", "nobody", "bob", "who am i")
        assert res.returncode != 0 and res.stderr.startswith("crosstalk: ")
        assert "who am i" not in [x["text"] for x in bob.inbox_lines()]


def test_cli_agent_refuses_a_forged_token_and_accepts_the_sdk_client_with_a_real_one():
    with procs() as p:
        alice = p.start_agent("alice")
        bob = p.start_agent("bob")
        url = bob.ready["a2a_url"]

        async def main():
            async with httpx.AsyncClient(timeout=WAIT_S) as http:
                forged = await rpc(
                    http, url, "SendMessage", {"message": text_message("forged", new_message_id())}, token="ab" * 32
                )
                assert forged.status_code == 401 and forged.json()["error"]["code"] == -32000
                missing = await rpc(
                    http, url, "SendMessage", {"message": text_message("none", new_message_id())}, token=None
                )
                assert missing.status_code == 401
            # The real token, read from alice's 0600 credential file, with the official SDK client.
            token = p.paths.token_path(alice.agent_id).read_text().strip()
            async with sdk(url, token) as client:
                task = await client.send_task(send_request("from the SDK, as alice", message_id=new_message_id()))
                assert task.status.state == pb.TASK_STATE_COMPLETED and ct_meta(task)["completion"] == "delivered"

        run_bounded(main(), 60)
        wait_for(lambda: len(bob.inbox_lines()) == 1, WAIT_S, "bob's inbox")
        [line] = bob.inbox_lines()
        assert (line["text"], line["from"], line["sender_class"]) == ("from the SDK, as alice", "alice", "verified")

        # Once alice stops, her token names nobody (after bob's brief liveness cache): the same request is refused.
        token = p.paths.token_path(alice.agent_id).read_text().strip()
        p.stop(alice.proc)

        async def stale():
            await until_token_refused(url, token)
            async with httpx.AsyncClient(timeout=WAIT_S) as http:
                msg = {"message": text_message("after alice stopped", new_message_id())}
                return (await rpc(http, url, "SendMessage", msg, token=token)).status_code

        assert run_bounded(stale(), 60) == 401
        assert len(bob.inbox_lines()) == 1


def test_agent_run_verbose_logs_a2a_traffic_through_the_one_chain():
    """A2A deliveries run the receiver chain, so `agent run -v` logs each with its final state: delivered ones and
    refused ones alike, the same as uds traffic."""
    with procs() as p:
        p.start_agent("alice")
        bob = p.start_agent("bob", "-v", "--role", "peer", "--peer", "alice")
        carol = p.start_agent("carol")
        res = p.cli("send", "--a2a", "--as", "alice", "--json", "bob", "over A2A")
        assert res.returncode == 0, res.stderr
        delivered = json.loads(res.stdout)
        refused = p.cli("send", "--a2a", "--as", "carol", "--json", "bob", "not a peer")  # bob takes peers only
        assert refused.returncode == 3, refused.stdout + refused.stderr
        res = p.cli("send", "bob", "over uds", "--from", "@ci:build")
        assert res.returncode == 0, res.stderr

        def logged() -> str:
            return bob.err_path.read_text()

        wait_for(lambda: logged().count(" from ") >= 3, WAIT_S, "three deliveries in bob's log")
        log = logged()
        assert f"{delivered['message_id']} from alice: accepted" in log
        assert "from carol: rejected acl:agents" in log
        assert "from @ci:build: accepted" in log
        assert carol.ready["name"] == "carol"
