"""`crosstalk demo` with the real harnesses: the pinned claude, codex, pi and qwen run as live sessions against the
demo's scripted model servers, and opencode and gemini too when they are installed (the demo adds a session of each
CLI it finds); the test reads only what the demo prints (and /proc), as a person would."""

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
OPTIONAL = {"opencode": "OpenCode", "gemini": "Gemini CLI"}  # expected exactly when their CLIs are installed
TITLES = ("Claude Code", "Codex", "pi", "Qwen Code", *(t for h, t in OPTIONAL.items() if (bin_dir() / h).is_file()))
SESSION = re.compile(
    r"^  (Claude Code|Codex|pi|Qwen Code|OpenCode|Gemini CLI)\s+pid (\d+)\s+agent (\S+)\s+"
    r"its model: scripted model server on 127\.0\.0\.1:(\d+) \((.+?)\) — no outside service$",
    re.M,
)
SENT = re.compile(r"^  (\S+)\s+→ (\S+)\s+(inform|ask|reply)\s+(\S+)\s+'(.*)'$", re.M)


@pytest.fixture
def home(require: Callable[[str], Path]) -> Iterator[Path]:
    for name in ("claude", "codex", "pi", "qwen"):
        require(name)  # opencode and gemini: optional to the demo, expected when installed (TITLES)
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
    assert len(pids) == len(TITLES), out
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
    versions = [r"Claude Code 2\.\d+\.\d+", r"Codex 0\.\d+\.\d+", r"pi 0\.\d+\.\d+", r"Qwen Code 0\.\d+\.\d+",
                *(rf"{t} \d+\.\d+\.\d+" for t in TITLES[4:])]  # fmt: skip
    assert re.match(rf"crosstalk demo: real {', '.join(versions[:-1])} and {versions[-1]} sessions", out), out

    sessions = {m[0]: m for m in SESSION.findall(out)}
    assert set(sessions) == set(TITLES), out
    chat = "Chat Completions API"
    apis = {"Claude Code": "Anthropic Messages API", "Codex": "OpenAI Responses API", "pi": chat, "Qwen Code": chat,
            "OpenCode": chat, "Gemini CLI": "Gemini API"}  # fmt: skip
    assert {t: m[4] for t, m in sessions.items()} == {t: apis[t] for t in TITLES}, out
    name = {title: sessions[title][2] for title in TITLES}

    # A message landed in each session: sent (accepted; queued for Qwen, which says so), read once by its model.
    rows = SENT.findall(out)
    informs = [r for r in rows if r[0] == "orchestrator" and r[2] == "inform"]
    assert sorted(r[1] for r in informs) == sorted(name.values()), out
    queued = {name[t] for t in ("Qwen Code", "Gemini CLI") if t in name}
    assert {r[3] for r in informs if r[1] not in queued} == {"accepted"}, out
    assert [r[3] for r in informs if r[1] in queued] == ["queued"] * len(queued), out
    if "Gemini CLI" in name:  # said truthfully: its model reads it with its user's next prompt, which the demo types
        assert "(nothing can start a turn in an idle Gemini CLI session)" in out, out
        assert re.search(r"^  Gemini CLI: queued, its model reads it with its user's next prompt \(nothing can start a "
                         r"turn in an idle Gemini CLI session\); the demo, as its user, types 'Tell me what is new\.'$",
                         out, re.M), out  # fmt: skip
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
    if "OpenCode" in name:  # a user message of the session, crosstalk's header line first
        assert re.search(r"  OpenCode:\n    \[crosstalk inform · from agents:orchestrator · message-id [0-9a-f-]+\]\n"
                         r"    Heads-up from the demo: ", read), read  # fmt: skip
    if "Gemini CLI" in name:  # crosstalk's envelope inside Gemini's hook context (Gemini escapes its < and >)
        assert re.search(r"  Gemini CLI:\n    <hook_context>&lt;cross-session-message [^\n]*from-name=\"orchestrator\" "
                         r"message-id=\"[^\"]+\" kind=\"inform\"&gt;\n    Heads-up from the demo: .*\n"
                         r"    &lt;/cross-session-message&gt;</hook_context>\n", read), read  # fmt: skip

    # The summary adds up: every number is a count of the tables above it.
    table = out.split("What each session's model read", 1)[1].split("The message into each session, as", 1)[0]
    counts = {t: int(n) for t, n in re.findall(r"^  (Claude Code|Codex|pi|Qwen Code|OpenCode|Gemini CLI)\s+\S+\s+"
                                               r"(\d+) message\(s\)$", table, re.M)}  # fmt: skip
    assert counts == {"Claude Code": 2, "Codex": 2, **{t: 1 for t in TITLES[2:]}}, table
    reads = re.findall(r"^      (inform|ask|reply)\s+from (\S+)\s+(read once|never read|read \d+ times)$", table, re.M)
    assert len(reads) == len(rows) and all(r[2] == "read once" for r in reads), table
    m = re.search(r"^(\d+) messages sent, (\d+) read by the receiving session's model \(none twice\); "
                  r"(\d+) ask answered across harnesses\.$", out, re.M)  # fmt: skip
    assert m, out
    assert int(m[1]) == len(rows) == len(TITLES) + 2
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
