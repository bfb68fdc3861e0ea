"""Where crosstalk keeps machine-local state: $CROSSTALK_HOME, else $XDG_STATE_HOME/crosstalk, else
~/.local/state/crosstalk. One home for the rule: registry.paths.StatePaths and a harness's installer (which may not
import the registry) both ask here. Strings only: this is on `crosstalk send`'s start-up path, without pathlib."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


def plain(path: str) -> str:
    """`path` as `str(pathlib.PurePosixPath(path))` writes it, without importing pathlib: repeated and trailing
    slashes and `.` parts dropped, `..` kept, exactly two leading slashes kept (POSIX leaves their meaning to the
    system), "." for nothing. tests/unit/registry/test_registry_paths_plain.py holds it to pathlib."""
    root = "//" if path.startswith("//") and not path.startswith("///") else "/" if path.startswith("/") else ""
    parts = "/".join(p for p in path.split("/") if p and p != ".")
    return root + parts if root or parts else "."


def join(base: str, name: str) -> str:
    """`str(Path(base) / name)` for a plain `base` and a one-part `name`."""
    if base == ".":
        return name
    return base + name if base.endswith("/") else f"{base}/{name}"


def state_root(environ: Mapping[str, str]) -> str:
    """The state root `environ` names, absolute and plain."""
    home = environ.get("CROSSTALK_HOME")
    if home:
        home = os.path.expanduser(home)
        return plain(home) if os.path.isabs(home) else join(plain(os.getcwd()), plain(home))
    xdg = environ.get("XDG_STATE_HOME")
    if xdg and os.path.isabs(xdg):  # the XDG spec says to ignore a relative value
        return join(plain(xdg), "crosstalk")
    base = environ.get("HOME") or os.path.expanduser("~")  # Path.home() when HOME is unset or empty
    return join(join(join(plain(base), ".local"), "state"), "crosstalk")
