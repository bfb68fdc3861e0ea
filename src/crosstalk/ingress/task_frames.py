"""The socket's task frames, pure: how one crosstalk agent sends another a task without the A2A SDK.

A task frame is shape (c) on an agent's socket (frames.py has (a) and (b)):

    {"type":"auth","token":RECEIVER_KEY}\\n
    {"type":"task","method":"send","bearer":SENDER_TOKEN,"message":{...},"return_immediately":false,
     "task_id":null,"op":null}\\n            or   {"type":"task","method":"get","bearer":SENDER_TOKEN,"task_id":T}\\n

answered with one line, `{"task": VIEW}` or `{"error": {"kind": K, "message": M}}`, then EOF. A frame with
`"keep": true` asks the receiver to keep the connection for the next frame (no auth line again): an answer with
`"kept": true` says it does (uds_tasks.serve_kept); without it the receiver closes after the answer, as ever.
The receiver's key proves the peer runs as this user; the bearer token names the sending agent (the token A2A's
edge gate reads, registry/bearer.py), and the peer's SO_PEERCRED pid must be that agent's own process. The
message and the task are A2A's (the same TaskApi the A2A edge calls: tasks/service.py), so a send gets the same
answers, the same dedupe and the same journal records as a SendMessage; VIEW is what `task_from_a2a` makes of the
A2A Task, without protobuf.
"""

from __future__ import annotations

import json
from typing import Any

from crosstalk.core.errors import ErrorKind, TaskError
from crosstalk.core.kinds import Kind
from crosstalk.core.message import Message, TextPart
from crosstalk.core.states import Outcome, State
from crosstalk.core.tasks import Artifact, HistoryEntry, TaskState, TaskView

METHODS = ("send", "get")
OPS = ("claim", "release")  # the A2A edge's metadata.crosstalk.op, the same requests (agent/claims.py)
# The Message fields a task frame carries: what A2A carries (message_from_a2a), nothing else. The receiver stamps
# `to` (its own name) and `sent_at`, as it does for a SendMessage.
MESSAGE_KEYS = ("message_id", "from", "kind", "delivery", "in_reply_to", "context_id", "task_id", "deadline_seconds",
                "hop_chain", "parts")  # fmt: skip
AUTH_KIND = "unauthenticated"  # error kinds besides the task kinds (ErrorKind values)
PROTOCOL_KIND = "failed"
# The agent stopped while it took the frame: the message may be journaled (and then delivered once it is back), or
# not. The sender is told the outcome is unknown, never that nothing arrived.
STOPPED_KIND = "agent_stopped"


# ------------------------------------------------------------------ requests
def encode_task_send(
    bearer: str,
    msg: Message,
    *,
    return_immediately: bool,
    task_id: str | None = None,
    op: str | None = None,
    keep: bool = False,
) -> bytes:
    fields = msg.to_dict()
    message = {k: fields[k] for k in MESSAGE_KEYS if fields.get(k) not in (None, "", [], 0)}
    message["parts"] = fields["parts"]
    if task_id:
        message["task_id"] = task_id
    line = {"type": "task", "method": "send", "bearer": bearer, "message": message,
            "return_immediately": return_immediately, "op": op}  # fmt: skip
    if keep:
        line["keep"] = True
    return json.dumps(line, ensure_ascii=False).encode() + b"\n"


def encode_task_get(bearer: str, task_id: str, *, keep: bool = False) -> bytes:
    line: dict[str, Any] = {"type": "task", "method": "get", "bearer": bearer, "task_id": task_id}
    if keep:
        line["keep"] = True
    return json.dumps(line).encode() + b"\n"


def message_of(params: dict[str, Any], *, to: str, sender_name: str | None) -> Message:
    """The Message a send frame carries, addressed to the receiving agent `to`. Raises MessageError (or TaskError
    for a frame that is not an object). `from` defaults to the verified sender's name, as on A2A."""
    raw = params.get("message")
    if not isinstance(raw, dict):
        raise TaskError(TaskError.INVALID, "message: must be an object")
    record = {k: raw.get(k) for k in MESSAGE_KEYS}
    record["to"] = to
    record["from"] = record.get("from") or sender_name
    msg = Message.from_dict(record)
    # One text part, the parts joined with newlines, as the A2A edge takes a message (message_from_a2a).
    return msg if len(msg.parts) == 1 else msg.with_(parts=(TextPart(msg.text),))


# ------------------------------------------------------------------ answers
def encode_view(view: TaskView) -> bytes:
    return json.dumps({"task": view_to_dict(view)}, ensure_ascii=False).encode() + b"\n"


