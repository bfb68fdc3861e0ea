"""What an extension-hosted session had set, saved so a resumed session keeps it: its handle, role, parent, peers and
acceptFrom, one small JSON file per session under the state root (`<root>/<harness>/<agent_id>.json`).

The file is read as untrusted input: each entry is checked and a bad one is skipped with a warning, never the whole
file. The checks are the same ones the extension's own requests go through.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crosstalk.core.ids import agent_id_for, is_agent_id
from crosstalk.core.sender import is_external_tag
from crosstalk.core.untrusted import UntrustedInput, text
from crosstalk.fs.atomic import atomic_write
from crosstalk.fs.reading import read_json_object
from crosstalk.policy import BUCKET_NAMES
from crosstalk.registry.errors import InvalidName
from crosstalk.registry.names import validate_name
from crosstalk.registry.paths import StatePaths, ensure_private_dir

MAX_SETTINGS = 64 * 1024  # a handle is at most 64 characters: a thousand peers fit
MAX_TAG = 256  # an @scheme:topic acceptFrom entry

Warn = Callable[[str], None]


def settings_path(paths: StatePaths, harness: str, session: str) -> Path:
    return paths.root / harness / f"{agent_id_for(harness, session)}.json"


def load_settings(path: Path, warn: Warn) -> dict[str, Any]:
    """The saved settings, each entry checked: a bad one is skipped with a warning, never the whole file."""
    try:
        saved = read_json_object(path, MAX_SETTINGS)
    except ValueError as exc:
        warn(f"saved crosstalk settings ignored: {exc}")
        return {}
    out: dict[str, Any] = {"role": saved.get("role")}
    for key in ("handle", "parent"):
        value = saved.get(key)
        if value is not None and (problem := bad_handle(value, key)):
            warn(f"saved {problem}: skipped")
        elif value is not None:
            out[key] = value
    for key in ("peers", "accept_from"):
        entries = saved.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list):
            warn(f"saved {key} is not a list: skipped")
            continue
        check = bad_handle if key == "peers" else bad_accept
        out[key] = []
        for entry in entries:
            if problem := check(entry, "peer" if key == "peers" else "acceptFrom entry"):
                warn(f"saved {problem}: skipped")
            else:
                out[key].append(entry)
    return out


def save_settings(path: Path, data: dict[str, Any], warn: Warn) -> str | None:
    """Write one session's settings; the reason when they cannot be (too large: nothing is written). A write that
    fails is warned about, not refused: the settings hold for this run all the same."""
    raw = (json.dumps(data) + "\n").encode()
    if len(raw) > MAX_SETTINGS:
        return f"this session's settings would be {len(raw)} bytes, over the {MAX_SETTINGS}-byte cap: not saved"
    try:
        ensure_private_dir(path.parent)
        atomic_write(path, raw)
    except OSError as exc:
        warn(f"could not save this session's crosstalk settings: {exc}")
    return None


def bad_handle(value: object, what: str) -> str | None:
    """Why `value` cannot be a handle (a name or an agent_id), naming it briefly; None when it can."""
    if not isinstance(value, str):
        return f"{what} {value!r} is not text"
    shown = repr(value if len(value) <= 40 else value[:40] + "…")
    try:
        text(value, what=f"{what} {shown}")
    except UntrustedInput as exc:
        return str(exc).encode("utf-8", "backslashreplace").decode()
    if is_agent_id(value) and what in ("peer", "peer handle", "parent"):
        return None
    try:
        validate_name(value)
    except InvalidName as exc:
        return f"{what} {shown} {exc.problem}"
    return None


def bad_accept(value: object, what: str) -> str | None:
    """Why `value` cannot be an acceptFrom entry (a bucket, a handle or an @scheme:topic tag); None when it can."""
    if isinstance(value, str) and len(value) <= MAX_TAG and (value in BUCKET_NAMES or is_external_tag(value)):
        problem = bad_handle(value, what)
        return problem if problem and "surrogate" in problem else None
    if isinstance(value, str) and bad_handle(value, what) is None:
        return None
    shown = repr(value if not isinstance(value, str) or len(value) <= 40 else value[:40] + "…")
    shown = shown.encode("utf-8", "backslashreplace").decode()
    return f"{what} {shown} is not a bucket ({', '.join(sorted(BUCKET_NAMES))}), a handle or an @scheme:topic tag"
