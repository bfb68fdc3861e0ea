"""kill -9 the bus dispatcher mid-tick, many times over: every message ends with exactly one reply on the remote.

Real git: a bare remote, machine m1 runs the dispatcher (`crosstalk daemon dispatch`, a real process) and claims
the scripted model local/echo, machine m2 sends with `message send --to local/echo@m1`. Each life sends some
messages before the dispatcher starts and some while it runs, then kills it (SIGKILL to its pid, as the OOM killer
would; half the time with its whole process group, so its git dies mid-write too, as a container stop does) at a
moment aimed at one phase of the tick: in `git fetch`, while the model runs (the model is made slow for
that life), right after the model answered (before its reply is committed), in `git commit`, in `git push`, or at
a random time. The git or model processes the dead dispatcher left behind run to their end (as they would during
systemd's RestartSec) before the dispatcher is restarted and left to finish. After every life:
- every message sent so far has exactly one reply on the remote. docs/bus.md promises at-least-once, a second
  reply only from a crash between a model run and its commit; this asserts more: such a crash re-runs the model,
  but the first answer never reaches the history, and what the killed writer left uncommitted (its reply file,
  git's index.lock) is cleared at the next boot: nothing is left in m1's work tree at the end;
- the remote's main only ever grows (each life's main descends from the last) and holds every message sent;
- the restarted dispatcher's cursor reaches HEAD (its state reloads: no wedge), and it exits 0 on SIGTERM;
- no message was given to the model more often than once plus the kills that happened while it was pending.
The iteration count comes from CROSSTALK_CRASH_ITERATIONS (default 10), the seed from CROSSTALK_CRASH_SEED.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from crosstalk.bus.protocol.message import parse_message
from tests.support.bus_dispatch import (
    Daemon,
    channel_rel,
    heartbeat,
    kill_pid_group,
    log_text,
    pid_alive,
    remote_files,
    set_registry,
    wait_for,
    write_model,
)
from tests.support.bus_machines import GIT_TIMEOUT, Machine, clean_env, init_bare_remote, join_two, new_machine

ITERATIONS = int(os.environ.get("CROSSTALK_CRASH_ITERATIONS", "10"))
# A life takes 5-15 s on a loaded machine, later ones longer as the remote grows: a 1,000-life run outlasted a fixed
# two hours while sound, so the limit scales with the lives asked for.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(max(7200, 30 * ITERATIONS))]
PHASES = ("fetch", "model", "answered", "commit", "push", "random")
MODEL = "local/echo"
MODEL_BODY = """
try:
    delay = float(open({ctrl!r}).read() or 0)
except (OSError, ValueError):
    delay = 0.0
