"""`crosstalk channel ...` and `crosstalk message send|replies` on two simulated machines sharing a bare remote."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from crosstalk.bus.protocol.message import BusMessage, parse_message, render_message, utc_timestamp
from crosstalk.bus.transport.state import PUSHED_BYTE
from tests.support.bus_machines import TwoMachines, remote_git

UNCLAIMED_SONNET = "crosstalk: warning: no known machine claims 'sonnet'"


def _remote_log(remote: Path) -> list[str]:
    return remote_git(remote, "log", "--format=%s", "main").splitlines()


def _remote_files(remote: Path) -> set[str]:
    return set(remote_git(remote, "ls-tree", "-r", "--name-only", "main").split())


# ---------------------------------------------------------------------------------------------- channels


def test_channel_create_list_rename_delete(two_machines: TwoMachines) -> None:
    a, uuid = two_machines.a, two_machines.channel
    assert (a.root / "data" / "channels" / uuid / "CHANNEL.md").read_text() == "---\nname: general\n---\n"
    res = a.cli("channel", "create", "sub", "--parent", "general", "--json")
    assert res.returncode == 0, res.stderr
    sub = json.loads(res.stdout)
    assert sub["parent"] == uuid
    listing = json.loads(a.cli("channel", "list", "--json").stdout)
    assert [(c["name"], c["parent"]) for c in listing] == [("general", None), ("sub", uuid)]
    assert "(parent: general)" in a.cli("channel", "list").stdout

    res = a.cli("channel", "rename", uuid, "main-room")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"{uuid}  main-room"
    res = a.cli("channel", "rename", "main-room", "sub")
    assert res.returncode == 2 and "already exists" in res.stderr

    res = a.cli("channel", "delete", "sub")  # stdin is not a terminal and no --yes
    assert res.returncode == 2
    assert (
        res.stderr == "crosstalk: refusing to delete channel 'sub' without confirmation: stdin is not a "
        "terminal; pass --yes sub\n"
    )
    res = a.cli("channel", "delete", "sub", "--yes", "Sub")
    assert res.returncode == 2 and "does not match" in res.stderr
    res = a.cli("channel", "delete", "sub", "--yes", "sub")
    assert res.returncode == 0, res.stderr
    assert not (a.root / "data" / "channels" / sub["uuid"]).exists()
    assert _remote_log(two_machines.remote)[:4] == [
        "crosstalk: delete channel sub",
        "crosstalk: rename channel general to main-room",
        "crosstalk: create channel sub",
        "crosstalk: create channel general",
    ]
    assert f"data/channels/{sub['uuid']}/CHANNEL.md" not in _remote_files(two_machines.remote)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("a/b", "must not contain '/'"),
        ("x" * 65, "the limit is 64"),
        ("0b8e3a52-8d6e-4c7e-9a51-0f3b2f8f3d10", "looks like a UUID"),
        ("general", "already exists"),
    ],
)
def test_channel_name_rules(two_machines: TwoMachines, name: str, why: str) -> None:
    res = two_machines.a.cli("channel", "create", name)
    assert res.returncode == 2
    assert why in res.stderr and res.stderr.count("\n") == 1


def test_channel_names_are_case_sensitive(two_machines: TwoMachines) -> None:
    a = two_machines.a
    res = a.cli("channel", "create", "General")
    assert res.returncode == 0, res.stderr
    listing = json.loads(a.cli("channel", "list", "--json").stdout)
    by_name = {c["name"]: c["uuid"] for c in listing}
    assert by_name == {"general": two_machines.channel, "General": res.stdout.strip()}


def _run_on_tty(machine_env: dict[str, str], cwd: Path, args: list[str], typed: str) -> tuple[int, str]:
    """Run the CLI with a pseudo-terminal as stdin, type a line into it; (exit code, stderr)."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "crosstalk", *args],
            stdin=follower,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=machine_env,
            cwd=cwd,
            text=True,
        )
        os.close(follower)
        follower = -1
        os.write(leader, typed.encode() + b"\n")
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
            raise
        return proc.returncode, err
    finally:
        os.close(leader)
        if follower != -1:
            os.close(follower)


def test_channel_delete_asks_for_the_typed_name_on_a_tty(two_machines: TwoMachines) -> None:
    a = two_machines.a
    assert a.cli("channel", "create", "doomed").returncode == 0
    code, err = _run_on_tty(a.env, a.root, ["channel", "delete", "doomed"], "nope")
    assert code == 2 and "did not match" in err
    assert "doomed" in a.cli("channel", "list").stdout
    code, err = _run_on_tty(a.env, a.root, ["channel", "delete", "doomed"], "doomed")
    assert code == 0, err
    assert "Type its name to confirm" in err
    assert "doomed" not in a.cli("channel", "list").stdout


