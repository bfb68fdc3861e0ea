"""The dispatcher's incremental scan: what is ours to do among the message files added between two commits
(batches for our models, live deliveries, failed replies), from what crosstalk.bus.runs.reader read and parsed.

Only the commits since the cursor are looked at (a `git diff` between two trees), never the whole channel
history, so an idle or small tick costs the same at 1k or 100k messages. The scan is pure apart from reading
files: the caller holds the transport lock, so the work tree is at `head`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from crosstalk.bus.errors import AmbiguousModel, ModelError
from crosstalk.bus.git.repo import GitRepo
from crosstalk.bus.protocol.addressing import WORKFLOW_ADDRESS, split_address, wakes
from crosstalk.bus.protocol.message import BusMessage
from crosstalk.bus.protocol.models import ModelSpec, resolve
from crosstalk.bus.runs.reader import (
    FileReader,
    ParseFailure,
    ScannedMessage,
    SenderIndex,
    answered_index,
    is_answered,
    parse_range,
)


@dataclass(slots=True)
class Batch:
    """Pending messages for one model in one channel under one persona: a single invocation."""

    channel: str
    model: ModelSpec
    as_: str | None
    messages: list[ScannedMessage] = field(default_factory=list)

    @property
    def bare(self) -> bool:
        """True when any message names the model without @machine (another dispatcher may take it too)."""
        return any(split_address(m.msg.to)[1] is None for m in self.messages)


@dataclass(frozen=True, slots=True)
class Rejection:
    """A message addressed to us that cannot be dispatched (an ambiguous bare model, a broken file): it gets a
    failed reply instead of a model run."""

    channel: str
    rels: tuple[str, ...]
    sender: str
    addressee: str
    responder: str  # the actor the failed reply comes from (without @machine): a claimed key or the bare name
    error: str


@dataclass(frozen=True, slots=True)
class LiveDelivery:
    """A message for a live crosstalk agent on this machine (`to: NAME@ALIAS`): the bridge delivers it into the
    agent's session through its receiver chain (crosstalk.bus.live.bridge)."""

    item: ScannedMessage
    agent: str


@dataclass(slots=True)
class ScanResult:
    added: int = 0
    messages: list[ScannedMessage] = field(default_factory=list)
    parse_errors: list[ParseFailure] = field(default_factory=list)
    # (channel, channel-relative target) -> the actors (from without @machine) that replied to it in the range
    answered: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    batches: list[Batch] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    live: list[LiveDelivery] = field(default_factory=list)
    down: list[LiveDelivery] = field(default_factory=list)  # for live agents here that are not running: held
    skipped_answered: int = 0
    ignored: list[str] = field(default_factory=list)  # .md files outside any channel directory: never dispatched


def our_model(to: str, claimed: Sequence[ModelSpec], alias: str) -> ModelSpec | None:
    """The claimed model a `to:` names on this machine, None when it is not ours. AmbiguousModel propagates."""
    model, machine = split_address(to)
    if machine is not None and machine != alias:
        return None
    try:
        return resolve(list(claimed), model)
    except AmbiguousModel:
        raise
    except ModelError:
        return None


def scan(
    repo: GitRepo,
    root: Path,
    old: str | None,
    new: str,
    *,
    claimed: Sequence[ModelSpec],
    alias: str,
    paths: Sequence[str] | None = None,
    live_agent: Callable[[str], str | None] | None = None,
    known_agent: Callable[[str], bool] | None = None,
) -> ScanResult:
    """Everything the tick needs from the commits in (old, new]: parsed messages, parse errors, the answered
    index, the pending batches for our claimed models and alias, the deliveries to live agents (`live_agent`
    maps a name to the live agent on this machine, or None; `known_agent` says whether an agent of that name has
    registered here, live or not), and the messages to answer with a failure."""
    reader = FileReader(repo, root, new)
    added = repo.added_message_files(old, new) if paths is None else list(paths)
    ignored: list[str] = []
    messages, failures = parse_range(reader, added, ignored)
    result = ScanResult(added=len(added), messages=messages, parse_errors=failures, ignored=ignored)
    result.answered = answered_index(messages)
    senders = SenderIndex(reader)
    for item in messages:
        senders.add(item.channel, item.rel, item.msg.sender)
    for bad in failures:
        senders.add(bad.channel, bad.rel, bad.sender)

    def sender_in(channel: str) -> Callable[[str], str | None]:
        return lambda rel: senders.sender_of(channel, rel)

    batches: dict[tuple[str, str, str | None], Batch] = {}
    for item in messages:
        try:
            _classify(item, claimed, alias, live_agent, known_agent, result, batches, sender_in(item.channel))
        except Exception as exc:  # one message that breaks the scan is reported (and answered if ours), not the tick
            m = item.msg
            error = f"{item.path}: cannot dispatch it ({type(exc).__name__}: {exc})"
            failures.append(ParseFailure(item.channel, item.rel, error, m.sender, m.to, m.re))
    result.batches.extend(batches.values())
    result.batches.sort(key=lambda b: b.messages[0].rel)
    for bad in failures:
        try:
            rejection = _reject_broken(bad, claimed, alias, result.answered, sender_in(bad.channel))
        except Exception:  # its parse error is logged already; nothing more can be said to its sender
            continue
        if rejection is not None:
            result.rejections.append(rejection)
    return result


