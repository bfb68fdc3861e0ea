"""An in-memory TaskApi with the documented semantics, simply: creator-only get/list/cancel, continuations (creator
only, terminal → UNSUPPORTED), dedupe on (sender, message_id), return_immediately → submitted at once, default wait →
terminal (an inform is delivered at once; an ask waits for `reply()` or its deadline).

Shared by the A2A unit and integration tests."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from typing import Any

from crosstalk.core.errors import TaskError
from crosstalk.core.kinds import Kind
from crosstalk.core.message import Message
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.tasks import HistoryEntry, TaskApi, TaskPage, TaskState, TaskView

ALICE = Sender(SenderClass.VERIFIED, "a1a1a1a1a1a1a1a1", "alice", "a2a")
BOB = Sender(SenderClass.VERIFIED, "b0b0b0b0b0b0b0b0", "bob", "a2a")
TOKENS = {"tok-alice": ALICE, "tok-bob": BOB}


def authenticate(token: str) -> Sender | None:
    return TOKENS.get(token)


@dataclass
class _Task:
    view: TaskView
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class FakeTasks(TaskApi):
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.sent: list[tuple[Sender, Message, str | None, bool]] = []
        self.tasks: dict[str, _Task] = {}
        self.by_message: dict[tuple[str, str], str] = {}
        self.invalid_reason: str | None = None  # next send raises INVALID with this reason
        self.reject_reason: str | None = None  # next new task fails as a policy rejection
        self.raise_next: Exception | None = None  # next call raises this (an unexpected failure)
        self.send_delay = 0.0  # seconds every send sleeps first (a slow receiver)
        self._seq = 0

    # -------------------------------------------------------------- TaskApi

    async def send(self, sender: Any, message: Any, *, task_id: str | None, return_immediately: bool) -> TaskView:
        self.calls.append(("send", sender.agent_id, message.message_id, task_id, return_immediately))
        self.sent.append((sender, message, task_id, return_immediately))
        self._maybe_raise()
        if self.send_delay:
            await asyncio.sleep(self.send_delay)
        if self.invalid_reason is not None:
            reason, self.invalid_reason = self.invalid_reason, None
            raise TaskError(TaskError.INVALID, reason)
        key = (sender.agent_id, message.message_id)
        if key in self.by_message:
            return self.tasks[self.by_message[key]].view
        if task_id is not None:
            task = self._own(sender.agent_id, task_id)
            if task.view.terminal:
                raise TaskError(TaskError.UNSUPPORTED, f"task {task_id} is {task.view.state.value}")
            self._update(task, history=(*task.view.history, _entry(message)))
            self.by_message[key] = task_id
            return task.view
        task = self._create(sender, message)
        if return_immediately:
            return task.view
        self.dispatch(task.view.task_id)
        return await self._wait_terminal(task, message)

    async def get(self, sender_agent_id: str, task_id: str) -> TaskView:
        self.calls.append(("get", sender_agent_id, task_id))
        self._maybe_raise()
        return self._own(sender_agent_id, task_id).view

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
        self.calls.append(("list", sender_agent_id, page_size, page_token, context_id, state))
        self.updated_after = updated_after
        self._maybe_raise()
        views = [
            t.view
            for t in self.tasks.values()
            if t.view.creator == sender_agent_id
            and (context_id is None or t.view.context_id == context_id)
            and (state is None or t.view.state is state)
        ]
        views.sort(key=lambda v: v.created_at, reverse=True)
        start = int(page_token or 0)
        page = views[start : start + page_size]
        more = start + page_size < len(views)
        return TaskPage(tuple(page), str(start + page_size) if more else "", len(views))

    async def cancel(self, sender_agent_id: str, task_id: str) -> TaskView:
        self.calls.append(("cancel", sender_agent_id, task_id))
        self._maybe_raise()
        task = self._own(sender_agent_id, task_id)
        if task.view.state is not TaskState.SUBMITTED:
            raise TaskError(TaskError.NOT_CANCELABLE, f"task {task_id} is {task.view.state.value}")
        self._update(task, state=TaskState.CANCELED, reason="canceled by its creator")
        return task.view

    # -------------------------------------------------------------- test controls

    def dispatch(self, task_id: str) -> None:
        """The receiver takes the message: an inform is delivered, an ask waits for its reply."""
        task = self.tasks[task_id]
        if task.view.state is not TaskState.SUBMITTED:
            return
        if self.reject_reason is not None:
            reason, self.reject_reason = self.reject_reason, None
            self._update(task, state=TaskState.FAILED, delivery="rejected", reason=reason)
        elif task.view.kind == Kind.ASK.value:
            self._update(task, state=TaskState.WORKING, delivery="accepted")
        else:
            self._update(task, state=TaskState.COMPLETED, delivery="accepted")

    def reply(self, task_id: str, text: str, message_id: str = "reply-1") -> None:
        task = self.tasks[task_id]
        entry = HistoryEntry(message_id, "agent", text, {"from": "receiver"})
        self._update(task, state=TaskState.COMPLETED, history=(*task.view.history, entry))

    def task_ids(self) -> list[str]:
        return list(self.tasks)

    # -------------------------------------------------------------- internals

    def _maybe_raise(self) -> None:
        if self.raise_next is not None:
            exc, self.raise_next = self.raise_next, None
            raise exc

    def _own(self, agent_id: str, task_id: str) -> _Task:
        task = self.tasks.get(task_id)
        if task is None or task.view.creator != agent_id:
            raise TaskError(TaskError.NOT_FOUND, f"no task {task_id}")
        return task

    def _create(self, sender: Sender, message: Message) -> _Task:
        self._seq += 1
        now = time.time()
        task_id = f"task-{self._seq:04d}"
        view = TaskView(
            task_id=task_id,
            context_id=message.context_id or f"ctx-{self._seq:04d}",
            creator=sender.agent_id or "",
            kind=message.kind.value,
            state=TaskState.SUBMITTED,
            delivery="queued",
            history=(_entry(message),),
            created_at=now + self._seq * 1e-6,  # strictly increasing, for newest-first order
            updated_at=now,
            deadline_at=now + message.deadline_seconds if message.deadline_seconds else None,
        )
        task = _Task(view)
        self.tasks[task_id] = task
        self.by_message[(sender.agent_id or "", message.message_id)] = task_id
        return task

    def _update(self, task: _Task, **changes: Any) -> None:
        task.view = replace(task.view, updated_at=time.time(), **changes)
        task.changed.set()
        task.changed = asyncio.Event()

    async def _wait_terminal(self, task: _Task, message: Message) -> TaskView:
        deadline = message.deadline_seconds or 30
        try:
            async with asyncio.timeout(deadline):
                while not task.view.terminal:
                    await task.changed.wait()
        except TimeoutError:
            self._update(task, state=TaskState.FAILED, reason="deadline passed")
        return task.view


def _entry(message: Message) -> HistoryEntry:
    return HistoryEntry(message.message_id, "user", message.text)
