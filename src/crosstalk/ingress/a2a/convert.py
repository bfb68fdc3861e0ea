"""Translation between A2A 1.0 protobuf records and crosstalk's own (Message, TaskView, TaskError), both ways.

Everything protobuf stays in this package: the server side turns an A2A Message into a crosstalk Message and a
TaskView into an A2A Task; the client side does the reverse. crosstalk's own fields travel as
`metadata.crosstalk` on the A2A Message (kind, delivery, deadline_seconds, in_reply_to, hop_chain, from) and on the
A2A Task (completion, delivery, reason, kind, and the creator's answer record: core.states.Outcome).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    JSON_RPC_ERROR_CODE_MAP,
    A2AError,
    ContentTypeNotSupportedError,
    InternalError,
    InvalidParamsError,
)
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct, Value

from crosstalk.core.errors import ERROR_TABLE, MessageError, TaskError
from crosstalk.core.kinds import Kind
from crosstalk.core.message import Message
from crosstalk.core.sender import Sender
from crosstalk.core.states import Outcome, State
from crosstalk.core.tasks import Artifact, ArtifactPart, HistoryEntry, TaskState, TaskView

_A2A_ERRORS: dict[int, type[A2AError]] = {code: cls for cls, code in JSON_RPC_ERROR_CODE_MAP.items()}

META_KEY = "crosstalk"  # the metadata namespace crosstalk's own fields travel under
MESSAGE_META_KEYS = ("kind", "delivery", "deadline_seconds", "in_reply_to", "hop_chain", "from")
OPS = ("claim", "release")  # metadata.crosstalk.op: a request about the receiving agent itself, never injected as is

STATE_TO_A2A: dict[TaskState, pb.TaskState] = {
    TaskState.SUBMITTED: pb.TASK_STATE_SUBMITTED,
    TaskState.WORKING: pb.TASK_STATE_WORKING,
    TaskState.INPUT_REQUIRED: pb.TASK_STATE_INPUT_REQUIRED,
    TaskState.COMPLETED: pb.TASK_STATE_COMPLETED,
    TaskState.FAILED: pb.TASK_STATE_FAILED,
    TaskState.CANCELED: pb.TASK_STATE_CANCELED,
}
STATE_FROM_A2A: dict[int, TaskState] = {v: k for k, v in STATE_TO_A2A.items()}

_ROLE_TO_A2A = {"user": pb.ROLE_USER, "agent": pb.ROLE_AGENT}
_ROLE_FROM_A2A = {pb.ROLE_USER: "user", pb.ROLE_AGENT: "agent"}

# Where a MessageError's field came from on the wire, so the client reads which of its inputs was wrong.
_WIRE_FIELD = {
    "message_id": "message.messageId",
    "parts": "message.parts",
    "context_id": "message.contextId",
    "task_id": "message.taskId",
    **{key: f"message.metadata.{META_KEY}.{key}" for key in MESSAGE_META_KEYS},
}


# ------------------------------------------------------------------ server side: A2A in, crosstalk out


def message_from_a2a(msg: pb.Message, *, to: str, sender: Sender) -> Message:
    """The crosstalk Message an inbound A2A Message stands for. Raises InvalidParamsError naming the bad field.

    Text parts only (joined with newlines, as Message.text joins them). Without `metadata.crosstalk` the message is
    a plain inform with delivery auto. `from` defaults to the verified sender's name (display only: identity comes
    from the bearer token, never from the envelope)."""
    text = "\n".join(_text_parts(msg))
    meta = _crosstalk_metadata(msg)
    record: dict[str, Any] = {
        "message_id": msg.message_id,
        "to": to,
        "from": meta.get("from") or sender.name,
        "kind": meta.get("kind"),
        "delivery": meta.get("delivery"),
        "in_reply_to": meta.get("in_reply_to"),
        "context_id": msg.context_id or None,
        "task_id": msg.task_id or None,
        "deadline_seconds": _whole_seconds(meta.get("deadline_seconds")),
        "hop_chain": meta.get("hop_chain"),
        "parts": [{"type": "text", "text": text}],
    }
    try:
        return Message.from_dict(record)
    except MessageError as exc:
        wire = _WIRE_FIELD.get(exc.field, exc.field)
        raise InvalidParamsError(message=f"{wire}: {exc.problem}", data={"field": wire}) from None


def message_op(msg: pb.Message) -> str | None:
    """`metadata.crosstalk.op` of an inbound A2A Message: None for an ordinary message, else one of OPS."""
    op = _crosstalk_metadata(msg).get("op")
    if op is None:
        return None
    if op not in OPS:
        field = f"message.metadata.{META_KEY}.op"
        raise InvalidParamsError(message=f"{field}: must be one of {', '.join(OPS)}, got {op!r}", data={"field": field})
    return str(op)


def _text_parts(msg: pb.Message) -> list[str]:
    # A2A 1.0 §3.1.1/§3.3.2: content the agent cannot take is ContentTypeNotSupportedError (-32005), not a
    # malformed request. crosstalk delivers text into a session, so only text parts (text/* if typed) are taken.
    texts: list[str] = []
    for i, part in enumerate(msg.parts):
        content = part.WhichOneof("content")
        if content != "text":
            what = f"a {content} part" if content else "a part with no content"
            raise ContentTypeNotSupportedError(
                message=f"message.parts[{i}]: only text parts are accepted, got {what}",
                data={"field": f"message.parts[{i}]"},
            )
        if part.media_type and not part.media_type.startswith("text/"):
            raise ContentTypeNotSupportedError(
                message=f"message.parts[{i}]: only text/* media types are accepted, got {part.media_type!r}",
                data={"field": f"message.parts[{i}].mediaType"},
            )
        texts.append(part.text)
    if not texts:
        raise InvalidParamsError(
            message="message.parts: at least one text part is required", data={"field": "message.parts"}
        )
    return texts


def _crosstalk_metadata(msg: pb.Message) -> dict[str, Any]:
    if not msg.HasField("metadata"):
        return {}
    meta = MessageToDict(msg.metadata).get(META_KEY)
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        field = f"message.metadata.{META_KEY}"
        raise InvalidParamsError(message=f"{field}: must be an object", data={"field": field})
    return meta  # unknown keys are ignored: a newer peer may add some


def _whole_seconds(value: object) -> object:
    """JSON numbers arrive as floats through protobuf's Struct: 30.0 is 30 seconds; 1.5 stays invalid."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def task_to_a2a(view: TaskView, history_length: int | None = None) -> pb.Task:
    """The A2A Task a crosstalk TaskView shows its creator. history_length: None = all, 0 = none, n = the last n."""
    task = pb.Task(id=view.task_id, context_id=view.context_id)
    task.status.state = STATE_TO_A2A[view.state]
    if view.updated_at:
        task.status.timestamp.FromNanoseconds(int(view.updated_at * 1e9))
    history = [_entry_to_a2a(entry, view) for entry in view.history]
    replies = [m for m in history if m.role == pb.ROLE_AGENT]
    if replies:
        task.status.message.CopyFrom(replies[-1])
    if history_length is not None:
        history = history[-history_length:] if history_length > 0 else []
    task.history.extend(history)
    task.artifacts.extend(artifact_to_a2a(a) for a in view.artifacts)
    answer = view.answer.to_dict() if view.answer is not None else None
    meta = {"completion": view.completion, "delivery": view.delivery, "reason": view.reason, "kind": view.kind,
            "answer": answer}  # fmt: skip
    task.metadata.update({META_KEY: {k: v for k, v in meta.items() if v is not None}})
    return task


