"""The machine-local registry of known transports, and creating, joining, listing, removing and choosing them."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from crosstalk.bus.errors import AmbiguousTransport, BusError, GitError, NotATransport, UnknownTransport
from crosstalk.bus.git.command import run_git
from crosstalk.bus.git.repo import GitRepo
from crosstalk.bus.protocol import layout
from crosstalk.bus.transport.state import (
    TransportState,
    dispatcher_pid,
    ensure_private_dir,
    read_json,
    transport_state,
    transports_dir,
    write_cursor,
    write_json_atomic,
)

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
INITIAL_COMMIT = "crosstalk: initial transport"
GIT_TIMEOUT = 120.0  # clone and push talk to a remote


def validate_name(name: str, what: str = "transport name") -> str:
    if not NAME_RE.match(name or ""):
        raise BusError(
            f"{what} {name!r} is not valid: use 1-63 characters of a-z, 0-9, '.', '_' or '-', starting with a "
            "letter or digit"
        )
    return name


@dataclass(frozen=True, slots=True)
class TransportEntry:
    """One registry file, bus/transports/<name>.json."""

    name: str
    root: Path
    alias: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "root": str(self.root), "alias": self.alias}


@dataclass(frozen=True, slots=True)
class Transport:
    """A transport chosen for a command: its name, work tree, this machine's alias for it."""

    name: str
    root: Path
    alias: str
    registered: bool = True

    def git(self, timeout: float = 60.0) -> GitRepo:
        return GitRepo(self.root, timeout, alias=self.alias)

    def state(self, environ: Mapping[str, str] = os.environ) -> TransportState:
        return transport_state(self.name, environ)


@dataclass(frozen=True, slots=True)
class TransportInfo:
    name: str
    root: Path
    alias: str | None
    exists: bool
    version_ok: bool
    problem: str | None

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "root": str(self.root),
            "alias": self.alias,
            "exists": self.exists,
            "version_ok": self.version_ok,
            "problem": self.problem,
        }


# ---------------------------------------------------------------------------------------------- registry files


def _entry_path(name: str, environ: Mapping[str, str]) -> Path:
    return transports_dir(environ) / f"{validate_name(name)}.json"


def load_entries(environ: Mapping[str, str] = os.environ) -> list[TransportEntry]:
    """Every registered transport, by name; unreadable entries are skipped (a later register overwrites them)."""
    folder = transports_dir(environ)
    entries: list[TransportEntry] = []
    if not folder.is_dir():
        return entries
    for path in sorted(folder.glob("*.json")):
        data = read_json(path)
        if not isinstance(data, dict) or not isinstance(data.get("root"), str):
            continue
        name = path.stem
        if not NAME_RE.match(name):
            continue
        alias = data.get("alias")
        entries.append(TransportEntry(name, Path(data["root"]), alias if isinstance(alias, str) else None))
    return entries


def get_entry(name: str, environ: Mapping[str, str] = os.environ) -> TransportEntry | None:
    return next((e for e in load_entries(environ) if e.name == name), None)


def register(name: str, root: Path, alias: str | None, environ: Mapping[str, str] = os.environ) -> TransportEntry:
    """Record name -> root; refuse a name already registered to another directory."""
    validate_name(name)
    if alias is not None:
        validate_name(alias, "alias")
    root = Path(root).resolve()
    existing = get_entry(name, environ)
    if existing is not None and existing.root.resolve() != root:
        raise BusError(
            f"transport name {name!r} is already registered to {existing.root}; pick another --name or run "
            f"'crosstalk transport rm {name}' first"
        )
    entry = TransportEntry(name, root, alias)
    ensure_private_dir(transports_dir(environ))
    write_json_atomic(_entry_path(name, environ), entry.to_json())
    return entry


def unregister(name: str, environ: Mapping[str, str] = os.environ) -> None:
    try:
        _entry_path(name, environ).unlink()
    except FileNotFoundError:
        pass


def effective_alias(name: str, entry_alias: str | None, environ: Mapping[str, str] = os.environ) -> str:
    """CROSSTALK_ALIAS, else the alias registered at init/clone, else the transport's name."""
    env_alias = environ.get("CROSSTALK_ALIAS")
    if env_alias:
        return validate_name(env_alias, "CROSSTALK_ALIAS")
    return entry_alias or name


# ---------------------------------------------------------------------------------------------- resolution


def _transport_for_root(root: Path, entries: list[TransportEntry], environ: Mapping[str, str]) -> Transport:
    root = root.resolve()
    for entry in entries:
        if entry.root.resolve() == root:
            return Transport(entry.name, root, effective_alias(entry.name, entry.alias, environ))
    name = root.name if NAME_RE.match(root.name) else "transport"
    return Transport(name, root, effective_alias(name, None, environ), registered=False)


