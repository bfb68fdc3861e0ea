"""`crosstalk install HARNESS [--scope user|project]` and `crosstalk uninstall HARNESS`: a harness kind that can
be set up (harness.base.Installable) registers `crosstalk mcp`, by its absolute path, the way the harness's own
command would, idempotently; a second install changes nothing."""

from __future__ import annotations

import os
import sys
from typing import Any

from crosstalk.cli.common import EXIT_USAGE, echo, fail, print_json, state_paths


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
        fail(f"cannot set up {args.harness} (install supports: claude, codex, pi)", EXIT_USAGE)
    if args.scope not in kind.scopes:
        fail(f"--scope {args.scope!r}: expected one of {', '.join(kind.scopes)}", EXIT_USAGE)
    return kind


def run_install(args: Any) -> int:
    kind = _kind(args)
    environ = dict(os.environ)
    changes = _apply(lambda: kind.install(args.scope, mcp_command(), environ, os.getcwd(), state_env(environ)))
    if args.native_peers:
        changes.append(_apply(lambda: _native_peers(kind, args.harness, on=True)))
    return _report(args, changes, "installed", "already installed")


def run_uninstall(args: Any) -> int:
    kind = _kind(args)
    from crosstalk.harness.base import PeerPublisher

    changes = _apply(lambda: kind.uninstall(args.scope, dict(os.environ), os.getcwd()))
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
        fail(f"--native-peers: {harness} has no native peers to publish agents as", EXIT_USAGE)
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
    touched = [c for c in changes if c.action not in ("unchanged", "absent")]
    echo(f"{done if touched else nothing}: crosstalk for {args.harness} ({args.scope} scope)")
    for c in changes:
        echo(f"  {c.action:<9} {c.path}")
    return 0
