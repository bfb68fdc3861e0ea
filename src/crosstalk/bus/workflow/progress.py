"""Where a workflow stands, read from the transport alone (its marker, its child channel's PLAN.json, messages and
COMPLETE): what the owning dispatcher advances from, and what `crosstalk workflow status` shows. Nothing here
writes."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from crosstalk.bus.errors import PlanError, UnsafeFile
from crosstalk.bus.protocol import layout
from crosstalk.bus.protocol.addressing import WORKFLOW_ADDRESS
from crosstalk.bus.protocol.message import BusMessage
from crosstalk.bus.protocol.safefs import SMALL_LIMIT, TEXT_LIMIT, read_transport_bytes, read_transport_text
from crosstalk.bus.transport.store import message_names, read_message
from crosstalk.bus.workflow.plan import Plan, parse_plan_json

COMPLETE_FILE = "COMPLETE"
FAILURE_CHARS = 2000  # a workflow's failure as it is recorded (one line; the reasons come from files others wrote)


def engine_name(alias: str) -> str:
    return f"{WORKFLOW_ADDRESS}@{alias}"


@dataclass(slots=True)
class Child:
    """One message of a workflow's child channel."""

    rel: str  # channel-relative
    msg: BusMessage


@dataclass(slots=True)
class Progress:
    marker_rel: str  # transport-relative path of the marker
    marker: BusMessage
    plan: Plan | None = None
    plan_error: str | None = None  # PLAN.json is there and unreadable
    complete: bool = False
    failed: bool = False  # COMPLETE says the workflow failed
    reason: str | None = None  # why, as COMPLETE says it (`failed: <reason>`; older owners wrote only `failed`)
    subs: list[Child] = field(default_factory=list)  # the fanout copies, in order
    sub_replies: dict[str, Child] = field(default_factory=dict)  # fanout copy rel -> its first reply
    synthesis: Child | None = None
    synthesis_reply: Child | None = None

    @property
    def child(self) -> str:
        return self.marker.child_channel or ""

    @property
    def stage(self) -> str:
        if self.complete:
            return "failed" if self.failed else "complete"
        if self.plan is None:
            return "compiling"
        if not self.subs or len(self.sub_replies) < len(self.subs):
            return "fanout"
        if self.synthesis_reply is None:
            return "synthesizing"
        return "routing"

    def failures(self) -> list[str]:
        """What failed so far (fanout copies or the synthesis answered `failed: true`)."""
        out = [f"fanout {c.msg.fanout or c.rel}: {r.msg.error or 'failed'}" for c in self.subs
               if (r := self.sub_replies.get(c.rel)) is not None and r.msg.failed]  # fmt: skip
        if self.synthesis_reply is not None and self.synthesis_reply.msg.failed:
            out.append(f"synthesis: {self.synthesis_reply.msg.error or 'failed'}")
        return out


def child_dir(root: Path, child: str) -> Path:
    return layout.channel_dir(root, child)


def read_progress(root: Path, marker_rel: str, marker: BusMessage, engine: str) -> Progress:
    """The workflow's progress; `engine` is the owner's sender name (`workflow@<alias>`)."""
    p = Progress(marker_rel, marker)
    child = marker.child_channel
    if not child or not layout.is_safe_relpath(child) or "/" in child:
        p.plan_error = "the marker names no child channel"
        return p
    base = f"{layout.CHANNELS_DIR}/{child}"
    done = _text(root, f"{base}/{COMPLETE_FILE}")
    p.complete, p.failed = done is not None, (done or "").startswith("failed")
    if p.failed:
        p.reason = " ".join(done[len("failed") :].lstrip(":").split())[:FAILURE_CHARS] or None  # type: ignore[index]
    try:
        p.plan = parse_plan_json(read_transport_bytes(root, f"{base}/{layout.PLAN_FILE}", TEXT_LIMIT), layout.PLAN_FILE)
    except FileNotFoundError:
        pass
    except (OSError, UnsafeFile, PlanError) as exc:
        p.plan_error = f"{layout.PLAN_FILE} is unreadable: {getattr(exc, 'message', None) or exc}"
    names = message_names(child_dir(root, child))
    children = [Child(rel, msg) for rel in names if (msg := read_message(root, f"{base}/{rel}")) is not None]
    mine = [c for c in children if c.msg.sender == engine]
    p.subs = [c for c in mine if c.msg.workflow_step == "fanout"]
    p.synthesis = next((c for c in mine if c.msg.workflow_step == "synthesize"), None)
    wanted = {c.rel for c in p.subs}
    for c in children:
        if c.msg.sender == engine:
            continue
        for target in c.msg.re:
            if target in wanted and target not in p.sub_replies:
                p.sub_replies[target] = c
            if p.synthesis is not None and target == p.synthesis.rel and p.synthesis_reply is None:
                p.synthesis_reply = c
    return p


def _text(root: Path, rel: str) -> str | None:
    try:
        return read_transport_text(root, rel, SMALL_LIMIT, errors="replace")
    except (OSError, UnsafeFile):
        return None


def find_markers(root: Path) -> list[str]:
    """Transport-relative paths of every workflow marker in the work tree, oldest first."""
    out: list[str] = []
    channels = Path(root) / layout.CHANNELS_DIR
    try:
        uuids = sorted(e.name for e in os.scandir(channels) if e.is_dir(follow_symlinks=False))
    except OSError:
        return []
    for uuid in uuids:
        for rel in message_names(child_dir(root, uuid)):
            path = f"{layout.CHANNELS_DIR}/{uuid}/{rel}"
            try:
                with open(Path(root) / path, "rb") as f:
                    head = f.read(4096)
            except OSError:
                continue
            if b"type: workflow" in head:
                msg = read_message(root, path)
                if msg is not None and msg.type == "workflow":
                    out.append(path)
    return sorted(out, key=lambda p: p.split("/", 3)[3])