def resolve_transport(cwd: Path, selector: str | None = None, environ: Mapping[str, str] = os.environ) -> Transport:
    """--transport NAME|DIR (or $CROSSTALK_TRANSPORT), else the transport containing cwd, else the only known one.

    The result has passed check_version."""
    selector = selector or environ.get("CROSSTALK_TRANSPORT") or None
    entries = load_entries(environ)
    if selector:
        entry = next((e for e in entries if e.name == selector), None)
        if entry is not None:
            transport = Transport(entry.name, entry.root, effective_alias(entry.name, entry.alias, environ))
        else:
            path = Path(selector).expanduser()
            if not path.is_absolute():
                path = Path(cwd) / path
            if not path.is_dir():
                known = ", ".join(e.name for e in entries) or "none"
                raise UnknownTransport(f"no transport named {selector!r} (known: {known}) and no such directory")
            transport = _transport_for_root(path, entries, environ)
    else:
        found = layout.find_root(Path(cwd))
        if found is not None:
            transport = _transport_for_root(found, entries, environ)
        elif len(entries) == 1:
            entry = entries[0]
            transport = Transport(entry.name, entry.root, effective_alias(entry.name, entry.alias, environ))
        elif not entries:
            raise UnknownTransport(
                "no transport here and none known: create one with 'crosstalk transport init NAME' or join one "
                "with 'crosstalk transport clone URL'"
            )
        else:
            names = ", ".join(e.name for e in entries)
            raise AmbiguousTransport(
                f"no transport here and {len(entries)} known ({names}): name one with --transport or "
                "$CROSSTALK_TRANSPORT"
            )
    layout.check_version(transport.root, transport.name)
    return transport


# ---------------------------------------------------------------------------------------------- init / clone / rm


def _target_dir(directory: Path | None, default: str, cwd: Path | None) -> Path:
    """The absolute directory to create a transport in: --dir (relative to cwd), else cwd/default."""
    chosen = Path(directory).expanduser() if directory is not None else Path(default)
    return (Path(cwd or Path.cwd()) / chosen).resolve()


def _check_new(name: str, alias: str | None, root: Path, environ: Mapping[str, str], hint: str) -> None:
    """Before anything is created: valid names, the name free (or already ours) and root empty."""
    validate_name(name)
    if alias is not None:
        validate_name(alias, "alias")
    existing = get_entry(name, environ)
    if existing is not None and existing.root.resolve() != root:
        raise BusError(f"transport name {name!r} is already registered to {existing.root}; {hint}")
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise BusError(f"{root} already exists and is not an empty directory")


@dataclass(frozen=True, slots=True)
class InitResult:
    transport: Transport
    pushed: bool


def init_transport(
    name: str,
    directory: Path | None = None,
    remote: str | None = None,
    alias: str | None = None,
    *,
    cwd: Path | None = None,
    environ: Mapping[str, str] = os.environ,
) -> InitResult:
    """Scaffold a new transport, commit it, register it, and push it when a remote is given."""
    root = _target_dir(directory, name, cwd)
    _check_new(name, alias, root, environ, "pick another name")
    if remote:
        _check_remote_empty(remote, alias)
    created = not root.exists()
    try:
        layout.scaffold(root)
        run_git(["init", "-q", "--initial-branch=main", str(root)], timeout=GIT_TIMEOUT)
        repo = GitRepo(root, GIT_TIMEOUT, alias=alias or name)
        repo.commit(["."], INITIAL_COMMIT)
        if remote:
            repo.run("remote", "add", "origin", remote)
    except BaseException:
        # Leave nothing half-made behind: the user re-runs the same command after fixing the cause.
        if created:
            shutil.rmtree(root, ignore_errors=True)
        else:
            for child in root.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
        raise
    entry = register(name, root, alias, environ)
    transport = Transport(name, root, effective_alias(name, entry.alias, environ))
    _start_cursor(transport, repo, environ)
    if not remote:
        return InitResult(transport, pushed=False)
    try:
        repo.run("push", "-q", "-u", "origin", "main")
    except GitError as exc:
        raise BusError(
            f"transport {name} was created at {root} but pushing to {remote} failed ({exc.message}); push it later "
            f"with: git -C {root} push -u origin main"
        ) from None
    return InitResult(transport, pushed=True)


def _check_remote_empty(remote: str, alias: str | None) -> None:
    """Refuse, before anything is made, a remote that already has a main branch: the first push could never land
    there, and what the user wants is most likely to join the transport it holds. A remote that cannot be reached
    now is left to the push, which says so and how to push later."""
    try:
        heads = run_git(["ls-remote", "--", remote, "refs/heads/main"], timeout=GIT_TIMEOUT)
    except GitError:
        return
    if heads.strip():
        join = f"crosstalk transport clone {remote}" + (f" --alias {alias}" if alias else " --alias ALIAS")
        raise BusError(
            f"{remote} already has a main branch (a transport, or another repository): to join the transport it "
            f"holds run: {join}; to create a new one, give an empty remote"
        )


