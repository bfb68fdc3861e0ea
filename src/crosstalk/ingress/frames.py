"""The uds wire format, pure: parsing and building lines. Newline-delimited JSON, Claude's shape.

Two connection shapes reach an agent's socket:
  (a) crosstalk frame:  {"type":"auth","token":T}\\n  then  {"type":"user","message":{...},"crosstalk":{...}}\\n
      answered with one state line {"message_id","state","reason"} and EOF;
  (b) native frame:     one {"type":"user","message":{"role":"user","content":C}, "msgV":1, ...}\\n with no
      "crosstalk" field (Claude's own SendMessage), accepted only from a verified peer and answered with bare EOF,
      because Claude's sender treats any reply bytes as an error.
An auth line may precede a native frame too (Claude authenticates when it has our key); the answer is still EOF.
Claude's frame is told apart by its own top-level fields (msgV, msg_id): an auth line followed by a plain user line
without them is shape (a) as a plain script writes it, a crosstalk client answered with its state.
"""

from __future__ import annotations

from crosstalk.core import jsonc, untrusted
from crosstalk.core.message import Message
from crosstalk.core.record import Record
from crosstalk.core.states import Outcome, State
from crosstalk.ingress.errors import FrameError

# `typing` is only needed by type checkers; importing it costs ~2 ms on `crosstalk send`'s start-up path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_LINE_BYTES = 512 * 1024  # one frame line: 64 KiB of text JSON-escapes to at most 384 KiB, plus metadata
CROSSTALK_FRAME_VERSION = 1
KEPT_TAIL = b',"kept":true}\n'  # how an answer says the connection is kept for the next frame (uds_keeping.py)


# Records (core/record.py), not dataclasses: this module is on `crosstalk send`'s start-up path.
class AuthLine(Record):
    _fields = ("token",)
    __slots__ = _fields
    token: str

    def __init__(self, token: str) -> None:
        self._set(token)


class TaskLine(Record):
    """A task frame (task_frames.py): `method` "send" or "get", the sending agent's bearer token, the rest as sent."""

    _fields = ("method", "bearer", "params")
    __slots__ = _fields
    method: str
    bearer: str
    params: dict[str, Any]

    def __init__(self, method: str, bearer: str, params: dict[str, Any]) -> None:
        self._set(method, bearer, params)


class UserLine(Record):
    _fields = ("content", "crosstalk", "native_from", "native_msg_id", "claude_frame")
    __slots__ = _fields
    content: str
    crosstalk: dict[str, Any] | None  # present → a crosstalk frame; absent → a native frame
    native_from: str | None  # Claude's top-level "from" (display only)
    native_msg_id: str | None  # Claude's "msg_id" (display only)
    claude_frame: bool  # Claude's own SendMessage wrote it (msgV/msg_id present): it must get bare EOF

    def __init__(
        self,
        content: str,
        crosstalk: dict[str, Any] | None,
        native_from: str | None = None,
        native_msg_id: str | None = None,
        claude_frame: bool = False,
    ) -> None:
        self._set(content, crosstalk, native_from, native_msg_id, claude_frame)

    @property
    def is_native(self) -> bool:
        return self.crosstalk is None


def parse_line(raw: bytes) -> AuthLine | UserLine | TaskLine:
    if len(raw) > MAX_LINE_BYTES:
        raise FrameError(f"frame line is {len(raw)} bytes, over the {MAX_LINE_BYTES}-byte limit")
    try:
        # Strict UTF-8 first: json.loads(bytes) decodes with surrogatepass, letting encoded surrogates through.
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FrameError(f"frame line is not JSON: not valid UTF-8 ({exc})") from None
    try:
        obj = untrusted.loads(text, what="frame line", max_bytes=MAX_LINE_BYTES)
    except untrusted.UntrustedInput as exc:  # not JSON, or nested too deeply
        raise FrameError(f"frame line is not JSON: {exc.problem}") from None
    if _may_hold_surrogate(text):  # else no string in it can hold one: nothing to walk
        _check_unicode(obj)
    if not isinstance(obj, dict):
        raise FrameError("frame line must be a JSON object")
    ftype = obj.get("type")
    if ftype == "auth":
        token = obj.get("token")
        if not isinstance(token, str) or not token:
            raise FrameError("auth line needs a non-empty string 'token'")
        return AuthLine(token)
    if ftype == "user":
        message = obj.get("message")
        if not isinstance(message, dict):
            raise FrameError("user line needs a 'message' object")
        if message.get("role", "user") != "user":
            raise FrameError("user line message.role must be 'user'")
        content = message.get("content")
        if not isinstance(content, str):
            raise FrameError("user line message.content must be a string")
        meta = obj.get("crosstalk")
        if meta is not None and not isinstance(meta, dict):
            raise FrameError("'crosstalk' must be an object")
        nfrom = obj.get("from")
        nid = obj.get("msg_id")
        return UserLine(
            content,
            meta,
            nfrom if isinstance(nfrom, str) else None,
            nid if isinstance(nid, str) else None,
            claude_frame="msgV" in obj or "msg_id" in obj,
        )
    if ftype == "task":
        method, bearer = obj.get("method"), obj.get("bearer")
        if method not in ("send", "get"):
            raise FrameError(f"task line 'method' must be 'send' or 'get', got {method!r}")
        if not isinstance(bearer, str) or not bearer:
            raise FrameError("task line needs a non-empty string 'bearer' (the sending agent's token)")
        return TaskLine(method, bearer, obj)
    raise FrameError(f"unknown frame type {ftype!r} (expected 'auth', 'user' or 'task')")


