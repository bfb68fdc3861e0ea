"""The dispatch prompt: PROTOCOL.md, then the persona (if `as:`), then the earlier messages of the thread (if the
batch answers any), then the batch's messages with delimiters."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from crosstalk.bus.errors import ModelError, UnsafeFile
from crosstalk.bus.protocol.layout import ACTORS_DIR
from crosstalk.bus.protocol.models import NAME_RE
from crosstalk.bus.protocol.safefs import TEXT_LIMIT, read_transport_text


@dataclass(frozen=True, slots=True)
class PromptItem:
    sender: str  # the message's "from"
    ref: str  # its channel-relative relPath
    body: str


EARLIER_HEADING = "## Earlier in this thread (already answered; the messages below continue it)"


def build_prompt(
    protocol_text: str, persona: str | None, items: list[PromptItem], earlier: Sequence[PromptItem] = ()
) -> str:
    """Protocol text, "## Persona" when given, the thread so far under EARLIER_HEADING as "--- Earlier (from: X,
    ref: R) ---" blocks when given, then "--- Message K of N (from: X, ref: R) ---" blocks; ends in "\\n"."""
    sections = [protocol_text.strip("\n")]
    if persona is not None:
        sections.append("## Persona\n\n" + persona.strip("\n"))
    if earlier:
        sections.append(EARLIER_HEADING)
        sections += [f"--- Earlier (from: {e.sender}, ref: {e.ref}) ---\n" + e.body.strip("\n") for e in earlier]
    total = len(items)
    for number, item in enumerate(items, start=1):
        header = f"--- Message {number} of {total} (from: {item.sender}, ref: {item.ref}) ---"
        sections.append(header + "\n" + item.body.strip("\n"))
    return "\n\n".join(s for s in sections if s) + "\n"


def load_persona(root: Path, name: str) -> str:
    """The text of local/actors/<name>.md in the transport at `root`: a regular file reached without symlinks and
    at most TEXT_LIMIT bytes, else ModelError naming it."""
    if not NAME_RE.fullmatch(name):
        raise ModelError(
            f"persona name {name!r} is not valid (1-64 of A-Z a-z 0-9 . _ -, starting with a letter/digit)"
        )
    rel = f"{ACTORS_DIR}/{name}.md"
    try:
        return read_transport_text(root, rel, TEXT_LIMIT, errors="replace")
    except FileNotFoundError:
        raise ModelError(f"persona '{name}' not found: {rel}") from None
    except UnsafeFile as exc:
        raise ModelError(f"persona '{name}': {exc.message}") from None
    except OSError as exc:
        raise ModelError(f"cannot read persona '{name}' ({rel}): {exc.strerror or exc}") from None
