"""The git bus dispatcher runs the REAL headless harness CLIs (`claude -p`, `codex exec`, `pi -p`) as bus models
against the local mock model servers, across two simulated machines sharing a bare remote.

ops sends with the real `crosstalk message send --to PROVIDER/MODEL@gpu`; the real `crosstalk daemon dispatch` on
gpu runs the harness named in data/crosstalk.yaml (absolute binary + headless flags; the mock URL and the isolation
dirs reach it only through `env:` ${VAR} references resolved from the dispatcher's own environment); ops waits with
`crosstalk message replies --pull` and reads the reply.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

import pytest

from crosstalk.bus.protocol.message import BusMessage
from tests.support.bus_harness import (
    REPLY_TIMEOUT,
    BusPair,
    Daemon,
    bus_pair,
    harness_provider,
    protocol_line,
    reject_model,
    wait_replied,
)
from tests.support.harness_run import HarnessRun

pytestmark = pytest.mark.timeout(300)
HARNESSES = ("claude", "codex", "pi")
MakeRun = Callable[..., HarnessRun]


def _channel_rel(rel: str) -> str:
    """data/channels/<uuid>/YYYY/... -> YYYY/..."""
    return rel.split("/", 3)[3]


def _only_reply(pair: BusPair, status: dict[str, object]) -> tuple[str, BusMessage]:
    replies = status["replies"]
    assert isinstance(replies, list) and len(replies) == 1, status
    path = replies[0]["path"]
    return path, pair.read(path)


def _assert_linked(pair: BusPair, reply: BusMessage, asked: str, address: str) -> None:
    question = pair.read(asked)
    assert reply.sender == address
    assert reply.to == question.sender == "op-ops"
    assert reply.re == (_channel_rel(asked),)


@pytest.mark.parametrize("name", HARNESSES)
def test_dispatcher_runs_the_real_harness(harness_run: MakeRun, name: str) -> None:
    answer = f"bus answer {secrets.token_hex(6)}"
    run = harness_run(name, reply=answer)
    token = secrets.token_hex(8)
    with bus_pair() as pair:
        registry, daemon_env = harness_provider(run, name, {"mock": []})
        assert "${XT_MOCK_URL}" in registry or name != "claude"
        pair.commit_registry(registry)
        address = f"{name}/mock@gpu"
        with Daemon(pair.gpu, "--interval", "1", env=daemon_env) as daemon:
            beat = daemon.wait_ready()
            assert beat.get("claimed") == [f"{name}/mock"], f"not claimed: {beat}\n{daemon.tail()}"
            asked = pair.send(address, f"What is the secret token {token}? Answer briefly.")
            [status] = wait_replied(pair.ops, [asked], REPLY_TIMEOUT, daemon)
        assert status["state"] == "REPLIED", f"{status}\n{daemon.tail()}"
        _, reply = _only_reply(pair, status)
        _assert_linked(pair, reply, asked, address)
        assert not reply.failed and reply.error is None
        assert reply.body.strip() == answer
        assert run.mock.replies and run.mock.replies == [answer] * len(run.mock.replies)
        # The model saw the whole dispatch prompt: the protocol, the delimiter naming the sender and ref, the body.
        assert run.mock.saw(protocol_line(pair.gpu.root)), f"{name}: PROTOCOL.md did not reach the model"
        delimiter = f"--- Message 1 of 1 (from: op-ops, ref: {_channel_rel(asked)}) ---"
        assert run.mock.saw(delimiter), f"{name}: no {delimiter!r} in the model requests"
        assert run.mock.saw(token), f"{name}: the message body did not reach the model"


def test_big_prompt_goes_on_stdin_and_a_failing_run_replies_failed(harness_run: MakeRun) -> None:
    """A body over 64 KiB reaches claude intact: the dispatcher sends it on stdin (over 128 KiB here, more than
    Linux lets one argv string carry, so its tail arriving proves stdin); a model the mock rejects makes claude
    exit 1, and the dispatcher answers with `failed: true` and the error."""
    run = harness_run("claude")
    rejected = "claude-mock-rejected"
    reject_model(run.mock, rejected)
    token = secrets.token_hex(8)
    filler = "".join(f"line {i:05d} of the long bus message {'.' * 60}\n" for i in range(2000))
    body = f"big question {token}\n{filler}END-{token}\n"
    assert len(body.encode()) > 128 * 1024  # MAX_ARG_STRLEN: too big for argv
    with bus_pair() as pair:
        current = run.argv_prefix[run.argv_prefix.index("--model") + 1]
        registry, daemon_env = harness_provider(run, "claude", {"mock": [], "rejected": [current, rejected]})
        pair.commit_registry(registry)
        with Daemon(pair.gpu, "--interval", "1", env=daemon_env) as daemon:
            beat = daemon.wait_ready()
            assert beat.get("claimed") == ["claude/mock", "claude/rejected"], f"{beat}\n{daemon.tail()}"
            big = pair.send("claude/mock@gpu", "-", input=body)
            bad = pair.send("claude/rejected@gpu", f"this run fails {token}")
            big_status, bad_status = wait_replied(pair.ops, [big, bad], REPLY_TIMEOUT, daemon)
        # The big one: answered, and the model saw its last line.
        assert big_status["state"] == "REPLIED", f"{big_status}\n{daemon.tail()}"
        _, reply = _only_reply(pair, big_status)
        _assert_linked(pair, reply, big, "claude/mock@gpu")
        assert not reply.failed
        assert run.mock.saw(f"END-{token}"), "the tail of the >64 KiB prompt did not reach the model"
        assert reply.body.strip() in run.mock.replies
        # The failing one: a failed reply carrying the CLI's exit status and its complaint.
        assert bad_status["state"] == "FAILED", f"{bad_status}\n{daemon.tail()}"
        _, failure = _only_reply(pair, bad_status)
        _assert_linked(pair, failure, bad, "claude/rejected@gpu")
        assert failure.failed is True
        assert failure.error and failure.error.startswith("exit 1"), failure.error
        assert rejected in failure.error, failure.error  # Claude's complaint is on stdout: the error carries both
        assert rejected in failure.body, failure  # the body carries the error and Claude's stdout complaint
        assert any(r.body.get("model") == rejected for r in run.mock.model_requests())
