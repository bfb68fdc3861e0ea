"""Writing to the bus (files -> commit -> push with retry -> wake) and reading reply status from it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from crosstalk.bus.errors import BusError
from crosstalk.bus.git.locks import git_dir, transport_lock
from crosstalk.bus.git.repo import CHANNELS_PATHSPEC, GitRepo
from crosstalk.bus.protocol import layout
from crosstalk.bus.protocol.layout import is_safe_relpath
from crosstalk.bus.protocol.message import MESSAGE_NAME_RE, BusMessage, parse_message, utc_timestamp
from crosstalk.bus.protocol.safefs import MESSAGE_LIMIT, read_transport_text
from crosstalk.bus.transport.state import wake
from crosstalk.bus.transport.transports import Transport
from crosstalk.fs.atomic import atomic_write

PENDING, REPLIED, FAILED = "PENDING", "REPLIED", "FAILED"


@dataclass(frozen=True, slots=True)
class PublishResult:
    commit: str
    pushed: bool
    push_error: str | None = None  # set when a remote exists but could not be reached (the commit stays local)


def publish(
    transport: Transport,
    files: dict[str, str],
    summary: str,
    *,
    push: bool = True,
    remove: Sequence[str] = (),
    precheck: Callable[[], None] | None = None,
) -> PublishResult:
    """Under the transport lock: run precheck, write files (transport-relative -> text), `git rm -r` remove,
    commit as one commit, push with retry when a remote exists; then wake this machine's dispatcher.
    A commit that fails takes back the files it wrote (a writer killed between its write and its commit leaves
    them: move_orphans)."""
    for rel in (*files, *remove):
        if not is_safe_relpath(rel):
            raise BusError(f"refusing to write outside the transport: {rel!r}")
    repo = transport.git()
    pushed = False
    push_error: str | None = None
    with transport_lock(transport.root):
        if precheck is not None:
            precheck()
        written: list[Path] = []
        try:
            for rel, text in files.items():
                path = transport.root / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(path, text.encode("utf-8"), mode=0o644)
                written.append(path)
            if remove:
                repo.run("rm", "-r", "-q", "--", *remove)
            commit = repo.commit(list(files), summary, removed=remove)
        except BaseException:
            _unwrite(repo, transport.root, written)
            raise
        if push and repo.has_remote():
            pushed = repo.push_with_retry()
            if not pushed:
                push_error = repo.last_push_error or "the remote is unreachable"
    wake(transport.name, pushed=pushed)
    return PublishResult(commit, pushed, push_error)


def move_orphans(transport: Transport) -> tuple[str, ...]:
    """Move files under data/channels that are not committed (untracked, or staged as new) to
    <state>/orphans/<utc time>/, keeping their paths; their transport-relative paths. Call under the transport
    lock (the dispatcher does at boot). Only the runtime writes under data/channels, and only in publish, under
    that lock: such a file was left by a writer killed between its write and its commit (a dispatcher killed
    after its model answered), and must never be committed by a later `git add -A` nor read as a second reply.
    Nothing is moved while a person's merge or rebase is under way."""
    repo = transport.git()
    gd = git_dir(transport.root)
    if any((gd / name).exists() for name in ("MERGE_HEAD", "rebase-merge", "rebase-apply", "CHERRY_PICK_HEAD")):
        return ()
    out = repo.run("status", "--porcelain=v1", "-z", "--untracked-files=all", "--", CHANNELS_PATHSPEC, check=False)
    found = [rec[3:] for rec in out.split("\0") if rec[:2] in ("??", "A ")]
    if not found:
        return ()
    safe = [rel for rel in found if is_safe_relpath(rel)]
    if safe:
        repo.run("rm", "--cached", "-q", "--ignore-unmatch", "--", *safe, check=False)
    dest = transport.state().ensure().orphans / utc_timestamp().replace(":", "")
    moved = []
    for rel in safe:
        src = transport.root / rel
        if src.is_symlink() or not src.is_file():
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.replace(src, target)
        moved.append(rel)
    return tuple(moved)


def _unwrite(repo: GitRepo, root: Path, written: list[Path]) -> None:
    """Take back the new files of a publish whose commit failed (unstaged, then removed)."""
    if not written:
        return
    rels = [str(p.relative_to(root)) for p in written]
    repo.run("rm", "--cached", "-q", "--ignore-unmatch", "--", *rels, check=False)
    for path in written:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def sync(transport: Transport) -> bool:
    """Pull the remote's new commits (under the lock); whether HEAD moved."""
    with transport_lock(transport.root):
        return transport.git().sync()


# ---------------------------------------------------------------------------------------------- replies


@dataclass(frozen=True, slots=True)
class ReplyInfo:
    path: str  # transport-relative
    sender: str
    failed: bool
    error: str | None

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "from": self.sender, "failed": self.failed, "error": self.error}


