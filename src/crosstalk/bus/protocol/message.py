"""Message files: the front-matter fields of protocol v7, parsing, rendering and collision-free names (pure)."""

from __future__ import annotations

import datetime as dt
import re
import secrets
from dataclasses import dataclass
from typing import Any

import yaml

from crosstalk.bus.errors import MessageFormatError
from crosstalk.bus.protocol.layout import is_safe_relpath
from crosstalk.bus.protocol.safefs import load_yaml

# The C loader is ~10x faster and the dispatcher parses every new message; both are "safe" (no object tags).
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

MAX_BODY_BYTES = 1 << 20
VALID_TYPES = (None, "workflow")
# "YYYY/MM/DD/HHMMSSmmmZ-<hex>.md", channel-relative; the hex suffix is at least 8 CSPRNG digits.
MESSAGE_NAME_RE = re.compile(r"^\d{4}/\d{2}/\d{2}/\d{9}Z-[0-9a-f]{8,}\.md$")
_FANOUT_RE = re.compile(r"^([1-9][0-9]*)/([1-9][0-9]*)$")
_STRING_FIELDS = ("as", "wake_as", "child_channel", "type", "error", "fanout", "dispatch_host", "workflow_step")
WORKFLOW_STEPS = ("fanout", "synthesize", "result")  # crosstalk's own field on a workflow's messages


@dataclass(frozen=True, slots=True)
class BusMessage:
    sender: str  # front-matter "from"
    to: str
    timestamp: str  # ISO 8601 UTC with milliseconds and Z, as written
    re: tuple[str, ...] = ()  # channel-relative relPaths
    as_: str | None = None  # "as"
    wake_as: str | None = None
    child_channel: str | None = None
    type: str | None = None  # None or "workflow"
    failed: bool = False
    error: str | None = None
    fanout: str | None = None  # crosstalk extension "K/N": a fanout copy is dispatched alone, never batched
    dispatch_host: str | None = None  # a workflow marker's owning dispatcher (its alias)
    workflow_step: str | None = None  # crosstalk extension on a workflow's own messages: WORKFLOW_STEPS
    body: str = ""


def utc_timestamp(now: dt.datetime | None = None) -> str:
    """ISO 8601 UTC with milliseconds and a Z: 2026-06-11T19:00:00.123Z."""
    now = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def new_message_name(now: dt.datetime | None = None) -> str:
    """A channel-relative file name that sorts by time and never collides: YYYY/MM/DD/HHMMSSmmmZ-<hex16>.md."""
    now = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    return now.strftime("%Y/%m/%d/%H%M%S") + f"{now.microsecond // 1000:03d}Z-{secrets.token_hex(8)}.md"


def fit_body(text: str, limit: int = MAX_BODY_BYTES) -> tuple[str, int]:
    """`text` cut to at most `limit` bytes of UTF-8 (on a character boundary), and how many bytes were cut."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text, 0
    return data[:limit].decode("utf-8", errors="ignore"), len(data) - limit


def too_large(dropped: int) -> str:
    """The error of a reply whose answer did not fit (the vocabulary of a failed model run: `failed`/`error`)."""
    return f"the answer is over the {MAX_BODY_BYTES}-byte limit of a reply: it was cut ({dropped} bytes dropped)"


def _split(text: str, where: str) -> tuple[str, str]:
    """(yaml text, body) of a message; front matter must open on the first line."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if not lines or lines[0].rstrip("\r ") != "---":
        raise MessageFormatError(f"{where}: no front matter (the file must start with a '---' line)")
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r ") == "---":
            body = "\n".join(lines[i + 1 :])
            # render_message writes one blank line after the front matter and one newline after the body.
            if body.startswith("\n"):
                body = body[1:]
            if body.endswith("\n"):
                body = body[:-1]
            return "\n".join(lines[1:i]), body
    raise MessageFormatError(f"{where}: front matter is not closed (no second '---' line)")


