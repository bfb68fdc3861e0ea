"""Two machines (separate CROSSTALK_HOME and CROSSTALK_ALIAS, clones of one bare remote), each running its own
dispatcher: addressed work crosses machines, and 500 messages survive both dispatchers racing on pushes."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from crosstalk.bus.protocol.message import parse_message
from tests.support.bus_dispatch import (
    Daemon,
    heartbeat,
    log_text,
    remote_files,
    runs,
    send,
    set_registry,
    wait_for,
    wait_replied,
    write_model,
)
from tests.support.bus_machines import Machine, TwoMachines

SENDER = """
import sys
from pathlib import Path
from crosstalk.bus.protocol.message import BusMessage, new_message_name, render_message, utc_timestamp
from crosstalk.bus.transport.store import publish
from crosstalk.bus.transport.transports import resolve_transport

root, sender, count, burst = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
channels = sys.argv[5].split(",")
transport = resolve_transport(Path(root))
sent = 0
while sent < count:
    files = {}
    for _ in range(min(burst, count - sent)):
        to = "m@m1" if sent % 2 == 0 else "m@m2"
        channel = channels[sent % len(channels)]
        asker = f"{sender}-{sent % 5}"  # several askers: one reply each per batch, so more reply commits race
        msg = BusMessage(sender=asker, to=to, timestamp=utc_timestamp(), body=f"task {sent} from {asker}")
        files[f"data/channels/{channel}/{new_message_name()}"] = render_message(msg)
        sent += 1
    publish(transport, files, f"test: burst from {sender}")
    for path in files:
        print(path, flush=True)