def direct_reply_to_a2a(view: TaskView) -> pb.Message | None:
    """A task answered with a direct message (TaskView.direct): the reply as the A2A Message SendMessage returns
    instead of the Task (A2A 1.0 §3.1.1: "Task … OR Message"). None when the task holds no such reply."""
    if not view.direct:
        return None
    replies = [entry for entry in view.history if entry.role == "agent"]
    if not replies:
        return None
    msg = _entry_to_a2a(replies[-1], view)
    msg.ClearField("task_id")  # a direct message stands on its own: the task is kept for audit, not shown
    return msg


def artifact_to_a2a(artifact: Artifact) -> pb.Artifact:
    out = pb.Artifact(artifact_id=artifact.artifact_id, name=artifact.name or "")
    for part in artifact.parts:
        out.parts.append(_part_to_a2a(part))
    return out


def _part_to_a2a(part: ArtifactPart) -> pb.Part:
    out = pb.Part(media_type=part.media_type or "", filename=part.filename or "")
    kind = part.kind
    if kind == "text":
        out.text = part.text or ""
    elif kind == "raw":
        out.raw = base64.b64decode(part.raw or "")
    elif kind == "url":
        out.url = part.url or ""
    else:
        out.data.CopyFrom(_to_value(part.data))
    return out


