"""The receiving relay process's side of A2A across the relay (docs/dev/relay.md "A2A across the relay"): a task
request for one of this machine's agents goes to that agent's task service as a task frame on its uds socket
(ingress/uds_tasks.py `serve_relayed`), which takes it only from this process, for the sender it labels
`@relay:<machine>/<agent>`. The task lives here, in that agent's journal, as a local sender's does: the same chain,
dedupe, deadline and reply. Blocking: relay/deliver.py runs it in a thread."""

from __future__ import annotations

import json
import socket

from crosstalk.core.errors import ErrorKind
from crosstalk.fs.reading import read_line
from crosstalk.registry.paths import StatePaths
from crosstalk.relay.a2a_wire import TaskRequest, encode_task_answer, encode_task_error
from crosstalk.relay.wire import encode_error

TIMEOUT_S = 60.0  # a waiting SendMessage is answered within the task service's 50 s (tasks/service.py MAX_WAIT_S)
MAX_ANSWER_BYTES = 1024 * 1024


def deliver_task(paths: StatePaths, req: TaskRequest, *, timeout: float = TIMEOUT_S) -> bytes:
    """The answer frame for one task request: the task, the task service's refusal, or why it never got there."""
    from crosstalk.ingress.frames import encode_auth
    from crosstalk.ingress.task_frames import encode_task_send
    from crosstalk.registry.credentials import read_key
    from crosstalk.registry.discovery import resolve
    from crosstalk.registry.errors import AmbiguousName, KeyFileError, NoSuchAgent, RegistryError

    msg = req.message
    try:
        target = resolve(paths, msg.to)
        key = read_key(paths.key_file(target.agent_id))
    except (NoSuchAgent, AmbiguousName) as exc:
        return encode_error("no_agent", str(exc))
    except KeyFileError as exc:
        return encode_error("unreachable", f"agent {msg.to!r} has no usable key: {exc}")
    except RegistryError as exc:
        return encode_error("unreachable", f"this machine's registry cannot be read: {exc}")
    line = json.loads(encode_task_send("-", msg, return_immediately=req.return_immediately, task_id=req.task_id))
    line["relay_from"] = msg.from_  # the bearer is unused: the socket proves this process (ingress/relay_peer.py)
    frame = encode_auth(key) + json.dumps(line, ensure_ascii=False).encode() + b"\n"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        try:
            sock.connect(target.uds_path)
        except OSError as exc:
            return encode_error("unreachable", f"agent {target.name!r} is not answering on its socket: {exc}")
        try:
            sock.sendall(frame)
            raw = read_line(sock, MAX_ANSWER_BYTES)
        except OSError as exc:  # the agent may have it: the sender resends the same message_id (dedupe)
            return encode_error("wire", f"no answer from {target.name}: {exc}")
    finally:
        sock.close()
    try:
        answer = json.loads(raw)
    except ValueError:
        return encode_error("wire", f"{target.name} answered with a line that is not JSON")
    if isinstance(answer, dict) and isinstance(answer.get("task"), dict):
        return encode_task_answer(answer["task"], target.name, target.agent_id)
    err = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(err, dict):  # the task frames' error, or the socket's own refusal (a string)
        kind, text = str(err.get("kind") or ErrorKind.FAILED.value), str(err.get("message") or "")
    else:
        kind, text = ErrorKind.FAILED.value, str(err or "the agent gave no task")
    return encode_task_error(kind, text, target.name, target.agent_id)
