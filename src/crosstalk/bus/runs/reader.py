"""Reading the message files added between two commits: each one read as of the new commit (work tree or git,
refusing what safefs refuses), parsed or reported as a ParseFailure, and the index of which actors replied to what.

The caller holds the transport lock, so the work tree is at the commit read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from crosstalk.bus.errors import BusError, MessageFormatError, UnsafeFile
from crosstalk.bus.git.repo import GitRepo
from crosstalk.bus.protocol import layout
from crosstalk.bus.protocol.addressing import actor_of, same_actor
from crosstalk.bus.protocol.layout import is_safe_relpath
from crosstalk.bus.protocol.message import BusMessage, lenient_fields, parse_message
from crosstalk.bus.protocol.safefs import MESSAGE_LIMIT, is_regular_in, read_transport_text
from crosstalk.bus.transport.channels import UUID_RE

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
    (crosstalk.bus.protocol.safefs), in the work tree and in git alike."""

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


def replies_since(repo: GitRepo, root: Path, old: str, new: str) -> dict[tuple[str, str], set[str]]:
    """The answered index of the commits in (old, new]: used right before a bare-name batch runs, to skip the
    messages another dispatcher answered meanwhile."""
    if old == new:
        return {}
    reader = FileReader(repo, root, new)
    messages, _ = parse_range(reader, repo.added_message_files(old, new))
    return answered_index(messages)
