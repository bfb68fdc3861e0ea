"""The dispatcher's incremental scan: the message files added between two commits, parsed, and what is ours to do.

Only the commits since the cursor are looked at (a `git diff` between two trees), never the whole channel
history, so an idle or small tick costs the same at 1k or 100k messages. The scan is pure apart from reading
files: the caller holds the transport lock, so the work tree is at `head`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from crosstalk.bus import layout
from crosstalk.bus.addressing import WORKFLOW_ADDRESS, actor_of, same_actor, split_address, wakes
from crosstalk.bus.channels import UUID_RE
from crosstalk.bus.errors import AmbiguousModel, BusError, MessageFormatError, ModelError, UnsafeFile
from crosstalk.bus.gitops import GitRepo
from crosstalk.bus.layout import is_safe_relpath
from crosstalk.bus.message import BusMessage, lenient_fields, parse_message
from crosstalk.bus.models import ModelSpec, resolve
from crosstalk.bus.safefs import MESSAGE_LIMIT, is_regular_in, read_transport_text

CHANNELS_DIR = layout.CHANNELS_DIR


@dataclass(frozen=True, slots=True)
class ScannedMessage:
    """One parsed message: its channel uuid, channel-relative path (what `re:` holds) and content."""

    channel: str
    rel: str
    msg: BusMessage

    @property
    def path(self) -> str:
        """The transport-relative path (`data/channels/<uuid>/<rel>`)."""
        return f"{CHANNELS_DIR}/{self.channel}/{self.rel}"


@dataclass(frozen=True, slots=True)
class ParseFailure:
    """A message file that breaks the protocol; `sender`/`to` are read leniently so it can still be answered."""

    channel: str
    rel: str
    error: str
    sender: str | None = None
    to: str | None = None
    re: tuple[str, ...] = ()

    @property
    def path(self) -> str:
        return f"{CHANNELS_DIR}/{self.channel}/{self.rel}"


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
    agent's session through its receiver chain (crosstalk.bus.bridge)."""

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


def split_channel_path(path: str) -> tuple[str, str] | None:
    """`data/channels/<uuid>/<rel>` -> (uuid, rel) for a message file, else None (CHANNEL.md, PLAN.json, ...)."""
    prefix = CHANNELS_DIR + "/"
    if not path.startswith(prefix) or not path.endswith(".md"):
        return None
    channel, _, rel = path[len(prefix) :].partition("/")
    if not channel or "/" not in rel:  # data/channels/<uuid>/CHANNEL.md has no date directories
        return None
    return channel, rel


class FileReader:
    """Reads transport files as of `head`: from the work tree (the lock is held, so HEAD == head), else git.

    Guaranteed: a symlink anywhere on the path, a file that is not regular, or one over MESSAGE_LIMIT is refused
    (crosstalk.bus.safefs), in the work tree and in git alike."""

    def __init__(self, repo: GitRepo, root: Path, head: str) -> None:
        self._repo = repo
        self._root = root
        self._head = head
        self._channels: dict[str, bool] = {}

    def read_checked(self, path: str) -> str:
        """The text of `path`; BusError saying why it cannot be read (naming the path)."""
        try:
            return read_transport_text(self._root, path, MESSAGE_LIMIT)
        except FileNotFoundError:
            pass
        except UnicodeDecodeError:
            raise BusError(f"{path}: not valid UTF-8") from None
        except OSError as exc:
            raise BusError(f"{path}: cannot read it ({exc.strerror or exc})") from None
        return self._from_git(path)

    def _from_git(self, path: str) -> str:
        entry = self._repo.tree_entry(self._head, path)
        if entry is None:
            raise BusError(f"{path}: not in the work tree nor in {self._head[:12]}")
        mode, size = entry
        if mode != "100644" and mode != "100755":
            raise UnsafeFile(f"{path}: committed as mode {mode}, not a regular file (refused)")
        if size > MESSAGE_LIMIT:
            raise UnsafeFile(f"{path}: {size} bytes is over the {MESSAGE_LIMIT}-byte limit (refused)")
        return self._repo.run("show", f"{self._head}:{path}")

    def read(self, path: str) -> str | None:
        """read_checked, None instead of an error."""
        try:
            return self.read_checked(path)
        except BusError:
            return None

    def is_channel(self, channel: str) -> bool:
        """Whether data/channels/<channel> is a channel: a uuid directory with a regular CHANNEL.md."""
        if channel not in self._channels:
            rel = f"{CHANNELS_DIR}/{channel}/{layout.CHANNEL_FILE}"
            self._channels[channel] = bool(UUID_RE.match(channel)) and (
                is_regular_in(self._root, rel) or self._repo.tree_entry(self._head, rel) is not None
            )
        return self._channels[channel]


