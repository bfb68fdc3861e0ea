"""`crosstalk agent start` returns once the agent serves, so the README's next line (`send`) reaches it; a start
that fails says the agent's own error with its exit code; `agent stop` stops it and nothing else."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from crosstalk.cli.agent_start import _is_standalone
from crosstalk.fs.procinfo import pid_alive
from tests.support.procs import Procs, one_error_line, wait_for


def test_start_then_send_at_once_then_stop(xt: Procs) -> None:
    inbox = xt.root / "alice.jsonl"
    res = xt.cli("agent", "start", "--harness", "fake", "--name", "alice", "--inbox", str(inbox), "--json")
    assert res.returncode == 0, res.stderr
    ready = json.loads(res.stdout)
    pid = ready["pid"]
    try:
        assert ready["name"] == "alice" and ready["log"].endswith("/logs/agent-alice.log")
        sent = xt.cli("send", "alice", "hello")  # no wait between: start returned only once alice was serving
        assert sent.returncode == 0, sent.stderr
        assert [json.loads(line)["text"] for line in inbox.read_text().splitlines()] == ["hello"]
        again = xt.cli("agent", "start", "--harness", "fake", "--name", "alice")
        assert again.returncode == 1 and "already registered by a live process" in one_error_line(again.stderr)
        stopped = xt.cli("agent", "stop", "alice")
        assert stopped.returncode == 0 and stopped.stdout == f"agent alice stopped (pid {pid})\n", stopped.stderr
        assert not pid_alive(pid)
        assert xt.cli("agent", "stop", "alice").returncode == 4
    finally:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
            wait_for(lambda: not pid_alive(pid), 10, "the started agent gone")


def test_a_start_that_fails_says_why_with_the_agents_exit_code(xt: Procs) -> None:
    res = xt.cli("agent", "start", "--harness", "fake", "--name", "bob", "--role", "worker", "--parent", "nobody")
    assert res.returncode == 4
    assert one_error_line(res.stderr) == (
        "crosstalk: the agent did not start: --parent: no live agent is named or has agent_id 'nobody'"
    )


def test_stop_stops_an_agent_run_in_the_foreground_too(xt: Procs) -> None:
    alice = xt.start_agent("alice")
    assert xt.cli("agent", "stop", "alice").returncode == 0
    wait_for(lambda: not pid_alive(alice.pid), 10, "alice stopped")


def test_only_a_process_running_agent_run_counts_as_standalone() -> None:
    """What keeps `agent stop` from signalling a session's shim (which serves its agents under `crosstalk mcp`)."""
    assert not _is_standalone(os.getpid())
    code = "import sys, time; time.sleep(30)"
    for argv, standalone in (
        ([sys.executable, "-c", code, "mcp"], False),
        ([sys.executable, "-c", code, "agent", "run"], True),
    ):
        proc = subprocess.Popen(argv)
        try:
            wait_for(lambda p=proc, last=argv[-1]: _cmdline(p.pid).endswith(last), 10, "the process started")
            assert _is_standalone(proc.pid) is standalone, argv
        finally:
            proc.kill()
            proc.wait(10)


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode().strip()
