"""A throwaway machine for `crosstalk doctor`: its own HOME, CROSSTALK_HOME and XDG_RUNTIME_DIR under one short temp
dir (AF_UNIX paths stay short), real fake-harness agents started as processes, processes that are started and reaped
to get a pid that is provably dead, and `crosstalk doctor` run as the installed CLI. close() ends every process it
started, by pid, and removes the dir."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from crosstalk.core.ids import agent_id_for, new_message_id
from crosstalk.fs.procinfo import proc_start_time
from crosstalk.registry.credentials import create_key
from crosstalk.registry.descriptor import Descriptor, write_descriptor
from crosstalk.registry.paths import StatePaths

CROSSTALK = Path(sys.executable).with_name("crosstalk")
TIMEOUT_S = 60.0


class Machine:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="xd", dir="/tmp"))
        self.home = self.dir / "h"
        self.home.mkdir()
        (self.dir / "run").mkdir(mode=0o700)
        self.env = {
            "PATH": f"{CROSSTALK.parent}:/usr/bin:/bin",
            "HOME": str(self.home),
            "CROSSTALK_HOME": str(self.dir / "s"),
            "XDG_RUNTIME_DIR": str(self.dir / "run"),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        self.paths = StatePaths(self.dir / "s")
        self._procs: list[subprocess.Popen[bytes]] = []

    # ------------------------------------------------------------------------------------------ processes

    def start_agent(self, name: str) -> dict[str, Any]:
        """A real fake-harness agent; returns its ready line (agent_id, socket...) once it is registered."""
        proc = subprocess.Popen(
            [str(CROSSTALK), "agent", "run", "--harness", "fake", "--name", name, "--no-a2a", "--json"],
            env=self.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        self._procs.append(proc)
        assert proc.stdout is not None
        ready_fds, _, _ = select.select([proc.stdout], [], [], TIMEOUT_S)  # it prints its ready line once published
        line = proc.stdout.readline() if ready_fds else b""
        assert line, f"agent {name} was not ready within {TIMEOUT_S:.0f}s"
        ready = json.loads(line)
        ready["pid"] = proc.pid
        return ready

    def kill(self, pid: int) -> None:
        """SIGKILL one of our processes and reap it: it leaves its files behind, as a crash does."""
        for proc in self._procs:
            if proc.pid == pid:
                proc.kill()
                proc.wait(timeout=TIMEOUT_S)

    def dead_process(self) -> tuple[int, str]:
        """(pid, start time) of a process that ran and has been reaped: provably dead."""
        proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
        started = None
        deadline = time.monotonic() + 10
        while started is None and time.monotonic() < deadline:
            started = proc_start_time(proc.pid)
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=TIMEOUT_S)
        assert started is not None and proc_start_time(proc.pid) is None
        return proc.pid, started

    def sleeper(self, *argv0: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """A live process (argv0 names the program it runs as, when given), killed on close."""
        args = (
            [*argv0, "-c", "import time; time.sleep(120)"]
            if argv0
            else [sys.executable, "-c", "import time; time.sleep(120)"]
        )
        proc = subprocess.Popen(args, env=env)
        self._procs.append(proc)
        deadline = time.monotonic() + 10
        while proc_start_time(proc.pid) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return proc

    # ------------------------------------------------------------------------------------------ state files

    def stale_agent(self, name: str, pid: int, started_at: str) -> str:
        """The files a registration leaves when its process dies: descriptor, key, token, and a real socket file
        that nothing listens on any more (bound, then closed without unlinking)."""
        self.paths.ensure()
        agent_id = agent_id_for("fake", name)
        sock_path = self.paths.uds_path(agent_id)
        with contextlib.closing(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)) as s:
            s.bind(str(sock_path))
        desc = Descriptor(
            agent_id=agent_id, name=name, harness="fake", pid=pid, started_at=started_at, cwd=str(self.dir),
            session_ref=name, uds_path=str(sock_path), instance_id=new_message_id(),
            credential_ref=str(self.paths.token_path(agent_id)), registered_at="2026-01-01T00:00:00Z",
        )  # fmt: skip
        write_descriptor(self.paths, desc)
        create_key(self.paths.key_path(agent_id))
        create_key(self.paths.token_path(agent_id))
        return agent_id

    def agent_files(self, agent_id: str) -> list[Path]:
        p = self.paths
        candidates = (p.descriptor(agent_id), p.uds_path(agent_id), p.key_path(agent_id), p.token_path(agent_id))
        return [f for f in candidates if f.exists()]

    # ------------------------------------------------------------------------------------------ the CLI

    def crosstalk(
        self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(CROSSTALK), *args], env={**self.env, **(env or {})}, cwd=cwd or self.dir, capture_output=True,
            text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def crosstalk_path(self) -> str:
        return str(CROSSTALK)

    def doctor(self, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
        """`crosstalk doctor --json ARGS`: (exit code, the report)."""
        proc = self.crosstalk("doctor", "--json", *args, env=env)
        assert proc.returncode in (0, 1), proc.stderr
        return proc.returncode, json.loads(proc.stdout)

    def close(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
            if proc.stdout is not None:
                proc.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def findings(report: dict[str, Any], check: str) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["check"] == check]


def problems(report: dict[str, Any], check: str | None = None) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["status"] == "problem" and check in (None, f["check"])]
