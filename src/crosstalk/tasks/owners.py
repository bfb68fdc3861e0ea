"""Who a task belongs to, and on which transport its messages are judged: a verified local agent's task (A2A, or
task frames), or another machine's agent's, which only this machine's relay process can bring (ingress/uds_tasks.py
checks that process; docs/dev/relay.md "A2A across the relay")."""

from __future__ import annotations

from crosstalk.core.sender import Sender, SenderClass
from crosstalk.policy.transport import RELAY_TRANSPORT

RELAY_TAG = "@relay:"


def task_owner(sender: Sender) -> str:
    """Who owns the task `sender` creates (and alone may read, continue or cancel it): a verified agent's id, or
    another machine's agent its relay process vouched for, `@relay:ALIAS/NAME` on the relay transport
    (ingress/uds_tasks.py; docs/dev/relay.md "A2A across the relay"). "" for anyone else: no task."""
    if sender.sender_class is SenderClass.VERIFIED:
        return sender.agent_id or ""
    relayed = sender.sender_class is SenderClass.EXTERNAL and sender.transport == RELAY_TRANSPORT
    name = sender.name or ""
    return name if relayed and name.startswith(RELAY_TAG) else ""


def via(sender: Sender) -> str:
    """The transport a task's messages are judged on: `relay` for another machine's agent (policy/transport.py:
    an ask passes, a command never), else `a2a`."""
    return RELAY_TRANSPORT if sender.transport == RELAY_TRANSPORT else "a2a"
