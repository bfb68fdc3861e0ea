"""The state root's permissions: crosstalk refuses a state dir that is not this user's (registry/paths.py) and a key
file that is not exactly 0600 (registry/credentials.py); directories it finds wider it tightens to 0700 on use. So
a foreign owner, a wrong key mode, a symlink and anything others can write to are problems; a directory others can
only read is a note."""

from __future__ import annotations

import shlex

from crosstalk.doctor.facts import PathMode, StateRoot
from crosstalk.doctor.findings import Finding, Status, note, ok, problem

CHECK = "permissions"


def _problem(entry: PathMode) -> Finding | None:
    path = shlex.quote(entry.path)
    if entry.is_symlink:
        return problem(CHECK, f"{entry.path} is a symlink; crosstalk refuses to follow it", f"rm {path}")
    if entry.uid != entry.my_uid:
        return problem(
            CHECK,
            f"{entry.path} is owned by uid {entry.uid}, not you (uid {entry.my_uid}); crosstalk refuses it",
            f"sudo chown {entry.my_uid} {path}",
        )
    if entry.kind == "dir" and entry.mode & 0o022:
        return problem(
            CHECK, f"{entry.path} has mode {entry.mode:04o}; others can add files to a state dir", f"chmod 700 {path}"
        )
    if entry.kind == "dir" and entry.mode != 0o700:
        return note(
            CHECK,
            f"{entry.path} has mode {entry.mode:04o}; others can list it (crosstalk tightens it to 0700 when an "
            "agent next starts)",
            f"chmod 700 {path}",
        )
    if entry.kind == "secret" and entry.mode != 0o600:
        return problem(
            CHECK,
            f"{entry.path} has mode {entry.mode:04o}; a key must be exactly 0600 or crosstalk refuses it",
            f"chmod 600 {path}",
        )
    if entry.kind == "file" and entry.mode & 0o022:
        return problem(CHECK, f"{entry.path} has mode {entry.mode:04o}; others can change it", f"chmod go-w {path}")
    return None


def check(state: StateRoot | None) -> list[Finding]:
    if state is None or not state.exists:
        root = state.root if state else "the state root"
        return [ok(CHECK, f"state root {root} not created yet (the first agent creates it, 0700)")]
    out = [f for f in map(_problem, state.entries) if f is not None]
    if not any(f.status is Status.PROBLEM for f in out):
        out.insert(0, ok(CHECK, f"state root {state.root}: {len(state.entries)} paths, none others can change"))
    return out
