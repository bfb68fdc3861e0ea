"""`crosstalk send` against real agent processes: exit codes, output shapes, stdin bodies, refusals."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from tests.support.procs import CROSSTALK, Agent, Procs, one_error_line

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def test_send_accepted_prints_id_and_name(xt: Procs, alice: Agent) -> None:
    res = xt.cli("send", "alice", "build 481 failed", "--from", "@ci:build")
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    m = re.fullmatch(rf"accepted ({UUID}) → alice\n", res.stdout)
    assert m, res.stdout
    lines = alice.inbox_lines()
    assert [x["message_id"] for x in lines] == [m.group(1)]
    assert lines[0]["text"] == "build 481 failed"
    assert lines[0]["from"] == "@ci:build"
    assert lines[0]["sender_class"] == "external"
    assert lines[0]["kind"] == "inform"


def test_send_by_agent_id(xt: Procs, alice: Agent) -> None:
    res = xt.cli("send", alice.agent_id, "by id")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("accepted ") and res.stdout.endswith("→ alice\n")
    assert len(alice.inbox_lines()) == 1


def test_send_json_output_shape(xt: Procs, alice: Agent) -> None:
    res = xt.cli("send", "alice", "hello", "--json")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 1
    answer = json.loads(lines[0])
    assert set(answer) >= {"message_id", "state", "to", "agent_id"}
    assert set(answer) <= {"message_id", "state", "reason", "evidence", "to", "agent_id"}
    assert re.fullmatch(UUID, answer["message_id"])
    assert answer["state"] == "accepted"
    assert answer["to"] == "alice"
    assert answer["agent_id"] == alice.agent_id
    assert isinstance(answer.get("evidence", {}), dict)
    assert alice.inbox_ids() == [answer["message_id"]]


@pytest.mark.parametrize("args", [(), ("-",)], ids=["no-text", "dash"])
def test_send_body_from_stdin_trailing_whitespace_stripped(xt: Procs, alice: Agent, args: tuple[str, ...]) -> None:
    body = "  line one\n\tline two  \n\n \t\n"
    res = xt.cli("send", "alice", *args, "--json", input=body)
    assert res.returncode == 0, res.stderr
    mid = json.loads(res.stdout)["message_id"]
    lines = alice.inbox_lines()
    assert [x["message_id"] for x in lines] == [mid]
    assert lines[0]["text"] == "  line one\n\tline two"  # leading whitespace kept, trailing stripped


@pytest.mark.parametrize("body", ["", "   \n\t\n"], ids=["empty", "blank"])
def test_send_empty_body_is_usage_error(xt: Procs, alice: Agent, body: str) -> None:
    res = xt.cli("send", "alice", input=body)
    assert res.returncode == 2
    assert res.stdout == ""
    assert "empty" in one_error_line(res.stderr)
    assert alice.inbox_lines() == []


def test_send_no_text_with_terminal_stdin_is_usage_error(xt: Procs, alice: Agent) -> None:
    master, slave = os.openpty()
    try:
        res = subprocess.run(
            [str(CROSSTALK), "send", "alice"], env=xt.env, stdin=slave, capture_output=True, timeout=30, check=False
        )
    finally:
        os.close(slave)
        os.close(master)
    assert res.returncode == 2
    assert "terminal" in one_error_line(res.stderr.decode())
    assert alice.inbox_lines() == []


def test_send_empty_text_argument_is_usage_error(xt: Procs, alice: Agent) -> None:
    res = xt.cli("send", "alice", "  ")
    assert res.returncode == 2
    one_error_line(res.stderr)
    assert alice.inbox_lines() == []


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--from", "bob"), "@scheme:topic"),
        (("--from", "@nospace"), "@scheme:topic"),
        (("--delivery", "steer", "--mode", "followUp"), "disagree"),
        (("--kind", "command"), "--kind"),
        (("--delivery", "later"), "--delivery"),
        (("--timeout", "0"), "--timeout"),
        (("--bogus",), "--bogus"),
    ],
    ids=[
        "from-no-scheme",
        "from-no-topic",
        "delivery-mode-disagree",
        "unknown-kind",
        "unknown-delivery",
        "timeout-range",
        "unknown-option",
    ],
)
def test_send_usage_errors_exit_2_one_line(xt: Procs, alice: Agent, args: tuple[str, ...], needle: str) -> None:
    res = xt.cli("send", "alice", "hi", *args)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert res.stdout == ""
    assert needle in one_error_line(res.stderr)
    assert alice.inbox_lines() == []


def test_send_missing_target_is_usage_error(xt: Procs) -> None:
    res = xt.cli("send")
    assert res.returncode == 2
    one_error_line(res.stderr)


@pytest.mark.parametrize(("delivery", "mode"), [("next_turn", "followUp"), ("steer", "steer"), ("auto", None)])
def test_send_delivery_and_mode_that_agree(xt: Procs, alice: Agent, delivery: str, mode: str | None) -> None:
    extra = ("--mode", mode) if mode else ()
    res = xt.cli("send", "alice", "x", "--delivery", delivery, *extra)
    assert res.returncode == 0, res.stderr
    assert alice.inbox_lines()[0]["delivery"] == delivery


def test_send_mode_follow_up_alone_means_next_turn(xt: Procs, alice: Agent) -> None:
    res = xt.cli("send", "alice", "x", "--mode", "followUp")
    assert res.returncode == 0, res.stderr
    assert alice.inbox_lines()[0]["delivery"] == "next_turn"


def test_send_no_such_agent_exit_4(xt: Procs) -> None:
    res = xt.cli("send", "nobody", "hi")
    assert res.returncode == 4
    assert res.stdout == ""
    assert "nobody" in one_error_line(res.stderr)


def test_send_to_killed_agent_with_stale_descriptor_exit_4(xt: Procs) -> None:
    bob = xt.start_agent("bob")
    assert xt.cli("send", "bob", "before").returncode == 0
    xt.kill9(bob)
    assert xt.paths.descriptor(bob.agent_id).exists()  # SIGKILL left the descriptor behind
    for target in ("bob", bob.agent_id):
        res = xt.cli("send", target, "after")
        assert res.returncode == 4, (res.stdout, res.stderr)
        assert res.stdout == ""
        one_error_line(res.stderr)
    assert len(bob.inbox_lines()) == 1


def test_send_worker_rejects_external_exit_3(xt: Procs) -> None:
    xt.start_agent("alice")
    carol = xt.start_agent("carol", "--role", "worker", "--parent", "alice")
    res = xt.cli("send", "carol", "nightly job finished", "--from", "@ci:x")
    assert res.returncode == 3, (res.stdout, res.stderr)
    line = one_error_line(res.stderr)
    assert "acl:external" in line
    assert "carol" in line
    assert res.stdout.startswith("rejected ")
    assert carol.inbox_lines() == []
    # The refusal is audited in the journal, never as a received message.
    recs = xt.journal_records(carol.agent_id)
    assert [r["type"] for r in recs] == ["rejected"]
    assert recs[0]["reason"] == "acl:external"


def test_send_worker_rejects_external_json(xt: Procs) -> None:
    xt.start_agent("alice")
    xt.start_agent("carol", "--role", "worker", "--parent", "alice")
    res = xt.cli("send", "carol", "hi", "--from", "@ci:x", "--json")
    assert res.returncode == 3
    answer = json.loads(res.stdout)
    assert answer["state"] == "rejected"
    assert answer["reason"] == "acl:external"
    assert "acl:external" in one_error_line(res.stderr)


def test_send_ping_is_answered_not_injected(xt: Procs, alice: Agent) -> None:
    res = xt.cli("send", "alice", "are you there?", "--kind", "ping", "--json")
    assert res.returncode == 0, res.stderr
    answer = json.loads(res.stdout)
    assert answer["state"] == "accepted"
    assert answer.get("reason") == "pong"
    assert alice.inbox_lines() == []
    assert xt.journal_records(alice.agent_id) == []  # never journaled either


def test_send_ping_plain_output(xt: Procs, alice: Agent) -> None:
    res = xt.cli("send", "alice", "ping?", "--kind", "ping")
    assert res.returncode == 0
    assert re.fullmatch(rf"accepted {UUID} → alice \(pong\)\n", res.stdout), res.stdout
    assert alice.inbox_lines() == []


def test_send_meta_injected_with_kind_meta(xt: Procs, alice: Agent) -> None:
    res = xt.cli("send", "alice", "FYI: main is frozen", "--kind", "meta", "--json")
    assert res.returncode == 0, res.stderr
    mid = json.loads(res.stdout)["message_id"]
    lines = alice.inbox_lines()
    assert [x["message_id"] for x in lines] == [mid]
    assert lines[0]["kind"] == "meta"
    assert lines[0]["how"] == "meta"
    assert 'kind="meta"' in lines[0]["rendered"]


def test_send_default_from_is_cli_user(xt: Procs, alice: Agent) -> None:
    assert xt.cli("send", "alice", "who am i").returncode == 0
    line = alice.inbox_lines()[0]
    assert line["from"].startswith("@cli:")
    assert line["sender_class"] == "external"


def test_send_queued_exit_0(xt: Procs) -> None:
    bob = xt.start_agent("bob", "--script", "queue")
    res = xt.cli("send", "bob", "later", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["state"] == "queued"
    assert len(bob.inbox_lines()) == 1


@pytest.mark.parametrize(("step", "state", "code"), [("refuse", "unreachable", 4), ("disconnect", "unknown", 1)])
def test_send_unreachable_and_unknown_exit_codes(xt: Procs, step: str, state: str, code: int) -> None:
    xt.start_agent("dave", "--script", step)
    res = xt.cli("send", "dave", "x", "--json")
    assert res.returncode == code, (res.stdout, res.stderr)
    assert json.loads(res.stdout)["state"] == state
    one_error_line(res.stderr)


def test_send_no_answer_within_timeout_exit_1(xt: Procs) -> None:
    hangs = xt.start_agent("hangs", "--script", "hang")
    res = xt.cli("send", "hangs", "x", "--timeout", "0.5")
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert res.stdout == ""
    one_error_line(res.stderr)
    # The message was claimed for dispatch before the harness hung: journaled, never acknowledged.
    types = [r["type"] for r in xt.journal_records(hangs.agent_id)]
    assert types == ["received", "dispatch"]


def test_send_to_a_session_that_holds_it_exits_5_and_says_held(xt: Procs) -> None:
    """The receiving harness holds the message for its user: the sender is told `held` (exit 5), never accepted;
    waiting for the user's word that never comes ends the same way, and the message was delivered to no one."""
    holder = xt.start_agent("holder", "--default", "hold")
    res = xt.cli("send", "holder", "for your user")
    assert res.returncode == 5, res.stderr
    m = re.fullmatch(rf"held ({UUID}) → holder: held: the session holds it for its user\n", res.stdout)
    assert m, res.stdout
    assert "holds the message for its user" in one_error_line(res.stderr)
    waited = xt.cli("send", "holder", "again", "--wait-held", "1.2", "--json")
    assert waited.returncode == 5 and json.loads(waited.stdout)["state"] == "held"
    assert holder.inbox_lines() == []


@pytest.mark.parametrize("via", ["argument", "stdin", "stdin far over"])
def test_send_over_the_text_limit_is_rejected_exit_3_and_nothing_sent(xt: Procs, alice: Agent, via: str) -> None:
    """A limit is `rejected` (3) with the receiver's own reason, as the exit-code table says; stdin is read capped."""
    body = "x" * (70_000 if via != "stdin far over" else 2_000_000)
    res = xt.cli("send", "alice", body) if via == "argument" else xt.cli("send", "alice", "-", input=body)
    assert res.returncode == 3, res.stderr
    line = one_error_line(res.stderr)
    assert line.startswith("crosstalk: rejected: admission:text_too_large") and "nothing was sent" in line, line
    assert alice.inbox_lines() == []
