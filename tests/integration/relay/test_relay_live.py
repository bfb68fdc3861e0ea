"""Live messages across "machines" (two state roots) through a real nats-server on loopback: `crosstalk send
NAME@ALIAS` from one reaches a live agent of the other through that machine's receiver chain and the state comes
back; a resend is answered from the journal; a machine is refused another's alias; the relay down is `unreachable`
within a bound, and the relay process reconnects on its own."""

from __future__ import annotations

import json
import subprocess

import pytest

from crosstalk.core.message import new_message
from crosstalk.fs.procinfo import login_name
from crosstalk.relay.config import RelayConfig, load
from crosstalk.relay.send import send_remote
from tests.support.nats_relay import NatsServer, join_and_serve, relay_status, serving_state
from tests.support.procs import Agent, Procs, one_error_line, procs
from tests.support.waiting import until

SEND_BOUND_S = 10.0  # every send below must end by itself well within this (the subprocess timeout enforces it)


@pytest.fixture
def alice(laptop: Procs, gpu: Procs, relay: NatsServer) -> Agent:
    """alice, a live (fake-harness) agent on laptop; laptop and gpu both joined, each with its relay process serving
    (gpu's carries gpu's `crosstalk send`s: relay/local_cli.py)."""
    agent = laptop.start_agent("alice")
    join_and_serve(laptop, relay, "laptop")
    join_and_serve(gpu, relay, "gpu")
    return agent


def test_a_send_crosses_the_relay_into_the_other_machines_chain(gpu: Procs, laptop: Procs, alice: Agent) -> None:
    res = gpu.cli("send", "alice@laptop", "the build on gpu is green", "--json", timeout=SEND_BOUND_S)
    assert res.returncode == 0, res.stderr
    answer = json.loads(res.stdout)
    assert answer["state"] == "accepted"
    assert (answer["to"], answer["agent_id"]) == ("alice@laptop", alice.agent_id)
    [line] = alice.inbox_lines()
    assert line["message_id"] == answer["message_id"]
    assert line["text"] == "the build on gpu is green"
    assert line["from"] == f"@relay:gpu/cli:{login_name()}"  # the machine is the relay's word, not the frame's
    assert line["sender_class"] == "external"
    # journaled by laptop's agent before the answer left: the received record and the outcome are there
    records = laptop.journal_records(alice.agent_id)
    [received] = [r for r in records if r.get("type") == "received"]
    assert received["message"]["message_id"] == answer["message_id"]
    assert received["sender"]["class"] == "external" and received["sender"]["name"] == line["from"]
    assert ("outcome", answer["message_id"]) in [(r.get("type"), r.get("message_id")) for r in records]
    # the plain line reads as a local send's does
    res = gpu.cli("send", "alice@laptop", "second", timeout=SEND_BOUND_S)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("accepted ") and res.stdout.endswith("→ alice@laptop\n")
    until(lambda: relay_status(laptop)["serve"]["answered"] == 2, "laptop's relay process counted both answers")


def test_and_the_other_way(gpu: Procs, laptop: Procs, relay: NatsServer, alice: Agent) -> None:
    bob = gpu.start_agent("bob")
    res = laptop.cli("send", "bob@gpu", "and back", "--from", "@ci:laptop", timeout=SEND_BOUND_S)
    assert res.returncode == 0, res.stderr
    [line] = bob.inbox_lines()
    assert (line["text"], line["from"]) == ("and back", "@relay:laptop/ci:laptop")


def test_a_resend_is_answered_from_the_journal_never_delivered_twice(gpu: Procs, alice: Agent) -> None:
    config = load(gpu.paths)
    assert config is not None
    msg = new_message("alice@laptop", "once only", from_="@ci:build")
    first = send_remote(config, msg, timeout=SEND_BOUND_S)
    again = send_remote(config, msg, timeout=SEND_BOUND_S)
    assert first.outcome.state.value == "accepted"
    assert again.outcome.state.value == "accepted"
    assert alice.inbox_ids() == [msg.message_id]


