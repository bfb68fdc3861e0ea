"""`crosstalk demo` with the real harnesses: the pinned claude, codex, pi and qwen run as live sessions against the
demo's scripted model servers; the test reads only what the demo prints (and /proc), as a person would."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.live_claude import bin_dir

pytestmark = pytest.mark.timeout(300)

CROSSTALK = Path(sys.executable).with_name("crosstalk")
DEMO_TIMEOUT_S = 240.0
TITLES = ("Claude Code", "Codex", "pi", "Qwen Code")
SESSION = re.compile(
    r"^  (Claude Code|Codex|pi|Qwen Code)\s+pid (\d+)\s+agent (\S+)\s+"
    r"its model: scripted model server on 127\.0\.0\.1:(\d+) \((.+?)\) — no outside service$",
    re.M,
)
SENT = re.compile(r"^  (\S+)\s+→ (\S+)\s+(inform|ask|reply)\s+(\S+)\s+'(.*)'$", re.M)


@pytest.fixture
def home(require: Callable[[str], Path]) -> Iterator[Path]:
    for name in ("claude", "codex", "pi", "qwen"):
        require(name)
    path = Path(tempfile.mkdtemp(prefix="xtdh", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def demo_argv() -> list[str]:
    return [str(CROSSTALK), "demo", "--harness-bin", str(bin_dir())]


def demo_env(home: Path) -> dict[str, str]:
    """A person's shell: PATH (node for codex and pi), a HOME of its own, nothing of the test's crosstalk state."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8", "USER": "tester"}


def with_marker(root: str) -> list[int]:
    """The processes (by PID) whose environment still names the demo's state root."""
    marker = f"CROSSTALK_HOME={root}/state".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def assert_all_gone(out: str) -> None:
    root = re.search(r"in a temporary dir (/tmp/xtdemo\.\w+)", out)
    assert root, out
    pids = [int(p) for p in re.findall(r"\bpid (\d+)", out)]
    assert len(pids) == 4, out
    assert [p for p in pids if Path(f"/proc/{p}").exists()] == [], out
    assert with_marker(root.group(1)) == [], out
    assert f"cleaned up {root.group(1)}" in out and not Path(root.group(1)).exists()
    assert re.search(r"stopped the sessions \(pids [\d, ]+\).*; 0 left running", out), out


def test_demo_runs_real_sessions_a_message_lands_in_each_and_an_ask_is_answered_across_harnesses(home: Path):
    res = subprocess.run(demo_argv(), env=demo_env(home), cwd=home, capture_output=True, text=True,
                         timeout=DEMO_TIMEOUT_S, stdin=subprocess.DEVNULL)  # fmt: skip
    out = res.stdout
    assert res.returncode == 0, out + res.stderr
    assert "fake agents" not in out
    assert re.match(r"crosstalk demo: real Claude Code 2\.\d+\.\d+, Codex 0\.\d+\.\d+, pi 0\.\d+\.\d+ and "
                    r"Qwen Code 0\.\d+\.\d+ sessions", out)  # fmt: skip

    sessions = {m[0]: m for m in SESSION.findall(out)}
    assert set(sessions) == set(TITLES), out
    assert {m[4] for m in sessions.values()} == {
        "Anthropic Messages API", "OpenAI Responses API", "Chat Completions API"}  # fmt: skip
    assert sessions["Qwen Code"][4] == "Chat Completions API"
    name = {title: sessions[title][2] for title in TITLES}

    # A message landed in each session: sent (accepted; queued for Qwen, which says so), read once by its model.
    rows = SENT.findall(out)
    informs = [r for r in rows if r[0] == "orchestrator" and r[2] == "inform"]
    assert sorted(r[1] for r in informs) == sorted(name.values()), out
    assert {r[3] for r in informs if r[1] != name["Qwen Code"]} == {"accepted"}, out
    assert [r[3] for r in informs if r[1] == name["Qwen Code"]] == ["queued"], out
    # The ask across harnesses: Codex's model asks Claude's, whose answer reaches the Codex thread.
    [ask] = [r for r in rows if r[2] == "ask"]
    [reply] = [r for r in rows if r[2] == "reply"]
    assert (ask[0], ask[1]) == (name["Codex"], name["Claude Code"]), out
    assert (reply[0], reply[1]) == (name["Claude Code"], name["Codex"]), out
    assert "the Codex thread's model read the answer, naming ask " in out and reply[4] in out
    # ... and how each model read it: Claude's and Codex's envelopes, pi's tagged user turn, Qwen's own envelope
    # around crosstalk's header line.
    read = out.split("The message into each session, as its model read it:", 1)[1]
    for title in ("Claude Code", "Codex"):
        block = read.split(f"  {title}:\n", 1)[1]
        assert re.match(r'    <cross-session-message [^\n]*from-name="orchestrator" message-id="[^"]+" kind="inform">\n'
                        r"    Heads-up from the demo: .*\n    </cross-session-message>\n", block), read  # fmt: skip
    assert re.search(r"  pi:\n    \[from agents:orchestrator\] Heads-up from the demo: ", read), read
    assert re.search(r"  Qwen Code:\n    <cross_session_message [^\n]*origin=\"own-process\">\n"
                     r"    \[crosstalk inform · from agents:orchestrator · message-id [0-9a-f-]+\]\n"
                     r"    Heads-up from the demo: .*\n    </cross_session_message>\n", read), read  # fmt: skip

    # The summary adds up: every number is a count of the tables above it.
    table = out.split("What each session's model read", 1)[1].split("The message into each session, as", 1)[0]
    counts = {t: int(n) for t, n in re.findall(r"^  (Claude Code|Codex|pi|Qwen Code)\s+\S+\s+(\d+) message\(s\)$",
                                               table, re.M)}  # fmt: skip
    assert counts == {"Claude Code": 2, "Codex": 2, "pi": 1, "Qwen Code": 1}, table
    reads = re.findall(r"^      (inform|ask|reply)\s+from (\S+)\s+(read once|never read|read \d+ times)$", table, re.M)
    assert len(reads) == len(rows) and all(r[2] == "read once" for r in reads), table
    m = re.search(r"^(\d+) messages sent, (\d+) read by the receiving session's model \(none twice\); "
                  r"(\d+) ask answered across harnesses\.$", out, re.M)  # fmt: skip
    assert m, out
    assert int(m[1]) == len(rows) == 6
    assert int(m[2]) == sum(counts.values()) == len(reads)
    assert int(m[3]) == sum(1 for r in reads if r[0] == "reply") == 1
    assert_all_gone(out)
    # The bus half runs too, and removes its temp dir.
    bus = re.search(r"cleaned up (/tmp/xtbus\.\w+)", out)
    assert bus and not Path(bus[1]).exists() and out.count(": REPLIED") == 2, out


def test_ctrl_c_mid_demo_stops_every_session_by_pid_and_removes_the_temp_dir(home: Path):
    # As in a terminal: SIGINT is not ignored (a test runner started in the background inherits it ignored).
    proc = subprocess.Popen(demo_argv(), env=demo_env(home), cwd=home, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    try:
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:  # the sessions are up and registered once this line is printed
            seen.append(line)
            if line.startswith("A message into each session"):
                proc.send_signal(signal.SIGINT)
                break
        out = "".join(seen) + proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 130, f"exit {proc.returncode}\n{out}"
    assert "interrupted; everything it started is stopped and removed" in out
    assert_all_gone(out)
