"""The tool definitions the model reads: names, descriptions and JSON Schemas."""

from __future__ import annotations

from typing import Any

from crosstalk.core import untrusted

PAGE_SIZE = 20
MAX_DEADLINE_S = 7 * 24 * 3600
MAILBOX_FILTERS = ("unresolved", "all", "recovered", "bounced", "replies")

_TO = {"type": "string", "minLength": 1, "description": "A name from list_agents (or its agent_id)."}
_TEXT = {"type": "string", "minLength": 1, "description": "The message text."}


def tool_definitions() -> list[dict[str, Any]]:
    """What the model reads on every turn: kept short (tests/unit/shim/test_shim_token_budget.py holds the size).
    How and when to use them is the skill's to say (`crosstalk install claude` installs it)."""
    return [
        {
            "name": "list_agents",
            "description": (
                "List the coding sessions on this machine you can message: name, harness, cwd, status, crosstalk, "
                "reachable (a message can be delivered into it now), role, owner. Your row has self=true."
            ),
            "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
        },
        {
            "name": "send_message",
            "description": (
                "Send a message into another session by name; it arrives there as a message from you. kind: "
                "inform (default), or command to a session you claimed. delivery: auto (default), steer (into its "
                "running turn now), next_turn. State accepted or queued: delivered; rejected or unreachable: not "
                "delivered (see reason); held: its user decides, you are told here; unknown: it may have arrived, "
                "do not resend blindly."
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
                "Ask another session something. Returns at once; the answer arrives in your session later as a "
                "message whose in_reply_to is this message_id. deadline_seconds (0: none) closes the ask."
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
                "Answer a message you received (an ask, or an inform up to an hour old) by its message-id: your "
                "text arrives in the sender's session with in_reply_to set. One reply per message."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "message_id": {"type": "string", "minLength": 1, "description": "The message-id you answer."},
                    "text": _TEXT,
                },
                "required": ["message_id", "text"],
                "additionalProperties": False,
            },
        },
        {
            "name": "receive_message",
            "description": (
                f"Your crosstalk mailbox, oldest first, {PAGE_SIZE} a page (pass next_cursor as cursor). state: "
                "unresolved (default: replies you owe, deliveries not confirmed), all, recovered, bounced, replies "
                "(answers to your asks)."
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
            try:  # JSON lets a lone surrogate through; it would fail far away, on the first write
                untrusted.text(value, what=key)
            except untrusted.UntrustedInput as exc:
                return {}, str(exc)
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