# ---------------------------------------------------------------------------------------------- message send


def _read(root: Path, rel: str) -> BusMessage:
    return parse_message((root / rel).read_text(), where=rel)


def test_send_prints_the_relpath_commits_and_pushes(two_machines: TwoMachines) -> None:
    a, uuid = two_machines.a, two_machines.channel
    res = a.cli("message", "send", "--to", "anthropic/sonnet@m2", "hello\n\n")
    assert res.returncode == 0, res.stderr
    rel = res.stdout.strip()
    assert rel.startswith(f"data/channels/{uuid}/") and rel.endswith(".md")
    msg = _read(a.root, rel)
    assert (msg.sender, msg.to, msg.body, msg.re, msg.fanout) == ("op-m1", "anthropic/sonnet@m2", "hello", (), None)
    assert rel in _remote_files(two_machines.remote)


def test_send_body_sources_and_sender(two_machines: TwoMachines) -> None:
    a = two_machines.a
    body_file = a.base / "task.md"
    body_file.write_text("from a file\n")
    rel = a.cli("message", "send", "--to", "sonnet", str(body_file)).stdout.strip()
    assert _read(a.root, rel).body == "from a file"
    rel = a.cli("message", "send", "--to", "sonnet", "-", input="from stdin\n").stdout.strip()
    assert _read(a.root, rel).body == "from stdin"
    rel = a.cli("message", "send", "--to", "sonnet", "--from", "alice", "x").stdout.strip()
    assert _read(a.root, rel).sender == "alice"
    rel = a.cli("message", "send", "--to", "sonnet", "x", env={"CROSSTALK_FROM": "pi/pi@m1"}).stdout.strip()
    assert _read(a.root, rel).sender == "pi/pi@m1"


@pytest.mark.parametrize(
    ("args", "stdin", "code", "why"),
    [
        (["hello"], None, 2, "needs --to"),
        (["--to", "a b", "x"], None, 2, "whitespace"),
        (["--to", "a@b@c", "x"], None, 2, "more than one '@'"),
        (["--to", "sonnet", "-"], "  \n", 2, "empty"),
        (["--to", "sonnet", "--as", "ghost", "x"], None, 2, "no actor 'ghost'"),
        (["--to", "sonnet", "--channel", "nope", "x"], None, 2, "no channel 'nope'"),
        (["--to", "sonnet", "--fanout", "65", "x"], None, 2, "not between 1 and 64"),
        (["--to", "sonnet", "--re", "x", "y"], None, 2, "unrecognized arguments"),
    ],
)
def test_send_errors(two_machines: TwoMachines, args: list[str], stdin: str | None, code: int, why: str) -> None:
    res = two_machines.a.cli("message", "send", *args, input=stdin)
    assert res.returncode == code, res.stderr
    assert why in res.stderr and res.stderr.count("\n") == 1


def test_send_body_limit(two_machines: TwoMachines) -> None:
    res = two_machines.a.cli("message", "send", "--to", "sonnet", "-", input="x" * ((1 << 20) + 1))
    assert res.returncode == 2 and "1024 KiB" in res.stderr


def test_the_default_channel_is_never_one_crosstalk_made(two_machines: TwoMachines) -> None:
    """A chat's channel, the bridge's live-<alias>, and a sub-channel (a workflow's) do not count: with `general`
    beside them, `message send` without --channel still goes to general."""
    a = two_machines.a
    general = json.loads(a.cli("channel", "list", "--json").stdout)[0]["uuid"]
    for args in (["chat-sonnet"], ["live-a"], ["wf-1", "--parent", "general"]):
        assert a.cli("channel", "create", *args).returncode == 0
    res = a.cli("message", "send", "--to", "sonnet", "x")
    assert res.returncode == 0 and f"/{general}/" in res.stdout, res.stderr


def test_send_channel_choice(two_machines: TwoMachines) -> None:
    a = two_machines.a
    other = a.cli("channel", "create", "other").stdout.strip()
    res = a.cli("message", "send", "--to", "sonnet", "x")
    assert res.returncode == 2
    assert "2 channels (general, other): pick one with --channel" in res.stderr
    assert f"/{other}/" in a.cli("message", "send", "--to", "sonnet", "--channel", "other", "x").stdout
    assert f"/{other}/" in a.cli("message", "send", "--to", "sonnet", "--channel", other, "x").stdout
    out = a.cli("message", "send", "--to", "sonnet", "x", env={"CROSSTALK_CHANNEL": other}).stdout
    assert f"/{other}/" in out


