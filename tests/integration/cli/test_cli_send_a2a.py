"""`crosstalk send --a2a`: over A2A as a live agent, answered with a task; usage errors are one line, exit 2."""

from __future__ import annotations

import json

import pytest

from tests.support.procs import Procs


def _one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("crosstalk: "), stderr
    return lines[0]


def test_send_a2a_as_an_agent_is_verified_and_answered_with_a_task(xt: Procs) -> None:
    xt.start_agent("alice")
    bob = xt.start_agent("bob", "--answer", "yes, merge it")
    res = xt.cli("send", "--a2a", "--as", "alice", "bob", "hello over a2a", "--json")
    assert res.returncode == 0, res.stderr
    answer = json.loads(res.stdout)
    assert (answer["state"], answer["completion"], answer["as"]) == ("completed", "delivered", "alice")
    line = bob.inbox_lines()[-1]
    assert (line["from"], line["sender_class"], line["text"]) == ("alice", "verified", "hello over a2a")

    ask = xt.cli("send", "--a2a", "--as", "alice", "bob", "safe to merge?", "--kind", "ask", "--deadline", "20")
    assert ask.returncode == 0, ask.stderr
    assert ask.stdout.splitlines()[-1] == "yes, merge it"


def test_send_a2a_failures_have_exit_codes(xt: Procs) -> None:
    xt.start_agent("alice")
    xt.start_agent("quiet", "--no-a2a")
    xt.start_agent("worker", "--role", "worker", "--parent", "alice")
    no_a2a = xt.cli("send", "--a2a", "--as", "alice", "quiet", "x")
    assert no_a2a.returncode == 4 and "serves no A2A endpoint" in _one_line(no_a2a.stderr)
    parent = xt.cli("send", "--a2a", "--as", "alice", "worker", "run the tests", "--kind", "command")
    assert parent.returncode == 0, parent.stderr  # alice is the worker's parent: a command is allowed
    # quiet serves no A2A itself, but its token still names it; the worker takes only its parent.
    stranger = xt.cli("send", "--a2a", "--as", "quiet", "worker", "do it", "--kind", "command")
    assert stranger.returncode == 3 and "acl:agents" in _one_line(stranger.stderr)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["send", "--a2a", "bob", "x"], "--a2a needs --as"),
        (["send", "--as", "alice", "bob", "x"], "--as needs --a2a"),
        (["send", "bob", "x", "--kind", "ask"], "--kind ask needs --a2a"),
        (["send", "--a2a", "--as", "alice", "bob", "x", "--deadline", "5"], "--deadline applies only"),
    ],
)
def test_send_a2a_usage_errors(xt: Procs, args: list[str], needle: str) -> None:
    res = xt.cli(*args)
    assert res.returncode == 2 and needle in _one_line(res.stderr)
