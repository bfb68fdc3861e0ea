"""The relay's subjects and frames (docs/dev/relay.md): pure functions, no NATS and no I/O.

A request on `crosstalk.v1.msg.<to>.<from>` carries `{"v": 1, "message": Message.to_dict()}`; an ask's message is
written as an inform with `"ask": {"deadline_seconds": N}` beside it, so a relay process from before relayed asks
(which ignores the field) still delivers it, as the inform with the ask's message_id it was, and its reply still
routes back; a current one delivers it as the ask it is (decode_request). The answer on the
request's reply subject is `{"v": 1, "outcome": …, "to": NAME, "agent_id": ID}` when the receiver chain answered, or
`{"v": 1, "error": KIND, "detail": TEXT}` when it could not run. `<from>` is taken from the subject the server
delivered (the server's permissions let each machine publish only under its own alias), never from the frame.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from crosstalk.core.errors import MessageError
from crosstalk.core.ids import is_external_tag
from crosstalk.core.message import MAX_NAME_CHARS, Message
from crosstalk.core.states import Outcome
from crosstalk.registry.names import is_valid_name
from crosstalk.relay.config import ALIAS_RE
from crosstalk.relay.errors import FrameError as FrameError

VERSION = 1
PREFIX = "crosstalk.v1.msg"
MAX_FRAME_BYTES = 256 * 1024
TAG_SCHEME = "@relay:"
ERROR_KINDS = frozenset({"no_agent", "unreachable", "bad_frame", "wire"})


def msg_subject(to_alias: str, from_alias: str) -> str:
    return f"{PREFIX}.{to_alias}.{from_alias}"


def inbound_subject(alias: str) -> str:
    """What machine `alias` subscribes to: every machine's requests to it."""
    return f"{PREFIX}.{alias}.*"


def inbox_prefix(alias: str) -> str:
    """The reply subjects of machine `alias`'s requests start with this (the server lets only it subscribe there)."""
    return f"_INBOX.{alias}"


def from_alias_of(subject: str, own_alias: str) -> str:
    """The sending machine's alias, from the subject the server delivered the request on."""
    parts = subject.split(".")
    if len(parts) != 5 or ".".join(parts[:3]) != PREFIX or parts[3] != own_alias or not ALIAS_RE.fullmatch(parts[4]):
        raise FrameError(f"not a request subject for machine {own_alias!r}: {subject!r}")
    return parts[4]


def split_remote(address: str) -> tuple[str, str] | None:
    """(NAME, ALIAS) of a NAME@ALIAS address whose ALIAS can be a relay machine's, else None."""
    name, sep, alias = address.rpartition("@")
    if not sep or not name or "@" in name or not ALIAS_RE.fullmatch(alias):
        return None
    return name, alias


def sender_label(from_alias: str, claimed: str | None) -> str:
    """How the receiving machine names a relayed sender: `@relay:<machine>/<its label there>`, an external sender.
    The label is the sending machine's own word for its sender: an agent name (an agent's tool send, which that
    machine's relay process took only with the agent's bearer proof: `@relay:laptop/alice`), or an external tag
    (`@cli:bob` → `@relay:laptop/cli:bob`); anything else becomes `anonymous`."""
    if claimed and is_valid_name(claimed):
        label = claimed
    else:
        label = claimed[1:] if claimed and is_external_tag(claimed) else "anonymous"
    tag = f"{TAG_SCHEME}{from_alias}/{label}"
    return tag if len(tag) <= MAX_NAME_CHARS else f"{TAG_SCHEME}{from_alias}/anonymous"


def relayed_agent(tag: object) -> tuple[str, str] | None:
    """(NAME, ALIAS) when `tag` names an agent another machine's relay process vouched for (`@relay:ALIAS/NAME`):
    the address NAME@ALIAS a reply or a send goes back to. None for anything else (a relayed `@cli:` sender has no
    way back)."""
    if not isinstance(tag, str) or not tag.startswith(TAG_SCHEME):
        return None
    alias, sep, name = tag[len(TAG_SCHEME) :].partition("/")
    if not sep or not ALIAS_RE.fullmatch(alias) or not is_valid_name(name):
        return None
    return name, alias


def encode_request(msg: Message) -> bytes:
    frame: dict[str, Any] = {"v": VERSION, "message": msg.to_dict()}
    if msg.kind.value == "ask":  # an older receiving machine reads the inform; a current one, the ask (module doc)
        frame["message"] = {**frame["message"], "kind": "inform", "deadline_seconds": 0}
        frame["ask"] = {"deadline_seconds": msg.deadline_seconds or 0}
    data = json.dumps(frame, ensure_ascii=False).encode("utf-8")
    if len(data) > MAX_FRAME_BYTES:
        raise FrameError(f"the frame is {len(data)} bytes, over the relay's {MAX_FRAME_BYTES}-byte limit")
    return data


