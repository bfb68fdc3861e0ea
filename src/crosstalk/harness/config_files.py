"""The steps every harness's installer shares for a config file the harness owns: edit it so that uninstall is a
clean undo (fs/install_undo.py), and say what changed. The installer keeps what is its own: how it edits the file
(`run`: its lock and size limit around fs.config_edit.update) and what its entries are (`add`, `remove`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from crosstalk.fs.install_undo import UndoRecord, missing_dirs
from crosstalk.fs.state_root import state_root
from crosstalk.harness.base import ConfigChange

Edit = Callable[[bytes | None], bytes | None]  # the file's bytes (None: absent) -> new bytes (None: delete it)
Run = Callable[[Edit], tuple[bytes | None, bytes | None]]  # apply an edit: (bytes first read, bytes written)


def change(path: Path, before: bytes | None, after: bytes | None) -> ConfigChange:
    """What an edit from `before` to `after` did to the file."""
    if before == after:
        return ConfigChange(str(path), "unchanged" if after is not None else "absent")
    return ConfigChange(str(path), "created" if before is None else "updated")


def install_edit(path: Path, environ: Mapping[str, str], run: Run, add: Edit) -> ConfigChange:
    """Apply `add`, keeping what undoes it: the file's bytes before crosstalk's first edit, the directories made."""
    made = missing_dirs(path)
    before, after = run(add)
    if after is not None:
        UndoRecord(state_root(environ), path).keep(before, after, made)
    return change(path, before, after)


def uninstall_edit(path: Path, environ: Mapping[str, str], run: Run, remove: Edit | None) -> ConfigChange | None:
    """Undo install: the bytes from before it, byte for byte, while the file is as crosstalk left it (`restored`, or
    `removed` when install created it); else `remove` takes out only crosstalk's entries (`updated`, `absent`), or,
    without one, the file is the user's now (`kept`; None when crosstalk never wrote it)."""
    undo = UndoRecord(state_root(environ), path)
    known = undo.load() is not None
    before, after = run(undo.restore)
    if before != after:
        result: ConfigChange | None = ConfigChange(str(path), "removed" if after is None else "restored")
    elif remove is not None:
        done = change(path, *run(remove))
        result = ConfigChange(done.path, "absent") if done.action == "unchanged" else done
    else:
        result = ConfigChange(str(path), "kept") if known and after is not None else None
    undo.finish()
    return result


def drop_entry(settings: dict[str, Any], table: str, name: str) -> bool:
    """Take `name` out of the object `settings[table]`, and the table itself when nothing else is left in it (an
    empty table means what none means: nothing of crosstalk's is left behind). Whether anything was taken."""
    entries = settings.get(table)
    if not isinstance(entries, dict) or name not in entries:
        return False
    del entries[name]
    if not entries:
        del settings[table]
    return True


def drop_items(settings: dict[str, Any], key: str, ours: Callable[[Any], bool]) -> bool:
    """Take crosstalk's items out of the list `settings[key]`, and the list itself when nothing else is left in it."""
    items = settings.get(key)
    if not isinstance(items, list) or not any(ours(item) for item in items):
        return False
    settings[key] = [item for item in items if not ours(item)]
    if not settings[key]:
        del settings[key]
    return True
