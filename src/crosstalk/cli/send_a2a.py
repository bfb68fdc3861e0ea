"""`crosstalk send --a2a --as AGENT TARGET`: the message as AGENT's A2A task at TARGET, printed as the task the
receiver answers with. TARGET a live agent here: its A2A endpoint (ingress/client.py `send_a2a`). TARGET NAME@ALIAS
that no live agent here has, when this state root joined a relay: across it, through this machine's relay process,
to the task service of agent NAME on machine ALIAS (relay/a2a_out.py; docs/dev/relay.md "A2A across the relay"),
printed and exited the same way."""

from __future__ import annotations

from crosstalk.cli.common import echo, fail, print_json, state_paths
from crosstalk.core.errors import EXIT_OK, ErrorKind

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def send_a2a(msg: Any, args: Any) -> int:
    """`send --a2a`: the receiver answers with a task; print it and exit by its state."""
    from crosstalk.core.errors import TaskError
    from crosstalk.ingress.client import send_a2a as send_local
    from crosstalk.ingress.errors import DeliveryError
    from crosstalk.registry.errors import AmbiguousName, NoSuchAgent, RegistryError

    if _across_relay(msg.to):
        return send_a2a_relay(msg, args)
    try:
        result = send_local(
            state_paths(),
            msg,
            as_agent=args.as_agent,
            return_immediately=args.return_immediately,
            task_id=args.task_id,
            timeout=args.timeout,
        )
    except (NoSuchAgent, AmbiguousName) as exc:
        fail(str(exc), ErrorKind.NO_AGENT)
    except DeliveryError as exc:
        fail(str(exc), exc.code)
    except TaskError as exc:
        fail(f"{exc.code}: {exc.message}", exc.code)
    except RegistryError as exc:
        fail(str(exc), ErrorKind.FAILED)
    return print_task(result.task, msg, args, result.target.name, result.target.agent_id, result.sender.name)


def _across_relay(to: str) -> bool:
    """NAME@ALIAS, no live agent here answers to it, and this state root joined a relay."""
    from crosstalk.registry.discovery import resolve
    from crosstalk.registry.errors import NoSuchAgent
    from crosstalk.relay.config import joined
    from crosstalk.relay.wire import split_remote

    if split_remote(to) is None or not joined(state_paths()):
        return False
    try:
        resolve(state_paths(), to)
    except NoSuchAgent:
        return True
    return False


def send_a2a_relay(msg: Any, args: Any) -> int:
    """The task across the relay: AGENT (a live agent here) proves itself to this machine's relay process with its
    bearer token, as to an A2A endpoint; machine ALIAS answers with NAME's task."""
    from crosstalk.ingress.task_frames import task_error, view_from_dict
    from crosstalk.registry.credentials import read_key
    from crosstalk.registry.discovery import resolve
    from crosstalk.registry.errors import AmbiguousName, KeyFileError, NoSuchAgent, RegistryError
    from crosstalk.relay.a2a_out import send_a2a_via_relay

    paths = state_paths()
    try:
        sender = resolve(paths, args.as_agent)
        token = read_key(paths.token_path(sender.agent_id))
    except (NoSuchAgent, AmbiguousName) as exc:
        fail(str(exc), ErrorKind.NO_AGENT)
    except KeyFileError as exc:
        fail(f"agent {args.as_agent!r} has no usable bearer token: {exc}", ErrorKind.NO_AGENT)
    except RegistryError as exc:
        fail(str(exc), ErrorKind.FAILED)
    result = send_a2a_via_relay(paths, token, msg, return_immediately=args.return_immediately,
                                task_id=args.task_id, timeout=args.timeout)  # fmt: skip
    outcome = result.outcome
    detail = outcome.evidence.get("detail") if isinstance(outcome.evidence, dict) else None
    if result.no_agent is not None:
        fail(f"no live agent is named {msg.to!r} (its machine says: {result.no_agent})", ErrorKind.NO_AGENT)
    if result.task_error is not None:
        err = task_error(str(result.task_error.get("kind")), str(result.task_error.get("message")))
        if err is not None:
            fail(f"{err.code}: {err.message}", err.code)
        fail(f"{result.to}: {result.task_error.get('kind')}: {result.task_error.get('message')}", ErrorKind.FAILED)
    if result.task is None:  # it never reached the agent's task service: the relay's own answer
        why = f"{outcome.reason}: {detail}" if detail else str(outcome.reason)
        if outcome.reason == "relay:bad_frame":
            why += " (a machine whose crosstalk predates A2A across the relay refuses the task and delivers nothing)"
        code = {"rejected": ErrorKind.REJECTED, "unreachable": ErrorKind.NO_AGENT}.get(outcome.state.value)
        fail(f"{outcome.state.value} → {msg.to}: {why}", code or ErrorKind.FAILED)
    try:
        task = view_from_dict(result.task, msg)
    except (ValueError, KeyError, TypeError) as exc:
        fail(f"{result.to} answered with a task crosstalk cannot read: {exc}", ErrorKind.FAILED)
    return print_task(task, msg, args, result.to, result.agent_id, sender.name)


def print_task(task: Any, msg: Any, args: Any, to: str, agent_id: str | None, as_name: str) -> int:
    """Print the task the receiver answered with (`--json`: its fields) and exit by its state."""
    reply = next((h.text for h in reversed(task.history) if h.role == "agent"), None)
    if args.as_json:
        print_json(
            {
                "task_id": task.task_id,
                "context_id": task.context_id,
                "state": task.state.value,
                "completion": task.completion,
                "delivery": task.delivery,
                "reason": task.reason,
                "answer": task.answer.to_dict() if task.answer is not None else None,
                "reply": reply,
                "message_id": msg.message_id,
                "to": to,
                "agent_id": agent_id,
                "as": as_name,
            }
        )
    else:
        detail = task.completion or task.reason or task.delivery
        echo(f"{task.state.value} task {task.task_id} → {to}" + (f" ({detail})" if detail else ""))
        if reply is not None:
            echo(reply)
    state = task.state.value
    if state == "completed" or (args.return_immediately and state in ("submitted", "working")):
        return EXIT_OK
    if state == "failed":
        unreachable = task.delivery == "unreachable"
        fail(
            f"{to}: task failed ({task.reason or task.delivery})",
            ErrorKind.NO_AGENT if unreachable else ErrorKind.REJECTED,
        )
    if state == "canceled":
        fail(f"{to}: task canceled", ErrorKind.REJECTED)
    fail(
        f"{to}: task is {state} (delivery {task.delivery or 'pending'}); nothing proves it arrived",
        ErrorKind.FAILED,
    )
