"""The Claude cross-session envelope: render and parse, with escaping.

    <cross-session-message from="uds:/…/ab12.sock" from-name="alice" message-id="…" kind="inform">
    body, with & < > escaped
    </cross-session-message>

The body is escaped on render, so a body that contains envelope markup stays body text: the parser reads exactly
one outer envelope and never looks inside the body for another one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from crosstalk.core.errors import EnvelopeError

TAG = "cross-session-message"
_OPEN_RE = re.compile(r"\A\s*<" + TAG + r"((?:\s+[A-Za-z][A-Za-z0-9_-]*=\"[^\"]*\")*)\s*>\n?", re.S)
_ATTR_RE = re.compile(r"([A-Za-z][A-Za-z0-9_-]*)=\"([^\"]*)\"")
_CLOSE_RE = re.compile(r"\n?</" + TAG + r">\s*\Z")
_UNESCAPE_RE = re.compile(r"&(amp|lt|gt|quot);")
_UNESCAPES = {"amp": "&", "lt": "<", "gt": ">", "quot": '"'}
_ATTR_NAME_RE = re.compile(r"\A[A-Za-z][A-Za-z0-9_-]*\Z")


def escape_body(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_attr(text: str) -> str:
    return escape_body(text).replace('"', "&quot;")


def unescape(text: str) -> str:
    """Reverse escape_body/escape_attr in one pass, so '&amp;lt;' becomes '&lt;' and not '<'."""
    return _UNESCAPE_RE.sub(lambda m: _UNESCAPES[m.group(1)], text)


@dataclass(frozen=True, slots=True)
class Envelope:
    body: str
    attrs: dict[str, str] = field(default_factory=dict)

    @property
    def from_(self) -> str | None:
        return self.attrs.get("from")

    @property
    def from_name(self) -> str | None:
        return self.attrs.get("from-name")

    @property
    def message_id(self) -> str | None:
        return self.attrs.get("message-id")

    @property
    def kind(self) -> str | None:
        return self.attrs.get("kind")

    @property
    def in_reply_to(self) -> str | None:
        return self.attrs.get("in-reply-to")


def render(body: str, attrs: dict[str, str | None]) -> str:
    """Render an envelope; attributes whose value is None are left out, order is kept."""
    rendered = []
    for name, value in attrs.items():
        if value is None:
            continue
        if not _ATTR_NAME_RE.match(name):
            raise EnvelopeError(f"bad attribute name {name!r}")
        rendered.append(f' {name}="{escape_attr(value)}"')
    return f"<{TAG}{''.join(rendered)}>\n{escape_body(body)}\n</{TAG}>"


def looks_like_envelope(text: str) -> bool:
    return bool(_OPEN_RE.match(text))


def parse(text: str) -> Envelope:
    """Parse one envelope that spans the whole text. Raises EnvelopeError naming the problem."""
    if not isinstance(text, str):
        raise EnvelopeError("envelope must be a string")
    opening = _OPEN_RE.match(text)
    if not opening:
        raise EnvelopeError(f"text does not start with a <{TAG} ...> tag")
    closing = _CLOSE_RE.search(text, opening.end())
    if not closing:
        raise EnvelopeError(f"envelope is not closed by </{TAG}> at the end of the text")
    attrs: dict[str, str] = {}
    for m in _ATTR_RE.finditer(opening.group(1)):
        name = m.group(1)
        if name in attrs:
            raise EnvelopeError(f"attribute {name!r} appears twice")
        attrs[name] = unescape(m.group(2))
    body = unescape(text[opening.end() : closing.start()])
    return Envelope(body=body, attrs=attrs)