time.sleep(delay)
print("answer to " + os.environ["CROSSTALK_RE"])
"""


@pytest.fixture
def bus() -> Iterator[tuple[Machine, Machine, Path, Path]]:
    """(m1: the dispatcher's machine, m2: the sender's, the bare remote, the model script)."""
    tmp = Path(tempfile.mkdtemp(prefix="xtc", dir="/tmp"))
    try:
        pair = join_two(new_machine(tmp, "m1", clean_env()), new_machine(tmp, "m2", clean_env()),
                        init_bare_remote(tmp / "remote.git"))  # fmt: skip
        model = write_model(tmp, "echo", MODEL_BODY.format(ctrl=str(tmp / "delay")))
        set_registry(pair.a, {"local": {"echo": str(model)}})
        pair.b.git("pull", "-q")
        yield pair.a, pair.b, pair.remote, model
    finally:
        if "model" in locals():
            end_leftovers(set(), model, timeout=0)
        shutil.rmtree(tmp, ignore_errors=True)


def children(pid: int) -> dict[int, str]:
    """The live child processes of pid (every thread's), pid -> command line."""
    found: dict[int, str] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return found
    for tid in tids:
        try:
            kids = Path(f"/proc/{pid}/task/{tid}/children").read_text().split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        for kid in map(int, kids):
            try:
                found[kid] = Path(f"/proc/{kid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except (FileNotFoundError, ProcessLookupError):
                pass
    return found


def phase_now(pid: int, model: Path, answered_before: int, m1: Machine) -> str:
    """Where the dispatcher is right now: the model, a git subcommand, after an answer and before `git commit`
    (its "dispatch" line is the log's last one; `git config`/`git add` come before the commit), or its own code."""
    log = log_text(m1)
    answered = log.count(" dispatch ") > answered_before and " dispatch " in log.rstrip("\n").rsplit("\n", 1)[-1]
    for cmd in children(pid).values():
        if str(model) in cmd:
            return "model"
        if cmd.startswith("git "):
            words = [w for w in cmd.split()[1:] if not w.startswith("-") and "=" not in w and "/" not in w]
            sub = words[0] if words else "?"
            return "answered, before commit" if answered and sub in ("config", "add") else f"git {sub}"
    return "answered, before commit" if answered else "python"


def trigger(phase: str, pid: int, model: Path, m1: Machine, rng: random.Random) -> Callable[[], bool]:
    """A condition that becomes true at the moment a kill aimed at `phase` should land."""
    answered, started = log_text(m1).count(" dispatch "), len(model_runs(model))
    wanted = {"fetch": " fetch ", "commit": " commit ", "push": " push "}
    if phase in wanted:
        return lambda: any(cmd.startswith("git ") and wanted[phase] in cmd for cmd in children(pid).values())
    if phase == "model":
        return lambda: len(model_runs(model)) > started
    if phase == "answered":
        return lambda: log_text(m1).count(" dispatch ") > answered
    at = time.monotonic() + rng.uniform(0.05, 1.5)
    return lambda: time.monotonic() >= at


SAID: dict[str, str] = {}  # message path -> what its `message send` wrote on stderr (a push it gave up on)


def send_all(m2: Machine, n: int, life: int, into: list[str]) -> None:
    """`message send` n times from m2 (each commits and pushes); the paths go to `into`, a failure as "!" + why."""
    for k in range(n):
        res = m2.cli("message", "send", "--to", f"{MODEL}@m1", "--from", "alice", f"life {life} task {k}")
        into.extend(res.stdout.split() if res.returncode == 0 else [f"!{res.returncode}: {res.stderr}"])
        for path in res.stdout.split() if res.returncode == 0 and res.stderr.strip() else []:
            SAID[path] = res.stderr.strip()


def post_mortem(m1: Machine, m2: Machine, remote: Path, want: set[str], daemon: Daemon) -> str:
    """What a failed life leaves to read: the messages without a reply (on the remote or not, what their send
    said), m1's dispatcher (heartbeat, children, kernel wait channel), m1's repository (HEAD, status, locks)."""
    _, files, replies = remote_state(remote)
    on_remote = {channel_rel(p) for p in files}
    lines = []
    for rel in sorted(want - set(replies)):
        path = next((p for p in SAID if channel_rel(p) == rel), rel)
        lines.append(f"no reply: {rel} on_remote={rel in on_remote} send_said={SAID.get(path, '-')!r}")
    pid = daemon.proc.pid
    wchan = Path(f"/proc/{pid}/wchan").read_text() if pid_alive(pid) else "dead"
    lines.append(f"dispatcher pid={pid} wchan={wchan} children={children(pid)} heartbeat={heartbeat(m1)}")
    assert m1.root is not None
    locks = sorted(str(p.relative_to(m1.root)) for p in (m1.root / ".git").rglob("*.lock"))
    lines.append(f"m1 HEAD={m1.git('rev-parse', 'HEAD').strip()} locks={locks}")
    lines.append("m1 status: " + m1.git("status", "--porcelain=v1", "--branch").strip().replace("\n", " | "))
    lines.append("m2 status: " + m2.git("status", "--porcelain=v1", "--branch").strip().replace("\n", " | "))
    return "\n".join(lines)


def remote_state(remote: Path) -> tuple[str, dict[str, str], dict[str, list[str]]]:
    """(main's sha, every message path -> text, channel-relative target -> the paths of its replies)."""
    head = subprocess.run(["git", "--git-dir", str(remote), "rev-parse", "main"], capture_output=True, text=True,
                          timeout=GIT_TIMEOUT, env=clean_env(), check=True).stdout.strip()  # fmt: skip
    files = remote_files(remote)
    replies: dict[str, list[str]] = {}
    for path, text in files.items():
        for target in reply_targets(path, text):
            replies.setdefault(target, []).append(path)
    return head, files, replies


@functools.cache
def reply_targets(path: str, text: str) -> tuple[str, ...]:
    """What a message file replies to; parsed once (the suite polls a remote that grows to thousands of files)."""
    msg = parse_message(text, where=path)
    assert not msg.failed, (path, msg.error)
    return tuple(msg.re)


def is_ancestor(remote: Path, old: str, new: str) -> bool:
    argv = ["git", "--git-dir", str(remote), "merge-base", "--is-ancestor", old, new]
    return subprocess.run(argv, capture_output=True, timeout=GIT_TIMEOUT, env=clean_env()).returncode == 0


def end_leftovers(pids: set[int], model: Path, timeout: float = 30.0) -> None:
    """Let what the dead dispatcher left running (git, the model) end on its own, then kill what still runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        if pid_alive(pid):
            kill_pid_group(pid)
    for record in model_runs(model):  # a model that outlived a life; runs are recorded with their pid
        pid = int(record["pid"])
        if pid_alive(pid) and str(model) in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
            kill_pid_group(pid)


def model_runs(model: Path) -> list[dict[str, Any]]:
    """The model's recorded runs (tests.support.bus_dispatch.runs), without a line a starting model is still writing."""
    record = model.with_name(model.name + ".jsonl")
    text = record.read_text() if record.exists() else ""
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines() if line.strip()]


def calls_per_message(model: Path) -> Counter[str]:
    """How often each message (channel-relative) was handed to the model, from its recorded runs."""
    return Counter(rel for run in model_runs(model) for rel in run["env"]["CROSSTALK_RE"].split(","))


def test_kill_9_mid_tick_never_duplicates_loses_or_wedges(bus: tuple[Machine, Machine, Path, Path]) -> None:
    m1, m2, remote, model = bus
    rng = random.Random(int(os.environ.get("CROSSTALK_CRASH_SEED", "14")))
    delay_file = model.with_name("delay")
    sent: list[str] = []
    kills_after: dict[str, int] = {}  # message -> kills that happened while it was pending
    aimed: Counter[str] = Counter()
    landed: Counter[str] = Counter()
    rerun_after: Counter[str] = Counter()  # where the kill landed -> the model re-runs it caused
    reruns = group_kills = 0
    prev_head, _, _ = remote_state(remote)
    started_at = time.monotonic()
    for life in range(ITERATIONS):
        phase = PHASES[life % len(PHASES)] if life < len(PHASES) else rng.choice(PHASES)
        delay_file.write_text(f"{rng.uniform(0.3, 1.5) if phase == 'model' else rng.uniform(0, 0.05):.3f}")
        send_all(m2, rng.randint(0, 2), life, sent)
        # Half the kills take the dispatcher's process group with it (a cgroup or container stop): its git dies
        # too, mid-write, and leaves .git/index.lock behind.
        group = rng.random() < 0.5
        group_kills += group
        daemon = Daemon(m1, "--interval", "0.2", "--jobs", "2")
        leftovers: set[int] = set()
        try:
            daemon.wait_ready()
            later: list[str] = []
            sender = threading.Thread(target=send_all, args=(m2, rng.randint(1, 3), life, later), daemon=True)
            sender.start()
            fire = trigger(phase, daemon.proc.pid, model, m1, rng)
            answered = log_text(m1).count(" dispatch ")
            deadline = time.monotonic() + 20
            while not fire() and time.monotonic() < deadline and daemon.proc.poll() is None:
                time.sleep(0.002)
            if phase == "model":  # somewhere inside the run, not at its start
                time.sleep(rng.uniform(0, float(delay_file.read_text())))
            where = phase_now(daemon.proc.pid, model, answered, m1)
            leftovers = set(children(daemon.proc.pid))
            assert daemon.proc.poll() is None, f"the dispatcher died by itself:\n{daemon.tail()}"
        finally:
            if group:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(daemon.proc.pid, signal.SIGKILL)
            daemon.kill9()
        aimed[phase] += 1
        landed[where] += 1
        sender.join(timeout=120)
        assert not sender.is_alive(), "message send hung"
        sent.extend(later)
        assert not [p for p in sent if p.startswith("!")], sent
        replied_at_kill = set(remote_state(remote)[2])
        for path in sent:  # the kill may re-run what was still pending on the remote
            kills_after[path] = kills_after.get(path, 0) + (channel_rel(path) not in replied_at_kill)
        end_leftovers(leftovers, model)
        delay_file.write_text("0")
        with Daemon(m1, "--interval", "0.2", "--jobs", "2") as again:
            again.wait_ready()
            want = {channel_rel(p) for p in sent}
            try:
                wait_for(lambda w=want: w <= set(remote_state(remote)[2]), 90, "a reply to every message", poll=0.2)
                wait_for(lambda: heartbeat(m1).get("cursor") == m1.git("rev-parse", "HEAD").strip(), 30, "cursor")
            except AssertionError as exc:
                why = f"{exc}\n{post_mortem(m1, m2, remote, want, again)}\n{again.tail()}"
                raise AssertionError(f"life {life} ({phase}, killed in {where}): {why}") from None
            assert again.stop() == 0, again.tail()
        head, files, replies = remote_state(remote)
        assert is_ancestor(remote, prev_head, head), f"life {life}: the remote's main was rewritten"
        prev_head = head
        assert set(sent) <= set(files), f"life {life}: lost messages {set(sent) - set(files)}"
        twice = {t: r for t, r in replies.items() if len(r) > 1}
        assert not twice, f"life {life} ({phase}, killed in {where}): duplicate replies {twice}"
        assert want <= set(replies), f"life {life}: missing replies {want - set(replies)}"
        calls = calls_per_message(model)
        total = sum(calls[channel_rel(p)] - 1 for p in sent)
        rerun_after[where], reruns = rerun_after[where] + total - reruns, total
        for path in sent:
            assert 1 <= calls[channel_rel(path)] <= 1 + kills_after[path], (path, calls[channel_rel(path)])
    status = m1.git("status", "--porcelain", "--untracked-files=all", "--", "data/channels").splitlines()
    orphans = Counter({"??": "untracked", "A ": "staged"}.get(line[:2], line[:2]) for line in status)
    assert not orphans, f"files left uncommitted in m1's work tree: {status}"  # moved aside at each boot
    assert not (m1.root / ".git" / "index.lock").exists()
    n_replies, n_runs = sum(map(len, replies.values())), len(model_runs(model))
    fsck = subprocess.run(["git", "--git-dir", str(remote), "fsck", "--connectivity-only"], capture_output=True,
                          text=True, timeout=GIT_TIMEOUT, env=clean_env())  # fmt: skip
    assert fsck.returncode == 0, fsck.stderr
    print(
        f"\ndispatcher crash suite: {ITERATIONS} kills ({group_kills} with the process group), {len(sent)} messages, "
        f"{n_replies} replies, duplicates 0, "
        f"missing 0, model re-runs {reruns} ({n_runs} runs); aimed {dict(aimed)}; landed {dict(landed)}; "
        f"re-runs by where the kill landed {dict(rerun_after)}; "
        f"{time.monotonic() - started_at:.0f} s",
        flush=True,
    )
    assert sum(aimed.values()) == ITERATIONS
