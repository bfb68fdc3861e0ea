"""Addresses (`[provider/]model[@machine]`) and the activation rule — pure functions, no I/O."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from crosstalk.bus.errors import BusError

if TYPE_CHECKING:  # only annotations: the bridge imports addressing without the message format (PyYAML)
    from crosstalk.bus.protocol.message import BusMessage

MAX_ADDRESS_CHARS = 200
WORKFLOW_ADDRESS = "workflow"  # reserved: the recipient of workflow markers, the sender of a workflow's own messages


def split_address(addr: str) -> tuple[str, str | None]:
    """("anthropic/sonnet", "cachy") for "anthropic/sonnet@cachy"; (addr, None) without a machine part."""
    actor, sep, machine = addr.partition("@")
    return (actor, machine) if sep else (addr, None)


def actor_of(addr: str) -> str:
    """The address without its "@machine": activation ignores machines, only routing honours them."""
    return split_address(addr)[0]


def _model_part(actor: str) -> tuple[bool, str]:
    provider, sep, model = actor.partition("/")
    return (True, model) if sep else (False, provider)


def same_actor(a: str, b: str) -> bool:
    """Whether two addresses name the same actor: equal actor parts, or equal model parts when at most one of
    them carries a provider prefix (a bare "sonnet" is the same actor as "anthropic/sonnet")."""
    left, right = actor_of(a), actor_of(b)
    if left == right:
        return True
    left_prefixed, left_model = _model_part(left)
    right_prefixed, right_model = _model_part(right)
    if left_prefixed and right_prefixed:
        return False
    return left_model == right_model


def wakes(msg: BusMessage, addressee: str, sender_of: Callable[[str], str | None]) -> bool:
    """The activation rule: a message wakes its addressee when it has no `re:`, or when one of its `re:`
    targets was sent by the addressee. A message from an actor to itself never wakes it.

    sender_of(rel_path) returns the "from" of a re: target in the same channel, or None if unknown."""
    if same_actor(msg.sender, msg.to):
        return False
    if not msg.re:
        return True
    for rel in msg.re:
        sender = sender_of(rel)
        if sender is not None and same_actor(sender, addressee):
            return True
    return False


def validate_address(addr: str) -> str:
    """Return addr if it is a syntactically valid `to:`; models are not checked (another machine may claim them)."""
    if not addr:
        raise BusError("the address is empty (expected MODEL, PROVIDER/MODEL, optionally @MACHINE)")
    if len(addr) > MAX_ADDRESS_CHARS:
        raise BusError(f"the address is longer than {MAX_ADDRESS_CHARS} characters")
    if any(ch.isspace() for ch in addr) or any(ord(ch) < 32 for ch in addr):
        raise BusError(f"address {addr!r} contains whitespace or control characters")
    if addr.count("@") > 1:
        raise BusError(f"address {addr!r} has more than one '@' (expected MODEL[@MACHINE])")
    actor, machine = split_address(addr)
    if not actor:
        raise BusError(f"address {addr!r} has no model before '@'")
    if machine is not None and not machine:
        raise BusError(f"address {addr!r} has an empty machine after '@'")
    if actor.count("/") > 1 or actor.startswith("/") or actor.endswith("/"):
        raise BusError(f"address {addr!r} is not MODEL or PROVIDER/MODEL")
    return addr
