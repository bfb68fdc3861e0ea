"""A clean undo of an install's edit to a file another program owns (a harness's settings): what the file held
before crosstalk's first edit, so uninstall puts it back byte for byte, and the directories the edit made.

Kept per edited file in `<state root>/install-undo/<sha256 of the path>.json` (0600): the bytes before the first
edit (kept across re-installs, which only move `after`), the sha256 of what crosstalk wrote last, and the
directories that did not exist before. Uninstall restores the old bytes only while the file is exactly what crosstalk
wrote; once the user or the harness changed it, the installer removes only crosstalk's entries instead (its own
rule), and the record is dropped either way. A directory crosstalk made is removed when it is empty.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from crosstalk.fs.atomic import atomic_write
from crosstalk.fs.reading import read_capped

STORE = "install-undo"
MADE = "made-dirs.json"  # in the store: the directories making the store made (the state root, its parents)
MAX_RECORD_BYTES = 96 * 1024 * 1024  # a 64 MiB config file, base64-encoded, and its record


def missing_dirs(path: Path) -> list[str]:
    """The ancestors of `path` that do not exist yet, outermost first: what writing it would make."""
    path = Path(path)
    out: list[str] = []
    parent = path.absolute().parent
    while not parent.exists() and parent != parent.parent:
        out.append(str(parent))
        parent = parent.parent
    return out[::-1]


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class UndoRecord:
    """The undo record of one edited file, under the state root `state_root`."""

    def __init__(self, state_root: str | os.PathLike[str], path: Path) -> None:
        self.path = path.absolute()
        name = _digest(str(self.path).encode())[:24]
        self.file = Path(state_root) / STORE / f"{name}.json"

    def load(self) -> dict[str, Any] | None:
        """The record, or None when there is none (or it is unreadable, which undoes nothing)."""
        try:
            st = os.lstat(self.file)
        except OSError:
            return None
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            return None  # it holds a copy of a settings file: only a private file of ours is trusted
        raw = read_capped(self.file, MAX_RECORD_BYTES)
        try:
            data = json.loads(raw) if raw else None
        except ValueError:
            return None
        if not isinstance(data, dict) or data.get("path") != str(self.path):
            return None
        return data

    def keep(self, before: bytes | None, after: bytes, made: list[str]) -> None:
        """Record an edit from `before` to `after` that made the directories `made`: the first edit's `before` and
        directories stay, a later edit moves `after` only."""
        if before == after:
            return
        kept = self.load()
        if kept is not None:
            old, made = kept.get("before"), [d for d in kept.get("made_dirs", []) if isinstance(d, str)]
        else:
            old = base64.b64encode(before).decode("ascii") if before is not None else None
        data = {"path": str(self.path), "before": old, "after": _digest(after), "made_dirs": made}
        store = self.file.parent
        if not store.is_dir():  # the store (and the state root) may be new too: undone with the last record
            made_store = missing_dirs(store / MADE)
            store.mkdir(mode=0o700, parents=True, exist_ok=True)
            atomic_write(store / MADE, (json.dumps(made_store) + "\n").encode(), mode=0o600)
        atomic_write(self.file, (json.dumps(data) + "\n").encode(), mode=0o600)

    def restore(self, raw: bytes | None) -> bytes | None:
        """The file's bytes from before crosstalk's first edit when `raw` is still what crosstalk wrote (None: the
        file did not exist); else `raw` itself. An edit function for fs.config_edit.update."""
        kept = self.load()
        if kept is None or raw is None or _digest(raw) != kept.get("after"):
            return raw
        before = kept.get("before")
        if before is None:
            return None
        try:
            return base64.b64decode(before, validate=True)
        except ValueError:
            return raw  # a damaged record restores nothing

    def finish(self) -> None:
        """After uninstall: remove the directories crosstalk made that are empty now (innermost first), then the
        record. One that still holds another install's file passes to that install's record, which removes it when
        it is undone in turn (installs of two harnesses under one new ~/.config, undone in any order)."""
        kept = self.load() or {}
        left = []
        for d in sorted((d for d in kept.get("made_dirs", []) if isinstance(d, str)), key=_depth, reverse=True):
            try:
                os.rmdir(d)  # only when empty: the user's files keep it
            except OSError:
                left.append(d)
        self.file.unlink(missing_ok=True)
        for other in self._others():
            inside = [d for d in left if Path(d) in Path(other.path).parents]
            data = other.load()
            if inside and data is not None:
                data["made_dirs"] = sorted({*data.get("made_dirs", []), *inside}, key=_depth)
                atomic_write(other.file, (json.dumps(data) + "\n").encode(), mode=0o600)

    def _others(self) -> list[UndoRecord]:
        """The other records in the store."""
        out = []
        for name in sorted(os.listdir(self.file.parent)) if self.file.parent.is_dir() else []:
            if name.endswith(".json") and name != MADE and name != self.file.name:
                raw = read_capped(self.file.parent / name, MAX_RECORD_BYTES)
                try:
                    path = json.loads(raw).get("path") if raw else None
                except (ValueError, AttributeError):
                    path = None
                if isinstance(path, str):
                    other = UndoRecord(self.file.parent.parent, Path(path))
                    if other.file.name == name:
                        out.append(other)
        return out


def _depth(path: str) -> int:
    return path.rstrip("/").count("/")


def tidy(state_root: str | os.PathLike[str]) -> None:
    """Once no record is left: the store goes, and the directories making it made (the state root and its parents,
    when crosstalk made them for it) if they are empty. The caller's last step, after its own files there."""
    store = Path(state_root) / STORE
    try:
        if [p for p in os.listdir(store) if p != MADE]:
            return
    except OSError:
        return
    raw = read_capped(store / MADE, MAX_RECORD_BYTES)
    try:
        made = json.loads(raw) if raw else []
    except ValueError:
        made = []
    (store / MADE).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        store.rmdir()
    for d in reversed([d for d in made if isinstance(d, str)] if isinstance(made, list) else []):
        with contextlib.suppress(OSError):
            os.rmdir(d)  # only when empty: the state root of a machine that runs agents stays
