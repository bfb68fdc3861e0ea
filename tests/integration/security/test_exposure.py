"""What a running agent exposes: it listens on 127.0.0.1 only, and every file that holds a secret or a message is
its user's alone (0600 files, 0700 directories, owned by the user). Read from /proc and the state root of a real
agent, `crosstalk agent run`, after it received a message."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

from crosstalk.core.message import new_message
from crosstalk.ingress.client import send
from tests.support.procs import procs

TCP_LISTEN = "0A"


def listening(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket process `pid` listens on (IPv4 and IPv6)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != TCP_LISTEN or inode not in inodes:
                continue
            hex_addr, hex_port = local.split(":")
            raw = bytes.fromhex(hex_addr)
            if family == socket.AF_INET:
                addr = socket.inet_ntop(family, raw[::-1])
            else:
                addr = socket.inet_ntop(family, b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4)))
            found.append((addr, int(hex_port, 16)))
    return found


def test_an_agent_listens_on_loopback_only_and_keeps_its_files_private() -> None:
    with procs() as xt:
        agent = xt.start_agent("exposed")
        assert send(xt.paths, new_message("exposed", "hello", from_="@test:exposure")).outcome.state.value == "accepted"
        sockets = listening(agent.pid)
        assert sockets, "the agent serves A2A: it listens somewhere"
        assert {addr for addr, _ in sockets} == {"127.0.0.1"}, sockets
        p = xt.paths
        state_dirs = {p.agents, p.names, p.journal, p.sock, p.key_path(agent.agent_id).parent,
                      p.token_path(agent.agent_id).parent}  # fmt: skip
        checked = 0
        for path in [d for top in state_dirs for d in (top, *top.rglob("*"))]:
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                continue
            assert st.st_uid == os.geteuid(), path
            if stat.S_ISDIR(st.st_mode):
                assert stat.S_IMODE(st.st_mode) & 0o077 == 0, (path, oct(st.st_mode))
            elif stat.S_ISREG(st.st_mode) or stat.S_ISSOCK(st.st_mode):
                assert stat.S_IMODE(st.st_mode) & 0o077 == 0, (path, oct(st.st_mode))
                checked += 1
        assert checked >= 5  # descriptor, key, token, journal, socket at least