def _as_text(value: Any) -> str:
    """A YAML 1.1 scalar that should have been a string, back as text (a timestamp keeps its Z form)."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return utc_timestamp(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _string(meta: dict[Any, Any], key: str, where: str, *, required: bool) -> str | None:
    value = meta.get(key)
    if value is None:
        if required:
            raise MessageFormatError(f"{where}: field '{key}' is required")
        return None
    if isinstance(value, list | dict):
        raise MessageFormatError(f"{where}: field '{key}' must be a string, not a {type(value).__name__}")
    text = _as_text(value)
    if required and not text.strip():
        raise MessageFormatError(f"{where}: field '{key}' must not be empty")
    return text


def _re_field(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        if isinstance(item, list | dict) or item is None:
            raise MessageFormatError(f"{where}: field 're' must be a path or a list of paths")
        path = _as_text(item)
        if not is_safe_relpath(path):
            raise MessageFormatError(f"{where}: field 're' has an unsafe path {path[:80]!r}")
        out.append(path)
    return tuple(out)


def parse_message(text: str, *, where: str = "message") -> BusMessage:
    """Parse a message file; any protocol violation raises MessageFormatError naming the field and where."""
    head, body = _split(text, where)
    try:
        meta = load_yaml(head, "front matter")  # aliases refused: a few bytes must not expand into gigabytes
    except Exception as exc:  # YAMLError, or ValueError from an impossible date such as 2026-13-45
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MessageFormatError(f"{where}: front matter is not valid YAML ({first})") from None
    if not isinstance(meta, dict):
        raise MessageFormatError(f"{where}: front matter must be a mapping of fields")
    sender = _string(meta, "from", where, required=True)
    to = _string(meta, "to", where, required=True)
    timestamp = _string(meta, "timestamp", where, required=True)
    extra = {key: _string(meta, key, where, required=False) for key in _STRING_FIELDS}
    if extra["type"] not in VALID_TYPES:
        raise MessageFormatError(f"type: {extra['type']!r} is not valid in protocol v7 (only 'workflow') in {where}")
    failed = meta.get("failed")
    if failed is None:
        failed = False
    elif not isinstance(failed, bool):
        raise MessageFormatError(f"{where}: field 'failed' must be true or false, not {_as_text(failed)[:40]!r}")
    fanout = extra["fanout"]
    if fanout is not None:
        m = _FANOUT_RE.match(fanout)
        if not m or int(m.group(1)) > int(m.group(2)):
            raise MessageFormatError(f"{where}: field 'fanout' must be 'K/N' with 1 <= K <= N, not {fanout[:40]!r}")
    assert sender is not None and to is not None and timestamp is not None  # required=True guarantees it
    return BusMessage(
        sender=sender,
        to=to,
        timestamp=timestamp,
        re=_re_field(meta.get("re"), where),
        as_=extra["as"],
        wake_as=extra["wake_as"],
        child_channel=extra["child_channel"],
        type=extra["type"],
        failed=failed,
        error=extra["error"],
        fanout=fanout,
        dispatch_host=extra["dispatch_host"],
        # Unknown values are ignored, as unknown fields are: only the runtime's own steps mean anything.
        workflow_step=extra["workflow_step"] if extra["workflow_step"] in WORKFLOW_STEPS else None,
        body=body,
    )


def lenient_fields(text: str) -> dict[str, Any]:
    """The front matter of a broken message as far as it can be read, string fields only (never raises)."""
    if not text.startswith("---"):
        return {}
    parts = text.split("\n---", 1)
    if len(parts) != 2:
        return {}
    head = parts[0][3:]
    # The whole front matter, else only its one-line `from:`, `to:` and `re:` (another field may be what is broken:
    # nested too deep, say), so the sender can still be told why its message is refused.
    addressing = "\n".join(line for line in head.split("\n") if line.startswith(("from:", "to:", "re:")))
    data = None
    for candidate in (head, addressing):
        try:
            data = load_yaml(candidate, "front matter", strings_only=True)
            break
        except Exception:  # any YAML or scalar error: try the narrower reading, then give up
            continue
    if not isinstance(data, dict):
        return {}
    out: dict[str, Any] = {}
    for key in ("from", "to"):
        if isinstance(data.get(key), str) and data[key].strip():
            out[key] = data[key].strip()
    re_value = data.get("re")
    if isinstance(re_value, str):
        out["re"] = (re_value,)
    elif isinstance(re_value, list) and all(isinstance(r, str) for r in re_value):
        out["re"] = tuple(re_value)
    return out


def render_message(msg: BusMessage) -> str:
    """The file text: "---\\n<yaml>---\\n\\n<body>\\n". `re` is a string for one target and a list for several."""
    meta: dict[str, Any] = {"from": msg.sender, "to": msg.to, "timestamp": msg.timestamp}
    if msg.re:
        meta["re"] = msg.re[0] if len(msg.re) == 1 else list(msg.re)
    optional = (
        ("as", msg.as_),
        ("wake_as", msg.wake_as),
        ("child_channel", msg.child_channel),
        ("type", msg.type),
        ("fanout", msg.fanout),
        ("dispatch_host", msg.dispatch_host),
        ("workflow_step", msg.workflow_step),
    )
    meta.update((key, value) for key, value in optional if value is not None)
    if msg.failed:
        meta["failed"] = True
    if msg.error is not None:
        meta["error"] = msg.error
    head = yaml.dump(meta, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1 << 30)
    return f"---\n{head}---\n\n{msg.body}\n"