def _to_value(data: Any) -> Value:
    value = Value()
    value.MergeFrom(to_struct({"v": data}).fields["v"])
    return value


def artifact_from_a2a(artifact: pb.Artifact) -> Artifact:
    parts = tuple(_part_from_a2a(p) for p in artifact.parts if p.WhichOneof("content"))
    return Artifact(artifact.artifact_id, parts, artifact.name or None)


def _part_from_a2a(part: pb.Part) -> ArtifactPart:
    media, filename = part.media_type or None, part.filename or None
    content = part.WhichOneof("content")
    if content == "text":
        return ArtifactPart(text=part.text, media_type=media, filename=filename)
    if content == "raw":
        return ArtifactPart(raw=base64.b64encode(part.raw).decode(), media_type=media, filename=filename)
    if content == "url":
        return ArtifactPart(url=part.url, media_type=media, filename=filename)
    return ArtifactPart(data=MessageToDict(part.data), media_type=media, filename=filename)


def _entry_to_a2a(entry: HistoryEntry, view: TaskView) -> pb.Message:
    msg = pb.Message(
        message_id=entry.message_id,
        context_id=view.context_id,
        task_id=view.task_id,
        role=_ROLE_TO_A2A.get(entry.role, pb.ROLE_AGENT),
        parts=[pb.Part(text=entry.text)],
    )
    if entry.metadata:
        # crosstalk's own fields travel under metadata.crosstalk, the same namespace a sender writes them in.
        msg.metadata.CopyFrom(to_struct({META_KEY: entry.metadata}))
    return msg


def to_struct(data: dict[str, Any]) -> Struct:
    """A JSON-safe copy of `data` as a protobuf Struct (values JSON cannot hold become strings)."""
    struct = Struct()
    struct.update(json.loads(json.dumps(data, default=str)))
    return struct


def task_error_to_a2a(err: TaskError) -> A2AError:
    """The A2A error a TaskError is answered with: the SDK's error that carries its kind's JSON-RPC code (the table
    in crosstalk.core.errors: -32001, -32002, -32004, -32600, -32602, -32603). A code outside the table (a peer's
    error passed on) is an internal error."""
    entry = ERROR_TABLE.get(err.code)
    cls = _A2A_ERRORS.get(entry.jsonrpc, InternalError) if entry else InternalError
    return cls(message=err.message or None)


def state_filter_from_a2a(state: int) -> tuple[bool, TaskState | None]:
    """ListTasks' status filter as (can_match, crosstalk state). UNSPECIFIED matches every task; a state crosstalk
    never uses (rejected, auth-required) matches none."""
    if state == pb.TASK_STATE_UNSPECIFIED:
        return True, None
    mapped = STATE_FROM_A2A.get(state)
    return mapped is not None, mapped


# ------------------------------------------------------------------ client side: crosstalk out, A2A in


def message_to_a2a(message: Message, *, task_id: str | None = None, op: str | None = None) -> pb.Message:
    """The A2A Message that carries a crosstalk Message to another agent (`op`: a claim or release request)."""
    msg = pb.Message(
        message_id=message.message_id,
        context_id=message.context_id or "",
        task_id=task_id or message.task_id or "",
        role=pb.ROLE_USER,
        parts=[pb.Part(text=p.text) for p in message.parts],
    )
    fields = message.to_dict()  # the keys message_from_a2a reads back, each only when set
    meta: dict[str, Any] = {key: fields[key] for key in MESSAGE_META_KEYS if fields[key]}
    if op is not None:
        meta["op"] = op
    msg.metadata.update({META_KEY: meta})
    return msg


