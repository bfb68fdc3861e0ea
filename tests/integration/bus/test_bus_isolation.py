"""One hostile file or one broken workflow settles as failed, with its reason, and never stops the transport: the good
messages beside it are answered in the same tick, the cursor moves on, and nothing is run twice.

Hostile inputs: front matter nesting ~1000 levels (the most libyaml builds; Python's repr of it overflows the
stack), a symlinked message, a message over the read cap, a workflow's PLAN.json or compile answer nesting
thousands of levels, and a model answer (4 MiB) over what a reply may hold."""

from __future__ import annotations

import os
from pathlib import Path

from crosstalk.bus.protocol.message import MAX_BODY_BYTES
from crosstalk.bus.protocol.safefs import MESSAGE_LIMIT
from crosstalk.bus.transport.state import read_cursor, transport_state
from tests.support.bus_dispatch import (
    GIT_ID,
    channel_messages,
    commit_files,
    dispatch_once,
    in_process_dispatcher,
    log_text,
    replies_to,
    runs,
    send,
    set_registry,
    single_machine,
    write_model,
)
from tests.support.bus_machines import Machine

DAY = "2026/11/29"
DEEP_YAML = 999  # libyaml builds at most 1000 levels; repr() of 999 nested lists overflows Python's stack
DEEP_JSON = 5000


def message(sender: str = "alice", to: str = "local/echo", body: str = "hello", extra: str = "") -> str:
    return f"---\nfrom: {sender}\nto: {to}\ntimestamp: 2026-11-29T23:51:20.913Z\n{extra}---\n\n{body}\n"


def deep_field(name: str) -> str:
    return f"{name}: {'[' * DEEP_YAML}{']' * DEEP_YAML}\n"


def rel(path: str) -> str:
    return path.split("/", 3)[3]


def at(channel: str, name: str) -> str:
    return f"data/channels/{channel}/{DAY}/{name}"


def models_machine(make_machine, **bodies: str) -> tuple[Machine, str, dict[str, Path]]:
    m, channel = single_machine(make_machine)
    folder = m.base / "models"
    folder.mkdir()
    paths = {name: write_model(folder, name, *([body] if body else [])) for name, body in bodies.items()}
    set_registry(m, {"local": {name: str(path) for name, path in paths.items()}})
    return m, channel, paths


def answered_ok(m: Machine, channel: str, path: str) -> bool:
    return any(not r.failed for r in replies_to(m.root, channel, path))


def test_hostile_messages_beside_good_ones_are_settled_and_the_good_ones_answered_in_the_same_tick(
    make_machine, monkeypatch
) -> None:
    m, channel, models = models_machine(make_machine, echo="")
    dispatcher = in_process_dispatcher(m, monkeypatch)
    dispatcher.tick()  # settle the cursor past the setup commits
    # A file posing as echo's earlier answer, whose front matter nests 999 levels: read again as a thread link.
    # In the thread a follow-up continues: echo's earlier answer, and a file posing as another one whose front
    # matter nests 999 levels (the thread is read again when the follow-up runs).
    earlier = at(channel, "235120913Z-00000000000000a0.md")
    hostile_reply = at(channel, "235120914Z-00000000000000a1.md")
    commit_files(
        m,
        {
            earlier: message("local/echo@m1", "alice", "earlier answer"),
            hostile_reply: message("local/echo@m1", "alice", "earlier", deep_field("failed")),
        },
    )
    dispatcher.tick()
    good_followup = at(channel, "235121000Z-00000000000000b1.md")
    good_new = at(channel, "235121001Z-00000000000000b2.md")
    deep = at(channel, "235121002Z-00000000000000c1.md")
    big = at(channel, "235121003Z-00000000000000c2.md")
    linked = at(channel, "235121004Z-00000000000000c3.md")
    outside = m.base / "outside.md"
    outside.write_text(message())
    os.makedirs(m.root / Path(linked).parent, exist_ok=True)
    os.symlink(outside, m.root / linked)
    commit_files(
        m,
        {
            good_followup: message(body="go on", extra=f"re: [{rel(earlier)}, {rel(hostile_reply)}]\n"),
            good_new: message(body="a new task"),
            deep: message(extra=deep_field("failed")),
            big: message(body="x" * (MESSAGE_LIMIT + 1)),
        },
        push=False,
    )
    m.git("add", "--", linked)
    m.git(*GIT_ID, "commit", "-q", "-m", "test: a symlinked message")
    report = dispatcher.tick()
    assert answered_ok(m, channel, good_followup) and answered_ok(m, channel, good_new)
    [run] = runs(models["echo"])  # both good ones in one batch, in this tick
    assert "earlier answer" in str(run["prompt"])  # the readable part of the thread
    [reply] = replies_to(m.root, channel, deep)
    assert reply.failed and "deeper than" in (reply.error or ""), reply
    log = log_text(m)
    for unreadable in (big, linked):  # no sender can be read from them: one logged error each, naming the file
        assert f"path={unreadable}" in log or unreadable in log, unreadable
    assert report.parse_errors == 3 and report.incomplete == 0
    assert read_cursor(transport_state("bus", os.environ)) == report.head


