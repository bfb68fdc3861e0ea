"""One transport's git work tree (GitRepo): queries, commits, and the push that rebases when it loses a race."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import stat
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

from crosstalk.bus.errors import GitError
from crosstalk.bus.git.command import error_line, git_env
from crosstalk.bus.git.locks import OWN_REBASE_MARKER, clear_stale_git_locks, git_dir, git_running_in, local_remote_dir

log = logging.getLogger(__name__)

CHANNELS_PATHSPEC = "data/channels"
PUSH_BUDGET_S = 20.0  # a push keeps retrying lost races this long (under the 30 s others wait for the lock)
STALE_REF_LOCK_S = 5.0  # a remote ref lock older than this, with no git working there, was left by a killed push
_REJECTED_MARKERS = ("[rejected]", "non-fast-forward", "fetch first", "failed to update ref", "stale info")


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
            return subprocess.run(argv, input=input, capture_output=True, text=True, timeout=limit, env=git_env())
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
            proc = subprocess.run(argv, capture_output=True, timeout=self.timeout, env=git_env())
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
