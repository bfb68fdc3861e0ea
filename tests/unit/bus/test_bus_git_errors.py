"""GitError messages and GitRepo.last_push_error carry git's meaningful line (the rejection, fatal: or error:
line), never a trailing "hint: ..." or the tail of a wrapped sentence."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from crosstalk.bus.errors import GitError
from crosstalk.bus.git.command import error_line, run_git
from crosstalk.bus.git.repo import GitRepo

REJECTED = """To /tmp/xt/r.git
 ! [rejected]        HEAD -> main (fetch first)
error: failed to push some refs to '/tmp/xt/r.git'
hint: Updates were rejected because the remote contains work that you do
hint: not have locally. This is usually caused by another repository pushing
hint: See the 'Note about fast-forwards' in 'git push --help' for details.
"""

UNREACHABLE = """fatal: '/tmp/xt/nope' does not appear to be a git repository
fatal: Could not read from remote repository.

Please make sure you have the correct access rights
and the repository exists.
"""


@pytest.mark.parametrize(
    ("stderr", "stdout", "code", "expected"),
    [
        (REJECTED, "", 1, "! [rejected]        HEAD -> main (fetch first)"),
        (
            UNREACHABLE,
            "",
            128,
            "fatal: '/tmp/xt/nope' does not appear to be a git repository; "
            "fatal: Could not read from remote repository.",
        ),
        (
            "error: src refspec nope does not match any\nerror: failed to push some refs to '/r'\n",
            "",
            1,
            "error: src refspec nope does not match any; error: failed to push some refs to '/r'",
        ),
        (
            "warning: something odd\nerror: could not apply 1234abc... x\nhint: Resolve all conflicts\n",
            "",
            1,
            "error: could not apply 1234abc... x",
        ),
        ("error: a\nfatal: b\nhint: c\n", "", 128, "fatal: b"),  # fatal: is what ended git
        ("Some plain complaint\nhint: do this instead\n", "", 1, "Some plain complaint"),
        ("hint: only advice\n", "nothing to commit, working tree clean\n", 1, "nothing to commit, working tree clean"),
        ("", "", 3, "exit 3"),
        ("\n  \n", "", None, "no output"),
        ("HINT: shouted advice\nfatal: x\n", "", 1, "fatal: x"),
    ],
)
def test_error_line_picks_the_meaningful_line(stderr: str, stdout: str, code: int | None, expected: str) -> None:
    assert error_line(stderr, stdout, code) == expected


# ------------------------------------------------------------------------------------------------ with real git


@pytest.fixture
def git_env(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("GIT_"):
            monkeypatch.delenv(key)
    (tmp / "gitconfig").write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _clone_with_commit(tmp: Path) -> tuple[Path, GitRepo]:
    _git("init", "-q", "--bare", "--initial-branch=main", "r.git", cwd=tmp)
    _git("clone", "-q", "r.git", "a", cwd=tmp)
    repo = GitRepo(tmp / "a", timeout=30)
    (tmp / "a" / "f").write_text("x\n")
    repo.commit(["f"], "one")
    return tmp / "r.git", repo


def test_last_push_error_is_the_rejection_line_not_a_hint(tmp: Path, git_env: None) -> None:
    remote, repo = _clone_with_commit(tmp)
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'remote says no' >&2\nexit 1\n")
    hook.chmod(0o755)
    assert repo.push_with_retry(attempts=3) is False
    assert repo.last_push_error == "! [remote rejected] HEAD -> main (pre-receive hook declined)"


def test_last_push_error_for_an_unreachable_remote_names_it(tmp: Path, git_env: None) -> None:
    _, repo = _clone_with_commit(tmp)
    repo.run("remote", "set-url", "origin", str(tmp / "gone.git"))
    assert repo.push_with_retry(attempts=3) is False
    error = repo.last_push_error or ""
    assert "does not appear to be a git repository" in error and "gone.git" in error
    assert "hint:" not in error and "repository exists" not in error


def test_git_errors_use_the_same_line(tmp: Path, git_env: None) -> None:
    _, repo = _clone_with_commit(tmp)
    with pytest.raises(GitError) as info:
        repo.run("push", "-q", "origin", "no-such-branch")
    assert info.value.message.endswith(
        f"error: src refspec no-such-branch does not match any; error: failed to push some refs to '{tmp / 'r.git'}'"
    )
    with pytest.raises(GitError) as info:
        run_git(["clone", "-q", str(tmp / "missing.git"), str(tmp / "c")])
    assert "fatal: repository" in info.value.message and "does not exist" in info.value.message
    with pytest.raises(GitError) as info:
        repo.run("commit", "-q", "-m", "nothing")  # nothing to commit: git says so on stdout
    assert "nothing to commit" in info.value.message