def test_send_as_persona_and_fanout_in_one_commit(two_machines: TwoMachines) -> None:
    a = two_machines.a
    (a.root / "local" / "actors" / "critic.md").write_text("You are a harsh critic.\n")
    before = len(_remote_log(two_machines.remote))
    res = a.cli("message", "send", "--to", "sonnet", "--as", "critic", "--fanout", "3", "review it")
    assert res.returncode == 0, res.stderr
    rels = res.stdout.split()
    assert len(rels) == 3 and len(set(rels)) == 3
    msgs = [_read(a.root, rel) for rel in rels]
    assert [m.fanout for m in msgs] == ["1/3", "2/3", "3/3"]
    assert {m.as_ for m in msgs} == {"critic"}
    assert len(_remote_log(two_machines.remote)) == before + 1


def test_re_comes_only_from_the_runtime_env(two_machines: TwoMachines) -> None:
    a, uuid = two_machines.a, two_machines.channel
    # A dispatched turn of anthropic/sonnet, woken by a task from codex@m2.
    first = a.cli("message", "send", "--to", "sonnet", "--from", "codex@m2", "task").stdout.strip()
    inner = first.split(f"{uuid}/", 1)[1]
    env = {"CROSSTALK_RE": f"{inner}", "CROSSTALK_CHANNEL": uuid, "CROSSTALK_FROM": "anthropic/sonnet@m1"}
    rel = a.cli("message", "send", "--to", "codex", "sub-question", env=env).stdout.strip()
    assert _read(a.root, rel).re == (inner,)  # to the sender of the triggering message: linked
    rel = a.cli("message", "send", "--to", "gemini", "a third opinion", env=env).stdout.strip()
    assert _read(a.root, rel).re == ()  # to anyone else: new work (a re: to codex's message would never wake it)
    rel = a.cli("message", "send", "--to", "codex", "--new", "unrelated", env=env).stdout.strip()
    assert _read(a.root, rel).re == ()
    other = a.cli("channel", "create", "other").stdout.strip()
    rel = a.cli("message", "send", "--to", "codex", "--channel", other, "elsewhere", env=env).stdout.strip()
    assert _read(a.root, rel).re == ()  # re: paths are channel-relative; they mean nothing in another channel


def test_send_push_failure_warns_and_still_exits_0(two_machines: TwoMachines) -> None:
    a, remote = two_machines.a, two_machines.remote
    moved = remote.with_name("gone.git")
    remote.rename(moved)
    try:
        res = a.cli("message", "send", "--to", "sonnet", "offline")
        assert res.returncode == 0
        # One warning that no known machine claims sonnet (claude is not on this PATH), one for the push.
        unclaimed, push = res.stderr.splitlines()
        assert unclaimed.startswith("crosstalk: warning: no known machine claims 'sonnet'")
        assert push.startswith("crosstalk: warning: the message is committed locally but the push failed")
        rel = res.stdout.strip()
        assert a.git("log", "-1", "--format=%s").startswith("crosstalk: message from op-m1")
    finally:
        moved.rename(remote)
    assert rel not in _remote_files(remote)
    assert a.cli("message", "send", "--to", "sonnet", "online").returncode == 0
    assert rel in _remote_files(remote)  # the next push carries the stranded commit


# ---------------------------------------------------------------------------------------------- replies


def _write_reply(machine_root: Path, uuid: str, target_inner: str, *, failed: bool, sender: str) -> None:
    """A reply as a dispatcher would commit it, written through the store so the commit is real."""
    from crosstalk.bus.protocol.message import new_message_name
    from crosstalk.bus.transport.store import publish
    from crosstalk.bus.transport.transports import Transport

    msg = BusMessage(
        sender=sender,
        to="op-m1",
        timestamp=utc_timestamp(),
        re=(target_inner,),
        failed=failed,
        error="exit 3: boom" if failed else None,
        body="the answer",
    )
    transport = Transport("bus", machine_root, "m2")
    publish(transport, {f"data/channels/{uuid}/{new_message_name()}": render_message(msg)}, "reply")


