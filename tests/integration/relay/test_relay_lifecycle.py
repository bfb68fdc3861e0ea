"""The relay process's life, with a real nats-server: `relay join` starts it in the background and says so, `relay
status` says it runs and is connected, a second `relay serve` is refused, `doctor` reports it, `relay leave` stops
it; and a relay process whose join is gone ends by itself."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator
from typing import Any

from crosstalk.fs.procinfo import is_same_process
from tests.support.nats_relay import NatsServer, relay_status, serving_state
from tests.support.procs import Procs, one_error_line
from tests.support.waiting import until

BOUND_S = 15.0


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"


@contextlib.contextmanager
def reaped(pid: int) -> Iterator[None]:
    """The background relay process is not the test's child: kill it if the test leaves it running."""
    try:
        yield
    finally:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def doctor_relay(machine: Procs) -> list[dict[str, Any]]:
    res = machine.cli("doctor", "--json", timeout=60)
    data = json.loads(res.stdout)
    return [f for f in data["findings"] if f["check"] == "relay"]


def test_join_starts_the_relay_process_and_leave_stops_it(relay: NatsServer, laptop: Procs) -> None:
    creds = str(relay.creds_file(laptop, "laptop"))
    res = laptop.cli("relay", "join", relay.url, "--alias", "laptop", "--creds", creds, "--json", timeout=BOUND_S)
    assert res.returncode == 0, res.stderr
    joined = json.loads(res.stdout)
    pid = joined["serve_pid"]
    assert joined["started"] is True and isinstance(pid, int)
    with reaped(pid):
        status = relay_status(laptop)
        assert status["serve"]["pid"] == pid
        until(lambda: serving_state(laptop) == "connected", "the background relay process connected", BOUND_S)
        res = laptop.cli("relay", "status")
        assert f"relay process: pid {pid}, connected for " in res.stdout
        # a second relay process is refused: the lock is taken
        res = laptop.cli("relay", "serve", timeout=BOUND_S)
        assert res.returncode == 1 and "a relay process already serves" in one_error_line(res.stderr)
        # joining again (the same relay and alias) keeps the one that runs, and says so
        res = laptop.cli("relay", "join", relay.url, "--alias", "laptop", "--creds", creds, timeout=BOUND_S)
        assert res.returncode == 0, res.stderr
        assert f"relay process already running (pid {pid})" in res.stdout
        [finding] = doctor_relay(laptop)
        assert finding["status"] == "ok" and f"relay process pid {pid} connected" in finding["text"]
        res = laptop.cli("relay", "leave")
        assert res.returncode == 0, res.stderr
        assert f"stopped relay process {pid}" in res.stdout
        until(lambda: not alive(pid), "the relay process exited", BOUND_S)
        assert relay_status(laptop) == {"joined": False, "serve": None}
        assert doctor_relay(laptop) == []


def test_doctor_says_when_a_joined_machine_runs_no_relay_process(relay: NatsServer, laptop: Procs) -> None:
    creds = str(relay.creds_file(laptop, "laptop"))
    res = laptop.cli("relay", "join", relay.url, "--alias", "laptop", "--creds", creds, "--no-start")
    assert res.returncode == 0, res.stderr
    assert "once `crosstalk relay serve` runs" in res.stdout
    [finding] = doctor_relay(laptop)
    assert finding["status"] == "problem" and "no relay process runs" in finding["text"]
    assert finding["fix"].startswith(f"crosstalk relay join {relay.url} --alias laptop --creds ")


def test_a_relay_process_ends_when_its_join_is_gone(relay: NatsServer, laptop: Procs) -> None:
    """Even while the relay is down (never connected): removing the join ends it, the lock comes free."""
    creds = str(relay.creds_file(laptop, "laptop"))
    res = laptop.cli("relay", "join", relay.url, "--alias", "laptop", "--creds", creds, "--json", timeout=BOUND_S)
    assert res.returncode == 0, res.stderr
    pid = json.loads(res.stdout)["serve_pid"]
    with reaped(pid):
        status = relay_status(laptop)["serve"]
        relay.kill9()
        until(lambda: serving_state(laptop) == "disconnected", "the relay process saw the relay go", BOUND_S)
        (laptop.root / "relay" / "relay.json").unlink()
        until(lambda: not alive(pid), "the relay process ended with its join", BOUND_S)
        assert not is_same_process(pid, status.get("pid_started"))
