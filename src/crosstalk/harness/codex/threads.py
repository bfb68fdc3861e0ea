"""The Codex threads the app-servers crosstalk can ask have loaded (endpoints.py), for listings and for messages into
threads crosstalk does not serve: a blocking client of an app-server socket (WebSocket over the unix socket). Each
discovery (`loaded`, every endpoint together) and each delivery has one overall deadline, whatever the peer does
(answers slowly, never, or with endless notifications); every step is bounded by what is left of it. Callers in an
event loop run it in a thread (the shim's list_agents does)."""

from __future__ import annotations

import contextlib
import itertools
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from crosstalk.core import untrusted
from crosstalk.core.states import State
from crosstalk.harness.base import InjectResult, SessionRow, derived_name
from crosstalk.harness.codex.endpoints import CLIENT, MAX_FRAME, endpoints, own_socket
from crosstalk.harness.errors import DeadlinePassed

NAME = "codex"  # the kind's (kind.py, which loads this module only to discover or deliver)
TIMEOUT_S = 3.0  # one step (connect, one request), at most
DISCOVERY_DEADLINE_S = 5.0  # one whole discovery: every endpoint, every request
DELIVER_DEADLINE_S = 10.0  # one whole delivery: connect, initialize, turn/start
MAX_THREADS = 200  # threads read per discovery, over every endpoint
CLOSE_S = 1.0  # a peer that never completes the closing handshake is dropped after this long


class Blocking:
    """One request/answer connection (notifications read and dropped)."""

    def __init__(self, path: str, deadline: float) -> None:
        from websockets.sync.client import unix_connect

        self.deadline = deadline  # time.monotonic() after which nothing more is asked
        self._stack = contextlib.ExitStack()
        self._ws = self._stack.enter_context(
            unix_connect(
                path, uri="ws://localhost/", max_size=MAX_FRAME, open_timeout=self._left(), close_timeout=CLOSE_S
            )
        )
        self._ids = itertools.count(1)
        try:
            self.request("initialize", {"clientInfo": CLIENT, "capabilities": {"experimentalApi": False}})
            self._ws.send(json.dumps({"method": "initialized"}))
        except BaseException:
            self.close()
            raise

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise DeadlinePassed("the overall deadline passed")
        return min(TIMEOUT_S, left)

    def request(self, method: str, params: dict[str, Any]) -> Any:
        rid = next(self._ids)
        self._ws.send(json.dumps({"id": rid, "method": method, "params": params}))
        step = time.monotonic() + self._left()
        while True:
            left = step - time.monotonic()
            if left <= 0:
                raise DeadlinePassed(f"{method}: no answer in time")
            message = untrusted.loads(self._ws.recv(timeout=left), what="a Codex app-server frame", max_bytes=MAX_FRAME)
            if isinstance(message, dict) and message.get("id") == rid and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result")

    def close(self) -> None:
        self._stack.close()


def _connect(path: str, deadline: float) -> Blocking | None:
    if not own_socket(path):
        return None
    try:
        return Blocking(path, deadline)
    except Exception:  # no app-server behind the socket, or not one: no evidence
        return None


def loaded(environ: Mapping[str, str], known_endpoints: Sequence[str] = ()) -> list[SessionRow]:
    """A row per thread the app-servers have loaded (an unreadable one is left out). A thread loaded on several
    app-servers is listed once, unreachable: a message would have to pick one (`ambiguous_endpoint`)."""
    rows: dict[str, SessionRow] = {}
    deadline = time.monotonic() + DISCOVERY_DEADLINE_S
    budget = [MAX_THREADS]  # threads still to read, over every endpoint
    for path in endpoints(environ, known_endpoints, parent=False):
        if time.monotonic() >= deadline or budget[0] <= 0:
            break
        for row in _loaded_at(path, deadline, budget):
            first = rows.get(row.session_ref)
            if first is None:
                rows[row.session_ref] = row
            elif first.endpoint != row.endpoint:
                where = f"{first.endpoint}, {row.endpoint}"
                reason = f"ambiguous_endpoint: the thread is loaded on several Codex app-servers ({where})"
                rows[row.session_ref] = replace(first, reachable=False, reason=reason)
    return list(rows.values())


def _loaded_at(path: str, deadline: float, budget: list[int]) -> list[SessionRow]:
    """The rows of the threads one app-server has loaded (its first page), read until the deadline passes or the
    budget of threads is spent; a thread that cannot be read is left out."""
    client = _connect(path, deadline)
    if client is None:
        return []
    rows: list[SessionRow] = []
    try:
        listed = client.request("thread/loaded/list", {})
        ids = listed.get("data") if isinstance(listed, dict) else None
        for tid in [t for t in ids if isinstance(t, str)] if isinstance(ids, list) else []:
            if budget[0] <= 0:
                break
            budget[0] -= 1
            try:
                read = client.request("thread/read", {"threadId": tid})
            except DeadlinePassed:
                break
            except Exception:
                continue
            thread = read.get("thread") if isinstance(read, dict) else None
            with contextlib.suppress(Exception):  # a malformed record: left out
                rows.append(_row(tid, thread if isinstance(thread, dict) else {}, path))
    except Exception:
        pass
    finally:
        client.close()
    return rows


def _row(tid: str, thread: Mapping[str, Any], endpoint: str) -> SessionRow:
    status = (thread.get("status") or {}).get("type")
    envs = thread.get("environments") or [{}]
    cwd = envs[0].get("cwd") if isinstance(envs[0], dict) else None
    name = thread.get("name")
    usable = status in ("idle", "active") and thread.get("canAcceptDirectInput", True) is not False
    return SessionRow(
        harness=NAME,
        session_ref=tid,
        name=name if isinstance(name, str) and name else derived_name(NAME, tid),
        cwd=cwd if isinstance(cwd, str) else None,
        status={"idle": "idle", "active": "busy"}.get(str(status), "unknown"),
        reachable=usable,
        reason=None if usable else f"the thread is {status or 'in an unknown state'}",
        endpoint=endpoint,
    )


def deliver(endpoint: str, thread_id: str, text: str) -> InjectResult:
    """An inform into a thread crosstalk does not serve, on the app-server `endpoint` that has it loaded:
    `turn/start` (a running turn takes it as a steer)."""
    client = _connect(endpoint, time.monotonic() + DELIVER_DEADLINE_S)
    if client is None:
        return InjectResult(State.UNREACHABLE, f"no Codex app-server at {endpoint}")
    try:
        params = {"threadId": thread_id, "input": [{"type": "text", "text": text, "text_elements": []}]}
        try:
            result = client.request("turn/start", params)
        except RuntimeError as exc:
            return InjectResult(State.UNREACHABLE, f"the Codex app-server refused: {exc}")
        except Exception as exc:
            return InjectResult(State.UNKNOWN, f"the app-server connection broke after the write: {exc}")
    finally:
        client.close()
    turn = (result or {}).get("turn") or {}
    if not isinstance(turn.get("id"), str):
        return InjectResult(State.UNKNOWN, "turn/start answered no turn id")
    return InjectResult(State.ACCEPTED, evidence={"codex": "turn/start", "turn_id": turn["id"], "native": True})
