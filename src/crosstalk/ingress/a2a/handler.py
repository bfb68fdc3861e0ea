"""The A2A request handler: each JSON-RPC method translated to the task service (TaskApi) and back.

Identity never comes from the request: the bearer middleware (server.py) resolves the token to a Sender, and the
context builder below hands it to the handler through ServerCallContext.state.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, NoReturn

from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler, validate_request_params
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.types import a2a_pb2 as pb
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    UnsupportedOperationError,
)
from a2a.utils.task import validate_history_length, validate_page_size

from crosstalk.core.errors import MessageError, TaskError
from crosstalk.core.message import Message
from crosstalk.core.sender import Sender
from crosstalk.core.tasks import TaskApi, TaskView
from crosstalk.fs import trace
from crosstalk.ingress.a2a.convert import (
    META_KEY,
    direct_reply_to_a2a,
    message_from_a2a,
    message_op,
    state_filter_from_a2a,
    task_error_to_a2a,
    task_to_a2a,
)

log = logging.getLogger(__name__)

# metadata.crosstalk.op requests (claim, release): (op, verified sender, message) → (the task that answers it,
# fields added to the task's metadata.crosstalk). crosstalk.agent.claims.ClaimDesk.handle is the one implementation.
OpHandler = Callable[[str, Sender, Message], Awaitable[tuple[TaskView, dict[str, Any]]]]

SENDER_STATE_KEY = "crosstalk_sender"  # where the bearer middleware leaves the Sender (ASGI scope["state"])

STREAMING_UNSUPPORTED = "Streaming is not supported by this agent (capabilities.streaming is false)"
PUSH_UNSUPPORTED = "Push notifications are not supported by this agent (capabilities.pushNotifications is false)"
EXTENDED_CARD_UNSUPPORTED = "This agent has no extended agent card (capabilities.extendedAgentCard is false)"


class SenderUser(User):
    """The A2A SDK's view of the verified sender (the SDK logs and compares `user_name`)."""

    def __init__(self, sender: Sender) -> None:
        self.sender = sender

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self.sender.agent_id or ""


class SenderContextBuilder(DefaultServerCallContextBuilder):
    """Builds the SDK's call context with the Sender the bearer middleware resolved, and without the token."""

    def build(self, request: Any) -> ServerCallContext:
        context = super().build(request)
        headers = context.state.get("headers")
        if isinstance(headers, dict):
            headers.pop("authorization", None)
        sender = request.scope.get("state", {}).get(SENDER_STATE_KEY)
        if isinstance(sender, Sender):
            context.user = SenderUser(sender)
            context.state[SENDER_STATE_KEY] = sender
        return context


