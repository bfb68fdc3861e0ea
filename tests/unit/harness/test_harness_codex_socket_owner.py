"""The Codex adapter connects only to an app-server socket that is this user's own (endpoints.own_socket, the check
discovery makes): never through a symlink, never to another uid's socket, so a message's content never reaches it."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

import pytest
from websockets.asyncio.server import unix_serve

from crosstalk.harness.codex.appserver import AppServer
from crosstalk.harness.errors import AppServerGone

pytestmark = pytest.mark.unit


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
                os.symlink(real, link)
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


def test_a_symlink_to_a_socket_is_refused_before_connecting() -> None:
    reason, connections = _refused("symlink")
    assert "not a unix socket" in reason and connections == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="making a socket another uid's needs root")
def test_another_users_socket_is_refused_before_connecting() -> None:
    reason, connections = _refused("chown")
    assert "owned by uid 65534" in reason and connections == 0
