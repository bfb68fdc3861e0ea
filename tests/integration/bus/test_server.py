"""`crosstalk server start|stop|restart|status|logs|unit`: the background dispatcher as a detached process."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import pytest

from crosstalk.bus.dispatch import server
from crosstalk.bus.transport.transports import Transport
from tests.support.bus_dispatch import heartbeat, replies_to, send, set_registry, single_machine, wait_for, write_model


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie is gone for our purposes (its parent, the CLI that spawned it, has exited; init reaps it).
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split(") ", 1)[1].startswith("Z")


@pytest.fixture
def bus(make_machine):
    m, channel = single_machine(make_machine)
    models = m.base / "models"
    models.mkdir()
    set_registry(m, {"local": {"echo": str(write_model(models, "echo"))}})
    pids: list[int] = []
    yield m, channel, pids
    # Never leave a daemon behind, whatever the test did.
    m.cli("server", "stop")
    for pid in pids:
        wait_for(lambda pid=pid: _pid_gone(pid), 20, f"pid {pid} to end")


def test_start_status_logs_stop(bus) -> None:
    m, channel, pids = bus
    res = m.cli("server", "start", "--interval", "30", "--json")
    assert res.returncode == 0, res.stderr
    started = json.loads(res.stdout)
    pid = started["pid"]
    pids.append(pid)
    assert started["started"] is True
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert b"daemon" in cmdline and b"dispatch" in cmdline and str(m.root).encode() in cmdline
    assert os.getsid(pid) == pid  # its own session: the terminal closing does not end it

    again = m.cli("server", "start")
    assert again.returncode == 0 and f"already running (pid {pid})" in again.stdout

    status = json.loads(m.cli("server", "status", "--json").stdout)
    assert status["running"] is True and status["pid"] == pid
    assert status["heartbeat"]["claimed"] == ["local/echo"] and status["heartbeat"]["alias"] == "m1"
    assert "running (pid" in m.cli("server", "status").stdout

    [path] = send(m, "echo", "hello server")
    wait_for(lambda: replies_to(m.root, channel, path), 30, "the reply")

    logs = m.cli("server", "logs", "-n", "200").stdout
    assert " boot " in logs and " dispatch " in logs and " reply " in logs
    assert logs.count(" boot ") == 1  # the daemon's stderr is the log file: no doubled lines
    res = m.cli("logs", "-f", "-n", "0", "--for", "0.5")
    assert res.returncode == 0

    res = m.cli("server", "stop")
    assert res.returncode == 0 and f"stopped (pid {pid})" in res.stdout
    wait_for(lambda: _pid_gone(pid), 20, "the daemon to exit")
    assert json.loads(m.cli("server", "status", "--json").stdout)["running"] is False
    assert "no dispatcher running" in m.cli("server", "stop").stdout


def test_restart_replaces_the_process(bus) -> None:
    m, _, pids = bus
    first = json.loads(m.cli("server", "start", "--json").stdout)["pid"]
    pids.append(first)
    res = m.cli("server", "restart", "--json")
    assert res.returncode == 0, res.stderr
    second = json.loads(res.stdout)["pid"]
    pids.append(second)
    assert second != first
    wait_for(lambda: _pid_gone(first), 20, "the first daemon to exit")
    assert heartbeat(m)["pid"] == second


def test_a_daemon_that_cannot_start_is_reported_with_its_log(bus) -> None:
    m, _, _ = bus
    (m.root / "CROSSTALK-VERSION").write_text("6\n")  # the daemon refuses it at once
    try:
        transport = Transport("bus", m.root, "m1")
        env = dict(m.env)
        with pytest.raises(server.ServerError) as info:
            server.start(transport, environ=env, timeout=15)
        assert "exited with" in info.value.message and "v6" in info.value.message
    finally:
        (m.root / "CROSSTALK-VERSION").write_text("7\n")


def test_stop_never_signals_a_process_that_is_not_our_dispatcher(bus) -> None:
    m, _, _ = bus
    state = m.state_dir
    state.mkdir(parents=True, exist_ok=True)
    # Pretend a dispatcher holds the lock, but the pid file names this test process (pytest, not a dispatcher).
    fd = os.open(state / "dispatcher.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        (state / "dispatcher.pid").write_text(f"{os.getpid()}\n")
        res = m.cli("server", "stop")
        assert res.returncode == 1
        assert f"pid {os.getpid()}" in res.stderr and "not a crosstalk dispatcher" in res.stderr
    finally:
        os.close(fd)


def test_unit_text_and_install(bus) -> None:
    m, _, _ = bus
    text = m.cli("server", "unit").stdout
    assert "[Unit]\nDescription=crosstalk dispatcher for bus\n" in text
    assert f"-m crosstalk daemon dispatch --transport {m.root}\n" in text
    assert f"Environment=CROSSTALK_HOME={m.home}\n" in text and "Environment=CROSSTALK_ALIAS=m1\n" in text
    assert "Restart=on-failure" in text and "[Install]\nWantedBy=default.target" in text
    res = m.cli("server", "unit", "--install")
    assert res.returncode == 0, res.stderr
    path = m.base / ".config" / "systemd" / "user" / "crosstalk-bus.service"
    assert res.stdout.strip() == str(path) and path.read_text().strip() == text.strip()
    assert "systemctl --user" in res.stderr
