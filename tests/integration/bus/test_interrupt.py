"""Stopping the dispatcher interrupts running models: run_model's cancel event ends the model's process group,
and an interrupted batch gets no reply, keeps the cursor where it was and is answered after a restart."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from pathlib import Path

from crosstalk.bus.protocol.models import ModelSpec
from crosstalk.bus.runs.runner import INTERRUPTED
from crosstalk.bus.transport.state import read_cursor
from tests.support.bus_dispatch import (
    Daemon,
    heartbeat,
    in_process_dispatcher,
    kill_pid_group,
    log_text,
    pid_alive,
    replies_to,
    run_spec,
    runs,
    send,
    set_registry,
    single_machine,
    wait_for,
    write_model,
)

# The model starts a grandchild that ignores SIGTERM (only the SIGKILL step ends it), records both pids, then
# sleeps far longer than any test waits.
SLEEPER = """#!{python}
import os, subprocess, sys, time
child = subprocess.Popen(["bash", "-c", "trap '' TERM; while :; do sleep 1; done"])
open(sys.argv[1], "w").write(f"{{os.getpid()}} {{child.pid}}")
print("started", flush=True)
time.sleep(60)
"""

# A dispatched model that sleeps 60 s, unless the flag file exists: then it answers at once.
SLOW_UNLESS_FLAG = """
if os.path.exists({flag!r}):
    print("quick answer")
else:
    time.sleep(60)
"""


def group_gone(pgid: int) -> bool:
    """No live (non-zombie) process left in the process group."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid and fields[0] != "Z":
                    return False
    return True


def test_cancel_kills_the_model_group_and_says_interrupted(tmp: Path) -> None:
    path = tmp / "sleeper"
    path.write_text(SLEEPER.format(python=sys.executable))
    path.chmod(0o755)
    pidfile = tmp / "pids"
    spec = ModelSpec("test", "sleeper", (str(path), str(pidfile)), None, {}, 120.0)
    cancel = threading.Event()
    results = []
    thread = threading.Thread(
        target=lambda: results.append(run_spec(spec, "p", env=dict(os.environ), cwd=tmp, cancel=cancel))
    )
    thread.start()
    pids: list[int] = []
    try:
        wait_for(lambda: pidfile.exists() and len(pidfile.read_text().split()) == 2, 30, "the model to start")
        pids = [int(p) for p in pidfile.read_text().split()]
        cancel.set()
        thread.join(timeout=20)
        assert not thread.is_alive()
        [result] = results
        assert not result.ok and result.interrupted and not result.timed_out
        assert result.error == INTERRUPTED == "interrupted: the dispatcher is stopping"
        assert result.stdout == "started\n"
        wait_for(lambda: not any(pid_alive(p) for p in pids), 10, "the model and its grandchild to end")
        assert group_gone(pids[0])
    finally:
        cancel.set()
        thread.join(timeout=20)
        if pids:
            kill_pid_group(pids[0])


def test_a_set_cancel_event_starts_nothing(tmp: Path) -> None:
    marker = tmp / "ran"
    spec = ModelSpec("test", "touch", ("touch", str(marker)), None, {}, 30.0)
    cancel = threading.Event()
    cancel.set()
    result = run_spec(spec, "p", env=dict(os.environ), cwd=tmp, cancel=cancel)
    assert result.interrupted and result.exit_code is None and not marker.exists()


def test_stop_interrupts_a_running_batch_which_stays_pending(make_machine, monkeypatch) -> None:
    m, channel = single_machine(make_machine)
    models = m.base / "models"
    models.mkdir()
    flag = m.base / "quick"
    slow = write_model(models, "slow", SLOW_UNLESS_FLAG.format(flag=str(flag)))
    set_registry(m, {"local": {"slow": str(slow)}})
    dispatcher = in_process_dispatcher(m, monkeypatch)
    dispatcher.tick()  # nothing to run yet: the cursor moves to HEAD
    cursor_before = read_cursor(dispatcher.state)
    assert cursor_before == m.git("rev-parse", "HEAD").strip()
    [path] = send(m, "slow", "take your time")
    reports = []
    thread = threading.Thread(target=lambda: reports.append(dispatcher.tick()))
    thread.start()
    model_pid = None
    try:
        wait_for(lambda: runs(slow), 30, "the model to start")
        model_pid = int(runs(slow)[0]["pid"])  # type: ignore[call-overload]
        dispatcher.stop()
        thread.join(timeout=20)
        assert not thread.is_alive()
        wait_for(lambda: group_gone(model_pid), 10, "the model's process group to end")
        [report] = reports
        assert report.incomplete == 1 and report.replies == 0 and report.failed == 0 and report.dispatched == 0
        assert replies_to(m.root, channel, path) == []
        assert read_cursor(dispatcher.state) == cursor_before
        assert " dispatch_interrupted " in log_text(m) and " dispatch_failed " not in log_text(m)
    finally:
        dispatcher.stop()
        thread.join(timeout=20)
        if model_pid is not None:
            kill_pid_group(model_pid)

    # The restart: a new dispatcher runs the batch again, and this time the model answers at once.
    flag.write_text("")
    again = in_process_dispatcher(m, monkeypatch)
    report = again.tick()
    assert (report.dispatched, report.replies, report.incomplete) == (1, 1, 0)
    [reply] = replies_to(m.root, channel, path)
    assert reply.body.strip() == "quick answer" and not reply.failed
    assert read_cursor(again.state) == report.head
    assert len(runs(slow)) == 2


def test_sigterm_during_a_model_run_exits_promptly_without_a_reply(make_machine) -> None:
    m, channel = single_machine(make_machine)
    models = m.base / "models"
    models.mkdir()
    slow = write_model(models, "slow", SLOW_UNLESS_FLAG.format(flag=str(m.base / "never")))
    set_registry(m, {"local": {"slow": str(slow)}})
    model_pid = None
    with Daemon(m, "--interval", "30") as daemon:
        try:
            daemon.wait_ready()
            cursor = m.git("rev-parse", "HEAD").strip()
            wait_for(lambda: heartbeat(m).get("cursor") == cursor, 30, "the first tick")
            [path] = send(m, "slow", "take your time")
            wait_for(lambda: runs(slow), 30, "the model to start")
            model_pid = int(runs(slow)[0]["pid"])  # type: ignore[call-overload]
            os.kill(daemon.proc.pid, signal.SIGTERM)
            assert daemon.proc.wait(timeout=15) == 0  # well before `server stop` would SIGKILL it
            wait_for(lambda: group_gone(model_pid), 10, "the model's process group to end")
        finally:
            if model_pid is not None:
                kill_pid_group(model_pid)
    assert replies_to(m.root, channel, path) == []
    assert (m.state_dir / "cursor").read_text().strip() == cursor
    text = log_text(m)
    assert " dispatch_interrupted " in text and " stop " in text
    assert not (m.state_dir / "dispatcher.pid").exists() and not (m.state_dir / "wake.sock").exists()
    assert (m.state_dir / "dispatcher.lock").exists() and heartbeat(m)["running"] is False
