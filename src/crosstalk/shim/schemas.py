"""The tool definitions the model reads: names, descriptions and JSON Schemas (seed 000 §8)."""

from __future__ import annotations

from typing import Any

PAGE_SIZE = 20
MAX_DEADLINE_S = 7 * 24 * 3600
MAILBOX_FILTERS = ("unresolved", "all", "recovered", "bounced", "replies")

_RESULT = (
    " The result is compact JSON: `state` (what happened), `reason` (why, when it did not simply work), "
    "`message_id`, and a `hint` when there is something you should do next."
)
_TO = {
    "type": "string",
    "minLength": 1,
    "description": "The recipient: an agent name from list_agents, or its 16-hex agent_id when a name is ambiguous.",
}
_TEXT = {"type": "string", "minLength": 1, "description": "The message text, as you want the other session to read it."}


def tool_definitions(adapter_note: str | None = None) -> list[dict[str, Any]]:
    """`adapter_note`: appended to the tools whose inbound half this build cannot serve for this harness."""
    note = f" Note: {adapter_note}" if adapter_note else ""
    return [
        {
            "name": "list_agents",
            "description": (
                "List the other AI coding sessions on this machine you can message through crosstalk: one row per "
                "agent with name, agent_id, harness, cwd, status, crosstalk (a crosstalk shim serves it now), "
                "reachable (messages to it can be delivered into its session), role and owner. Your own row has "
                "self=true. Works before anything else; use it to find the name to pass as `to`."
            ),
            "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
        },
        {
            "name": "send_message",
            "description": (
                "Send a message to another live session by name. It arrives inside that session as a message "
                "from you. kind: `inform` (default; information, no answer owed) or `command` (work you ask a "
                "session you own to do; refused unless you are its owner or it is a primary). delivery: `auto` "
                "(default; soonest without breaking a tool call), `steer` (into the running turn), `next_turn` (do "
                "not wake an idle session). States: accepted (delivered now), queued (delivered for its next "
                "model request), rejected (refused by policy or limits; not delivered), unreachable (nothing "
                "reached the session), unknown (it may have arrived; do not resend blindly). To get an answer "
                "use `ask` instead." + _RESULT + note
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "to": _TO,
                    "text": _TEXT,
                    "kind": {"type": "string", "enum": ["inform", "command"], "default": "inform"},
                    "delivery": {"type": "string", "enum": ["auto", "steer", "next_turn"], "default": "auto"},
                },
                "required": ["to", "text"],
                "additionalProperties": False,
            },
        },
        {
            "name": "ask",
            "description": (
                "Ask another live session a question that needs an answer. Returns at once with the ask's "
                "message_id, task_id and state (submitted or accepted; rejected/unreachable if it could not be "
                "delivered). The receiving session answers with its `reply` tool; the answer arrives in your "
                "session as a message whose in_reply_to is this message_id. deadline_seconds (0 = none) closes "
                "the ask: a reply after it is refused." + _RESULT + note
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "to": _TO,
                    "text": _TEXT,
                    "deadline_seconds": {"type": "integer", "minimum": 0, "maximum": MAX_DEADLINE_S, "default": 0},
                },
                "required": ["to", "text"],
                "additionalProperties": False,
            },
        },
        {
            "name": "reply",
            "description": (
                "Answer a message another session sent you, naming its message_id (shown in the message you "
                "received, and in receive_message). Your text goes back to that session as a message whose "
                "in_reply_to is that message_id. An ask: this completes the asker's task; after the ask's "
                "deadline the reply is refused with ask_closed. An inform: you can reply for 1 hour after it was "
                "delivered to you; later it is refused with route_expired (use send_message instead). One reply "
                "per message: repeating the same text returns the first result and sends nothing; different text "
                "is refused with already_replied. Messages from unverified or external senders cannot be replied "
                "to (sender_unverified): there is no address to reply to." + _RESULT
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "message_id": {
                        "type": "string",
                        "minLength": 1,
                        "description": "The message_id of the ask or inform you answer.",
                    },
                    "text": _TEXT,
                },
                "required": ["message_id", "text"],
                "additionalProperties": False,
            },
        },
        {
            "name": "receive_message",
            "description": (
                "Read your crosstalk mailbox: the messages other sessions sent you, oldest first, from your "
                "whole journal. Messages delivered into your session already appeared there; use this to find "
                "what did not, or to look up a message_id. state filter (always applied): `unresolved` "
                f"(default: messages that need attention: asks you still owe a reply, and messages whose "
                f"delivery is unknown, unreachable, recovered after a crash, or still in flight), `all`, "
                f"`recovered`, `bounced`, `replies` (answers to the asks you sent: messages whose in_reply_to "
                f"is one of your asks' message_id). Pages of {PAGE_SIZE}: pass the returned next_cursor as `cursor` to "
                "continue; cursor 0 starts at the beginning." + _RESULT + note
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "cursor": {"type": "integer", "minimum": 0, "default": 0},
                    "state": {"type": "string", "enum": list(MAILBOX_FILTERS), "default": "unresolved"},
                },
                "additionalProperties": False,
            },
        },
    ]


def check_arguments(schema: dict[str, Any], arguments: Any) -> tuple[dict[str, Any], str | None]:
    """Validate against the small JSON Schema subset the tools use and fill defaults: (arguments, problem)."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return {}, "arguments must be a JSON object"
    props: dict[str, Any] = schema.get("properties", {})
    for key in arguments:
        if key not in props:
            return {}, f"unknown argument {key!r} (expected: {', '.join(props) or 'none'})"
    out: dict[str, Any] = {}
    for key, spec in props.items():
        if key not in arguments or arguments[key] is None:
            if key in schema.get("required", ()):
                return {}, f"{key} is required"
            if "default" in spec:
                out[key] = spec["default"]
            continue
        value = arguments[key]
        if spec["type"] == "string":
            if not isinstance(value, str):
                return {}, f"{key} must be a string"
            if len(value.strip()) < spec.get("minLength", 0):
                return {}, f"{key} must not be empty"
        elif spec["type"] == "integer":
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int):
                return {}, f"{key} must be a whole number"
            if value < spec.get("minimum", value) or value > spec.get("maximum", value):
                return {}, f"{key} must be between {spec.get('minimum')} and {spec.get('maximum', 'any')}"
        if "enum" in spec and value not in spec["enum"]:
            return {}, f"{key} must be one of: {', '.join(spec['enum'])}"
        out[key] = value
    return out, None