def _may_hold_surrogate(text: str) -> bool:
    """Whether the line has an escape `\\uD800`-`\\uDFFF` (either case): strict UTF-8 text holds no surrogate, so
    json can only make one from such an escape. A hit may be a false alarm (an escaped backslash before `ud8..`): the
    walk then decides. str methods, not `re`: this module is on `crosstalk send`'s start-up path."""
    at = text.find("\\u")
    while at >= 0:
        if text[at + 2 : at + 3] in ("d", "D") and text[at + 3 : at + 4] in _HIGH_NIBBLE:
            return True
        at = text.find("\\u", at + 2)
    return False


_HIGH_NIBBLE = frozenset("89abcdefABCDEF")


def _check_unicode(obj: object) -> None:
    """Refuse a lone surrogate anywhere in the line (JSON lets "\\ud800" through; UTF-8 cannot hold it, so the
    journal and the harness could not either). Iterative: untrusted.loads bounded the depth, but not our stack."""
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            strings: list[str] = [item]
        elif isinstance(item, dict):
            strings = list(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
            continue
        else:
            continue
        for value in strings:
            try:
                untrusted.text(value, what="frame line")
            except untrusted.UntrustedInput:
                bad = next(c for c in value if 0xD800 <= ord(c) <= 0xDFFF)
                raise FrameError(
                    f"frame line holds a lone surrogate (\\u{ord(bad):04x}) in a string: not valid Unicode"
                ) from None


def message_from_crosstalk(line: UserLine, to: str) -> Message:
    """Build the record from a crosstalk frame. The receiver, not the frame, decides the sender's identity."""
    meta = dict(line.crosstalk or {})
    version = meta.get("v", CROSSTALK_FRAME_VERSION)
    if type(version) is not int or version != CROSSTALK_FRAME_VERSION:
        raise FrameError(f"crosstalk frame version {version!r} is not supported (this agent speaks 1)")
    data = {
        "message_id": meta.get("message_id"),
        "to": to,
        "from": meta.get("from"),
        "kind": meta.get("kind"),
        "delivery": meta.get("delivery"),
        "in_reply_to": meta.get("in_reply_to"),
        "context_id": meta.get("context_id"),
        "deadline_seconds": meta.get("deadline_seconds", 0),
        "hop_chain": meta.get("hop_chain") or [],
        "sent_at": meta.get("sent_at"),
        "parts": [{"type": "text", "text": line.content}],
    }
    return Message.from_dict(data, check_size=False)  # size is the admission step's to answer


def encode_auth(token: str) -> bytes:
    return jsonc.dumps({"type": "auth", "token": token}).encode() + b"\n"


def encode_crosstalk_user(msg: Message, *, keep: bool = False) -> bytes:
    """`keep`: ask the agent to keep the connection for the next frame (uds_keeping.py)."""
    meta: dict[str, Any] = {
        "v": CROSSTALK_FRAME_VERSION,
        "message_id": msg.message_id,
        "from": msg.from_,
        "to": msg.to,
        "kind": msg.kind.value,
        "delivery": msg.delivery.value,
        "sent_at": msg.sent_at,
    }
    if msg.in_reply_to:
        meta["in_reply_to"] = msg.in_reply_to
    if msg.context_id:
        meta["context_id"] = msg.context_id
    if msg.deadline_seconds:
        meta["deadline_seconds"] = msg.deadline_seconds
    if msg.hop_chain:
        meta["hop_chain"] = list(msg.hop_chain)
    if keep:
        meta["keep"] = True
    line = {"type": "user", "message": {"role": "user", "content": msg.text}, "crosstalk": meta}
    return jsonc.dumps(line, ensure_ascii=False).encode() + b"\n"


def encode_answer(outcome: Outcome) -> bytes:
    return jsonc.dumps(outcome.to_dict()).encode() + b"\n"


def encode_error_answer(reason: str, message_id: str | None = None) -> bytes:
    return jsonc.dumps({"message_id": message_id, "state": State.REJECTED.value, "reason": reason}).encode() + b"\n"


def parse_answer(raw: bytes) -> Outcome:
    try:
        obj = untrusted.loads(raw, what="the agent's answer", max_bytes=MAX_LINE_BYTES)
    except untrusted.UntrustedInput as exc:
        raise FrameError(f"the agent's answer is not JSON: {exc.problem}") from None
    if not isinstance(obj, dict) or "state" not in obj:
        raise FrameError("the agent's answer has no state")
    try:
        state = State(obj["state"])
    except ValueError:
        raise FrameError(f"the agent answered an unknown state {obj['state']!r}") from None
    evidence = obj.get("evidence")
    return Outcome(
        str(obj.get("message_id") or ""), state, obj.get("reason"), evidence if isinstance(evidence, dict) else {}
    )


def says_kept(answer: bytes) -> bool:
    """Whether an answer line ends with `"kept": true` (its last member, as KEPT_TAIL writes it; any spacing), read
    without parsing the line. An answer that says it elsewhere is taken as not kept: the connection is closed, the
    safe side."""
    body = answer.strip()
    if not body.endswith(b"}"):
        return False
    body = body[:-1].rstrip()
    if not body.endswith(b"true"):
        return False
    body = body[:-4].rstrip()
    return body.endswith(b":") and body[:-1].rstrip().endswith(b'"kept"')
