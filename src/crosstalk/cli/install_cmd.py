"""`crosstalk install HARNESS [--scope user|project]` and `crosstalk uninstall HARNESS`: a harness kind that can
be set up (harness.base.Installable) registers `crosstalk mcp`, by its absolute path, the way the harness's own
command would, idempotently; a second install changes nothing.

Uninstall deletes a config file only when this crosstalk created it (install records each file it created in
`$CROSSTALK_HOME/installs.json`) and it holds nothing else once crosstalk's entry is out; a file the user had stays,
even empty. The report says `removed` only for a file deleted, `updated` for one edited, `kept` for one that is the
user's."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from crosstalk.cli.common import echo, fail, print_json, state_paths
from crosstalk.core.errors import ErrorKind

MAX_CONFIG_BYTES = 64 * 1024 * 1024


def mcp_command() -> list[str]:
    """The absolute argv of `crosstalk mcp` as this crosstalk was started."""
    script = os.path.abspath(sys.argv[0])
    if os.path.basename(script) == "crosstalk" and os.access(script, os.X_OK):
        return [script, "mcp"]
    return [sys.executable, "-m", "crosstalk", "mcp"]  # `python -m crosstalk install …`


def state_env(environ: dict[str, str]) -> dict[str, str]:
    """CROSSTALK_HOME, when this shell's state root is not the one a process with only HOME would find (a harness
    that filters its MCP children's environment would otherwise give the shim a second state root)."""
    from crosstalk.registry.paths import StatePaths

    mine = StatePaths.from_env(environ).root
    bare = StatePaths.from_env({k: v for k, v in environ.items() if k == "HOME"}).root
    return {} if mine == bare else {"CROSSTALK_HOME": str(mine)}


def _kind(args: Any) -> Any:
    from crosstalk import harness as kinds
    from crosstalk.harness.base import Installable

    kind = kinds.kind(args.harness)
    if not isinstance(kind, Installable):
        fail(f"cannot set up {args.harness} (install supports: claude, codex, pi, qwen, opencode)", ErrorKind.USAGE)
    if args.scope not in kind.scopes:
        fail(f"--scope {args.scope!r}: expected one of {', '.join(kind.scopes)}", ErrorKind.USAGE)
    return kind


def run_install(args: Any) -> int:
    kind = _kind(args)
    environ = dict(os.environ)
    changes = _apply(lambda: kind.install(args.scope, mcp_command(), environ, os.getcwd(), state_env(environ)))
    _apply(lambda: _record_created([c.path for c in changes if c.action == "created"]))
    if args.native_peers:
        changes.append(_apply(lambda: _native_peers(kind, args.harness, on=True)))
    return _report(args, changes, "installed", "already installed")


def run_uninstall(args: Any) -> int:
    kind = _kind(args)
    from crosstalk.harness.base import PeerPublisher

    changes = _apply(lambda: kind.uninstall(args.scope, dict(os.environ), os.getcwd()))
    changes = _apply(lambda: _remove_created(changes))
    if isinstance(kind, PeerPublisher):
        changes.append(_apply(lambda: _native_peers(kind, args.harness, on=False)))
    return _report(args, changes, "uninstalled", "not installed")


def _native_peers(kind: Any, harness: str, *, on: bool) -> Any:
    """The opt-in setting `$CROSSTALK_HOME/native-peers/<harness>.json` (agents/peers.py reads it at start)."""
    import json

    from crosstalk.fs.atomic import atomic_write
    from crosstalk.fs.reading import read_capped
    from crosstalk.harness.base import ConfigChange, PeerPublisher
    from crosstalk.registry.paths import ensure_private_dir

    if not isinstance(kind, PeerPublisher):
        fail(f"--native-peers: {harness} has no native peers to publish agents as", ErrorKind.USAGE)
    paths = state_paths()
    path = paths.native_peers / f"{harness}.json"
    if not on:
        existed = path.exists()
        path.unlink(missing_ok=True)
        return ConfigChange(str(path), "removed" if existed else "absent")
    data = (json.dumps(kind.peer_settings(dict(os.environ)), indent=2) + "\n").encode()
    if read_capped(path, len(data) + 1) == data:
        return ConfigChange(str(path), "unchanged")
    action = "updated" if path.exists() else "created"
    paths.root.mkdir(parents=True, exist_ok=True)
    ensure_private_dir(paths.root)
    ensure_private_dir(paths.native_peers)
    atomic_write(path, data, mode=0o600)
    return ConfigChange(str(path), action)


