"""Whether a parsed journal line has the shape replay relies on. A line of valid JSON with a wrong type in it
(`ts: null`, a string where an object belongs, an unknown task state) is outside damage, like a line that does not
parse: the reader skips and counts it, so one bad record never stops an agent from starting.

Only the fields replay and the task table read are checked, each for the type they read it as; anything else a
record carries is left alone.
"""

from __future__ import annotations

from typing import Any

from crosstalk.core.tasks import TaskState
from crosstalk.journal import records as R

_TASK_STATES = frozenset(s.value for s in TaskState)
_STR_OR_NONE: dict[str, tuple[str, ...]] = {
    R.RECEIVED: ("transport", "dedupe_key"),
    R.OUTCOME: ("message_id", "state", "reason"),
    R.DISPATCH: ("message_id",),
    R.RESOLVED: ("message_id",),
    R.TASK: ("context_id", "creator", "kind", "reason", "delivery", "message_id", "entry", "text"),
    R.OBLIGATION: ("message_id", "state"),
    R.ROUTE: ("message_id", "state"),
}
_DICT_OR_NONE: dict[str, tuple[str, ...]] = {
    R.RECEIVED: ("sender", "binding"),
    R.OUTCOME: ("evidence", "binding"),
    R.TASK: ("meta", "answer"),
    R.SENT: ("message",),
}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def problem(rec: dict[str, Any]) -> str | None:
    """None when replay can fold the record in, else what is wrong with it."""
    rtype = rec.get("type")
    if not isinstance(rtype, str):
        return "no type"
    if "ts" in rec and not _number(rec["ts"]):
        return "ts is not a number"
    for key in _STR_OR_NONE.get(rtype, ()):
        if rec.get(key) is not None and not isinstance(rec[key], str):
            return f"{key} is not a string"
    for key in _DICT_OR_NONE.get(rtype, ()):
        if rec.get(key) is not None and not isinstance(rec[key], dict):
            return f"{key} is not an object"
    if rtype == R.RECEIVED:
        message = rec.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("message_id"), str):
            return "message is not an object with a message_id"
    elif rtype == R.TASK:
        if not isinstance(rec.get("task_id"), str):
            return "task_id is not a string"
        if rec.get("state", "submitted") not in _TASK_STATES:
            return f"unknown task state {rec.get('state')!r}"
        if rec.get("deadline_at") is not None and not _number(rec["deadline_at"]):
            return "deadline_at is not a number"
        if rec.get("artifacts") is not None and not isinstance(rec["artifacts"], list):
            return "artifacts is not a list"
    elif rtype == R.CHECKPOINT and not isinstance(rec.get("entries"), list):
        return "entries is not a list"
    elif rtype == R.CLAIM and not all(isinstance(rec.get(k), str | None) for k in ("action", "owner", "role")):
        return "a claim field is not a string"
    return None
