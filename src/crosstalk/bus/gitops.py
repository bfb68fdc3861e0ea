"""A thin git wrapper for the bus (every call has a timeout) and the per-transport lock around git mutations."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import stat
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from crosstalk.bus.errors import GitError
from crosstalk.fs.locks import FileLock
from crosstalk.fs.procinfo import own_pids, process_argv, process_cwd

log = logging.getLogger(__name__)

CHANNELS_PATHSPEC = "data/channels"
LOCK_NAME = "crosstalk.lock"
OWN_REBASE_MARKER = "crosstalk-rebase"  # in .git while a rebase of ours runs
PUSH_BUDGET_S = 20.0  # a push keeps retrying lost races this long (under the 30 s others wait for the lock)
STALE_REF_LOCK_S = 5.0  # a remote ref lock older than this, with no git working there, was left by a killed push
_REJECTED_MARKERS = ("[rejected]", "non-fast-forward", "fetch first", "failed to update ref", "stale info")


def _git_env() -> dict[str, str]:
    env = dict(os.environ)
    # Never block on a credential prompt or an editor; parse git's English messages reliably.
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_EDITOR": "true", "GIT_MERGE_AUTOEDIT": "no", "LC_ALL": "C"})
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    return env


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def error_line(stderr: str, stdout: str = "", returncode: int | None = None) -> str:
    """The one line that says why git failed, for GitError messages and GitRepo.last_push_error.

    git ends many failures with advice ("hint: ...") or with the second half of a wrapped sentence, so the last
    line is often useless. Preferred, in order: the ref rejection ("! [rejected] HEAD -> main (fetch first)"),
    the "fatal:" lines, the "error:" lines (several of a kind are joined with "; "); else the last line that is
    not a hint, of stderr and then of stdout; else "exit N"."""
    lines = [line for line in _lines(stderr) if not line.lower().startswith("hint:")]
    for wanted in (
        lambda line: line.startswith("! ["),
        lambda line: line.lower().startswith("fatal:"),
        lambda line: line.lower().startswith("error:"),
    ):
        found = [line for line in lines if wanted(line)]
        if found:
            return "; ".join(dict.fromkeys(found))
    if lines:
        return lines[-1]
    out = [line for line in _lines(stdout) if not line.lower().startswith("hint:")]
    if out:
        return out[-1]
    return f"exit {returncode}" if returncode is not None else "no output"


def run_git(args: Iterable[str], *, cwd: Path | None = None, timeout: float = 60.0, input: str | None = None) -> str:
    """Run git outside any repository (clone, init); GitError with git's error line (error_line) on failure."""
    argv = ["git", *args]
    try:
        proc = subprocess.run(
            argv, cwd=cwd, input=input, capture_output=True, text=True, timeout=timeout, env=_git_env()
        )
    except subprocess.TimeoutExpired:
        raise GitError(f"git {' '.join(argv[1:3])} timed out after {timeout:g} s") from None
    except OSError as exc:
        raise GitError(f"cannot run git: {exc}") from None
    if proc.returncode != 0:
        raise GitError(f"git {' '.join(argv[1:3])} failed: {error_line(proc.stderr, proc.stdout, proc.returncode)}")
    return proc.stdout