def _object(data: bytes) -> dict[str, Any]:
    if len(data) > MAX_FRAME_BYTES:
        raise FrameError(f"the frame is {len(data)} bytes, over {MAX_FRAME_BYTES}")
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FrameError(f"not a JSON frame: {exc}") from None
    if not isinstance(obj, dict):
        raise FrameError("a frame must be a JSON object")
    if obj.get("v") != VERSION:
        raise FrameError(f"frame version {obj.get('v')!r}, this side speaks {VERSION}")
    return obj


def decode_request(data: bytes, own_alias: str, from_alias: str) -> Message:
    """The message a request carries, readdressed for this machine: `to` is the local NAME (its `@<own_alias>` is
    checked and dropped) and `from` is `@relay:<from_alias>/<label>` (sender_label)."""
    return request_of(parse_frame(data), own_alias, from_alias)


def parse_frame(data: bytes) -> dict[str, Any]:
    """A frame's JSON object, its size and version checked (FrameError otherwise)."""
    return _object(data)


def addressed(raw: dict[str, Any], own_alias: str, from_alias: str) -> tuple[str, str]:
    """A relayed message's (local agent name, sender label): `to` must be NAME@<this machine>, and who sent it is
    the sending machine's word (sender_label), never the frame's alone. FrameError otherwise."""
    to = raw.get("to")
    remote = split_remote(to) if isinstance(to, str) else None
    if remote is None or remote[1] != own_alias:
        raise FrameError(f"the message is addressed to {to!r}, not to NAME@{own_alias}")
    claimed = raw.get("from")
    return remote[0], sender_label(from_alias, claimed if isinstance(claimed, str) else None)


def request_of(obj: dict[str, Any], own_alias: str, from_alias: str) -> Message:
    """decode_request on a parsed frame."""
    raw = obj.get("message")
    if not isinstance(raw, dict):
        raise FrameError("the request carries no message object")
    name, label = addressed(raw, own_alias, from_alias)
    local = {**raw, "to": name, "from": label}
    if "ask" in obj:
        ask = obj["ask"]
        deadline = ask.get("deadline_seconds") if isinstance(ask, dict) else None
        if type(deadline) is not int or deadline < 0 or raw.get("kind", "inform") != "inform":
            raise FrameError("an ask frame carries an inform message and ask.deadline_seconds, a whole number >= 0")
        local.update(kind="ask", deadline_seconds=deadline)
    try:
        return Message.from_dict(local)
    except MessageError as exc:
        raise FrameError(f"invalid message: {exc}") from None


def encode_answer(outcome: Outcome, name: str, agent_id: str) -> bytes:
    return json.dumps({"v": VERSION, "outcome": outcome.to_dict(), "to": name, "agent_id": agent_id}).encode()


def encode_error(kind: str, detail: str) -> bytes:
    assert kind in ERROR_KINDS, kind
    return json.dumps({"v": VERSION, "error": kind, "detail": detail[:2000]}).encode()


@dataclass(frozen=True, slots=True)
class Answer:
    outcome: Outcome | None  # the receiver chain's answer
    to: str | None
    agent_id: str | None
    error: str | None = None  # one of ERROR_KINDS when the chain could not run
    detail: str | None = None
    task: dict[str, Any] | None = None  # a task request's answer: the task as its creator sees it (relay/a2a_in.py)
    task_error: dict[str, Any] | None = None  # or the task service's refusal, {"kind", "message"}


def decode_answer(data: bytes) -> Answer:
    obj = _object(data)
    if "task" in obj or "task_error" in obj:  # a task request's answer (relay/a2a_wire.py)
        to, agent_id, task, err = obj.get("to"), obj.get("agent_id"), obj.get("task"), obj.get("task_error")
        if not isinstance(to, str) or not isinstance(agent_id, str):
            raise FrameError("an answer names the agent (to, agent_id)")
        if isinstance(task, dict):
            return Answer(None, to, agent_id, task=task)
        if not isinstance(err, dict) or not all(isinstance(err.get(k), str) for k in ("kind", "message")):
            raise FrameError("a task answer carries task, an object, or task_error: {kind, message}")
        return Answer(None, to, agent_id, task_error={"kind": err["kind"], "message": err["message"]})
    if "error" in obj:
        kind, detail = obj.get("error"), obj.get("detail")
        if kind not in ERROR_KINDS or not isinstance(detail, str):
            raise FrameError(f"an error answer must name one of {sorted(ERROR_KINDS)} with a detail")
        return Answer(None, None, None, str(kind), detail)
    try:
        outcome = Outcome.from_dict(obj.get("outcome"))
    except ValueError as exc:
        raise FrameError(f"bad outcome: {exc}") from None
    to, agent_id = obj.get("to"), obj.get("agent_id")
    if not isinstance(to, str) or not isinstance(agent_id, str):
        raise FrameError("an answer names the agent (to, agent_id)")
    return Answer(outcome, to, agent_id)