def _default_clone_dir(url: str) -> str:
    base = url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    return base[: -len(".git")] if base.endswith(".git") else base or "transport"


def _checkout_default_branch(repo: GitRepo) -> None:
    """A bare remote whose HEAD names a branch nobody pushed (master vs main) clones to an empty work tree; check
    out origin/main (else the only remote branch) so the transport appears."""
    if repo.run("rev-parse", "-q", "--verify", "HEAD", check=False).strip():
        return
    branches = [b for b in repo.run("for-each-ref", "--format=%(refname:short)", "refs/remotes/origin").split() if b]
    branches = [b for b in branches if b != "origin/HEAD" and b != "origin"]
    pick = "origin/main" if "origin/main" in branches else (branches[0] if len(branches) == 1 else None)
    if pick is not None:
        local = pick.split("/", 1)[1]
        repo.run("checkout", "-q", "-B", local, "--track", pick)


def clone_transport(
    url: str,
    directory: Path | None = None,
    name: str | None = None,
    alias: str | None = None,
    *,
    cwd: Path | None = None,
    environ: Mapping[str, str] = os.environ,
) -> Transport:
    """git clone a transport, check its version (removing the fresh clone when incompatible), register it."""
    root = _target_dir(directory, _default_clone_dir(url), cwd)
    name = name or root.name
    _check_new(name, alias, root, environ, "pass --name to pick another")
    run_git(["clone", "-q", url, str(root)], timeout=GIT_TIMEOUT)
    try:
        _checkout_default_branch(GitRepo(root, GIT_TIMEOUT, alias=alias or name))
        layout.check_version(root, name)
    except NotATransport:
        shutil.rmtree(root, ignore_errors=True)
        raise NotATransport(
            f"{url} is not a crosstalk transport (no {layout.VERSION_FILE}); removed the fresh clone"
        ) from None
    except BusError:
        shutil.rmtree(root, ignore_errors=True)
        raise
    entry = register(name, root, alias, environ)
    transport = Transport(name, root, effective_alias(name, entry.alias, environ))
    _start_cursor(transport, GitRepo(root, GIT_TIMEOUT, alias=alias or name), environ)
    return transport


def _start_cursor(transport: Transport, repo: GitRepo, environ: Mapping[str, str]) -> None:
    """This machine's dispatcher starts reading at the commit the machine joined at: work committed from then on is
    its to take (even before its dispatcher first runs), and the history before it is not replayed — a machine
    joining a long-lived transport must not re-run every old task it happens to claim. A cursor left by an earlier
    registration under this name is replaced (transport rm removes the state; re-joining starts afresh)."""
    state = transport.state(environ).ensure()
    write_cursor(state, repo.head())


def list_transports(environ: Mapping[str, str] = os.environ) -> list[TransportInfo]:
    out: list[TransportInfo] = []
    for entry in load_entries(environ):
        exists = entry.root.is_dir()
        problem: str | None = None
        if not exists:
            problem = f"{entry.root} does not exist"
        else:
            try:
                layout.check_version(entry.root, entry.name)
            except BusError as exc:
                problem = exc.message
        out.append(TransportInfo(entry.name, entry.root, entry.alias, exists, problem is None, problem))
    return out


def check_not_running(name: str, environ: Mapping[str, str] = os.environ) -> TransportState:
    """BusError while this machine's dispatcher for name is alive; else its state paths."""
    state = transport_state(name, environ)
    pid = dispatcher_pid(state)
    if pid is not None:
        raise BusError(
            f"the dispatcher for {name} is running (pid {pid}); stop it first with 'crosstalk server stop "
            f"--transport {name}'"
        )
    return state


def remove_transport(
    name: str, *, delete_files: bool = False, environ: Mapping[str, str] = os.environ
) -> TransportEntry:
    """Forget a transport on this machine (and delete its work tree if asked); refused while its dispatcher runs."""
    entry = get_entry(validate_name(name), environ)
    if entry is None:
        known = ", ".join(e.name for e in load_entries(environ)) or "none"
        raise UnknownTransport(f"no transport named {name!r} is registered (known: {known})")
    state = check_not_running(name, environ)
    unregister(name, environ)
    # The cursor and logs describe this transport's history; a future transport of the same name must not inherit them.
    shutil.rmtree(state.dir, ignore_errors=True)
    if delete_files and entry.root.exists():
        shutil.rmtree(entry.root)
    return entry
