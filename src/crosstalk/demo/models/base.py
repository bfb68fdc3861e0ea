"""Shared core of the mock model servers: a threaded HTTP server on 127.0.0.1:<free port> that records every
request and answers with a scripted reply. Subclasses speak one provider's wire format (usually SSE)."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

from crosstalk.core import untrusted

REPLY_PREFIX = "MOCK-REPLY: "
CALL_RE = re.compile(r"^CALL (\S+) (\{.*\})\s*$", re.MULTILINE)
SLEEP_RE = re.compile(r"^SLEEP (\d+(?:\.\d+)?)\s*$", re.MULTILINE)
MAX_SLEEP_S = 30.0
MAX_BODY_BYTES = 64 * 1024 * 1024  # a harness's request body (the whole conversation so far) parsed, at most


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the mock received it. `body` is the parsed JSON (or {} when it was not JSON)."""

    method: str
    path: str
    headers: dict[str, str]
    raw: str
    body: dict[str, Any] = field(default_factory=dict)
    at: float = 0.0


def digest_reply(text: str) -> str:
    """The default scripted answer: the first line of the newest user text (at most 80 chars) and its length."""
    stripped = text.strip()
    first = stripped.splitlines()[0][:80] if stripped else ""
    return f"{REPLY_PREFIX}{first} [{len(text)} chars]"


def obey_script(text: str, placeholders: dict[str, re.Pattern[str]]) -> tuple[str, str] | None:
    """What every mock does with the text its model reads: a `SLEEP <seconds>` line delays the answer (a slow
    turn); the last `CALL <tool> <json>` line is the tool call to make, as (tool, raw JSON) with each placeholder
    replaced by the newest match of its pattern in the text. None: answer with text."""
    sleep = SLEEP_RE.search(text)
    if sleep:
        time.sleep(min(float(sleep.group(1)), MAX_SLEEP_S))
    found = CALL_RE.findall(text)
    if not found:
        return None
    tool, raw = found[-1]
    for placeholder, pattern in placeholders.items():
        values = pattern.findall(text)
        if values:
            raw = raw.replace(placeholder, values[-1])
    return tool, raw


def scripted_call_args(text: str, placeholders: dict[str, re.Pattern[str]]) -> tuple[str, dict[str, Any]] | None:
    """obey_script's tool call with its arguments parsed: (tool, a JSON object), or None when the text asks for
    none or its arguments are not a JSON object (then the mock answers with text)."""
    call = obey_script(text, placeholders)
    if call is None:
        return None
    name, raw = call
    try:
        args = untrusted.loads(raw, what="a scripted call's arguments", max_bytes=MAX_BODY_BYTES)
    except untrusted.UntrustedInput:
        return None
    return (name, args) if isinstance(args, dict) else None


def route(path: str) -> str:
    """A request path without its query string and trailing slash."""
    return path.split("?")[0].rstrip("/")


