"""The committed shape of a transport (protocol v7): where things live, the version check, and scaffolding."""

from __future__ import annotations

from pathlib import Path

from crosstalk.bus.errors import BusError, NotATransport, VersionMismatch
from crosstalk.bus.protocol.safefs import SMALL_LIMIT, read_transport_text

PROTOCOL_VERSION = 7

VERSION_FILE = "CROSSTALK-VERSION"
PROTOCOL_FILE = "PROTOCOL.md"  # the agent orientation prepended to every dispatch
SPEC_FILE = "CROSSTALK.md"
REGISTRY_FILE = "data/crosstalk.yaml"
CHANNELS_DIR = "data/channels"
CHANNEL_FILE = "CHANNEL.md"
PLAN_FILE = "PLAN.json"  # reserved for workflows (a later version); never a message
ACTORS_DIR = "local/actors"

TEMPLATE_DIR = Path(__file__).resolve().parent / "template"
# Shipped without the dot so packaging tools never drop or apply it; renamed on scaffold.
_RENAMES = {"gitignore": ".gitignore"}


def is_safe_relpath(path: str) -> bool:
    """A relative path that cannot leave the directory it is relative to."""
    if not path or path.startswith("/") or "\\" in path or "\x00" in path or "\n" in path:
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


def find_root(start: Path) -> Path | None:
    """The nearest directory at or above start holding both CROSSTALK-VERSION and .git, or None."""
    here = Path(start).absolute()
    for candidate in (here, *here.parents):
        if (candidate / VERSION_FILE).is_file() and (candidate / ".git").exists():
            return candidate
    return None


def read_version(root: Path) -> int | None:
    """The integer in root/CROSSTALK-VERSION; None if the file is missing. A garbled file raises NotATransport."""
    try:
        text = read_transport_text(root, VERSION_FILE, SMALL_LIMIT).strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, BusError) as exc:
        raise NotATransport(f"{root} has an unreadable {VERSION_FILE}: {exc}") from None
    if not text.isdigit():
        raise NotATransport(f"{root} has a garbled {VERSION_FILE} ({text[:20]!r}; expected a single integer)")
    return int(text)


def check_version(root: Path, name: str | None = None) -> None:
    """Refuse a directory that is not a v7 transport, with a message that says what to do."""
    root = Path(root)
    if not root.is_dir():
        raise NotATransport(f"{root} is not a crosstalk transport (no such directory)")
    version = read_version(root)
    if version is None:
        raise NotATransport(f"{root} is not a crosstalk transport (no {VERSION_FILE})")
    if version != PROTOCOL_VERSION:
        label = name or root.name
        hint = (
            "use a crosstalk release that speaks it, or start a new transport (there is no migration)"
            if version < PROTOCOL_VERSION
            else "upgrade crosstalk on this machine"
        )
        raise VersionMismatch(
            f"transport {label} speaks crosstalk protocol v{version}; "
            f"this crosstalk speaks v{PROTOCOL_VERSION} — {hint}"
        )
    if not (root / ".git").exists():
        raise NotATransport(f"{root} is not a crosstalk transport (not a git work tree)")


def scaffold(root: Path) -> list[str]:
    """Copy the template into root (which may exist but should be empty); return the transport-relative files."""
    import shutil  # not at module level: the shim's bridge helpers import layout for is_safe_relpath

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    for src in sorted(TEMPLATE_DIR.rglob("*")):
        if not src.is_file() or "__pycache__" in src.parts or src.suffix == ".pyc":
            continue
        rel = src.relative_to(TEMPLATE_DIR)
        rel = rel.with_name(_RENAMES.get(rel.name, rel.name))
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        written.append(rel.as_posix())
    return written


def channel_dir(root: Path, uuid: str) -> Path:
    return Path(root) / CHANNELS_DIR / uuid


def actor_file(root: Path, name: str) -> Path:
    return Path(root) / ACTORS_DIR / f"{name}.md"
