"""What a killed writer leaves behind, and a quiet remote: real git, real processes.

- A git killed mid-commit leaves .git/index.lock: removed when no git works in the repository, kept while one does.
- A publish whose commit fails takes back the files it wrote; files a killed writer left uncommitted under
  data/channels are moved to the machine-local state at the dispatcher's boot, never committed nor read.
- A reply whose commit failed is committed on the next tick without running the model again.
- An idle tick lists the remote's ref and fetches nothing; a conversation makes the loop tick fast, quiet slows it.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import crosstalk.bus.dispatch.dispatcher as dispatcher_module
from crosstalk.bus.errors import GitError
from crosstalk.bus.git.locks import clear_stale_git_locks, git_running_in
from crosstalk.bus.git.repo import GitRepo
from crosstalk.bus.transport.store import move_orphans, publish
from crosstalk.bus.transport.transports import resolve_transport
from tests.support.bus_dispatch import (
    GIT_ID,
    channel_rel,
    in_process_dispatcher,
    machine_with_models,
    replies_to,
    runs,
    send,
    set_registry,
    wait_for,
    write_model,
)
from tests.support.bus_machines import GIT_TIMEOUT, TwoMachines


class LiveGit:
    """A real git process that works in `root` and waits (cat-file --batch reads stdin until it closes)."""

    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen(
            ["git", "-C", str(root), "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL
        )

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(GIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(GIT_TIMEOUT)


def _transport(m, monkeypatch):
    for key in ("CROSSTALK_HOME", "CROSSTALK_ALIAS", "HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM"):
        monkeypatch.setenv(key, m.env[key])
    import os

    return resolve_transport(m.root, None, dict(os.environ))


def _b_dispatching_echo(two_machines: TwoMachines, monkeypatch):  # type: ignore[no-untyped-def]
    """(a, b, b's in-process dispatcher claiming local/echo), its own registry commit ticked through: idle."""
    a, b = two_machines.a, two_machines.b
    models = b.base / "models"
    models.mkdir()
    set_registry(b, {"local": {"echo": str(write_model(models, "echo"))}})
    dispatcher = in_process_dispatcher(b, monkeypatch)
    assert any(dispatcher.tick().idle for _ in range(10)), "never idle"
    return a, b, dispatcher


def test_a_dead_gits_index_lock_is_removed_and_a_live_gits_is_kept(make_machine, monkeypatch) -> None:
    m, channel, _ = machine_with_models(make_machine, echo="")
    transport = _transport(m, monkeypatch)
    lock = m.root / ".git" / "index.lock"
    lock.write_text("")  # what a git killed mid-commit leaves
    rel = f"data/channels/{channel}/2026/12/02/010203004Z-0123456789abcdef.md"
    body = "---\nfrom: a\nto: b\ntimestamp: 2026-12-02T01:02:03.004Z\n---\nhello\n"
    live = LiveGit(m.root)
    try:
        wait_for(lambda: git_running_in(m.root), 10, "the live git seen")
        with pytest.raises(GitError, match=r"index\.lock"):
            publish(transport, {rel: body}, "test: while a git runs", push=False)
        assert lock.exists(), "a running git's lock is never removed"
        assert not (m.root / rel).exists(), "a failed commit takes back the files it wrote"
        assert "??" not in m.git("status", "--porcelain") and "A " not in m.git("status", "--porcelain")
    finally:
        live.close()
    assert not git_running_in(m.root)
    publish(transport, {rel: body}, "test: after the git died", push=False)
    assert not lock.exists() and (m.root / rel).exists()
    assert m.git("log", "-1", "--format=%s").strip() == "test: after the git died"


def test_files_a_killed_writer_left_uncommitted_are_moved_aside_at_boot(make_machine, monkeypatch) -> None:
    m, channel, models = machine_with_models(make_machine, echo="")
    [sent] = send(m, "local/echo", "an ordinary message")
    day = m.root / "data" / "channels" / channel / "2026" / "12" / "02"
    day.mkdir(parents=True, exist_ok=True)
    untracked = day / "010203004Z-00000000000000aa.md"
    staged = day / "010203005Z-00000000000000bb.md"
    for path in (untracked, staged):
        head = "---\nfrom: local/echo@m1\nto: alice\ntimestamp: 2026-12-02T01:02:03.004Z\n"
        path.write_text(f"{head}re: {channel_rel(sent)}\n---\na reply never committed\n")
    m.git("add", "--", str(staged))
    dispatcher = in_process_dispatcher(m, monkeypatch)
    dispatcher.recover()
    assert not untracked.exists() and not staged.exists()
    orphans = sorted(p.name for p in (m.state_dir / "orphans").rglob("*.md"))
    assert orphans == sorted([staged.name, untracked.name])
    assert m.git("status", "--porcelain", "--", "data/channels").strip() == ""
    assert (m.root / sent).exists(), "committed messages are never moved"
    events = (m.state_dir / "dispatcher.log").read_text()
    assert events.count("orphan_moved") == 2
    dispatcher.tick()
    assert len(runs(models / "echo")) == 1  # the orphans were never read as replies: the message is answered


def test_an_orphan_is_left_alone_while_a_persons_rebase_is_under_way(make_machine, monkeypatch) -> None:
    m, channel, _ = machine_with_models(make_machine, echo="")
    transport = _transport(m, monkeypatch)
    stray = m.root / "data" / "channels" / channel / "draft.md"
    stray.write_text("a person's file in the middle of their rebase\n")
    (m.root / ".git" / "rebase-merge").mkdir()
    assert move_orphans(transport) == () and stray.exists()


def test_a_reply_whose_commit_failed_is_committed_next_tick_without_running_the_model_again(
    make_machine, monkeypatch
) -> None:
    m, channel, models = machine_with_models(make_machine, echo="")
    [path] = send(m, "local/echo", "answer me once")
    dispatcher = in_process_dispatcher(m, monkeypatch)
    (m.root / ".git" / "index.lock").write_text("")
    live = LiveGit(m.root)  # a person's git holds the index: the commit fails, the lock is kept
    try:
        wait_for(lambda: git_running_in(m.root), 10, "the live git seen")
        failed = dispatcher.tick()
        assert failed.incomplete == 1 and failed.replies == 0
        assert len(runs(models / "echo")) == 1
    finally:
        live.close()
    retried = dispatcher.tick()
    assert retried.replies == 1 and retried.incomplete == 0
    assert len(runs(models / "echo")) == 1, "the model ran once"
    assert len(replies_to(m.root, channel, path)) == 1
    assert "reply_retried" in (m.state_dir / "dispatcher.log").read_text()


def test_a_kept_reply_is_committed_when_more_messages_joined_its_batch(make_machine, monkeypatch) -> None:
    """Under load the commit fails, and by the next tick another message waits for the same model: the kept
    answer is committed for the first, and the model runs once more only for the newcomer."""
    m, channel, models = machine_with_models(make_machine, echo="")
    [first] = send(m, "local/echo", "answer me once")
    dispatcher = in_process_dispatcher(m, monkeypatch)
    (m.root / ".git" / "index.lock").write_text("")
    live = LiveGit(m.root)
    try:
        wait_for(lambda: git_running_in(m.root), 10, "the live git seen")
        failed = dispatcher.tick()
        assert failed.incomplete == 1 and failed.replies == 0
    finally:
        live.close()
    [second] = send(m, "local/echo", "and me")
    retried = dispatcher.tick()
    assert retried.incomplete == 0
    prompts = [str(r["prompt"]) for r in runs(models / "echo")]
    assert len(prompts) == 2, prompts
    assert "answer me once" in prompts[0] and "answer me once" not in prompts[1] and "and me" in prompts[1]
    assert len(replies_to(m.root, channel, first)) == 1
    assert len(replies_to(m.root, channel, second)) == 1
    assert "reply_retried" in (m.state_dir / "dispatcher.log").read_text()


def test_an_idle_tick_fetches_nothing_and_new_work_is_fetched(two_machines: TwoMachines, monkeypatch) -> None:
    a, b, dispatcher = _b_dispatching_echo(two_machines, monkeypatch)
    fetches: list[float] = []
    real_fetch = GitRepo.fetch

    def counted(self: GitRepo) -> None:
        fetches.append(time.monotonic())
        real_fetch(self)

    monkeypatch.setattr(GitRepo, "fetch", counted)
    for _ in range(3):
        assert dispatcher.tick().idle
    assert fetches == [], "an idle tick lists the remote's ref; it fetches nothing"

    [path] = send(a, "local/echo@m2", "over the remote")
    report = dispatcher.tick()
    assert len(fetches) == 1 and report.dispatched == 1
    assert len(replies_to(b.root, two_machines.channel, path)) == 1

    # Someone ran `git fetch` by hand: the tracking ref moved, HEAD did not. The tick still takes the new work.
    [later] = send(a, "local/echo@m2", "fetched by a person")
    b.git("fetch", "-q", "origin")
    assert dispatcher.tick().dispatched == 1
    assert len(replies_to(b.root, two_machines.channel, later)) == 1


def test_the_loop_ticks_fast_after_traffic_and_at_the_interval_when_quiet(make_machine, monkeypatch) -> None:
    from crosstalk.bus.dispatch.dispatcher import Dispatcher

    m, _, _ = machine_with_models(make_machine, echo="")
    base = in_process_dispatcher(m, monkeypatch)
    # active_for outlasts any tick (a 0.3 s window once ran out inside a tick on a loaded machine); its end is
    # reached by moving the dispatcher's clock, never by waiting for it.
    dispatcher = Dispatcher(base.transport, interval=5.0, active_interval=0.5, active_for=60.0, log=base.log)
    assert dispatcher.next_wait() == 5.0
    send(m, "local/echo", "traffic")
    assert not dispatcher.tick().idle
    assert dispatcher.next_wait() == 0.5 and dispatcher.heartbeat()["polling"] == 0.5
    real = time.monotonic
    monkeypatch.setattr(dispatcher_module, "time", SimpleNamespace(monotonic=lambda: real() + 61.0))
    assert dispatcher.next_wait() == 5.0, "quiet again after active_for"
    assert Dispatcher(base.transport, interval=0.2, active_interval=0.5).active_interval == 0.2


def test_the_cli_defaults_match_the_dispatchers() -> None:
    from crosstalk.bus.dispatch import dispatcher
    from crosstalk.cli import daemon_cmd

    assert (daemon_cmd.ACTIVE_INTERVAL_S, daemon_cmd.ACTIVE_FOR_S) == (
        dispatcher.ACTIVE_INTERVAL_S,
        dispatcher.ACTIVE_FOR_S,
    )


def test_a_dead_gits_index_lock_does_not_wedge_the_sync(two_machines: TwoMachines, monkeypatch) -> None:
    """A git killed mid-commit left index.lock: the next tick's pull (merge or rebase) would fail on it for good;
    taking the transport lock clears it (no git works in the repository), and the new work is taken."""
    a, b, dispatcher = _b_dispatching_echo(two_machines, monkeypatch)
    [path] = send(a, "local/echo@m2", "after a crash")
    (b.root / ".git" / "index.lock").write_text("")
    report = dispatcher.tick()
    assert report.dispatched == 1, (b.state_dir / "dispatcher.log").read_text()[-2000:]
    assert len(replies_to(b.root, two_machines.channel, path)) == 1
    assert not (b.root / ".git" / "index.lock").exists()


@pytest.mark.parametrize("ours", [True, False])
def test_a_rebase_a_kill_left_half_done_is_aborted_only_when_it_was_ours(
    two_machines: TwoMachines, monkeypatch, ours: bool
) -> None:
    """A kill inside our `git rebase` leaves HEAD detached mid-rebase: every later pull sees no upstream and takes
    nothing, silently. Taking the transport lock aborts a rebase our marker says was ours; a person's paused rebase
    (no marker) is left as it is."""
    a, b, dispatcher = _b_dispatching_echo(two_machines, monkeypatch)
    (b.root / "notes.txt").write_text("a local commit, not pushed yet\n")
    b.git("add", "notes.txt")
    b.git(*GIT_ID, "commit", "-q", "-m", "local")
    [path] = send(a, "local/echo@m2", "after a killed rebase")
    b.git("fetch", "-q", "origin")
    b.git(*GIT_ID, "-c", "sequence.editor=sed -i '1i break'", "rebase", "-q", "-i", "origin/main")  # stops half done
    assert (b.root / ".git" / "rebase-merge").exists()
    if ours:
        (b.root / ".git" / "crosstalk-rebase").write_text("1\n")
    report = dispatcher.tick()
    if ours:
        assert not (b.root / ".git" / "rebase-merge").exists()
        assert report.dispatched == 1 and len(replies_to(b.root, two_machines.channel, path)) == 1
    else:
        assert (b.root / ".git" / "rebase-merge").exists(), "a person's rebase is never aborted"


def test_a_killed_pushs_ref_lock_on_the_remote_does_not_refuse_every_later_push(two_machines: TwoMachines) -> None:
    """A kill -9 of a pusher's process group takes its local receive-pack with it, leaving the bare remote's
    refs/heads/main.lock: every later push of every machine failed ("failed to update ref") for good. A push
    removes such a lock (this user's, older than an update takes, no git working in the remote) and goes on."""
    a, remote = two_machines.a, two_machines.remote
    lock = remote / "refs" / "heads" / "main.lock"
    lock.write_text("0" * 40 + "\n")
    old = time.time() - 60
    os.utime(lock, (old, old))
    res = a.cli("message", "send", "--to", "sonnet", "--channel", "general", "after a killed push")
    assert res.returncode == 0 and "push failed" not in res.stderr, res.stderr
    assert not lock.exists()
    rel = res.stdout.strip()
    listed = subprocess.run(["git", "--git-dir", str(remote), "ls-tree", "-r", "--name-only", "main"],
                            capture_output=True, text=True, timeout=GIT_TIMEOUT, check=True).stdout  # fmt: skip
    assert rel in listed.split()


def test_a_remote_ref_lock_is_kept_while_a_git_works_in_the_remote(two_machines: TwoMachines) -> None:
    """A git at work in the remote (a push being received) keeps its lock, however old: the push gives up after
    its budget, says the message is committed locally, and nothing is removed."""
    a, remote = two_machines.a, two_machines.remote
    lock = remote / "refs" / "heads" / "main.lock"
    lock.write_text("0" * 40 + "\n")
    old = time.time() - 60
    os.utime(lock, (old, old))
    live = LiveGit(remote)
    try:
        wait_for(lambda: git_running_in(remote), 10, "the git in the remote")
        res = a.cli("message", "send", "--to", "sonnet", "--channel", "general", "while a push is received")
    finally:
        live.close()
    assert res.returncode == 0 and "push failed" in res.stderr, res.stderr
    assert lock.exists()


def test_every_lock_a_killed_git_leaves_is_cleared_at_the_transport_lock_and_a_live_gits_are_kept(
    two_machines: TwoMachines, monkeypatch
) -> None:
    """A group kill inside our `git rebase` left .git/MERGE_MSG.lock: every later rebase failed to pick our reply
    commit ("could not lock '.git/MERGE_MSG'"), every tick, for good (found by the dispatcher crash suite). Any lock
    git leaves in the git dir or under refs/ is cleared when no git works in the repository, never our own flock
    file; while a git works there, all are kept. The next tick then takes the new work."""
    a, b, dispatcher = _b_dispatching_echo(two_machines, monkeypatch)
    gd = b.root / ".git"
    names = ["MERGE_MSG.lock", "HEAD.lock", "next-index-4242.lock", "refs/remotes/origin/main.lock"]
    for name in names:
        (gd / name).write_text("")
    live = LiveGit(b.root)
    try:
        wait_for(lambda: git_running_in(b.root), 10, "the live git seen")
        assert not clear_stale_git_locks(b.root)
        assert all((gd / name).exists() for name in names), "a running git's locks are never removed"
    finally:
        live.close()
    [path] = send(a, "local/echo@m2", "after a killed rebase")
    report = dispatcher.tick()
    assert report.dispatched == 1, (b.state_dir / "dispatcher.log").read_text()[-2000:]
    assert len(replies_to(b.root, two_machines.channel, path)) == 1
    assert not [name for name in names if (gd / name).exists()]
    assert (gd / "crosstalk.lock").exists()