def test_no_such_agent_or_machine_is_said_plainly(gpu: Procs, alice: Agent) -> None:
    res = gpu.cli("send", "carol@laptop", "hi", timeout=SEND_BOUND_S)
    assert res.returncode == 4
    assert "no live agent is named 'carol@laptop'" in one_error_line(res.stderr)
    res = gpu.cli("send", "alice@mars", "hi", timeout=SEND_BOUND_S)
    assert res.returncode == 4
    assert "relay:no_machine: no machine 'mars' is serving on the relay" in one_error_line(res.stderr)
    assert alice.inbox_lines() == []


def test_a_machine_cannot_speak_as_another(gpu: Procs, relay: NatsServer, alice: Agent) -> None:
    """evil has its own user; claiming gpu's alias, the server refuses its publish: rejected, nothing arrives."""
    creds = relay.creds_file(gpu, "evil")
    res = gpu.cli("relay", "join", relay.url, "--alias", "gpu", "--creds", str(creds))
    assert res.returncode == 1 and "not as machine 'gpu'" in one_error_line(res.stderr)
    assert relay_status(gpu)["creds"] == str(gpu.root / "gpu.creds")  # the join gpu saved stands
    res = gpu.cli("relay", "join", relay.url, "--alias", "other", "--creds", str(creds))
    assert res.returncode == 2 and "relay leave" in one_error_line(res.stderr)
    hostile = RelayConfig(relay.url, "gpu", str(creds))
    out = send_remote(hostile, new_message("alice@laptop", "I am gpu", from_="@cli:gpu"), timeout=SEND_BOUND_S)
    assert (out.outcome.state.value, out.outcome.reason) == ("rejected", "relay:permission_denied")
    assert alice.inbox_lines() == []


def test_join_refuses_wrong_credentials_and_a_foreign_alias(relay: NatsServer) -> None:
    with procs() as m:
        wrong = relay.creds_file(m, "gpu", password="not-it")
        res = m.cli("relay", "join", relay.url, "--alias", "gpu", "--creds", str(wrong))
        assert res.returncode == 1
        assert "refused this machine's credentials" in one_error_line(res.stderr)
        evil = relay.creds_file(m, "evil")
        res = m.cli("relay", "join", relay.url, "--alias", "laptop", "--creds", str(evil))
        assert res.returncode == 1
        assert "not as machine 'laptop'" in one_error_line(res.stderr)
        assert relay_status(m)["joined"] is False


def test_relay_down_is_unreachable_then_the_relay_process_reconnects(
    gpu: Procs, laptop: Procs, relay: NatsServer, alice: Agent
) -> None:
    relay.kill9()
    until(lambda: serving_state(laptop) == "disconnected", "laptop's relay process saw the relay go")
    try:
        res = gpu.cli("send", "alice@laptop", "anyone there?", timeout=SEND_BOUND_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"a send with the relay down did not end within {SEND_BOUND_S} s")
    assert res.returncode == 4
    line = one_error_line(res.stderr)
    assert "relay:unreachable" in line  # gpu's relay process is not connected either: it says so at once
    relay.start()  # the same port: the relay comes back
    until(lambda: serving_state(laptop) == "connected", "laptop's relay process reconnected on its own")
    res = gpu.cli("send", "alice@laptop", "back again", timeout=SEND_BOUND_S)
    assert res.returncode == 0, res.stderr
    assert [x["text"] for x in alice.inbox_lines()] == ["back again"]


def test_leave_stops_the_relay_process_and_forgets_the_relay(laptop: Procs, alice: Agent) -> None:
    serving = [p for p in laptop.procs if p.args[1:3] == ["relay", "serve"]]
    res = laptop.cli("relay", "leave")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("left nats://127.0.0.1:")
    assert serving[0].wait(10) == 0
    assert relay_status(laptop) == {"joined": False, "serve": None}


def test_status_says_what_serves_and_a_second_serve_is_refused(laptop: Procs, alice: Agent) -> None:
    res = laptop.cli("relay", "status")
    assert res.returncode == 0, res.stderr
    first, second, third = res.stdout.splitlines()
    assert first.startswith("joined nats://127.0.0.1:") and "as 'laptop'" in first
    assert second.startswith("relay process: pid ") and ", connected for " in second
    assert third.startswith("other machines: ")  # whom its presence hears (test_relay_presence.py)
    res = laptop.cli("relay", "serve", timeout=SEND_BOUND_S)
    assert res.returncode == 1 and "a relay process already serves" in one_error_line(res.stderr)
