"""The agent name rule: preferred name if free, else <harness>-<cwd basename>-<agent_id hex>."""

from __future__ import annotations

import os

from crosstalk.core.ids import is_agent_id
from crosstalk.registry.errors import InvalidName, RegistryError

TYPE_CHECKING = False  # not `typing`: importing it costs ~2 ms on `crosstalk send`'s start-up path
if TYPE_CHECKING:
    from collections.abc import Iterator

MAX_NAME_CHARS = 64
# A name is `^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$` in full (fullmatch), checked with str methods: `crosstalk send`
# checks descriptor names at start-up, where `re` costs about a bare interpreter start (docs/performance.md, "Lean
# send path"); tests/unit/registry/test_registry_names.py holds the check to that expression.
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_NAME_CHARS = _ALNUM | frozenset("._-")
FALLBACK_HEX = (8, 10, 12, 14, 16)  # first 8 hex of agent_id, extended two at a time
_MAX_HARNESS_CHARS = 24


def is_valid_name(name: object) -> bool:
    """A name is also a file name; it never has an agent_id's shape (16 lowercase hex), or `crosstalk send <id>`
    could reach an agent that took another's id as its name while the owner is down."""
    return (
        isinstance(name, str)
        and 0 < len(name) <= MAX_NAME_CHARS
        and name[0] in _ALNUM
        and _NAME_CHARS.issuperset(name)
        and not is_agent_id(name)
    )


def validate_name(name: object) -> str:
    """Return name if it is a valid agent name (names are also file names), else raise InvalidName."""
    if is_valid_name(name):
        return name  # type: ignore[return-value]
    if not isinstance(name, str):
        raise InvalidName(name, f"must be a string, got {type(name).__name__}")
    if not name:
        raise InvalidName(name, "is empty")
    if len(name) > MAX_NAME_CHARS:
        raise InvalidName(name, f"is {len(name)} characters, over the {MAX_NAME_CHARS}-character limit")
    if is_agent_id(name):
        raise InvalidName(name, "has the shape of an agent_id (16 lowercase hex); names must not")
    if not name[0].isascii() or not name[0].isalnum():
        raise InvalidName(name, "must start with a letter or digit")
    bad = next(c for c in name if not (c.isascii() and (c.isalnum() or c in "._-")))
    raise InvalidName(name, f"contains {bad!r}; allowed are letters, digits, '.', '_' and '-'")


def _sanitize(text: str) -> str:
    import re  # here: only a registering agent names itself

    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")


def fallback_names(harness: str, cwd: str, agent_id: str) -> Iterator[str]:
    """<harness>-<cwd basename>-<8 hex>, then 10, 12, 14, 16 hex; always valid names, always distinct."""
    if not is_agent_id(agent_id):
        raise RegistryError(f"agent_id must be 16 lowercase hex characters, got {agent_id!r}")
    # The harness starts the name, so it must start with a letter or digit.
    head = _sanitize(harness).lstrip("._-")[:_MAX_HARNESS_CHARS] or "agent"
    base = _sanitize(os.path.basename(os.path.normpath(cwd))) if cwd else ""
    # Truncate the basename once, against the longest suffix, so every name in the series shares it.
    room = MAX_NAME_CHARS - len(head) - 1 - FALLBACK_HEX[-1] - 1
    base = base[:room].rstrip("-")
    prefix = f"{head}-{base}-" if base else f"{head}-"
    for n in FALLBACK_HEX:
        yield prefix + agent_id[:n]


def candidate_names(preferred: str | None, harness: str, cwd: str, agent_id: str) -> list[str]:
    """The names to try in order: preferred (when given and valid), then the fallbacks."""
    out = [preferred] if preferred and is_valid_name(preferred) else []
    out.extend(n for n in fallback_names(harness, cwd, agent_id) if n not in out)
    return out