class GitRepo:
    """One transport's git work tree. Commands get a committer identity only when the repo has none."""

    def __init__(self, root: Path, timeout: float = 60.0, *, alias: str | None = None) -> None:
        self.root = Path(root)
        self.timeout = timeout
        self.alias = alias or "local"
        self.last_push_error: str | None = None
        self._identity: list[str] | None = None

    # ------------------------------------------------------------------------------------------------ plumbing

    def _identity_args(self) -> list[str]:
        # A fresh machine (CI, a container) has no user.name; git would refuse to commit. Checked once per repo.
        if self._identity is None:
            proc = self._raw(["config", "--get", "user.name"], identity=False)
            self._identity = (
                []
                if proc.returncode == 0 and proc.stdout.strip()
                else ["-c", "user.name=crosstalk", "-c", f"user.email=crosstalk@{self.alias}.invalid"]
            )
        return self._identity

    def _raw(
        self, args: list[str], *, input: str | None = None, identity: bool = True, timeout: float | None = None
    ) -> subprocess.CompletedProcess[str]:
        argv = ["git", *(self._identity_args() if identity else []), "-C", str(self.root), *args]
        limit = self.timeout if timeout is None else timeout
        try:
            return subprocess.run(argv, input=input, capture_output=True, text=True, timeout=limit, env=_git_env())
        except subprocess.TimeoutExpired:
            raise GitError(f"git {' '.join(args[:2])} timed out after {limit:g} s in {self.root}") from None
        except OSError as exc:
            raise GitError(f"cannot run git: {exc}") from None

    def run(self, *args: str, input: str | None = None, check: bool = True) -> str:
        """git -C root ARGS; stdout. check=True raises GitError with git's error line (error_line)."""
        proc = self._raw(list(args), input=input)
        if check and proc.returncode != 0:
            why = error_line(proc.stderr, proc.stdout, proc.returncode)
            raise GitError(f"git {' '.join(args[:2])} failed in {self.root}: {why}")
        return proc.stdout

    # ------------------------------------------------------------------------------------------------ queries

    def head(self) -> str:
        return self.run("rev-parse", "HEAD").strip()

    def branch(self) -> str:
        out = self._raw(["symbolic-ref", "--short", "-q", "HEAD"])
        return out.stdout.strip() or "main"

    def has_remote(self) -> bool:
        return self._raw(["config", "--get", "remote.origin.url"], identity=False).returncode == 0

    def upstream(self) -> str | None:
        """The sha of HEAD's upstream (as of the last fetch), or None when no upstream is set."""
        proc = self._raw(["rev-parse", "-q", "--verify", "@{u}"])
        return proc.stdout.strip() or None if proc.returncode == 0 else None

    def fetch(self) -> None:
        # --no-recurse-submodules: by default fetch reads the whole index to look for submodules, which made an
        # idle tick grow with the number of messages (bench/bus_tick.py); a transport never has submodules.
        # --no-write-fetch-head: FETCH_HEAD is shared by every fetch in the work tree. A person's `git pull` reads
        # it right after its own fetch; a dispatcher fetch in between used to clobber it ("no such ref was
        # fetched"). The bus only ever uses the remote-tracking refs.
        self.run("fetch", "-q", "--no-recurse-submodules", "--no-write-fetch-head", "origin")

    def remote_head(self) -> str | None:
        """The sha the remote's branch points at now, asked with one ref listing (`git ls-remote`: no objects
        move); None when the remote has no such branch (yet). Raises GitError when the remote cannot be asked."""
        ref = f"refs/heads/{self.branch()}"
        for line in self.run("ls-remote", "origin", ref).splitlines():
            sha, _, name = line.partition("\t")
            if name == ref:
                return sha
        return None

    def remote_branch(self) -> str | None:
        """The sha of refs/remotes/origin/<branch> as of the last fetch; None when the remote has no such branch
        (yet): nothing to pull."""
        ref = f"refs/remotes/origin/{self.branch()}"
        proc = self._raw(["rev-parse", "-q", "--verify", f"{ref}^{{commit}}"])
        return proc.stdout.strip() or None if proc.returncode == 0 else None

    def ahead_behind(self) -> tuple[int, int]:
        """(commits only here, commits only upstream); (0, 0) without an upstream."""
        proc = self._raw(["rev-list", "--left-right", "--count", "HEAD...@{u}"])
        if proc.returncode != 0:  # no upstream configured (yet): nothing to compare with
            return (0, 0)
        out = proc.stdout.split()
        return (int(out[0]), int(out[1]))

    def is_ancestor(self, older: str, newer: str) -> bool:
        return self._raw(["merge-base", "--is-ancestor", older, newer]).returncode == 0

    def list_paths(self, *args: str) -> list[str]:
        """The NUL-separated paths a `git ARGS -z` prints, decoded as the file system does: a name with non-ASCII
        characters or a newline comes back exactly as committed (never C-quoted)."""
        argv = ["git", "-C", str(self.root), *args]
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=self.timeout, env=_git_env())
        except subprocess.TimeoutExpired:
            raise GitError(f"git {' '.join(args[:2])} timed out after {self.timeout:g} s in {self.root}") from None
        except OSError as exc:
            raise GitError(f"cannot run git: {exc}") from None
        if proc.returncode != 0:
            why = error_line(os.fsdecode(proc.stderr), "", proc.returncode)
            raise GitError(f"git {' '.join(args[:2])} failed in {self.root}: {why}")
        return [os.fsdecode(raw) for raw in proc.stdout.split(b"\0") if raw]

    def added_message_files(self, old: str | None, new: str) -> list[str]:
        """Transport-relative paths of files added under data/channels between two commits (tree to tree only,
        so the cost follows the change, not the number of files in the work tree). NUL-separated: every name
        comes back exactly as committed."""
        if old is None:
            return self.list_paths("ls-tree", "-r", "-z", "--name-only", new, "--", CHANNELS_PATHSPEC)
        return self.list_paths(
            "diff", "-z", "--name-only", "--no-renames", "--diff-filter=A", old, new, "--", CHANNELS_PATHSPEC
        )

    def tree_entry(self, commit: str, path: str) -> tuple[str, int] | None:
        """(mode, size) of `path` in `commit` ("100644", 12), or None when it is not there."""
        out = self.run("ls-tree", "-z", "-l", commit, "--", path, check=False)
        for record in out.split("\0"):
            meta, _, name = record.partition("\t")
            fields = meta.split()
            if name == path and len(fields) == 4:
                return fields[0], int(fields[3]) if fields[3].isdigit() else 0
        return None

    # ------------------------------------------------------------------------------------------------ changes

    def commit(self, paths: Iterable[str], message: str, *, removed: Iterable[str] = ()) -> str:
        """Stage paths (additions and edits) and commit exactly them plus `removed` (already `git rm`ed); the new
        HEAD. Only these paths: whatever else a person has staged in the transport's work tree stays staged and
        out of our commit."""
        paths, removed = list(paths), list(removed)
        if not paths and not removed:
            raise GitError("nothing to commit: no paths given")
        try:
            return self._commit(paths, message, removed)
        except GitError as exc:
            # A git killed mid-write (kill -9 of a process group, a container stop) leaves index.lock behind, and
            # every later commit fails on it for good. Removed only when no git of ours runs in this repository.
            if ".lock" not in exc.message or not self.clear_stale_git_locks():
                raise
        return self._commit(paths, message, removed)

    def _commit(self, paths: list[str], message: str, removed: list[str]) -> str:
        if paths:
            self.run("add", "-A", "--", *paths)
        self.run("commit", "--no-verify", "-q", "-m", message, "--", *paths, *removed)
        return self.head()

    def clear_stale_git_locks(self) -> bool:
        return clear_stale_git_locks(self.root)

    def clear_stale_remote_ref_lock(self, branch: str) -> bool:
        """On a remote that is a directory on this machine (a bare repository, a shared mount), remove
        refs/heads/<branch>.lock when a git killed mid-push left it: ours (this user's), older than
        STALE_REF_LOCK_S (an update holds it for milliseconds) and no git of this user working in the remote. A
        kill -9 of a pusher's process group takes its local receive-pack with it, and the lock it leaves refuses
        every later push from every machine ("failed to update ref"). Whether it removed one."""
        url = self._raw(["config", "--get", "remote.origin.url"], identity=False).stdout.strip()
        remote = local_remote_dir(url, self.root)
        if remote is None:
            return False
        lock = remote / "refs" / "heads" / f"{branch}.lock"
        try:
            st = os.lstat(lock)
        except OSError:
            return False
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or time.time() - st.st_mtime < STALE_REF_LOCK_S:
            return False
        if git_running_in(remote):
            return False
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()
        log.warning("removed %s: no git works in the remote, so a push that was killed left it", lock)
        return True

    def _rebase_onto_upstream(self) -> None:
        """Fetch (without FETCH_HEAD) and rebase local commits onto origin/<branch>; a remote without the branch
        is nothing to rebase onto. Not `git pull`: its FETCH_HEAD can be clobbered by any concurrent fetch."""
        self.fetch()
        upstream = self.remote_branch()
        if upstream is None or self.is_ancestor(upstream, "HEAD"):
            return
        self._rebase(upstream)

    def _rebase(self, upstream: str) -> None:
        """Rebase local commits onto `upstream`; aborted on failure. A marker file says the rebase is ours while it
        runs, so one a kill left half done is aborted at the next transport lock (recover_own_rebase), never a
        person's."""
        marker = git_dir(self.root) / OWN_REBASE_MARKER
        marker.write_text(f"{os.getpid()}\n")
        try:
            proc = self._raw(["-c", "rebase.autoStash=true", "rebase", "-q", upstream])
            if proc.returncode != 0:
                self._raw(["rebase", "--abort"])
                why = error_line(proc.stderr, proc.stdout, proc.returncode)
                raise GitError(f"git rebase onto the upstream failed in {self.root}: {why}")
        finally:
            with contextlib.suppress(FileNotFoundError):
                marker.unlink()

    def push_with_retry(self, attempts: int = 8, budget_s: float = PUSH_BUDGET_S) -> bool:
        """Push HEAD to origin; on a lost race, rebase onto the remote and try again with jittered backoff, at
        least `attempts` times and for as long as `budget_s` allows: a machine whose peers push back to back
        loses several races in a row (its rebase is the extra step the winner never pays), so a count alone
        gave up while the remote was fine.

        Returns False when the remote stays unreachable (the commits stay local, to be pushed later); raises
        GitError only when a rebase cannot be completed."""
        self.last_push_error = None
        branch = self.branch()
        unreachable = 0
        deadline = time.monotonic() + budget_s
        attempt = -1
        while True:
            attempt += 1
            if attempt >= attempts and time.monotonic() >= deadline:
                return False
            proc = self._raw(["push", "-q", "origin", f"HEAD:refs/heads/{branch}"])
            if proc.returncode == 0:
                # Record the upstream so ahead_behind()/sync() work on a transport initialised without -u.
                self._raw(["branch", "-q", f"--set-upstream-to=origin/{branch}"])
                return True
            err = proc.stderr
            self.last_push_error = error_line(err, proc.stdout, proc.returncode)
            if any(marker in err for marker in _REJECTED_MARKERS):
                if "failed to update ref" in err or "cannot lock ref" in err:
                    self.clear_stale_remote_ref_lock(branch)
                try:
                    self._rebase_onto_upstream()
                except GitError as exc:
                    if "could not read" in exc.message.lower() or "unable to access" in exc.message.lower():
                        return False
                    raise
            else:
                unreachable += 1
                if unreachable >= 2:  # not a race: the remote is down or refuses us; a later tick pushes
                    return False
            time.sleep(min(2.0, 0.05 * (2 ** min(attempt, 6))) * random.uniform(0.5, 1.5))

    def sync(self, *, remote_checked: bool = False) -> bool:
        """Fetch, then fast-forward or rebase onto the upstream when it moved; whether HEAD changed."""
        if not remote_checked and not self.has_remote():
            return False
        self.fetch()
        upstream = self.upstream()
        if upstream is None:
            return False
        head = self.head()
        if upstream == head or self.is_ancestor(upstream, head):
            return False
        if self.is_ancestor(head, upstream):
            self.run("merge", "--ff-only", "-q", upstream)
        else:
            self._rebase(upstream)
        return self.head() != head


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
    if not lock.try_acquire(grace=timeout):
        raise GitError(f"transport {root} is busy: another crosstalk process held its lock for {timeout:g} s")
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