class A2ARequestHandler(RequestHandler):
    """A2A 1.0 methods over crosstalk's task service. `to` is the receiving agent's name (Message.to)."""

    def __init__(self, tasks: TaskApi, *, to: str, ops: OpHandler | None = None) -> None:
        self._tasks = tasks
        self._to = to
        self._ops = ops

    def rename(self, to: str) -> None:
        """The receiving agent's new alias (a harness rename): later messages are addressed to it."""
        self._to = to

    # -------------------------------------------------------------- the four methods crosstalk serves

    @validate_request_params
    async def on_message_send(self, params: pb.SendMessageRequest, context: ServerCallContext) -> pb.Task | pb.Message:
        trace.mark("a2a_handler")
        validate_history_length(params.configuration)
        sender = _sender(context)
        message = message_from_a2a(params.message, to=self._to, sender=sender)
        op = message_op(params.message)
        if op is not None:
            return await self._on_op(op, sender, message, params.configuration)
        try:
            view = await self._tasks.send(
                sender,
                message,
                task_id=message.task_id,
                return_immediately=params.configuration.return_immediately,
            )
        except Exception as exc:
            _raise_mapped(exc, "SendMessage")
        direct = direct_reply_to_a2a(view)
        if direct is not None:
            return direct  # answered with a direct message: SendMessageResponse(message=…), the task kept for audit
        return _task(view, params.configuration)

    async def _on_op(self, op: str, sender: Sender, message: Message, config: Any) -> pb.Task:
        """A claim or release of this agent: answered by the op handler, never queued as a message."""
        if self._ops is None:
            raise UnsupportedOperationError(message=f"this agent does not serve metadata.{META_KEY}.op ({op})")
        try:
            view, extra = await self._ops(op, sender, message)
        except Exception as exc:
            _raise_mapped(exc, f"SendMessage ({op})")
        task = _task(view, config)
        if extra:
            task.metadata.fields[META_KEY].struct_value.update(extra)
        return task

    @validate_request_params
    async def on_get_task(self, params: pb.GetTaskRequest, context: ServerCallContext) -> pb.Task:
        validate_history_length(params)
        sender = _sender(context)
        try:
            view = await self._tasks.get(sender.agent_id or "", params.id)
        except Exception as exc:
            _raise_mapped(exc, "GetTask")
        return _task(view, params)

    @validate_request_params
    async def on_list_tasks(self, params: pb.ListTasksRequest, context: ServerCallContext) -> pb.ListTasksResponse:
        validate_history_length(params)
        page_size = params.page_size if params.HasField("page_size") else DEFAULT_LIST_TASKS_PAGE_SIZE
        validate_page_size(page_size)
        updated_after = None
        if params.HasField("status_timestamp_after"):
            updated_after = params.status_timestamp_after.ToNanoseconds() / 1e9
        sender = _sender(context)
        can_match, state = state_filter_from_a2a(params.status)
        if not can_match:
            return pb.ListTasksResponse(next_page_token="", page_size=page_size, total_size=0)
        try:
            page = await self._tasks.list(
                sender.agent_id or "",
                page_size=page_size,
                page_token=params.page_token,
                context_id=params.context_id or None,
                state=state,
                updated_after=updated_after,
            )
        except Exception as exc:
            _raise_mapped(exc, "ListTasks")
        return pb.ListTasksResponse(
            tasks=[_task(view, params) for view in page.tasks],
            next_page_token=page.next_page_token,
            page_size=page_size,
            total_size=page.total_size,
        )

    @validate_request_params
    async def on_cancel_task(self, params: pb.CancelTaskRequest, context: ServerCallContext) -> pb.Task:
        sender = _sender(context)
        try:
            view = await self._tasks.cancel(sender.agent_id or "", params.id)
        except Exception as exc:
            _raise_mapped(exc, "CancelTask")
        return task_to_a2a(view)

    # -------------------------------------------------------------- what the card says we do not do

    async def on_message_send_stream(
        self, params: pb.SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        raise UnsupportedOperationError(message=STREAMING_UNSUPPORTED)
        yield  # an async generator, as the dispatcher expects

    async def on_subscribe_to_task(
        self, params: pb.SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        raise UnsupportedOperationError(message=STREAMING_UNSUPPORTED)
        yield

    async def on_create_task_push_notification_config(
        self, params: pb.TaskPushNotificationConfig, context: ServerCallContext
    ) -> pb.TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError(message=PUSH_UNSUPPORTED)

    async def on_get_task_push_notification_config(
        self, params: pb.GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> pb.TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError(message=PUSH_UNSUPPORTED)

    async def on_list_task_push_notification_configs(
        self, params: pb.ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> pb.ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError(message=PUSH_UNSUPPORTED)

    async def on_delete_task_push_notification_config(
        self, params: pb.DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError(message=PUSH_UNSUPPORTED)

    async def on_get_extended_agent_card(
        self, params: pb.GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> pb.AgentCard:
        # A2A 1.0 §3.3.4: extendedAgentCard false → UnsupportedOperationError (NotConfigured is for agents that
        # declare the capability but have no card).
        raise UnsupportedOperationError(message=EXTENDED_CARD_UNSUPPORTED)


def _sender(context: ServerCallContext) -> Sender:
    sender = context.state.get(SENDER_STATE_KEY)
    if not isinstance(sender, Sender) or not sender.agent_id:
        # The bearer middleware refuses unauthenticated requests before they get here; reaching this is a wiring bug.
        log.error("A2A request reached the handler without a verified sender")
        raise InternalError(message="no verified sender for this request")
    return sender


def _task(view: TaskView, config: Any) -> pb.Task:
    history_length = config.history_length if config.HasField("history_length") else None
    return task_to_a2a(view, history_length)


def _raise_mapped(exc: Exception, method: str) -> NoReturn:
    """Task-service exceptions as the A2A errors the spec names; anything unexpected as an opaque internal error
    (its text may hold paths or internals, so it goes to the log, not to the peer)."""
    if isinstance(exc, TaskError):
        raise task_error_to_a2a(exc) from None
    if isinstance(exc, A2AError):
        raise exc
    if isinstance(exc, MessageError):
        raise InvalidParamsError(message=str(exc), data={"field": exc.field}) from None
    log.exception("A2A %s failed in the task service", method)
    raise InternalError(message=f"{method} failed inside the agent") from None
