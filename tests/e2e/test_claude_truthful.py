"""Truthful outcomes with the real `claude` (2.1.332): what a sending model is told about a message is what happened
to it in the receiving session. A receiving Claude may hold a message for its user (permission-mode parity, or
`crossSessionInbound: "hold"`), refuse it (`"refuse"`), or let it through; the sender hears `accepted` only when
the receiving model got it, `held` while the receiving user has it, and later the final word as a notice from
crosstalk (`crosstalk: your message <id> to <name>, held for its user, was delivered.` / `was not delivered
(<state>)`).

Each test asserts on what the models saw (the mock servers log every request) and on what the receiving Claude
wrote on its stream-json stdout (its `peer_message_hold` events); the tests are the receiving sessions' host, and
approve or drop held messages with the control requests an SDK host sends. Sessions are shared by the tests of this
module (a `Team`, started as the tests first need them); a test that ends a session or kills a shim has sessions
of its own.

    CROSSTALK_MATRIX_OUT=/tmp/matrix.md pytest -s tests/e2e/test_claude_truthful.py   # prints (and writes) the
                                                                                      # permission-mode matrix
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from crosstalk.fs.procinfo import pid_alive
from crosstalk.journal.codec import read_journal
from crosstalk.registry.paths import StatePaths
from tests.support.live_claude import CROSSTALK, LiveClaude

pytestmark = pytest.mark.timeout(240)

WAIT_S = 60.0
UNSEEN_S = 3.0  # how long a held or refused message is watched for in the receiving model's requests
SENDERS = ("bypass", "default")
RECEIVER_MODES = ("bypass", "default", "plan")
SET_PEER_DELIVERY = {"subtype": "set_peer_delivery", "shows_held_messages": True}

# The sessions the tests share, by key: LiveClaude.start's options. `x-*` run crosstalk (registered by a first
# crosstalk call), `n-*` run without it and are addressed by their Claude name (`--name`, their key).
SPECS: dict[str, dict[str, Any]] = {
    "s-bypass": {"permission_mode": "bypass"},
    "s-default": {"permission_mode": "default"},
    **{f"x-{m}": {"permission_mode": m} for m in RECEIVER_MODES},
    **{f"n-{m}": {"permission_mode": m, "install": False, "name": f"n-{m}"} for m in RECEIVER_MODES},
    "x-refuse": {"settings": {"crossSessionInbound": "refuse"}},
    "x-hold": {"settings": {"crossSessionInbound": "hold"}},
    "n-expiring": {"install": False, "name": "n-expiring"},  # test_held_then_expired ends it
    "crasher": {},  # test_a_held_send_survives_a_crash_of_the_sending_shim kills its shim
}


class Team:
    """The module's live sessions under one root (one Claude config dir, one CROSSTALK_HOME), started on first use:
    each as a host that shows held messages (`set_peer_delivery` before anything reaches it), a crosstalk session
    registered (its first crosstalk call made; a plan-mode session's permission prompt for it allowed)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.live: dict[str, LiveClaude] = {}

    def __call__(self, *keys: str) -> list[LiveClaude]:
        new = [k for k in dict.fromkeys(keys) if k not in self.live]
        for key in new:
            s = LiveClaude.start(
                self.root / key, crosstalk_home=self.root / "xt", config_dir=self.root / "claude", **SPECS[key]
            )
            self.live[key] = s
            s.control(SET_PEER_DELIVERY)
        calls = [k for k in new if SPECS[k].get("install", True)]
        for key in calls:  # all at once: the MCP servers start side by side
            self.live[key].say("CALL mcp__crosstalk__list_agents {}")
        for key in calls:
            s = self.live[key]
            if s.permission_mode == "plan":
                s.allow_tool("mcp__crosstalk__list_agents")
            s.wait_tool_result("list_agents")
            s.agent()
        for key in new:
            if key not in calls:  # a session without crosstalk is there once its record carries its name
                s = self.live[key]
                _wait(lambda s=s, key=key: (s.record() or {}).get("name") == SPECS[key]["name"], s.tail)
        return [self.live[k] for k in keys]

    def close(self) -> None:
        for s in reversed(list(self.live.values())):
            s.close()


@pytest.fixture(scope="module")
def _team() -> Iterator[Team]:
    root = Path(tempfile.mkdtemp(prefix="xt", dir="/tmp"))  # short: unix socket paths stay under 108 bytes
    team = Team(root)
    try:
        yield team
    finally:
        team.close()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def team(require: Callable[[str], Path], request: pytest.FixtureRequest) -> Team:
    require("claude")  # skip, or fail when the run requires the CLIs (tests/e2e/conftest.py), before any start
    return request.getfixturevalue("_team")


# ---------------------------------------------------------------------------------------------------- helpers
def _wait(predicate: Callable[[], object], what: Callable[[], str] = lambda: "", timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"condition not met in {timeout:.0f} s\n{what()}"
        time.sleep(0.05)


def name_of(s: LiveClaude) -> str:
    """How a sender addresses the session: its crosstalk agent's name, or (no crosstalk) its Claude name."""
    return s.agent().name if SPECS[s.root.name].get("install", True) else SPECS[s.root.name]["name"]


def send(sender: LiveClaude, to: str, text: str) -> dict[str, Any]:
    """The sender's model calls send_message; returns the result as that model read it."""
    n = len(sender.requests())
    sender.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': to, 'text': text})}")
    return sender.wait_tool_result("send_message", after=n)


def saw(s: LiveClaude, needle: str) -> bool:
    return any(needle in r.raw for r in s.requests())


def held_event(s: LiveClaude, needle: str, timeout: float = WAIT_S) -> dict[str, Any]:
    """The session's `peer_message_hold` event (state held) for the message whose text holds `needle`."""
    return s.wait_hold(lambda h: h.get("state") == "held" and needle in json.dumps(h.get("preview")), timeout)


def decide(s: LiveClaude, hold: dict[str, Any], decision: str) -> str:
    """The host's decision on a held message ("deliver" or "drop"); returns Claude's outcome for it."""
    answer = s.control({"subtype": "decide_held_peer_message", "hold_id": hold["hold_id"], "decision": decision})
    assert answer.get("subtype") == "success", answer
    return str(answer["response"]["outcome"])


def notice(s: LiveClaude, message_id: str, timeout: float = WAIT_S, after: int = 0) -> str:
    """The notice from crosstalk about `message_id` the session's model read (its text, up to the envelope end)."""
    return _notice(s, message_id, timeout, after)[1]


def _notice(s: LiveClaude, message_id: str, timeout: float = WAIT_S, after: int = 0) -> tuple[str, str]:
    """(the opening tag of the envelope that carried the notice, the notice's text). The notice is a text block of a
    user message, or, when it arrived while a tool ran, a text block inside that tool's result."""
    needle = f"crosstalk: your message {message_id} to "
    req = s.wait_seen(needle, timeout=timeout, after=after)
    for text in _texts(req.body.get("messages", [])):
        if needle in text:
            head, rest = text.split(needle, 1)
            tag = head[head.rfind("<cross-session-message") :]
            return tag, (needle + rest).split("</cross-session-message>")[0].strip()
    raise AssertionError(f"{s.root.name}: {needle!r} is in a request, but in no text block: {req.raw[-3000:]}")


def _texts(node: object) -> Iterator[str]:
    """Every text the model reads in `node` (messages, their content blocks, a tool result's content)."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, list):
        for item in node:
            yield from _texts(item)
    elif isinstance(node, dict):
        if isinstance(node.get("text"), str):
            yield node["text"]
        yield from _texts(node.get("content"))


def assert_unseen(s: LiveClaude, needle: str, seconds: float = UNSEEN_S) -> None:
    """The session's model has not seen `needle`, and does not within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert not saw(s, needle), f"{s.root.name}'s model saw {needle!r}"
        time.sleep(0.1)
    assert not saw(s, needle), f"{s.root.name}'s model saw {needle!r}"


def outcomes(s: LiveClaude, message_id: str) -> list[dict[str, Any]]:
    """The outcome records for `message_id` in the session's crosstalk agent's journal, oldest first."""
    path = StatePaths(Path(s.env["CROSSTALK_HOME"])).journal_file(s.agent().agent_id)
    return [r for r in read_journal(path).records if r.get("type") == "outcome" and r.get("message_id") == message_id]


def cli(s: LiveClaude, *args: str) -> subprocess.Popen[str]:
    """`crosstalk ARGS` from a shell of the session's user (its HOME, CROSSTALK_HOME and Claude config dir)."""
    env = {k: s.env[k] for k in ("PATH", "HOME", "CROSSTALK_HOME", "CLAUDE_CONFIG_DIR")}
    return subprocess.Popen([str(CROSSTALK), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str], timeout: float = WAIT_S) -> tuple[int, str, str]:
    """The command's exit code, stdout and stderr; killed (and the test failed) after `timeout` s."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=10)
        raise AssertionError(f"{proc.args} did not exit in {timeout:.0f} s\n{out}\n{err}") from None
    return proc.returncode, out, err


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    """The shell commands a test starts; any still running at its end are killed."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait(10)


# ---------------------------------------------------------------------------------------------------- a. the matrix
def expected(sender_mode: str, receiver: str) -> str:
    """What 2.1.332 does (docs/dev/claude-adapter.md): a crosstalk session's own shim writes every message into it
    and is let through; a message from outside the receiver's process tree (a native send) is held when the sender's
    mode class (bypass, or prompting: default and plan) differs from the receiver's."""
    kind, mode = receiver.split("-")
    if kind == "x":
        return "accepted"
    return "accepted" if (sender_mode == "bypass") == (mode == "bypass") else "held"


def test_the_permission_mode_matrix_every_answer_is_the_truth(team: Team):
    """Senders in bypass and default mode send to crosstalk and native receivers in bypass, default and plan mode;
    the state each sending model read is what happened: `accepted` only when the receiving model saw the message,
    `held` only when the receiving Claude held it for its user and its model did not see it."""
    receivers = [f"{kind}-{m}" for kind in ("x", "n") for m in RECEIVER_MODES]
    team("s-bypass", "s-default", *receivers)
    sessions = team.live
    tag = secrets.token_hex(4)
    sent: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    for sender_mode in SENDERS:
        for receiver in receivers:
            token = f"matrix {tag} {sender_mode} to {receiver}"  # nothing the envelope escapes
            sent[sender_mode, receiver] = token, send(sessions[f"s-{sender_mode}"], name_of(sessions[receiver]), token)
    # What happened in each receiver: seen by its model, or held (and not seen UNSEEN_S later).
    deadline, seen_by = time.monotonic() + UNSEEN_S, time.monotonic() + 30
    cells: dict[tuple[str, str], str] = {}
    problems: list[str] = []
    for (sender_mode, receiver), (token, result) in sent.items():
        r, state = sessions[receiver], result.get("state")
        cell = f"{sender_mode} → {receiver}: told {state}"
        if state == "accepted":
            try:
                r.wait_seen(token, timeout=max(0.1, seen_by - time.monotonic()))
                cells[sender_mode, receiver] = "accepted"
            except AssertionError:
                problems.append(f"{cell}, but the receiving model never saw it")
                cells[sender_mode, receiver] = "**accepted, never seen**"
        elif state == "held":
            time.sleep(max(0.0, deadline - time.monotonic()))
            hold = next((h for h in r.holds() if h.get("state") == "held" and token in json.dumps(h)), None)
            if saw(r, token):
                problems.append(f"{cell}, but the receiving model saw it")
                cells[sender_mode, receiver] = "**held, but seen**"
            elif hold is None:
                problems.append(f"{cell}, but the receiving Claude held no such message")
                cells[sender_mode, receiver] = "**held, no hold**"
            else:
                cells[sender_mode, receiver] = f"held ({hold.get('cause')})"
        else:
            problems.append(f"{cell} ({result.get('reason')}): neither accepted nor held")
            cells[sender_mode, receiver] = f"**{state}**"
        if state in ("accepted", "held") and state != expected(sender_mode, receiver):
            problems.append(f"{cell}, expected {expected(sender_mode, receiver)}")
    table = matrix_table(cells, receivers)
    print(f"\n{table}")
    if os.environ.get("CROSSTALK_MATRIX_OUT"):
        Path(os.environ["CROSSTALK_MATRIX_OUT"]).write_text(table)
    assert not problems, "\n".join(problems) + f"\n{table}"


def matrix_table(cells: dict[tuple[str, str], str], receivers: list[str]) -> str:
    what = {"x": "crosstalk", "n": "without crosstalk (native)"}
    head = "| receiver | " + " | ".join(f"sender: {m}" for m in SENDERS) + " |"
    rows = [head, "|---|" + "---|" * len(SENDERS)]
    for receiver in receivers:
        kind, mode = receiver.split("-")
        rows.append(f"| {mode}, {what[kind]} | " + " | ".join(cells.get((s, receiver), "—") for s in SENDERS) + " |")
    note = (
        "Claude Code 2.1.332; the state the sending model read (`send_message`), checked against the receiving "
        "model's requests and the receiving Claude's `peer_message_hold` events (the cause in parentheses)."
    )
    return "\n".join([note, "", *rows]) + "\n"


# ---------------------------------------------------------------------------------------------------- b. approved
def test_held_then_approved_the_sender_learns_it_was_delivered(team: Team, procs: list[subprocess.Popen[str]]):
    """A default-mode session sends to a native session running with bypass permissions: held. The receiving user
    (the host) lets it through: the receiving model sees it, and the sending model gets the notice that it was
    delivered. From a shell: `crosstalk send` says held (exit 5); with `--wait-held` it waits for the user's
    decision and exits 0 once the message is let through."""
    sender, receiver = team("s-default", "n-bypass")
    token = f"approve me {secrets.token_hex(6)}"
    result = send(sender, name_of(receiver), token)
    assert result["state"] == "held" and result["to"] == name_of(receiver), result
    mid = result["message_id"]
    hold = held_event(receiver, token)
    assert hold.get("cause") == "mode-mismatch", hold
    assert_unseen(receiver, token)
    n = len(sender.requests())
    assert decide(receiver, hold, "deliver") == "delivered"
    receiver.wait_seen(token)
    text = notice(sender, mid, after=n)
    assert text.startswith(f"crosstalk: your message {mid} to {name_of(receiver)}") and "was delivered" in text, text

    # From a shell, which asserts no permission mode: held (exit 5), the line naming the message.
    token = f"from a shell {secrets.token_hex(6)}"
    procs.append(cli(receiver, "send", name_of(receiver), token))
    code, out, err = finish(procs[-1])
    assert code == 5, (code, out, err)
    assert re.match(rf"held (\S+) → {re.escape(name_of(receiver))}: \S", out), out
    hold = held_event(receiver, token)
    assert hold.get("cause") == "no-mode-asserted", hold
    assert decide(receiver, hold, "drop") == "denied"  # nobody waits for its word: the user declines it
    # ... and with --wait-held, the user's decision is the exit code.
    token = f"from a shell, waiting {secrets.token_hex(6)}"
    procs.append(cli(receiver, "send", name_of(receiver), token, "--wait-held", "30"))
    hold = held_event(receiver, token)
    assert_unseen(receiver, token, 1.0)
    assert procs[-1].poll() is None, "crosstalk send --wait-held exited before the user decided"
    assert decide(receiver, hold, "deliver") == "delivered"
    code, out, err = finish(procs[-1])
    assert code == 0, (code, out, err)
    receiver.wait_seen(token)


# ---------------------------------------------------------------------------------------------------- c. expired
def test_held_then_expired_when_the_receiving_session_ends(team: Team, procs: list[subprocess.Popen[str]]):
    """The receiving session ends while it holds a message from a session and one from a shell: the sending model
    gets the notice `was not delivered (unreachable)`, and `crosstalk send --wait-held` exits 4."""
    sender, receiver = team("s-default", "n-expiring")
    token = f"expire me {secrets.token_hex(6)}"
    result = send(sender, name_of(receiver), token)
    assert result["state"] == "held", result
    mid = result["message_id"]
    held_event(receiver, token)
    shell_token = f"from a shell, expiring {secrets.token_hex(6)}"
    procs.append(cli(receiver, "send", name_of(receiver), shell_token, "--wait-held", "60"))
    held_event(receiver, shell_token)
    assert not saw(receiver, token) and not saw(receiver, shell_token)
    n = len(sender.requests())
    receiver.close()  # the session ends holding both
    text = notice(sender, mid, after=n)
    assert text.startswith(f"crosstalk: your message {mid} to {name_of(receiver)}"), text
    assert "was not delivered (unreachable)" in text, text
    code, out, err = finish(procs[-1])
    assert code == 4, (code, out, err)
    assert not saw(receiver, token) and not saw(receiver, shell_token)


# ---------------------------------------------------------------------------------------------------- d. settings
def test_the_receiving_users_settings_refuse_or_hold(team: Team):
    """`crossSessionInbound: "refuse"`: the sender is told rejected, naming the setting, and the receiving model
    never sees the message. `"hold"`: held even from the session's own shim; the user drops it: the sending model is
    told it was not delivered (rejected), and the receiving agent's journal shows held, then rejected, late."""
    sender, refusing, holding = team("s-bypass", "x-refuse", "x-hold")
    refused_token = f"refuse me {secrets.token_hex(6)}"
    refused = send(sender, name_of(refusing), refused_token)
    assert refused["state"] == "rejected" and "crossSessionInbound" in (refused.get("reason") or ""), refused

    token = f"hold me {secrets.token_hex(6)}"
    result = send(sender, name_of(holding), token)
    assert result["state"] == "held", result
    mid = result["message_id"]
    hold = held_event(holding, token)
    assert hold.get("cause") == "explicit-setting" and mid in json.dumps(hold["preview"]), hold
    assert_unseen(holding, token)
    assert not saw(refusing, refused_token)
    n = len(sender.requests())
    assert decide(holding, hold, "drop") == "denied"
    text = notice(sender, mid, after=n)
    assert text.startswith(f"crosstalk: your message {mid} to {name_of(holding)}"), text
    assert "was not delivered (rejected)" in text, text
    _wait(
        lambda: [r["state"] for r in outcomes(holding, mid)][-1:] == ["rejected"], lambda: str(outcomes(holding, mid))
    )
    records = outcomes(holding, mid)
    states = [r["state"] for r in records]
    assert states[0] == "held" and states[-1] == "rejected", records
    assert (records[-1].get("evidence") or {}).get("late") is True, records
    assert not saw(holding, token) and not saw(refusing, refused_token)


# ---------------------------------------------------------------------------------------------------- e. a crash
def test_a_held_send_survives_a_crash_of_the_sending_shim(team: Team):
    """A's message to B (which holds everything) is held; A's shim is killed (-9); B's user drops the message while
    A has no shim. At A's next crosstalk call Claude starts a new shim, which finds the held send in A's journal and
    learns B's final word: A's model gets the notice that the message was not delivered (rejected)."""
    a, b = team("crasher", "x-hold")
    token = f"held across a crash {secrets.token_hex(6)}"
    result = send(a, name_of(b), token)
    assert result["state"] == "held", result
    mid = result["message_id"]
    hold = held_event(b, token)
    [shim] = a.shim_pids()
    assert shim == a.agent().pid
    os.kill(shim, signal.SIGKILL)
    _wait(lambda: not pid_alive(shim), lambda: f"shim {shim} still running after SIGKILL", 30)
    assert decide(b, hold, "drop") == "denied"
    _wait(lambda: [r["state"] for r in outcomes(b, mid)][-1:] == ["rejected"], lambda: str(outcomes(b, mid)))
    n = len(a.requests())
    a.say("CALL mcp__crosstalk__list_agents {}")
    # A call that reaches the dead shim before Claude noticed its exit answers "Connection closed" and starts
    # nothing; the call after it starts the new shim (docs/dev/claude-adapter.md, "A shim that dies").
    if a.wait_tool_text("list_agents", after=n).startswith("Connection closed"):
        a.say("CALL mcp__crosstalk__list_agents {}")
    tag, text = _notice(a, mid, after=n)
    assert text.startswith(f"crosstalk: your message {mid} to {name_of(b)}"), text
    assert "was not delivered (rejected)" in text, text
    # Written by A's own shim (the envelope is from A's own socket), and the old one is dead: the new one wrote it.
    own = StatePaths(Path(a.env["CROSSTALK_HOME"])).uds_path(a.agent().agent_id)
    assert f'from="uds:{own}"' in tag, tag
    assert a.shim_pids() and shim not in a.shim_pids() and a.agent().pid != shim
    assert not saw(b, token)
