"""Messages into an OpenCode session crosstalk does not serve yet (no crosstalk tool call registered it), inform
only: written through the plugin's inbox of its OpenCode process, as the adapter writes (adapter.py), with a header
naming the sender as it named itself (no crosstalk chain judged it) and no address to answer to.

    [crosstalk inform · from @cli:you (native, unverified) · message-id 01a2…]
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from crosstalk.core.states import State
from crosstalk.harness.base import InjectResult, SessionRow
from crosstalk.harness.errors import HarnessDisconnected, PreSendFailure
from crosstalk.harness.opencode import inbox

ANSWER_TIMEOUT_S = 15.0
STATES = {"immediate": State.ACCEPTED, "queued": State.QUEUED}
BUSY = "the OpenCode session is busy: the running turn reads it at its next step"


def deliver(
    row: SessionRow,
    text: str,
    *,
    from_name: str,
    sender_pid: int | None,
    environ: Mapping[str, str],
    message_id: str | None = None,
    on_settled: Callable[[str, InjectResult], None] | None = None,
) -> InjectResult:
    if row.pid is None:
        return InjectResult(State.UNREACHABLE, "the OpenCode session's process serves no crosstalk plugin inbox")
    mid = message_id or str(uuid.uuid4())
    body = f"[crosstalk inform · from {from_name} (native, unverified) · message-id {mid}]\n{text}"
    ask = {"op": "deliver", "session": row.session_ref, "text": body, "as": "auto"}
    try:
        answer = inbox.request(inbox.socket_path(environ, row.pid), ask, ANSWER_TIMEOUT_S)
    except PreSendFailure as exc:
        return InjectResult(State.UNREACHABLE, str(exc))
    except HarnessDisconnected as exc:
        return InjectResult(State.UNKNOWN, str(exc), {"msg_id": mid})
    if answer.get("error"):
        return InjectResult(State.UNREACHABLE, f"the OpenCode plugin did not write it: {str(answer['error'])[:200]}")
    state = STATES.get(str(answer.get("delivered")))
    if state is None:
        return InjectResult(State.UNKNOWN, "the OpenCode plugin could not say it was written", {"msg_id": mid})
    reason = None if state is State.ACCEPTED else BUSY
    return InjectResult(state, reason, {"msg_id": mid, "opencode": answer.get("delivered")})