def encode_error(kind: str, message: str) -> bytes:
    return json.dumps({"error": {"kind": kind, "message": message}}, ensure_ascii=False).encode() + b"\n"


def view_to_dict(view: TaskView) -> dict[str, Any]:
    """What the creator is shown of a task: the fields an A2A Task carries (task_to_a2a)."""
    return {
        "task_id": view.task_id,
        "context_id": view.context_id,
        "kind": view.kind,
        "state": view.state.value,
        "reason": view.reason,
        "delivery": view.delivery,
        "answer": view.answer.to_dict() if view.answer is not None else None,
        "history": [_entry_dict(h) for h in view.history],
        "updated_at": view.updated_at,
        "artifacts": [a.to_dict() for a in view.artifacts],
        "direct": view.direct,
    }


def _entry_dict(h: HistoryEntry) -> dict[str, Any]:
    return {"message_id": h.message_id, "role": h.role, "text": h.text, "metadata": h.metadata}


def view_from_dict(data: object, sent: Message | None = None) -> TaskView:
    """The TaskView the sender reads, as `task_from_a2a` (and, for a direct reply, `reply_message_to_view`) make it
    from the A2A answer: creator empty (the caller is the creator), artifacts' text as agent history entries.
    Raises ValueError on a malformed view."""
    if not isinstance(data, dict):
        raise ValueError("the task is not an object")
    history = [_entry(h) for h in data.get("history") or []]
    artifacts = tuple(Artifact.from_dict(a) for a in data.get("artifacts") or [] if isinstance(a, dict))
    if data.get("direct") and sent is not None:
        replies = [h for h in history if h.role == "agent"]
        if replies:
            return _direct(replies[-1], sent, str(data.get("context_id") or ""))
    seen = {h.message_id for h in history}
    for artifact in artifacts:
        texts = [p.text for p in artifact.parts if p.text is not None]
        if texts and artifact.artifact_id not in seen:
            history.append(HistoryEntry(artifact.artifact_id, "agent", "\n".join(texts),
                                        {"artifact": artifact.name or True}))  # fmt: skip
    answer = None
    if data.get("answer") is not None:
        try:
            answer = Outcome.from_dict(data["answer"])
        except ValueError:
            answer = None
    return TaskView(
        task_id=str(data["task_id"]),
        context_id=str(data.get("context_id") or ""),
        creator="",
        kind=str(data.get("kind") or (sent.kind.value if sent is not None else "")),
        state=TaskState(data["state"]),
        reason=data.get("reason") or None,
        delivery=data.get("delivery") or None,
        answer=answer,
        history=tuple(history),
        updated_at=float(data.get("updated_at") or 0.0),
        artifacts=artifacts,
    )


def _entry(raw: object) -> HistoryEntry:
    if not isinstance(raw, dict):
        raise ValueError("a history entry is not an object")
    meta = raw.get("metadata")
    return HistoryEntry(str(raw["message_id"]), str(raw.get("role") or "agent"), str(raw.get("text") or ""),
                        meta if isinstance(meta, dict) else {})  # fmt: skip


def _direct(reply: HistoryEntry, sent: Message, context_id: str) -> TaskView:
    """A task answered with a direct message: as A2A's SendMessage shows it (a Message, no task id)."""
    answered = State.REPLIED if sent.kind is Kind.ASK else State.ACCEPTED
    return TaskView(
        task_id="",
        context_id=context_id or sent.context_id or "",
        creator="",
        kind=sent.kind.value,
        state=TaskState.COMPLETED,
        answer=Outcome(sent.message_id, answered),
        history=(HistoryEntry(sent.message_id, "user", sent.text), reply),
    )


def error_of(data: dict[str, Any]) -> tuple[str, str]:
    err = data.get("error")
    if not isinstance(err, dict):
        return PROTOCOL_KIND, "malformed error answer"
    return str(err.get("kind") or PROTOCOL_KIND), str(err.get("message") or "")


TASK_KINDS = frozenset({TaskError.NOT_FOUND, TaskError.NOT_CANCELABLE, TaskError.UNSUPPORTED, TaskError.INVALID,
                        TaskError.INVALID_PARAMS, TaskError.INTERNAL})  # fmt: skip


def task_error(kind: str, message: str) -> TaskError | None:
    """The TaskError an error answer stands for, or None when it is not a task-level error."""
    try:
        code = ErrorKind(kind)
    except ValueError:
        return None
    return TaskError(code, message) if code in TASK_KINDS else None