class SenderIndex:
    """`sender_of(channel, rel)` for the activation rule: the `from` of a re: target, cached for one tick."""

    def __init__(self, reader: FileReader) -> None:
        self._reader = reader
        self._cache: dict[tuple[str, str], str | None] = {}

    def add(self, channel: str, rel: str, sender: str | None) -> None:
        self._cache[(channel, rel)] = sender

    def sender_of(self, channel: str, rel: str) -> str | None:
        key = (channel, rel)
        if key not in self._cache:
            text = self._reader.read(f"{CHANNELS_DIR}/{channel}/{rel}")
            sender: str | None = None
            if text is not None:
                try:
                    sender = parse_message(text, where=rel).sender
                except Exception:  # broken or hostile: read leniently (never raises)
                    sender = lenient_fields(text).get("from")
            self._cache[key] = sender
        return self._cache[key]


def parse_range(
    reader: FileReader, paths: Iterable[str], ignored: list[str] | None = None
) -> tuple[list[ScannedMessage], list[ParseFailure]]:
    """Parse every message file among `paths`, in file-name (chronological) order. Guaranteed never to raise for
    one file: a file that cannot be read or parsed is a ParseFailure naming it. A `.md` file under a date
    directory of something that is not a channel (no uuid directory with CHANNEL.md) is not a message: its path
    goes to `ignored`. Other paths (CHANNEL.md, PLAN.json, ...) are skipped."""
    messages: list[ScannedMessage] = []
    failures: list[ParseFailure] = []
    for path in sorted(paths):
        where = split_channel_path(path)
        if where is None:
            continue
        channel, rel = where
        if not reader.is_channel(channel):
            if ignored is not None:
                ignored.append(path)
            continue
        if not is_safe_relpath(rel):
            failures.append(ParseFailure(channel, rel, f"the file name {rel!r} has a control character"))
            continue
        try:
            text = reader.read_checked(path)
        except BusError as exc:
            failures.append(ParseFailure(channel, rel, exc.message))
            continue
        try:
            messages.append(ScannedMessage(channel, rel, parse_message(text, where=path)))
        except MessageFormatError as exc:
            raw = lenient_fields(text)
            failures.append(ParseFailure(channel, rel, exc.message, raw.get("from"), raw.get("to"), raw.get("re", ())))
        except Exception as exc:  # a parser bug must not wedge the tick: this file is reported, the rest run
            failures.append(ParseFailure(channel, rel, f"{path}: cannot parse it ({type(exc).__name__}: {exc})"))
    return messages, failures


def answered_index(messages: Iterable[ScannedMessage]) -> dict[tuple[str, str], set[str]]:
    """(channel, target) -> the actors that replied to target (any message whose re: lists it)."""
    index: dict[tuple[str, str], set[str]] = {}
    for item in messages:
        for target in item.msg.re:
            index.setdefault((item.channel, target), set()).add(actor_of(item.msg.sender))
    return index


def is_answered(answered: dict[tuple[str, str], set[str]], channel: str, rel: str, model_key: str) -> bool:
    return any(same_actor(actor, model_key) for actor in answered.get((channel, rel), ()))


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
    for it (crosstalk.bus.held); a new task for a name nothing here has answered gets a failed reply."""
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


def replies_since(repo: GitRepo, root: Path, old: str, new: str) -> dict[tuple[str, str], set[str]]:
    """The answered index of the commits in (old, new]: used right before a bare-name batch runs, to skip the
    messages another dispatcher answered meanwhile."""
    if old == new:
        return {}
    reader = FileReader(repo, root, new)
    messages, _ = parse_range(reader, repo.added_message_files(old, new))
    return answered_index(messages)
