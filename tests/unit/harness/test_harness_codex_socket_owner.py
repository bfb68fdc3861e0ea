"""The Codex adapter connects only to an app-server socket that is this user's own (endpoints.own_socket, the check
discovery makes): never to another uid's socket or through another uid's symlink, so a message's content never reaches
it. Codex makes its control socket a symlink of the user's own, so such a link is followed."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

import pytest
from websockets.asyncio.server import unix_serve

from crosstalk.harness.codex.appserver import AppServer
from crosstalk.harness.errors import AppServerGone


def _refused(prepare: str) -> tuple[str, int]:
    """Serve a WebSocket on a real socket, point `link` at it as `prepare` says; (the refusal, connections seen)."""
    root = Path(tempfile.mkdtemp(prefix="xo", dir="/tmp"))
    real, link = root / "real.sock", root / "link.sock"
    seen = []

    async def handler(ws: object) -> None:
        seen.append(ws)

    async def main() -> str:
        async with unix_serve(handler, str(real)):
            if prepare == "symlink":
                os.symlink(root / "gone.sock", link)
            elif prepare == "their symlink":
                os.symlink(real, link)
                os.chown(link, 65534, 65534, follow_symlinks=False)
            else:
                os.rename(real, link)
                os.chown(link, 65534, 65534)  # another user's socket
            with pytest.raises(AppServerGone) as exc:
                await asyncio.wait_for(AppServer.connect(str(link)), 10)
            return str(exc.value)

    try:
        return asyncio.run(main()), len(seen)
    finally:
        for p in (real, link):
            p.unlink(missing_ok=True)
        root.rmdir()


def test_a_dangling_symlink_is_refused_before_connecting() -> None:
    reason, connections = _refused("symlink")
    assert "No such file" in reason and connections == 0


def test_the_users_own_symlink_to_the_users_socket_is_followed_as_codex_makes_it() -> None:
    from crosstalk.harness.codex.endpoints import socket_problem

    root = Path(tempfile.mkdtemp(prefix="xo", dir="/tmp"))
    try:
        import socket

        with socket.socket(socket.AF_UNIX) as server:
            server.bind(str(root / "real.sock"))
            os.symlink(root / "real.sock", root / "link.sock")
            assert socket_problem(str(root / "link.sock")) is None
            (root / "plain").write_text("")
            os.symlink(root / "plain", root / "to-file.sock")
            assert "not a unix socket" in (socket_problem(str(root / "to-file.sock")) or "")
    finally:
        for p in root.iterdir():
            p.unlink()
        root.rmdir()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a symlink another uid's needs root")
def test_another_users_symlink_is_refused_before_connecting() -> None:
    reason, connections = _refused("their symlink")
    assert "symlink owned by uid 65534" in reason and connections == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="making a socket another uid's needs root")
def test_another_users_socket_is_refused_before_connecting() -> None:
    reason, connections = _refused("chown")
    assert "owned by uid 65534" in reason and connections == 0
