"""The claim and release tools: take another session as your worker, and give it back.

The target's journal has one writer, its own process, so the shim does not change the target: it sends the target
an A2A SendMessage with `metadata.crosstalk.op` = "claim" | "release" as the calling agent, and the target checks the
rules, journals the claim, rewrites its descriptor and tells its session (crosstalk/agent/claims.py). The model reads
`{state: claimed | released | rejected, reason, hint}`; a target that could not be reached answers unreachable or
unknown, as send_message does.

Imported when `crosstalk mcp` starts (the definitions): nothing heavy at module level.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from crosstalk.core.states import DELIVERED_STATES

if TYPE_CHECKING:
    from crosstalk.agent import AgentHost
    from crosstalk.registry.paths import StatePaths
    from crosstalk.shim.sending import Sender

_NAME = {"type": "string", "minLength": 1, "description": "A name from list_agents (or its agent_id)."}

CLAIM_TOOLS: list[dict[str, Any]] = [
    {
        "name": "claim",
        "description": (
            "Make another primary session your worker: it then takes command messages from you only, until you "
            "release it or its session ends."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {"name": _NAME},
            "required": ["name"],
            "additionalProperties": False,
        },
    },
    {
        "name": "release",
        "description": "Release a session you claimed: it becomes a primary again.",
        "inputSchema": {
            "type": "object",
            "properties": {"name": _NAME},
            "required": ["name"],
            "additionalProperties": False,
        },
    },
]

_HINTS = {
    "self_claim": "you cannot claim your own session; pass another agent's name from list_agents",
    "self_release": "you cannot release your own session; only the agent that claimed you can",
    "already_claimed": "{name} is already owned by another agent; only its owner can release it",
    "worker_cannot_claim": "you are a worker (another agent owns you), and a worker cannot claim",
    "not_claimed": "{name} is not claimed by anyone, so there is nothing to release",
    "not_owner": "{name} is owned by another agent; only its owner can release it",
    "claimer_unknown": "{name} could not find your registration; call list_agents and try again",
    "no_such_agent": "no live agent is named {name!r}; call list_agents for the current names",
    "ambiguous_name": "several live agents are named {name!r}: pass one of their agent_ids as `name`",
}


async def claim_or_release(op: str, paths: StatePaths, sender: Sender, host: AgentHost, name: str) -> dict[str, Any]:
    """Ask the agent `name` to record a claim ("claim") or release ("release") by `host`."""
    from crosstalk.core.message import new_message
    from crosstalk.shim.sending import resolve_target

    done = "claimed" if op == "claim" else "released"
    target = resolve_target(paths, name)
    if isinstance(target, dict):
        return _rejected(target["reason"], name, candidates=target.get("candidates"))
    if target.agent_id == host.agent_id:  # refused here too, so the model gets the answer without a round trip
        return _rejected(f"self_{op}", target.name)
    text = f"crosstalk: {host.name} asks to {op} {target.name}"
    msg = new_message(target.name, text, from_=host.name)
    result = await sender.send(host, target, msg, return_immediately=False, op=op)
    state = result.get("state")
    if state in DELIVERED_STATES:
        out: dict[str, Any] = {"state": done, "name": target.name, "agent_id": target.agent_id}
        if op == "claim":
            out["hint"] = (
                f"{target.name} is now your worker: give it work with send_message(kind='command'); "
                "release it when you are done"
            )
        return out
    if state == "rejected":
        return _rejected(result.get("reason") or "rejected", target.name)
    # unreachable / unknown: the target could not be asked, or its answer was lost
    out = {k: v for k, v in result.items() if k in ("state", "reason", "detail", "hint")}
    out["name"] = target.name
    if state == "unknown":
        out.setdefault("hint", f"it may have taken effect; call list_agents to see {target.name}'s role and owner")
    return out


def _rejected(reason: str, name: str, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"state": "rejected", "reason": reason, "name": name}
    hint = _HINTS.get(reason)
    if hint:
        out["hint"] = hint.format(name=name)
    out.update({k: v for k, v in extra.items() if v is not None})
    return out
