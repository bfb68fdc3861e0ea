"""Each registered bus transport: whether its work tree is there and speaks this protocol, its remote, commits not
yet on the remote, the last successful push (git records one in the remote-tracking ref's reflog, "update by
push"), and this machine's dispatcher (its lock and heartbeat)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace

from crosstalk.bus.dispatch import server
from crosstalk.bus.errors import BusError
from crosstalk.bus.git.repo import GitRepo
from crosstalk.bus.protocol import layout
from crosstalk.bus.transport.transports import Transport, TransportInfo, effective_alias, list_transports
from crosstalk.doctor.facts import TransportFacts

GIT_TIMEOUT_S = 15.0


def last_push(repo: GitRepo) -> str | None:
    """When this clone last pushed successfully: the newest "update by push" entry of origin/<branch>'s reflog."""
    ref = f"refs/remotes/origin/{repo.branch()}"
    out = repo.run("reflog", "show", "--date=iso-strict", "--format=%gd%x09%gs", ref, "--", check=False)
    for line in out.splitlines():
        selector, _, subject = line.partition("\t")
        if subject.startswith("update by push"):
            return selector.partition("@{")[2].rstrip("}") or None
    return None


def _unpushed(repo: GitRepo) -> int:
    """Commits here that the remote-tracking branch (as of the last fetch or push) does not have."""
    if repo.upstream() is not None:
        return repo.ahead_behind()[0]
    since = f"origin/{repo.branch()}..HEAD" if repo.remote_branch() is not None else "HEAD"
    return int(repo.run("rev-list", "--count", since).strip() or 0)


def _one(info: TransportInfo, environ: Mapping[str, str]) -> TransportFacts:
    name, root = info.name, info.root
    if not info.exists:
        return TransportFacts(name, str(root), False, None, None, None)
    protocol: int | None = None
    try:
        protocol = layout.read_version(root)
    except BusError:
        pass
    if not info.version_ok:
        return TransportFacts(name, str(root), True, info.problem, protocol, None)
    transport = Transport(name, root, effective_alias(name, info.alias, environ))
    st = server.status(transport, environ)
    beat = st.heartbeat or {}
    halted = beat.get("halted")
    errors = beat.get("errors")  # the dispatcher writes a count; anything else reads as none
    live = TransportFacts(
        name, str(root), True, None, protocol, None,
        dispatcher_running=st.running, dispatcher_pid=st.pid, heartbeat_age_s=st.heartbeat_age_s,
        halted=str(halted) if halted else None, errors=errors if isinstance(errors, int) else 0,
    )  # fmt: skip
    repo = GitRepo(root, GIT_TIMEOUT_S, alias=transport.alias)
    try:
        remote = repo.run("config", "--get", "remote.origin.url", check=False).strip() or None
        ahead = _unpushed(repo) if remote else 0
        pushed = last_push(repo) if remote else None
    except BusError as exc:
        return replace(live, git_error=exc.message)
    return replace(live, remote=remote, ahead=ahead, last_push=pushed)


def gather(environ: Mapping[str, str] = os.environ) -> tuple[TransportFacts, ...]:
    return tuple(_one(info, environ) for info in list_transports(environ))
