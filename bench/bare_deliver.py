"""A bare MCP server: the least a session needs to put a message into another harness's session, no crosstalk.

- `turn_start {socket, thread, text}`: `turn/start` into a Codex thread, over one connection per app-server socket,
  kept (as crosstalk's adapter keeps its own).
- `claude_line {socket, text}`: one line into a Claude session's messaging socket, as Claude's own SendMessage
  writes it (the envelope with from-mode="bypass", priority "next").
- `pi_line {socket, text}`: one line into bench/pi/bare_inbox.ts's socket (a bare pi extension), which makes it
  `pi.sendUserMessage(line)`.
- `qwen_frame {socket, token, session, text}`: the auth line and one user frame into a Qwen Code session's inbox
  (the registry token, `fromMode: "bypass"`), as Qwen's own peers write them.
- `opencode_prompt {url, session, text}`: `POST <url>/session/<session>/prompt_async`, OpenCode's own route (the one
  its SDK's `client.session.promptAsync` calls, from crosstalk's plugin too), with nothing of crosstalk's.

The Codex benchmark registers it in the sending session beside crosstalk, so both deliveries start from the same
tool call and differ only in what happens between the sender's harness and the receiver's.

    python bench/bare_deliver.py

Newline-delimited JSON-RPC on stdio (the MCP stdio transport), no SDK: initialize, tools/list, tools/call, ping.
"""

from __future__ import annotations

import itertools
import json
import socket
import sys
import uuid
from typing import Any

TOOLS = [
    {
        "name": "turn_start",
        "description": "Start a turn in a Codex thread with this text.",
        "inputSchema": {
            "type": "object",
            "properties": {"socket": {"type": "string"}, "thread": {"type": "string"}, "text": {"type": "string"}},
            "required": ["socket", "thread", "text"],
        },
    },
    {
        "name": "claude_line",
        "description": "Put this text into a Claude session through its messaging socket.",
        "inputSchema": {
            "type": "object",
            "properties": {"socket": {"type": "string"}, "text": {"type": "string"}},
            "required": ["socket", "text"],
        },
    },
    {
        "name": "pi_line",
        "description": "Put this text into a pi session through the bare extension's socket.",
        "inputSchema": {
            "type": "object",
            "properties": {"socket": {"type": "string"}, "text": {"type": "string"}},
            "required": ["socket", "text"],
        },
    },
    {
        "name": "qwen_frame",
        "description": "Put this text into a Qwen Code session through its inbox.",
        "inputSchema": {
            "type": "object",
            "properties": {k: {"type": "string"} for k in ("socket", "token", "session", "text")},
            "required": ["socket", "token", "session", "text"],
        },
    },
    {
        "name": "opencode_prompt",
        "description": "Post this text to an OpenCode session (prompt_async).",
        "inputSchema": {
            "type": "object",
            "properties": {k: {"type": "string"} for k in ("url", "session", "text")},
            "required": ["url", "session", "text"],
        },
    },
]
TIMEOUT_S = 10.0


class AppServer:
    def __init__(self, path: str) -> None:
        from websockets.sync.client import unix_connect

        self.ws = unix_connect(path, uri="ws://localhost/", max_size=None, open_timeout=TIMEOUT_S)
        self.ids = itertools.count(1)
        self.request("initialize", {"clientInfo": {"name": "bare", "title": None, "version": "1"},
                                    "capabilities": {"experimentalApi": False}})  # fmt: skip
        self.ws.send(json.dumps({"method": "initialized"}))

    def request(self, method: str, params: dict[str, Any]) -> Any:
        rid = next(self.ids)
        self.ws.send(json.dumps({"id": rid, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=TIMEOUT_S))
            if message.get("id") == rid and "method" not in message:
                return message.get("result", message.get("error"))


def claude_line(path: str, text: str) -> str:
    envelope = f'<cross-session-message from="uds:/nowhere" from-name="bare" from-mode="bypass">\n{text}\n'
    line = {"type": "user", "message": {"role": "user", "content": envelope + "</cross-session-message>"},
            "priority": "next"}  # fmt: skip
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(TIMEOUT_S)
        sock.connect(path)
        sock.sendall((json.dumps(line) + "\n").encode())
        sock.shutdown(socket.SHUT_WR)
        return sock.recv(4096).decode(errors="replace")


def pi_line(path: str, text: str) -> str:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(TIMEOUT_S)
        sock.connect(path)
        sock.sendall((text + "\n").encode())
        return sock.recv(16).decode(errors="replace")


def qwen_frame(path: str, token: str, session: str, text: str) -> str:
    user = {"msgV": 1, "msgId": str(uuid.uuid4()), "type": "user", "fromName": "bare", "fromMode": "bypass",
            "toSessionId": session, "priority": "next", "message": {"role": "user", "content": text}}  # fmt: skip
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(TIMEOUT_S)
        sock.connect(path)
        sock.sendall(
            (json.dumps({"msgV": 1, "type": "auth", "token": token}) + "\n" + json.dumps(user) + "\n").encode()
        )
        sock.shutdown(socket.SHUT_WR)
        return sock.recv(4096).decode(errors="replace")


def opencode_prompt(url: str, session: str, text: str) -> str:
    import urllib.request

    body = json.dumps({"parts": [{"type": "text", "text": text}]}).encode()
    req = urllib.request.Request(f"{url}/session/{session}/prompt_async", data=body, method="POST",
                                 headers={"content-type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
        return str(r.status)


def main() -> None:
    servers: dict[str, AppServer] = {}
    out = sys.stdout
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if "id" not in msg:
            continue  # a notification
        method, rid = msg.get("method"), msg["id"]
        if method == "initialize":
            version = (msg.get("params") or {}).get("protocolVersion", "2025-06-18")
            result: Any = {"protocolVersion": version, "capabilities": {"tools": {}},
                           "serverInfo": {"name": "bare", "version": "1"}}  # fmt: skip
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            params = msg.get("params") or {}
            args = params.get("arguments") or {}
            path, text = str(args.get("socket", "")), str(args.get("text", ""))
            if params.get("name") == "claude_line":
                answer: Any = claude_line(path, text)
            elif params.get("name") == "pi_line":
                answer = pi_line(path, text)
            elif params.get("name") == "opencode_prompt":
                answer = opencode_prompt(str(args.get("url", "")), str(args.get("session", "")), text)
            elif params.get("name") == "qwen_frame":
                answer = qwen_frame(path, str(args.get("token", "")), str(args.get("session", "")), text)
            else:
                server = servers.get(path) or servers.setdefault(path, AppServer(path))
                input_ = [{"type": "text", "text": text, "text_elements": []}]
                answer = server.request("turn/start", {"threadId": str(args.get("thread", "")), "input": input_})
            result = {"content": [{"type": "text", "text": json.dumps(answer)}]}
        elif method == "ping":
            result = {}
        else:
            out.write(json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": method}}) + "\n")
            out.flush()
            continue
        out.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
