"""The dispatcher loop as a real process: woken by `message send`, killed with -9 mid-tick and restarted, a
transport upgraded under it, a second dispatcher refused, SIGTERM."""

from __future__ import annotations

import os
import stat

import pytest

from tests.support.bus_dispatch import (
    Daemon,
    commit_files,
    heartbeat,
    kill_pid_group,
    log_text,
    machine_with_models,
    replies_to,
    runs,
    send,
    set_registry,
    wait_for,
    write_model,
)


@pytest.fixture
def bus(make_machine):
    return machine_with_models(make_machine, echo="")


def test_send_wakes_the_daemon_long_before_its_interval(bus) -> None:
    m, channel, _ = bus
    with Daemon(m, "--interval", "120") as daemon:
        daemon.wait_ready()
        sock = m.state_dir / "wake.sock"
        assert stat.S_ISSOCK(sock.stat().st_mode) and stat.S_IMODE(sock.stat().st_mode) == 0o600
        ticks = heartbeat(m)["ticks"]
        [path] = send(m, "echo", "wake up")
        # Without the wake-up the next tick would come after 120 s; waiting far less proves the poke.
        wait_for(lambda: replies_to(m.root, channel, path), 30, "the reply")
        # The tick that wrote the reply writes its heartbeat when it ends, a moment after the reply.
        wait_for(lambda: heartbeat(m).get("ticks", 0) > ticks, 30, "the tick's heartbeat")
        assert m.cli("message", "replies", path).returncode == 0
        assert daemon.stop() == 0
    text = log_text(m)
    assert " boot " in text and " stop " in text and "tick " in text
    assert not sock.exists()
    assert heartbeat(m)["running"] is False


def test_a_second_dispatcher_is_refused(bus) -> None:
    m, _, _ = bus
    with Daemon(m, "--interval", "60") as daemon:
        daemon.wait_ready()
        res = m.cli("daemon", "dispatch", "--once")
        assert res.returncode == 1
        assert f"already running (pid {daemon.proc.pid})" in res.stderr


def test_kill_9_mid_tick_then_restart_answers_the_message(bus) -> None:
    m, channel, models = bus
    marker = m.base / "first-run.pid"
    # The first run records its pid and hangs (the daemon is killed meanwhile); later runs answer at once.
    body = (
        f"marker = {str(marker)!r}\n"
        "if not os.path.exists(marker):\n"
        "    open(marker, 'w').write(str(os.getpid()))\n"
        "    time.sleep(120)\n"
        "print('answered after restart')\n"
    )
    sleepy = write_model(models, "sleepy", body)
    set_registry(m, {"local": {"sleepy": str(sleepy)}})
    try:
        daemon = Daemon(m, "--interval", "0.5")
        daemon.wait_ready()
        [path] = send(m, "sleepy", "long job")
        wait_for(lambda: marker.exists() and marker.read_text(), 30, "the model to start")
        daemon.kill9()
        assert replies_to(m.root, channel, path) == []
        # The pidfile and wake socket of the dead daemon are left behind; a restart must cope.
        with Daemon(m, "--interval", "0.5", log_name="daemon2.out") as again:
            again.wait_ready()
            wait_for(lambda: replies_to(m.root, channel, path), 60, "the reply after the restart")
            again.stop()
        replies = replies_to(m.root, channel, path)
        # At-least-once: the killed run never committed, so exactly one reply; a duplicate would be allowed
        # only from a crash between a model run and its commit.
        assert 1 <= len(replies) <= 2
        assert len(replies) == 1, "no run finished before the kill, so no duplicate is expected"
        assert replies[0].body == "answered after restart"
        assert len(runs(sleepy)) == 2
    finally:
        if marker.exists() and marker.read_text().strip().isdigit():
            kill_pid_group(int(marker.read_text()))


def test_an_upgraded_transport_stops_dispatching_and_the_heartbeat_says_why(bus) -> None:
    m, channel, models = bus
    with Daemon(m, "--interval", "0.3") as daemon:
        daemon.wait_ready()
        commit_files(m, {"CROSSTALK-VERSION": "8\n"}, "upgrade to v8")
        wait_for(lambda: heartbeat(m).get("halted"), 30, "the halt")
        assert "v8" in str(heartbeat(m)["halted"])
        assert "version_error" in log_text(m)
        # Written by hand (the CLI refuses a v8 transport): the halted daemon must not answer it.
        rel = f"data/channels/{channel}/2026/01/02/030405006Z-00112233aabbccdd.md"
        commit_files(m, {rel: "---\nfrom: alice\nto: echo\ntimestamp: 2026-01-02T03:04:05.006Z\n---\n\nhi\n"})
        ticks = heartbeat(m)["ticks"]
        wait_for(lambda: heartbeat(m)["ticks"] >= ticks + 3, 30, "more ticks")
        assert runs(models / "echo") == []
        assert daemon.proc.poll() is None
        assert heartbeat(m)["halted"]


def test_sigterm_exits_zero_and_keeps_the_cursor(bus) -> None:
    m, channel, _ = bus
    with Daemon(m, "--interval", "0.3") as daemon:
        daemon.wait_ready()
        [path] = send(m, "echo", "hi")
        wait_for(lambda: replies_to(m.root, channel, path), 30, "the reply")
        wait_for(lambda: heartbeat(m).get("cursor") == m.git("rev-parse", "HEAD").strip(), 30, "the cursor")
        assert daemon.stop() == 0
    cursor = (m.state_dir / "cursor").read_text().strip()
    assert cursor == m.git("rev-parse", "HEAD").strip()
    assert not (m.state_dir / "dispatcher.pid").exists()
    assert os.stat(m.state_dir).st_mode & 0o777 == 0o700
