"""A peer process for the uds ingress tests: connects to an agent's socket from its own pid, so the agent sees a
process other than the test runner.

Reads one JSON config from stdin, prints one JSON result on stdout:
  {"sock": path, "mode": "raw"|"deliver", "timeout": s,
   "register": null | {"home": dir, "name": str, "session_ref": str},   # publish a descriptor for this pid first
   raw:     "data_b64": bytes to send, "shut_wr": bool
   deliver: "token": str, "message": {message_id, to, from, kind, text}}
  → {"pid", "agent_id", "name", "answer_b64" (raw), "outcome" (deliver), "error"}
"""

from __future__ import annotations

import base64
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any


def _raw(cfg: dict[str, Any]) -> dict[str, Any]:
    data = base64.b64decode(cfg["data_b64"])
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(cfg.get("timeout", 10.0))
    sock.connect(cfg["sock"])
    error = None
    try:
        try:
            sock.sendall(data)
            if cfg.get("shut_wr"):
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError) as exc:
            error = f"send: {type(exc).__name__}"
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                error = "recv: ConnectionResetError"
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        sock.close()
    return {"answer_b64": base64.b64encode(b"".join(chunks)).decode(), "error": error}


def _deliver(cfg: dict[str, Any]) -> dict[str, Any]:
    from crosstalk.core.message import new_message
    from crosstalk.ingress.uds_client import deliver

    m = cfg["message"]
    msg = new_message(
        m["to"], m["text"], from_=m.get("from"), kind=m.get("kind", "inform"), message_id=m.get("message_id")
    )
    outcome = deliver(cfg["sock"], cfg["token"], msg, timeout=cfg.get("timeout", 10.0))
    return {"outcome": outcome.to_dict(), "error": None}


def main() -> None:
    cfg = json.loads(sys.stdin.read())
    out: dict[str, Any] = {"pid": os.getpid(), "agent_id": None, "name": None}
    reg = None
    if cfg.get("register"):
        from crosstalk.registry.paths import StatePaths
        from crosstalk.registry.registration import Registration

        r = cfg["register"]
        paths = StatePaths(Path(r["home"]))
        reg = Registration.acquire(
            paths, harness="fake", session_ref=r["session_ref"], preferred_name=r["name"], cwd=r["home"]
        )
        reg.publish(uds_path=str(paths.uds_path(reg.agent_id)))
        out.update(agent_id=reg.agent_id, name=reg.name)
    try:
        out.update(_deliver(cfg) if cfg.get("mode") == "deliver" else _raw(cfg))
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        if reg is not None:
            reg.close()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
