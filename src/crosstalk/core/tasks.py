"""Task records and the errors the task service raises. Pure: no I/O, no SDK types."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from crosstalk.core.states import Outcome
from crosstalk.core.strenum import StrEnum


class TaskState(StrEnum):
    """A2A 1.0 task states, as far as crosstalk uses them."""

    SUBMITTED = "submitted"  # journaled, waiting for dispatch; still cancelable
    WORKING = "working"  # claimed for dispatch, or an ask delivered and awaiting its reply
    INPUT_REQUIRED = "input_required"  # interrupted: the receiver waits for the creator's next message (not terminal)
    COMPLETED = "completed"  # delivered (inform/command/meta), or an ask answered
    FAILED = "failed"  # rejected, unreachable, or an ask whose deadline passed
    CANCELED = "canceled"  # canceled by its creator before dispatch


TERMINAL = frozenset({TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED})


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One message in a task's history."""

    message_id: str
    role: str  # "user" (the sender's message) or "agent" (the receiver's reply)
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ArtifactPart:
    """One part of an artifact, exactly one content field set: `text`, `data` (any JSON value), `raw` (the file's
    bytes, base64-encoded) or `url` (a file by reference). `media_type` and `filename` describe a file part."""

    text: str | None = None
    data: Any = None
    raw: str | None = None
    url: str | None = None
    media_type: str | None = None
    filename: str | None = None

    @property
    def kind(self) -> str:
        for name in ("text", "raw", "url"):
            if getattr(self, name) is not None:
                return name
        return "data"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {self.kind: getattr(self, self.kind)}
        if self.media_type:
            out["media_type"] = self.media_type
        if self.filename:
            out["filename"] = self.filename
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ArtifactPart:
        return cls(
            text=data.get("text"),
            data=data.get("data"),
            raw=data.get("raw"),
            url=data.get("url"),
            media_type=data.get("media_type"),
            filename=data.get("filename"),
        )


@dataclass(frozen=True, slots=True)
class Artifact:
    """An output the receiver produced for a task (A2A 1.0 §4.1.7)."""

    artifact_id: str
    parts: tuple[ArtifactPart, ...]
    name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"artifact_id": self.artifact_id, "parts": [p.to_dict() for p in self.parts]}
        if self.name:
            out["name"] = self.name
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Artifact:
        parts = tuple(ArtifactPart.from_dict(p) for p in data.get("parts") or [] if isinstance(p, dict))
        return cls(str(data.get("artifact_id") or ""), parts, data.get("name") or None)


@dataclass(frozen=True, slots=True)
class TaskView:
    """What the task's creator may see of it."""

    task_id: str
    context_id: str
    creator: str  # agent_id of the verified sender that created it
    kind: str
    state: TaskState
    reason: str | None = None
    delivery: str | None = None  # the receiver chain's state: accepted | queued | rejected | unreachable | unknown
    answer: Outcome | None = None  # what the creator is told: the chain's outcome, then replied, expired, canceled …
    history: tuple[HistoryEntry, ...] = ()
    created_at: float = 0.0
    updated_at: float = 0.0
    deadline_at: float | None = None
    artifacts: tuple[Artifact, ...] = ()
    direct: bool = False  # answered with a direct message: SendMessage shows the reply as a Message, not a Task

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    @property
    def completion(self) -> str | None:
        """metadata.crosstalk.completion: "delivered" when the message reached the session, "replied" when an ask
        was answered; None otherwise. An unknown outcome never reads as completed."""
        if self.state is not TaskState.COMPLETED:
            return None
        replied = self.artifacts or any(h.role == "agent" for h in self.history)
        return "replied" if replied else "delivered"


@dataclass(frozen=True, slots=True)
class TaskPage:
    tasks: tuple[TaskView, ...]
    next_page_token: str  # "" when there are no more
    total_size: int


class TaskApi:
    """The operations an A2A server needs, keyed by the verified sender's agent_id. Implemented by
    tasks.service.TaskService; the A2A ingress depends only on this interface."""

    async def send(
        self,
        sender: Any,  # crosstalk.core.sender.Sender (verified, transport "a2a")
        message: Any,  # crosstalk.core.message.Message (kind, delivery, deadline, in_reply_to, hop chain, text)
        *,
        task_id: str | None,
        return_immediately: bool,
    ) -> TaskView:
        """A new task (task_id None) or a continuation of the sender's own task.

        Without return_immediately it returns only when the task is terminal (an ask: when answered, failed or
        past its deadline). With it, the task as soon as it is journaled (submitted). Raises TaskError:
        NOT_FOUND (no such task of this sender), UNSUPPORTED (continuation of a terminal task), INVALID
        (admission, hop guard or size: nothing was created). A policy refusal is a FAILED task, not an error.
        The same (sender, message_id) again returns the task it created the first time."""
        raise NotImplementedError

    async def get(self, sender_agent_id: str, task_id: str) -> TaskView:
        """The sender's own task; another's or a missing one is NOT_FOUND."""
        raise NotImplementedError

    async def list(
        self,
        sender_agent_id: str,
        *,
        page_size: int = 50,
        page_token: str = "",
        context_id: str | None = None,
        state: TaskState | None = None,
        updated_after: float | None = None,
    ) -> TaskPage:
        """Only the sender's own tasks, most recently updated first; `updated_after` (epoch seconds) filters."""
        raise NotImplementedError

    async def cancel(self, sender_agent_id: str, task_id: str) -> TaskView:
        """SUBMITTED and not yet claimed for dispatch → CANCELED with nothing written to the session; claimed or
        terminal → NOT_CANCELABLE; another's or missing → NOT_FOUND."""
        raise NotImplementedError