def test_an_answer_over_what_a_reply_may_hold_is_a_failed_reply_not_pending(make_machine, bare_remote) -> None:
    m = make_machine("m1")
    res = m.cli("transport", "init", "bus", "--dir", str(m.base / "bus"), "--remote", str(bare_remote))
    assert res.returncode == 0, res.stderr
    m.root = Path(res.stdout.strip())
    assert m.cli("channel", "create", "general").returncode == 0
    folder = m.base / "models"
    folder.mkdir()
    big = write_model(folder, "big", "sys.stdout.write('y' * (4 << 20))")
    echo = write_model(folder, "echo")
    set_registry(m, {"local": {"big": str(big), "echo": str(echo)}})
    [asked] = send(m, "local/big", "write me a novel")
    [other] = send(m, "local/echo", "hello")
    dispatch_once(m, timeout=120)
    res = m.cli("message", "replies", asked, other, "--pull", "--json")
    assert res.returncode == 0, res.stdout + res.stderr  # 2 would mean something stayed PENDING
    import json

    states = {row["path"]: row for row in json.loads(res.stdout)}
    assert states[other]["state"] == "REPLIED"
    assert states[asked]["state"] == "FAILED", states[asked]
    [reply] = states[asked]["replies"]
    assert f"over the {MAX_BODY_BYTES}-byte limit" in reply["error"]
    text = (m.root / reply["path"]).read_bytes()
    assert len(text) <= MESSAGE_LIMIT and text.count(b"y") >= MAX_BODY_BYTES // 2  # the head of the answer is kept
    assert len(runs(big)) == 1


# ------------------------------------------------------------------------------------------------ workflows


def _workflow(m: Machine, prose: str = "Fan out 2 drafts using local/echo; have local/echo pick one.") -> str:
    doc = m.base / "wf.md"
    doc.write_text(f"---\ntype: workflow\n---\n\n{prose}\n")
    res = m.cli("workflow", "run", str(doc), "--channel", "general")
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def _result(m: Machine, marker: str):
    channel = marker.split("/")[2]
    return [r for r in replies_to(m.root, channel, marker) if r.workflow_step == "result"]


def _status(m: Machine) -> str:
    res = m.cli("workflow", "status")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    return res.stdout


def test_a_compile_answer_nesting_thousands_of_levels_fails_that_workflow_once(make_machine, monkeypatch) -> None:
    deep = "{" + '"fanout": ' + "[" * DEEP_JSON + "]" * DEEP_JSON + "}"
    m, channel, models = models_machine(make_machine, compile=f"print({deep!r})", echo="")
    dispatcher = in_process_dispatcher(m, monkeypatch)
    dispatcher.tick()
    marker = _workflow(m)
    [good] = send(m, "local/echo", "hello")
    dispatcher.tick()
    dispatcher.tick()  # a failed workflow is not compiled again
    assert answered_ok(m, channel, good)
    [result] = _result(m, marker)
    assert result.failed and "deeper than" in (result.error or ""), result
    assert len(runs(models["compile"])) == 1
    out = _status(m)
    assert "failed" in out and "deeper than" in out


def test_a_plan_json_nesting_thousands_of_levels_fails_that_workflow_not_the_transport(
    make_machine, monkeypatch
) -> None:
    m, channel, models = models_machine(make_machine, compile="", echo="")
    dispatcher = in_process_dispatcher(m, monkeypatch)
    dispatcher.tick()
    marker = _workflow(m)
    child = channel_messages(m.root, channel)[marker.split("/", 3)[3]].child_channel
    commit_files(m, {f"data/channels/{child}/PLAN.json": "[" * DEEP_JSON + "]" * DEEP_JSON})
    [good] = send(m, "local/echo", "hello")
    report = dispatcher.tick()
    dispatcher.tick()
    assert answered_ok(m, channel, good) and report.incomplete == 0
    [result] = _result(m, marker)
    assert result.failed and "PLAN.json" in (result.error or ""), result
    assert runs(models["compile"]) == []
    lines = [line for line in _status(m).splitlines() if line.strip()]
    assert any("failed" in line and "PLAN.json" in line for line in lines), lines


def test_a_send_from_a_dispatched_turn_never_reads_its_re_targets_through_a_symlink(make_machine) -> None:
    m, channel = single_machine(make_machine)
    outside = m.base / "outside.md"
    outside.write_text(message("local/echo@m1", "alice", "planted"))
    name = f"{DAY}/235120913Z-00000000000000d0.md"
    link = m.root / "data" / "channels" / channel / name
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(outside, link)
    env = {"CROSSTALK_RE": name, "CROSSTALK_CHANNEL": channel}
    [sent] = send(m, "local/echo", "a new task", env=env)
    assert channel_messages(m.root, channel)[rel(sent)].re == ()
