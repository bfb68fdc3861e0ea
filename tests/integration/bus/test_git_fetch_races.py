"""The bus's fetch and pull never depend on FETCH_HEAD, and a remote without the branch yet is nothing to pull.

The flaky `git pull --rebase` ("no such ref was fetched") in test_bridge: `git pull` fetches, then reads
.git/FETCH_HEAD to learn what to merge. The dispatcher of the same work tree fetched every 0.3 s and rewrote
FETCH_HEAD in between, so the pull found no ref for its branch. The bus now fetches with --no-write-fetch-head and
rebases onto refs/remotes/origin/<branch>, so it neither clobbers a person's pull nor is clobbered by one. These
tests pin that down deterministically: FETCH_HEAD held by "someone else" (a sentinel, or a path git cannot write).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from crosstalk.bus.git.locks import git_dir
from crosstalk.bus.git.repo import GitRepo
from tests.support.bus_machines import GIT_TIMEOUT, clean_env, init_bare_remote

GIT_ID = ("-c", "user.name=test", "-c", "user.email=test@example.invalid")


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *GIT_ID, *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT, env=clean_env()
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def clone(remote: Path, where: Path) -> Path:
    git(remote.parent, "clone", "-q", str(remote), str(where))
    return where


def commit(root: Path, name: str) -> None:
    (root / name).write_text(name + "\n")
    git(root, "add", "--", name)
    git(root, "commit", "-q", "-m", name)


@pytest.fixture
def remote(xt_tmp: Path) -> Path:
    """A bare remote with one commit on main."""
    bare = init_bare_remote(xt_tmp / "remote.git")
    seed = xt_tmp / "seed"
    git(xt_tmp, "init", "-q", "--initial-branch=main", str(seed))
    commit(seed, "first")
    git(seed, "remote", "add", "origin", str(bare))
    git(seed, "push", "-q", "-u", "origin", "main")
    return bare


def test_the_bus_fetch_leaves_fetch_head_to_whoever_else_is_pulling(remote: Path, xt_tmp: Path) -> None:
    a, b = clone(remote, xt_tmp / "a"), clone(remote, xt_tmp / "b")
    commit(b, "from-b")
    git(b, "push", "-q", "origin", "HEAD:main")
    fetch_head = git_dir(a) / "FETCH_HEAD"
    fetch_head.write_text("sentinel: a person's `git pull` is between its fetch and its merge\n")
    repo = GitRepo(a, GIT_TIMEOUT)
    assert repo.sync() is True
    assert fetch_head.read_text().startswith("sentinel")
    assert (a / "from-b").exists()


def test_a_lost_push_race_is_rebased_without_fetch_head(remote: Path, xt_tmp: Path) -> None:
    a, b = clone(remote, xt_tmp / "a"), clone(remote, xt_tmp / "b")
    commit(b, "from-b")
    git(b, "push", "-q", "origin", "HEAD:main")
    commit(a, "from-a")
    fetch_head = git_dir(a) / "FETCH_HEAD"
    fetch_head.unlink(missing_ok=True)
    fetch_head.mkdir()  # FETCH_HEAD unusable, as when another fetch rewrites it under us
    repo = GitRepo(a, GIT_TIMEOUT)
    assert repo.push_with_retry() is True, repo.last_push_error
    log = git(remote, "log", "--format=%s", "main")
    assert log.split() == ["from-a", "from-b", "first"]


def test_a_remote_without_the_branch_yet_is_nothing_to_pull(xt_tmp: Path) -> None:
    bare = init_bare_remote(xt_tmp / "empty.git")
    root = xt_tmp / "local"
    git(xt_tmp, "init", "-q", "--initial-branch=main", str(root))
    commit(root, "only-here")
    git(root, "remote", "add", "origin", str(bare))
    git(root, "config", "branch.main.remote", "origin")
    git(root, "config", "branch.main.merge", "refs/heads/main")
    repo = GitRepo(root, GIT_TIMEOUT)
    assert repo.sync() is False
    repo._rebase_onto_upstream()  # the branch is not on the remote yet: nothing to rebase onto, no error
    assert repo.remote_branch() is None
    assert repo.push_with_retry() is True
    assert git(bare, "log", "--format=%s", "main").split() == ["only-here"]