"""


def _join(two: TwoMachines, providers: dict[str, dict[str, str]]) -> None:
    set_registry(two.a, providers)
    two.b.git("pull", "-q")


def test_a_task_for_the_other_machine_is_answered_there(two_machines: TwoMachines) -> None:
    a, b = two_machines.a, two_machines.b
    models = a.base / "models"
    models.mkdir()
    echo = write_model(models, "echo")
    _join(two_machines, {"local": {"echo": str(echo)}})
    with Daemon(a, "--interval", "0.5") as da, Daemon(b, "--interval", "0.5") as db:
        da.wait_ready()
        db.wait_ready()
        [path] = send(a, "echo@m2", "hello from m1", sender="op-m1")
        [status] = wait_replied(a, [path], 60, db)
        assert status["state"] == "REPLIED", status
        [run] = runs(echo)
        assert run["env"]["CROSSTALK_ALIAS"] == "m2"  # B ran it; A left it alone
        [reply_status] = status["replies"]
        reply = parse_message((a.root / reply_status["path"]).read_text())
        assert reply.sender == "local/echo@m2" and reply.to == "op-m1" and reply.body == "answer from local/echo@m2"

        # A bare name reaches whichever dispatcher grabs it first; at-least-once allows a second answer at most.
        [bare] = send(b, "echo", "anyone?", sender="op-m2")
        wait_replied(b, [bare], 60)
        time.sleep(1.0)  # let a late duplicate, if any, land before counting
        answers = [r for r in runs(echo) if "anyone?" in str(r["prompt"])]
        assert 1 <= len(answers) <= 2
        assert da.stop() == 0 and db.stop() == 0


def _remote_state(remote: Path) -> tuple[dict[str, object], dict[str, list[tuple[str, object]]]]:
    """(path -> message, target path -> [(reply path, reply)]) on the remote."""
    messages = {path: parse_message(text, where=path) for path, text in remote_files(remote).items()}
    replies: dict[str, list[tuple[str, object]]] = {}
    for path, msg in messages.items():
        channel_dir = path.rsplit("/", 4)[0]
        for target in msg.re:
            replies.setdefault(f"{channel_dir}/{target}", []).append((path, msg))
    return messages, replies


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_500_messages_with_both_dispatchers_racing(two_machines: TwoMachines) -> None:
    a, b, remote = two_machines.a, two_machines.b, two_machines.remote
    model = a.base / "m.sh"
    model.write_text("#!/bin/sh\necho done\n")
    model.chmod(0o755)
    channels = [two_machines.channel]
    for name in ("c1", "c2", "c3"):
        res = a.cli("channel", "create", name)
        assert res.returncode == 0, res.stderr
        channels.append(res.stdout.strip())
    _join(two_machines, {"p": {"m": str(model)}})

    sent: dict[str, list[str]] = {"m1": [], "m2": []}
    errors: list[str] = []

    def burst_sender(machine: Machine, count: int) -> None:
        script = machine.base / "sender.py"
        script.write_text(SENDER)
        proc = subprocess.run(
            [
                sys.executable,
                str(script),
                str(machine.root),
                f"op-{machine.alias}",
                str(count),
                "7",
                ",".join(channels),
            ],
            env=machine.env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        if proc.returncode != 0:
            errors.append(proc.stderr)
        sent[machine.alias].extend(proc.stdout.split())

    def cli_sender(machine: Machine, count: int) -> None:
        for i in range(count):
            to = "m@m1" if i % 2 == 0 else "m@m2"
            res = machine.cli("message", "send", "--to", to, "--channel", channels[i % 4], f"cli task {i}")
            if res.returncode != 0:
                errors.append(res.stderr)
            sent[machine.alias].extend(res.stdout.split())

    started = time.monotonic()
    with Daemon(a, "--interval", "0.3") as da, Daemon(b, "--interval", "0.3") as db:
        da.wait_ready()
        db.wait_ready()
        threads = [
            threading.Thread(target=burst_sender, args=(a, 245)),
            threading.Thread(target=burst_sender, args=(b, 245)),
            threading.Thread(target=cli_sender, args=(a, 5)),
            threading.Thread(target=cli_sender, args=(b, 5)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        sent_at = time.monotonic()
        assert not errors, errors
        targets = set(sent["m1"]) | set(sent["m2"])
        assert len(targets) == 500

        def all_answered() -> bool:
            _, replies = _remote_state(remote)
            return all(t in replies for t in targets)

        wait_for(all_answered, 300, "a reply to every message", poll=1.0)
        answered_at = time.monotonic()
        remote_head = lambda: subprocess.run(  # noqa: E731
            ["git", "--git-dir", str(remote), "rev-parse", "main"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
        wait_for(
            lambda: a.git("rev-parse", "HEAD").strip() == b.git("rev-parse", "HEAD").strip() == remote_head(),
            60,
            "both clones to converge on the remote's HEAD",
            poll=0.5,
        )
        assert da.stop() == 0 and db.stop() == 0
    beats = {"m1": heartbeat(a), "m2": heartbeat(b)}

    messages, replies = _remote_state(remote)
    per_target = Counter({t: len(replies.get(t, [])) for t in targets})
    duplicates = {t: n for t, n in per_target.items() if n != 1}
    assert not duplicates, f"{len(duplicates)} messages did not get exactly one reply: {list(duplicates.items())[:5]}"
    for target in targets:
        [(_, reply)] = replies[target]
        machine = messages[target].to.split("@")[1]
        assert reply.sender == f"p/m@{machine}" and reply.body == "done" and not reply.failed
        assert reply.to == messages[target].sender
    for path, msg in messages.items():
        channel_dir = path.rsplit("/", 4)[0]
        for target in msg.re:
            assert f"{channel_dir}/{target}" in messages, f"{path} replies to a missing {target}"
    assert a.git("rev-parse", "HEAD") == b.git("rev-parse", "HEAD")
    assert beats["m1"]["dispatched"] + beats["m2"]["dispatched"] == 500
    print(
        f"\n500 messages: sends took {sent_at - started:.1f} s, all answered after {answered_at - started:.1f} s; "
        f"replies {sum(1 for m in messages.values() if m.re)}; "
        f"ticks m1={beats['m1']['ticks']} m2={beats['m2']['ticks']}; "
        f"errors m1={beats['m1']['errors']} m2={beats['m2']['errors']}"
    )
    for machine in (a, b):
        for line in log_text(machine).splitlines():
            if " error " in line:
                print(machine.alias, line)
