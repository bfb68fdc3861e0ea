"""The per-transport lock around git mutations, and the repair of what a killed git leaves behind (its lock
files, a rebase of ours half done): checked under that lock, so no git of ours runs in the repository then."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from crosstalk.bus.errors import GitError
from crosstalk.bus.git.command import run_git
from crosstalk.fs.locks import FileLock
from crosstalk.fs.procinfo import own_pids, process_argv, process_cwd

log = logging.getLogger(__name__)

LOCK_NAME = "crosstalk.lock"
OWN_REBASE_MARKER = "crosstalk-rebase"  # in .git while a rebase of ours runs


def recover_own_rebase(root: Path) -> bool:
    """Abort a rebase of ours that a kill left half done (HEAD detached mid-rebase: every later pull would see no
    upstream and take nothing, silently); whether it did. Only with our marker, and only when no git works in the
    repository: a person's paused rebase has no marker and is left alone."""
    gd = git_dir(root)
    marker = gd / OWN_REBASE_MARKER
    if not marker.exists():
        return False
    if git_running_in(root):
        return False
    if (gd / "rebase-merge").exists() or (gd / "rebase-apply").exists():
        clear_stale_git_locks(root)
        run_git(["-C", str(root), "rebase", "--abort"], timeout=60)
        log.warning("aborted a rebase a killed crosstalk process left half done in %s", root)
    with contextlib.suppress(FileNotFoundError):
        marker.unlink()
    return True


def stale_git_locks(root: Path) -> list[Path]:
    """The lock files git leaves in the repository's git dir when it dies mid-write: `*.lock` at its top
    (index.lock, HEAD.lock, MERGE_MSG.lock, config.lock, packed-refs.lock, next-index-*.lock, ...) and under refs/;
    never our own flock file (LOCK_NAME), which lives for good. One listdir, and a walk of refs/ (a transport has
    a handful of refs)."""
    gd = git_dir(root)
    try:
        found = [gd / name for name in os.listdir(gd) if name.endswith(".lock") and name != LOCK_NAME]
    except OSError:
        return []
    for base, _dirs, files in os.walk(gd / "refs"):
        found += [Path(base) / name for name in files if name.endswith(".lock")]
    return found


def clear_stale_git_locks(root: Path) -> bool:
    """Remove the lock files of a git that died mid-write (kill -9 of a process group, a container stop) when no
    git process of this user works in the repository (its cwd inside it, or `-C` naming it): left behind, each
    fails every later commit, rebase, merge or fetch that needs it for good (index.lock a commit, MERGE_MSG.lock a
    rebase's next pick, a ref's lock its update). Whether it removed any. A person's running git (an open commit
    editor) keeps its locks."""
    locks = stale_git_locks(root)
    if not locks or git_running_in(root):
        return False
    for lock in locks:
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()
        log.warning("removed %s: no git works in %s, so a git that died left it", lock, root)
    return True


def local_remote_dir(url: str, root: Path) -> Path | None:
    """The directory a remote URL names on this machine (a path, relative to `root` or absolute, or file://),
    or None for a network URL (ssh, https, scp-like host:path)."""
    if url.startswith("file://"):
        url = url[len("file://") :]
    elif "://" in url or (":" in url.split("/", 1)[0] and not url.startswith("/")):
        return None
    path = Path(url) if os.path.isabs(url) else Path(root) / url
    return path if url and path.is_dir() else None


def git_running_in(root: Path) -> bool:
    """Whether a git process of this user works in the repository at `root`: its cwd inside it, or `-C` naming
    it (as the bus's own git calls do)."""
    top = os.path.realpath(root)
    for pid in own_pids():
        argv = process_argv(pid)
        if not argv or not os.path.basename(argv[0]).startswith("git"):  # git, git-receive-pack, git-upload-pack
            continue
        places = [process_cwd(pid) or ""]
        places += [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-C"]
        for place in places:
            real = os.path.realpath(os.path.join(process_cwd(pid) or "/", place)) if place else ""
            if real and (real == top or real.startswith(top + os.sep)):
                return True
    return False


def git_dir(root: Path) -> Path:
    """root/.git, following a `gitdir:` file (worktrees, submodules) without running git."""
    dot = Path(root) / ".git"
    if dot.is_file():
        text = dot.read_text(encoding="utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            target = Path(text[len("gitdir:") :].strip())
            return target if target.is_absolute() else (Path(root) / target).resolve()
    return dot


_held = threading.local()


@contextlib.contextmanager
def transport_lock(root: Path, timeout: float = 30.0) -> Iterator[None]:
    """Serialise git mutations on one transport across processes and threads (flock on .git/crosstalk.lock).

    Re-entrant within a thread, so a helper that locks may call another that locks."""
    path = git_dir(root) / LOCK_NAME
    key = str(path)
    depth: dict[str, int] = getattr(_held, "depth", None) or {}
    _held.depth = depth
    if depth.get(key):
        depth[key] += 1
        try:
            yield
        finally:
            depth[key] -= 1
        return
    lock = FileLock(path)
    if not lock.acquire(timeout):
        raise GitError(f"transport {root} is busy: crosstalk processes held its lock for {timeout:g} s")
    # Every git mutation of the bus runs under this lock, so no git of ours runs in the repository now: a
    # leftover git lock is a dead git's (or a person's, whose git is then still running and keeps it).
    with contextlib.suppress(OSError, GitError):
        clear_stale_git_locks(root)
        recover_own_rebase(root)
    depth[key] = 1
    try:
        yield
    finally:
        depth.pop(key, None)
        lock.release()
