"""A2A across the relay (docs/dev/relay.md "A2A across the relay"): the task request and its answer, pure.

A task request is `{"v": 1, "task": {"message": Message.to_dict(), "return_immediately": B, "task_id": T|null}}`
on the same subject as a message. It has no top-level `message`, so a relay process from before it answers
`bad_frame` and delivers nothing: a task is never taken as a plain message. The answer is `{"v": 1, "task": VIEW,
"to": NAME, "agent_id": ID}` (VIEW as ingress/task_frames.py `view_to_dict` writes it: what A2A's Task carries), or
`{"v": 1, "task_error": {"kind": K, "message": M}, "to": NAME, "agent_id": ID}` when the task service refused it, or
one of wire.py's error frames when it never reached the agent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from crosstalk.core.errors import MessageError
from crosstalk.core.message import Message
from crosstalk.relay.errors import FrameError
from crosstalk.relay.wire import MAX_FRAME_BYTES, VERSION, addressed, relayed_agent


@dataclass(frozen=True, slots=True)
class TaskRequest:
    message: Message  # readdressed for this machine: `to` the local NAME, `from` `@relay:<machine>/<agent>`
    return_immediately: bool
    task_id: str | None


def encode_task_request(msg: Message, *, return_immediately: bool, task_id: str | None) -> bytes:
    task = {"message": msg.to_dict(), "return_immediately": return_immediately, "task_id": task_id}
    data = json.dumps({"v": VERSION, "task": task}, ensure_ascii=False).encode("utf-8")
    if len(data) > MAX_FRAME_BYTES:
        raise FrameError(f"the frame is {len(data)} bytes, over the relay's {MAX_FRAME_BYTES}-byte limit")
    return data


def task_request_of(obj: dict[str, Any], own_alias: str, from_alias: str) -> TaskRequest:
    """The task request a parsed frame carries (wire.py `parse_frame`). Its sender must be an agent of the sending
    machine (a task has an owner a reply goes back to), so `from` must be an agent name: FrameError otherwise."""
    task = obj.get("task")
    raw = task.get("message") if isinstance(task, dict) else None
    if not isinstance(task, dict) or not isinstance(raw, dict):
        raise FrameError("a task request carries task.message, an object")
    name, label = addressed(raw, own_alias, from_alias)
    if relayed_agent(label) is None:
        raise FrameError("a task's sender must be an agent of the sending machine (from: its name)")
    tid, immediately = task.get("task_id"), task.get("return_immediately", False)
    if (tid is not None and (not isinstance(tid, str) or not tid)) or not isinstance(immediately, bool):
        raise FrameError("task.task_id is a non-empty string or null, task.return_immediately a boolean")
    try:
        msg = Message.from_dict({**raw, "to": name, "from": label, "task_id": None})
    except MessageError as exc:
        raise FrameError(f"invalid message: {exc}") from None
    return TaskRequest(msg, immediately, tid)


def encode_task_answer(view: dict[str, Any], name: str, agent_id: str) -> bytes:
    return json.dumps({"v": VERSION, "task": view, "to": name, "agent_id": agent_id}, ensure_ascii=False).encode()


def encode_task_error(kind: str, message: str, name: str, agent_id: str) -> bytes:
    err = {"kind": kind[:64], "message": message[:2000]}
    return json.dumps({"v": VERSION, "task_error": err, "to": name, "agent_id": agent_id}).encode()


def task_params(raw: object) -> dict[str, Any]:
    """A local request's `task` field (relay/local.py), checked: {"return_immediately": bool, "task_id": str|None}.
    ValueError otherwise."""
    if not isinstance(raw, dict):
        raise ValueError("task: an object")
    immediately, tid = raw.get("return_immediately", False), raw.get("task_id")
    if not isinstance(immediately, bool) or not (tid is None or (isinstance(tid, str) and tid)):
        raise ValueError("task: return_immediately a boolean, task_id a non-empty string or null")
    return {"return_immediately": immediately, "task_id": tid}
