"""Sending one message to NAME@ALIAS across the relay: connect as this machine, one request, the answer.

Every way it ends is bounded: the connect timeout when the relay is down, NATS's "no responders" at once when no
machine ALIAS serves, the caller's timeout when the answer never comes (then `unknown`: resend the same message_id
and the receiver answers from its journal).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from crosstalk.core.message import Message
from crosstalk.core.states import Outcome, State
from crosstalk.relay.a2a_wire import encode_task_request
from crosstalk.relay.config import RelayConfig, RelayConfigError
from crosstalk.relay.link import Link, describe
from crosstalk.relay.wire import Answer, FrameError, decode_answer, encode_request, msg_subject, split_remote

UNREACHABLE = "relay:unreachable"
NO_MACHINE = "relay:no_machine"
PERMISSION_DENIED = "relay:permission_denied"
NO_ANSWER = "relay:no_answer"
BAD_ANSWER = "relay:bad_answer"
TASK_REFUSED = "relay:task_refused"  # the remote task service refused a task request


@dataclass(frozen=True, slots=True)
class RemoteResult:
    """The outcome, or `no_agent` (no live agent of that name there) with the remote machine's word."""

    outcome: Outcome
    to: str
    agent_id: str | None = None
    no_agent: str | None = None
    task: dict[str, Any] | None = None  # a task request's answer (relay/a2a_wire.py): the task, as its creator sees it
    task_error: dict[str, Any] | None = None  # or the remote task service's refusal, {"kind", "message"}


def _failed(msg: Message, state: State, reason: str, detail: str) -> RemoteResult:
    return RemoteResult(Outcome(msg.message_id, state, reason, {"detail": detail, "relay": True}), msg.to)


async def send_remote_async(config: RelayConfig, msg: Message, *, timeout: float) -> RemoteResult:
    """One send on a connection of its own: connect as this machine, one request, close. (`crosstalk send` goes
    through this machine's relay process instead, relay/local_cli.py; this stays for tests and benches.)"""
    if split_remote(msg.to) is None:
        raise ValueError(f"{msg.to!r} is not a NAME@ALIAS address")
    link = Link(config)
    try:
        try:
            await link.connect(keep_trying=False, name=f"crosstalk send {config.alias}")
        except RelayConfigError:
            raise
        except Exception as exc:
            why = describe(link.last_error or exc)
            return _failed(msg, State.UNREACHABLE, UNREACHABLE, f"cannot reach the relay {config.url}: {why}")
        return await request_on(link, msg, timeout=timeout)
    finally:
        await link.close()


async def request_on(link: Link, msg: Message, *, timeout: float, task: dict[str, Any] | None = None) -> RemoteResult:
    """One request on a connected link (a one-off send's, or the relay process's for its agents' tool sends), and
    the remote machine's answer as a RemoteResult. Every way it ends is bounded by `timeout`. `task`
    ({"return_immediately", "task_id"}): send it as an A2A task request (relay/a2a_wire.py) instead."""
    import nats.errors as ne

    config = link.config
    remote = split_remote(msg.to)
    if remote is None:
        raise ValueError(f"{msg.to!r} is not a NAME@ALIAS address")
    _name, alias = remote
    try:
        frame = encode_request(msg) if task is None else encode_task_request(msg, **task)
    except FrameError as exc:
        return _failed(msg, State.REJECTED, "admission:frame_too_large", str(exc))
    if not link.nc.is_connected:
        why = describe(link.last_error)
        return _failed(msg, State.UNREACHABLE, UNREACHABLE, f"not connected to the relay {config.url}: {why}")
    refusals = len(link.permission_errors)
    request = asyncio.ensure_future(link.nc.request(msg_subject(alias, config.alias), frame, timeout=timeout))
    refused = asyncio.ensure_future(_permission_refused(link, refusals))
    done, _ = await asyncio.wait({request, refused}, return_when=asyncio.FIRST_COMPLETED)
    if refused in done and not request.done():
        request.cancel()
        return _failed(
            msg, State.REJECTED, PERMISSION_DENIED,
            f"the relay refused machine {config.alias!r} this send ({refused.result()}): a machine may send only "
            "as its own alias",
        )  # fmt: skip
    refused.cancel()
    try:
        reply = request.result()
    except ne.NoRespondersError:
        return _failed(msg, State.UNREACHABLE, NO_MACHINE, f"no machine {alias!r} is serving on the relay")
    except (ne.TimeoutError, TimeoutError):
        return _failed(
            msg, State.UNKNOWN, NO_ANSWER,
            f"no answer from machine {alias!r} within {timeout:g} s; the message may have arrived: resend it "
            f"with the same message_id ({msg.message_id}) and the receiver answers from its journal",
        )  # fmt: skip
    except Exception as exc:
        return _failed(msg, State.UNKNOWN, NO_ANSWER, f"the relay connection failed mid-request: {describe(exc)}")
    return result_of(msg, alias, reply.data)


def result_of(msg: Message, alias: str, data: bytes) -> RemoteResult:
    """The answer frame machine `alias` sent back, as this side reports it."""
    try:
        answer = decode_answer(data)
    except FrameError as exc:
        return _failed(msg, State.UNKNOWN, BAD_ANSWER, f"machine {alias!r} answered with a bad frame: {exc}")
    if answer.error == "no_agent":
        return RemoteResult(Outcome(msg.message_id, State.UNREACHABLE, "no_such_agent"), msg.to, None, answer.detail)
    if answer.error == "unreachable":
        return _failed(msg, State.UNREACHABLE, "relay:agent_unreachable", answer.detail or "")
    if answer.error == "bad_frame":
        return _failed(msg, State.REJECTED, "relay:bad_frame", answer.detail or "")
    if answer.task is not None or answer.task_error is not None:
        return _task_result(msg, alias, answer)
    if answer.error is not None or answer.outcome is None:
        return _failed(msg, State.UNKNOWN, NO_ANSWER, answer.detail or "no outcome")
    return RemoteResult(answer.outcome, f"{answer.to}@{alias}", answer.agent_id)


def _task_result(msg: Message, alias: str, answer: Answer) -> RemoteResult:
    """A task request's answer (relay/a2a_wire.py): the task, its answer record as the outcome; or the remote task
    service's refusal, `rejected` (TASK_REFUSED, its kind and message in the evidence)."""
    to = f"{answer.to}@{alias}"
    if answer.task is not None:
        outcome = Outcome(msg.message_id, State.SUBMITTED)
        with contextlib.suppress(ValueError):
            raw = answer.task.get("answer")
            outcome = Outcome.from_dict(raw) if isinstance(raw, dict) else outcome
        return RemoteResult(outcome, to, answer.agent_id, task=answer.task)
    err = answer.task_error or {}
    evidence = {"kind": err.get("kind"), "detail": err.get("message"), "relay": True}
    return RemoteResult(Outcome(msg.message_id, State.REJECTED, TASK_REFUSED, evidence), to, answer.agent_id,
                        task_error=err)  # fmt: skip


async def _permission_refused(link: Link, seen: int) -> str:
    """Wait for a permissions violation after the first `seen` (nats-py reports them only to the error callback)."""
    while len(link.permission_errors) <= seen:
        link.refused.clear()
        await link.refused.wait()
    return link.permission_errors[-1]


def send_remote(config: RelayConfig, msg: Message, *, timeout: float) -> RemoteResult:
    return asyncio.run(send_remote_async(config, msg, timeout=timeout))