@dataclass(frozen=True, slots=True)
class ReplyStatus:
    path: str  # transport-relative
    state: str  # PENDING | REPLIED | FAILED
    replies: tuple[ReplyInfo, ...] = field(default=())

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "state": self.state, "replies": [r.to_json() for r in self.replies]}


def split_message_path(rel: str) -> tuple[str, str]:
    """("<uuid>", "YYYY/MM/DD/name.md") of a transport-relative message path; BusError if it is not one."""
    prefix = layout.CHANNELS_DIR + "/"
    if not rel.startswith(prefix):
        raise BusError(f"{rel} is not a message path (expected {prefix}<uuid>/YYYY/MM/DD/<name>.md)")
    uuid, _, inner = rel[len(prefix) :].partition("/")
    if not uuid or not MESSAGE_NAME_RE.match(inner):
        raise BusError(f"{rel} is not a message path (expected {prefix}<uuid>/YYYY/MM/DD/<name>.md)")
    return uuid, inner


def normalize_message_path(transport: Transport, given: str, cwd: Path | None = None) -> str:
    """A transport-relative message path from what a user typed: transport-relative, absolute, or relative to
    cwd inside the transport. BusError when it does not name an existing message file."""
    candidates: list[Path] = []
    path = Path(given)
    if path.is_absolute():
        candidates.append(path)
    else:
        candidates.append(transport.root / given)
        if cwd is not None:
            candidates.append(Path(cwd) / given)
    root = transport.root.resolve()
    for candidate in candidates:
        try:
            rel = candidate.resolve().relative_to(root).as_posix()
        except ValueError:
            continue
        if candidate.is_file():
            split_message_path(rel)
            return rel
    if path.is_absolute() and not any(p.resolve().is_relative_to(root) for p in candidates):
        raise BusError(f"{given} is not inside transport {transport.name} ({transport.root})")
    raise BusError(f"no message {given} in transport {transport.name}")


def message_names(channel_dir: Path, start: str = "") -> Iterable[str]:
    """Channel-relative message names >= start in name (= time) order, pruning whole days/months/years before it;
    never through a symlinked directory or file."""
    parts = start.split("/")  # YYYY, MM, DD, file

    def sorted_dirs(path: Path) -> list[str]:
        try:
            return sorted(e.name for e in os.scandir(path) if e.is_dir(follow_symlinks=False))
        except FileNotFoundError:
            return []

    for year in sorted_dirs(channel_dir):
        if year < parts[0]:
            continue
        for month in sorted_dirs(channel_dir / year):
            if (year, month) < tuple(parts[:2]):
                continue
            for day in sorted_dirs(channel_dir / year / month):
                if (year, month, day) < tuple(parts[:3]):
                    continue
                folder = channel_dir / year / month / day
                files = (e.name for e in os.scandir(folder) if e.is_file(follow_symlinks=False))
                for name in sorted(n for n in files if n.endswith(".md")):
                    rel = f"{year}/{month}/{day}/{name}"
                    if rel >= start:
                        yield rel


def read_message(root: Path, rel: str) -> BusMessage | None:
    """The message at transport-relative `rel`: never through a symlink, never over MESSAGE_LIMIT."""
    try:
        return parse_message(read_transport_text(root, rel, MESSAGE_LIMIT), where=rel)
    except (OSError, ValueError, BusError):  # ValueError: UnicodeDecodeError, UntrustedInput
        return None  # an unreadable neighbour is not a reply; the dispatcher logs parse errors


def replies_status(transport: Transport, rel_paths: Sequence[str]) -> list[ReplyStatus]:
    """For each transport-relative message path: REPLIED, FAILED (every reply failed) or PENDING, matched by the
    `re:` of later messages in the same channel."""
    targets: dict[str, list[str]] = {}
    for rel in rel_paths:
        uuid, inner = split_message_path(rel)
        if not (transport.root / rel).is_file():
            raise BusError(f"no message {rel} in transport {transport.name}")
        targets.setdefault(uuid, []).append(inner)
    found: dict[tuple[str, str], list[ReplyInfo]] = {}
    for uuid, inners in targets.items():
        wanted = set(inners)
        channel_dir = layout.channel_dir(transport.root, uuid)
        for name in message_names(channel_dir, min(inners)):
            rel = f"{layout.CHANNELS_DIR}/{uuid}/{name}"
            msg = read_message(transport.root, rel)
            if msg is None:
                continue
            for target in wanted.intersection(msg.re):
                found.setdefault((uuid, target), []).append(ReplyInfo(rel, msg.sender, msg.failed, msg.error))
    out: list[ReplyStatus] = []
    for rel in rel_paths:
        uuid, inner = split_message_path(rel)
        replies = tuple(found.get((uuid, inner), ()))
        if not replies:
            state = PENDING
        elif all(r.failed for r in replies):
            state = FAILED
        else:
            state = REPLIED
        out.append(ReplyStatus(rel, state, replies))
    return out