def task_from_a2a(task: pb.Task, *, kind: str = "") -> TaskView:
    """The TaskView an A2A Task stands for. Tolerant of agents that are not crosstalk: a state crosstalk does not
    use reads as its nearest crosstalk state with the A2A state as the reason, and a reply carried as an artifact
    or only as status.message becomes an agent history entry (artifacts are also kept as they came). `creator` is
    left empty: the caller is the creator."""
    meta = _struct_dict(task, "metadata").get(META_KEY)
    meta = meta if isinstance(meta, dict) else {}
    state, reason = _state_from_a2a(task.status.state)
    history: list[HistoryEntry] = [_entry_from_a2a(m) for m in task.history]
    seen = {h.message_id for h in history}
    if task.status.HasField("message") and task.status.message.message_id not in seen:
        history.append(_entry_from_a2a(task.status.message))
        seen.add(task.status.message.message_id)
    for artifact in task.artifacts:
        texts = [p.text for p in artifact.parts if p.WhichOneof("content") == "text"]
        if texts and artifact.artifact_id not in seen:
            history.append(
                HistoryEntry(artifact.artifact_id, "agent", "\n".join(texts), {"artifact": artifact.name or True})
            )
    updated = task.status.timestamp.ToNanoseconds() / 1e9 if task.status.HasField("timestamp") else 0.0
    return TaskView(
        task_id=task.id,
        context_id=task.context_id,
        creator="",
        kind=str(meta.get("kind") or kind),
        state=state,
        reason=_opt_str(meta.get("reason")) or reason,
        delivery=_opt_str(meta.get("delivery")),
        answer=_answer_from(meta.get("answer")),
        history=tuple(history),
        updated_at=updated,
        artifacts=tuple(artifact_from_a2a(a) for a in task.artifacts),
    )


def reply_message_to_view(reply: pb.Message, sent: Message) -> TaskView:
    """An agent that answers SendMessage with a direct Message (no task): a completed view holding both, its answer
    replied (to an ask) or delivered."""
    answered = State.REPLIED if sent.kind is Kind.ASK else State.ACCEPTED
    return TaskView(
        task_id=reply.task_id,
        context_id=reply.context_id or sent.context_id or "",
        creator="",
        kind=sent.kind.value,
        state=TaskState.COMPLETED,
        answer=Outcome(sent.message_id, answered, task_id=reply.task_id or None),
        history=(HistoryEntry(sent.message_id, "user", sent.text), _entry_from_a2a(reply)),
    )


def _state_from_a2a(state: int) -> tuple[TaskState, str | None]:
    mapped = STATE_FROM_A2A.get(state)
    if mapped is not None:
        return mapped, None
    if state == pb.TASK_STATE_REJECTED:
        return TaskState.FAILED, "rejected"
    return TaskState.WORKING, pb.TaskState.Name(state) if state in pb.TaskState.values() else f"state {state}"


def _entry_from_a2a(msg: pb.Message) -> HistoryEntry:
    text = "\n".join(p.text for p in msg.parts if p.WhichOneof("content") == "text")
    meta = _struct_dict(msg, "metadata")
    ours = meta.get(META_KEY)
    # Our own agents nest their fields under metadata.crosstalk; another agent's metadata is kept as it came.
    return HistoryEntry(
        msg.message_id, _ROLE_FROM_A2A.get(msg.role, "agent"), text, ours if isinstance(ours, dict) else meta
    )


def _answer_from(raw: object) -> Outcome | None:
    """The answer record a crosstalk agent put on its task; None from an agent that sends none (or a bad one)."""
    if raw is None:
        return None
    try:
        return Outcome.from_dict(raw)
    except ValueError:
        return None


def _struct_dict(owner: Any, field: str) -> dict[str, Any]:
    return MessageToDict(getattr(owner, field)) if owner.HasField(field) else {}


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