def text_parts(content: Any, skip_prefixes: tuple[str, ...] = ()) -> str:
    """Joins the text of a message's content: a string, or a list of blocks with a `text` field."""
    if isinstance(content, str):
        return content
    out: list[str] = []
    for block in content if isinstance(content, list) else []:
        text = block.get("text") if isinstance(block, dict) else None
        if isinstance(text, str) and not text.lstrip().startswith(skip_prefixes):
            out.append(text)
    return "\n".join(out)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    mock: ScriptedModelServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _record(self) -> RecordedRequest:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        try:
            body = untrusted.loads(raw, what="the request body", max_bytes=MAX_BODY_BYTES) if raw else {}
        except untrusted.UntrustedInput:
            body = {}
        req = RecordedRequest(
            self.command, self.path, dict(self.headers), raw, body if isinstance(body, dict) else {}, time.time()
        )
        self.server.mock._log(req)
        return req

    def do_HEAD(self) -> None:
        self._record()
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        req = self._record()
        self.server.mock.handle_get(self, req)

    def do_POST(self) -> None:
        req = self._record()
        try:
            self.server.mock.handle_post(self, req)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the harness dropped the stream (a steered or interrupted turn): nothing left to answer

    def send_json(self, status: int, obj: object) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_sse(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True

    def send_event(self, data: object, event: str | None = None) -> None:
        payload = data if isinstance(data, str) else json.dumps(data)
        head = f"event: {event}\n" if event else ""
        self.wfile.write(f"{head}data: {payload}\n\n".encode())
        self.wfile.flush()


Handler = _Handler


class ScriptedModelServer:
    """The shared server: `start()`, `stop()`, `base_url`, `requests`; set `reply` to answer with fixed text, and
    `replies_by` ({needle: text}) to answer a request whose newest user text holds a needle with that needle's
    text (one mock serving several scripted conversations at once). `scripts_by` ({needle: script lines}) adds
    those `CALL`/`SLEEP` lines to what the model acts on whenever the newest input holds the needle: the model's
    part of a conversation is scripted on the server, and what the harness sends it stays plain text."""

    name: ClassVar[str] = "mock"
    model: ClassVar[str] = "mock-model"
    generation_path: ClassVar[str]  # how the path of this API's generation endpoint ends

    def __init__(self, reply: str | None = None) -> None:
        self.reply = reply
        self.replies_by: dict[str, str] = {}
        self.scripts_by: dict[str, str] = {}
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._replies: list[str] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # lifecycle ------------------------------------------------------------------------------------------------
    def start(self, timeout: float = 5.0) -> ScriptedModelServer:
        if self._server is not None:
            return self
        server = _Server(("127.0.0.1", 0), _Handler)
        server.mock = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"{self.name}-mock", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise TimeoutError(f"{self.name} mock did not start within {timeout}s") from None
                time.sleep(0.02)

    def stop(self, timeout: float = 5.0) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return
        stopper = threading.Thread(target=server.shutdown, daemon=True)
        stopper.start()
        stopper.join(timeout)
        server.server_close()
        if thread is not None:
            thread.join(timeout)

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"{self.name} mock is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # request log ----------------------------------------------------------------------------------------------
    def _log(self, req: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(req)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def model_requests(self) -> list[RecordedRequest]:
        """The requests that asked the model for an answer (the POSTs to this API's generation path)."""
        return [r for r in self.requests if r.method == "POST" and self.is_generation_path(r.path)]

    def wait_request(
        self,
        predicate: Callable[[RecordedRequest], object],
        *,
        after: int = 0,
        timeout: float = 60.0,
        what: Callable[[], str] = lambda: "no such model request",
        alive: Callable[[], bool] | None = None,
    ) -> RecordedRequest:
        """The first model request (from index `after` on) the predicate holds for; AssertionError with `what()`
        after `timeout` s, or as soon as `alive()` says the harness is gone."""
        deadline = time.monotonic() + timeout
        while True:
            found = next((r for r in self.model_requests()[after:] if predicate(r)), None)
            if found is not None:
                return found
            if time.monotonic() > deadline or (alive is not None and not alive()):
                raise AssertionError(what())
            time.sleep(0.02)

    def wait_seen(self, needle: str, **kw: Any) -> RecordedRequest:
        """The first model request carrying `needle` in its raw body (wait_request's keywords)."""
        return self.wait_request(lambda r: needle in r.raw, **kw)

    @property
    def replies(self) -> list[str]:
        """Every answer text sent so far, oldest first."""
        with self._lock:
            return list(self._replies)

    def saw(self, needle: str) -> bool:
        """Whether any model request carried `needle` (searched in the raw JSON body and in the parsed text)."""
        return any(needle in r.raw or needle in self.newest_user_text(r.body) for r in self.model_requests())

    # scripting ------------------------------------------------------------------------------------------------
    def answer(self, body: dict[str, Any]) -> str:
        """The reply text for one model request (by `replies_by`, else the fixed `reply` if set, else a digest),
        recorded in `replies`."""
        newest = self.newest_user_text(body)
        text = next((reply for needle, reply in self.replies_by.items() if needle in newest), None)
        if text is None:
            text = self.reply if self.reply is not None else digest_reply(newest)
        with self._lock:
            self._replies.append(text)
        return text

    def with_scripts(self, text: str) -> str:
        """The text a scripted model acts on: `text`, then the script of every `scripts_by` needle it holds."""
        extra = [script for needle, script in self.scripts_by.items() if needle in text]
        return "\n".join([text, *extra]) if extra else text

    # provider specifics ---------------------------------------------------------------------------------------
    def is_generation_path(self, path: str) -> bool:
        return route(path).endswith(self.generation_path)

    def newest_user_text(self, body: dict[str, Any]) -> str:
        raise NotImplementedError

    def handle_post(self, h: Handler, req: RecordedRequest) -> None:
        raise NotImplementedError

    def handle_get(self, h: Handler, req: RecordedRequest) -> None:
        if route(req.path).endswith("/models"):
            h.send_json(200, {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "mock"}]})
        else:
            h.send_json(404, {"error": {"message": f"mock: no route {req.path}"}})