def _classify(
    item: ScannedMessage,
    claimed: Sequence[ModelSpec],
    alias: str,
    live_agent: Callable[[str], str | None] | None,
    known_agent: Callable[[str], bool] | None,
    result: ScanResult,
    batches: dict[tuple[str, str, str | None], Batch],
    sender_of: Callable[[str], str | None],
) -> None:
    """What one parsed message asks of this machine: a batch, a rejection, a live delivery, or nothing."""
    msg = item.msg
    try:
        spec = our_model(msg.to, claimed, alias)
    except AmbiguousModel as exc:
        # Only answer the ambiguity when the message would have woken that name at all.
        name = split_address(msg.to)[0]
        if wakes(msg, name, sender_of) and not is_answered(result.answered, item.channel, item.rel, name):
            result.rejections.append(Rejection(item.channel, (item.rel,), msg.sender, msg.to, name, exc.message))
        return
    if spec is None and msg.type != "workflow":
        _route_unclaimed(item, alias, live_agent, known_agent, result, sender_of)
        return
    if spec is None or msg.type == "workflow" or not wakes(msg, spec.key, sender_of):
        return
    if is_answered(result.answered, item.channel, item.rel, spec.key):
        result.skipped_answered += 1
        return
    if msg.fanout:
        result.batches.append(Batch(item.channel, spec, msg.as_, [item]))  # a fanout copy runs alone
        return
    batches.setdefault((item.channel, spec.key, msg.as_), Batch(item.channel, spec, msg.as_)).messages.append(item)


def _route_unclaimed(
    item: ScannedMessage,
    alias: str,
    live_agent: Callable[[str], str | None] | None,
    known_agent: Callable[[str], bool] | None,
    result: ScanResult,
    sender_of: Callable[[str], str | None],
) -> None:
    """`to: NAME@<our alias>` that no claimed model answers: a live agent called NAME gets it through the bridge.
    When NAME is not running, a reply to what NAME sent, or a new task for a name an agent here has had, is held
    for it (crosstalk.bus.live.held); a new task for a name nothing here has answered gets a failed reply."""
    actor, machine = split_address(item.msg.to)
    if actor == WORKFLOW_ADDRESS:  # the workflow engine's traffic is its own (crosstalk.bus.workflow)
        return
    if machine != alias or live_agent is None or not wakes(item.msg, actor, sender_of):
        return
    if "/" in actor or is_answered(result.answered, item.channel, item.rel, actor):
        agent = None
    else:
        agent = live_agent(actor)
        if agent is None and (item.msg.re or (known_agent is not None and known_agent(actor))):
            result.down.append(LiveDelivery(item, actor))
            return
    if agent is not None:
        result.live.append(LiveDelivery(item, agent))
    elif not item.msg.re and not is_answered(result.answered, item.channel, item.rel, actor):
        error = f"no model and no live agent named {actor!r} on machine {alias!r}"
        result.rejections.append(Rejection(item.channel, (item.rel,), item.msg.sender, item.msg.to, actor, error))


def _reject_broken(
    bad: ParseFailure,
    claimed: Sequence[ModelSpec],
    alias: str,
    answered: dict[tuple[str, str], set[str]],
    sender_of: Callable[[str], str | None],
) -> Rejection | None:
    """A broken file addressed to one of our models gets a failed reply (once), when it can be addressed back."""
    if bad.to is None or bad.sender is None:
        return None
    try:
        spec = our_model(bad.to, claimed, alias)
        responder = spec.key if spec is not None else None
    except AmbiguousModel:
        responder = split_address(bad.to)[0]
    if responder is None:
        return None
    probe = BusMessage(sender=bad.sender, to=bad.to, timestamp="", re=bad.re)
    if not wakes(probe, responder, sender_of) or is_answered(answered, bad.channel, bad.rel, responder):
        return None
    return Rejection(bad.channel, (bad.rel,), bad.sender, bad.to, responder, f"unreadable message: {bad.error}")