RECORD = "installs.json"
MAX_RECORD_BYTES = 1024 * 1024
KEPT = "yours: changed since crosstalk wrote it, so left as it is; remove it and install again for crosstalk's"


def _created() -> tuple[Any, list[str]]:
    """(the record's path, the config files crosstalk's installs created); a record that cannot be read is empty."""
    from crosstalk.core.errors import UntrustedInput
    from crosstalk.core.untrusted import loads
    from crosstalk.fs.reading import read_capped

    path = state_paths().root / RECORD
    raw = read_capped(path, MAX_RECORD_BYTES)
    try:
        data = loads(raw, what=str(path), max_bytes=MAX_RECORD_BYTES) if raw else {}
    except UntrustedInput:
        data = {}
    created = data.get("created") if isinstance(data, dict) else None
    return path, [p for p in created if isinstance(p, str)] if isinstance(created, list) else []


def _save_created(path: Any, created: list[str]) -> None:
    import json

    from crosstalk.fs.atomic import atomic_write
    from crosstalk.registry.paths import ensure_private_dir

    path.parent.mkdir(parents=True, exist_ok=True)
    ensure_private_dir(path.parent)
    atomic_write(path, (json.dumps({"created": created}, indent=2) + "\n").encode())


def _record_created(paths: list[str]) -> None:
    if not paths:
        return
    record, created = _created()
    _save_created(record, created + [p for p in paths if p not in created])


def _remove_created(changes: list[Any]) -> list[Any]:
    """Each edited file crosstalk created that now holds nothing else is deleted (reported `removed`)."""
    from crosstalk.fs.config_edit import update
    from crosstalk.harness.base import ConfigChange

    record, created = _created()
    out = []
    for change in changes:
        if change.action == "updated" and change.path in created:
            created.remove(change.path)
            _, after = update(Path(change.path), lambda raw: None if _holds_nothing(raw) else raw,
                              limit=MAX_CONFIG_BYTES)  # fmt: skip
            change = ConfigChange(change.path, "removed") if after is None else change
        out.append(change)
    if len(created) != len(_created()[1]):
        _save_created(record, created)
    return out


def _holds_nothing(raw: bytes | None) -> bool:
    """Nothing but whitespace, or JSON of nothing but empty objects and lists (`{"mcpServers": {}}`)."""
    from crosstalk.core.untrusted import loads

    def empty(value: Any) -> bool:
        if isinstance(value, dict):
            return all(empty(v) for v in value.values())
        return isinstance(value, list) and not value

    if raw is None or not raw.strip():
        return True
    try:
        return empty(loads(raw, what="config", max_bytes=MAX_CONFIG_BYTES))
    except ValueError:
        return False


def _apply(step: Any) -> Any:
    from crosstalk.core.errors import CrosstalkError

    try:
        return step()
    except (CrosstalkError, OSError) as exc:
        fail(str(exc))


def _report(args: Any, changes: Any, done: str, nothing: str) -> int:
    if args.as_json:
        rows = [{"path": c.path, "action": c.action} for c in changes]
        print_json({"harness": args.harness, "scope": args.scope, "changes": rows})
        return 0
    touched = [c for c in changes if c.action not in ("unchanged", "absent", "kept")]
    echo(f"{done if touched else nothing}: crosstalk for {args.harness} ({args.scope} scope)")
    for c in changes:
        echo(f"  {c.action:<9} {c.path}" + (f" ({KEPT})" if c.action == "kept" else ""))
    return 0