def test_replies_pending_replied_failed_and_bad_paths(two_machines: TwoMachines) -> None:
    a, b, uuid = two_machines.a, two_machines.b, two_machines.channel
    q1 = a.cli("message", "send", "--to", "sonnet@m2", "q1").stdout.strip()
    q2 = a.cli("message", "send", "--to", "sonnet@m2", "q2").stdout.strip()
    res = a.cli("message", "replies", q1, q2)
    assert res.returncode == 1  # PENDING: not known yet
    assert res.stdout == f"{q1} PENDING\n{q2} PENDING\n"

    b.git("pull", "-q")
    _write_reply(b.root, uuid, q1.split(f"{uuid}/")[1], failed=False, sender="anthropic/sonnet@m2")
    _write_reply(b.root, uuid, q2.split(f"{uuid}/")[1], failed=True, sender="anthropic/sonnet@m2")

    assert a.cli("message", "replies", q1).returncode == 1  # not pulled yet: PENDING
    res = a.cli("message", "replies", "--pull", q1, str(a.root / q2), "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert [(d["path"], d["state"]) for d in data] == [(q1, "REPLIED"), (q2, "FAILED")]
    assert data[1]["replies"][0]["failed"] is True and data[1]["replies"][0]["error"] == "exit 3: boom"
    assert data[0]["replies"][0]["from"] == "anthropic/sonnet@m2"
    assert a.cli("message", "replies", q1, q2).stdout == f"{q1} REPLIED\n{q2} FAILED\n"

    res = a.cli("message", "replies", q1, "data/channels/nope/2026/01/01/000000000Z-0123456789abcdef.md")
    assert res.returncode == 1 and "no message data/channels/nope" in res.stderr
    res = a.cli("message", "replies", "/etc/passwd")
    assert res.returncode == 1 and "is not inside transport bus" in res.stderr
    res = a.cli("message", "replies", "CROSSTALK.md")
    assert res.returncode == 1 and "is not a message path" in res.stderr


# ---------------------------------------------------------------------------------------------- races


def test_two_machines_racing_on_push_lose_nothing(two_machines: TwoMachines) -> None:
    a, b = two_machines.a, two_machines.b
    sent: dict[str, list[str]] = {"m1": [], "m2": []}
    errors: list[str] = []

    def sender(machine: object, key: str) -> None:
        for i in range(8):
            res = machine.cli("message", "send", "--to", "sonnet", f"{key} #{i}")  # type: ignore[attr-defined]
            # Only the warning that nobody claims sonnet here (claude is not on this PATH); never a push warning.
            others = [x for x in res.stderr.splitlines() if not x.startswith(UNCLAIMED_SONNET)]
            if res.returncode != 0 or others:
                errors.append(f"{key}: {res.returncode} {res.stderr}")
            sent[key].extend(res.stdout.split())

    threads = [threading.Thread(target=sender, args=(m, m.alias)) for m in (a, b) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    everything = sent["m1"] + sent["m2"]
    assert len(everything) == 32 and len(set(everything)) == 32
    assert set(everything) <= _remote_files(two_machines.remote)
    for m in (a, b):
        m.git("pull", "-q", "--rebase")
        assert all((m.root / rel).is_file() for rel in everything)


def test_send_wakes_the_local_dispatcher(two_machines: TwoMachines) -> None:
    import socket

    a = two_machines.a
    state = a.state_dir
    state.mkdir(parents=True, exist_ok=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(state / "wake.sock"))  # stands in for the daemon's wake socket
        sock.settimeout(30)
        assert a.cli("message", "send", "--to", "sonnet", "wake up").returncode == 0
        pokes = [sock.recv(16)]
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            while True:
                pokes.append(sock.recv(16))
        # the send pushed, so its poke says so: the dispatcher tells the other machines (the relay's wake)
        assert PUSHED_BYTE in pokes, pokes


def test_a_send_commits_only_its_own_files_never_what_a_person_staged(two_machines: TwoMachines) -> None:
    a = two_machines.a
    (a.root / "data" / "crosstalk.yaml").write_text("providers: {}\n# half-finished edit\n")
    a.git("add", "data/crosstalk.yaml")
    rel = a.cli("message", "send", "--to", "sonnet", "hello").stdout.strip()
    changed = a.git("show", "--name-only", "--format=", "HEAD").split()
    assert changed == [rel]
    assert "data/crosstalk.yaml" in a.git("diff", "--cached", "--name-only")  # still staged, still the person's
    res = a.cli("channel", "delete", "general", "--yes", "general")
    assert res.returncode == 0, res.stderr
    assert "data/crosstalk.yaml" not in a.git("show", "--name-only", "--format=", "HEAD")
    assert "data/crosstalk.yaml" in a.git("diff", "--cached", "--name-only")
