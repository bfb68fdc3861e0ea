"""`crosstalk demo` without the harness CLIs (its --harness-bin pointed at an empty directory): it says so in one
line, runs fake-harness agents instead, and its summary is a count of the tables it prints."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.procs import CROSSTALK, Procs, one_error_line, procs

pytestmark = pytest.mark.timeout(180)

DEMO_TIMEOUT_S = 150.0
DELIVERY = re.compile(r"^  (\S+)\s+([→⇒]) (\S+)\s+(inform|meta|ping|ask)\s+(task \S+|\S+)(.*)$", re.M)
INBOX = re.compile(r"^  (alice|bob|carol|dana)\s+(\d+) message\(s\), (\d+) injected twice$", re.M)


@pytest.fixture
def xt() -> Iterator[Procs]:
    with procs() as p:
        (p.root / "empty").mkdir()
        yield p


def demo(xt: Procs, *args: str) -> list[str]:
    return [str(CROSSTALK), "demo", "--harness-bin", str(xt.root / "empty"), *args]


def env(xt: Procs) -> dict[str, str]:
    """The test's environment with its own HOME; without PYTHONUNBUFFERED, so the demo must flush each line."""
    return {k: v for k, v in xt.env.items() if k != "PYTHONUNBUFFERED"} | {"HOME": str(xt.root)}


def fate(line: tuple[str, ...]) -> str:
    """What became of one deliveries-table line, read from the line alone."""
    _sender, _arrow, _to, kind, state, rest = line
    if "(duplicate)" in rest:
        return "duplicate"
    if kind == "ping" and state == "accepted":
        return "ping"
    return "delivered" if state in ("accepted", "queued", "task completed") else state


def test_without_the_harnesses_it_says_so_in_one_line_and_runs_fake_agents_whose_summary_adds_up(xt: Procs):
    res = subprocess.run(demo(xt), env=env(xt), cwd=xt.root, capture_output=True, text=True,
                         timeout=DEMO_TIMEOUT_S, stdin=subprocess.DEVNULL)  # fmt: skip
    out = res.stdout
    assert res.returncode == 0, out + res.stderr
    first, second = out.splitlines()[:2]
    assert first.startswith(f"crosstalk demo: no claude, codex, pi in {xt.root / 'empty'}: fake agents instead")
    assert (
        "bash scripts/dev.sh demo" in first and "@anthropic-ai/claude-code@" in first and "--harness-bin DIR" in first
    ), first
    assert second.startswith("crosstalk demo: agents in a temporary state root /tmp/xtdemo.")
    assert "scripted model server" not in out

    lines = DELIVERY.findall(out)
    tally = Counter(fate(line) for line in lines)
    inboxes = {name: (int(n), int(twice)) for name, n, twice in INBOX.findall(out)}
    assert set(inboxes) == {"alice", "bob", "carol", "dana"}, out
    shown = sum(n for n, _ in inboxes.values())
    m = re.search(r"^(\d+) sends: (\d+) delivered into a session \(the inbox table shows (\d+)\), (.*); none twice\.$",
                  out, re.M)  # fmt: skip
    assert m, out
    assert int(m[1]) == len(lines) == sum(tally.values())
    assert int(m[2]) == tally["delivered"] == shown == int(m[3])  # the ping is answered, never injected
    others = {what: int(n) for n, what in re.findall(r"(\d+) (\w+)", m[4])}
    assert others == {"duplicates": tally["duplicate"], "ping": tally["ping"], "rejected": tally["rejected"],
                      "unreachable": tally["unreachable"]}, m[4]  # fmt: skip
    assert all(twice == 0 for _, twice in inboxes.values())
    root = re.search(r"state root (/tmp/xtdemo\.\w+)", out)
    assert root and f"cleaned up {root[1]}" in out and not Path(root[1]).exists()
    assert [p for p in map(int, re.findall(r"\bpid (\d+)", out)) if Path(f"/proc/{p}").exists()] == []


def test_harness_clis_that_fail_to_start_fall_back_to_fake_agents_with_the_reason(xt: Procs):
    broken = xt.root / "broken"
    broken.mkdir()
    for name in ("claude", "codex", "pi", "node"):  # a broken install: each exits at once
        (broken / name).write_text("#!/bin/sh\necho 'broken install' >&2\nexit 1\n")
        (broken / name).chmod(0o755)
    run_env = env(xt) | {"PATH": f"{broken}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    res = subprocess.run([str(CROSSTALK), "demo", "--harness-bin", str(broken)], env=run_env, cwd=xt.root,
                         capture_output=True, text=True, timeout=DEMO_TIMEOUT_S, stdin=subprocess.DEVNULL)  # fmt: skip
    out = res.stdout
    assert res.returncode == 0, out + res.stderr
    failed = r"^crosstalk demo: the real sessions failed \(the (Claude Code|Codex|pi) session exited: broken install\)"
    assert re.search(failed + ": fake agents instead$", out, re.M), out
    assert re.search(r"^\d+ sends: \d+ delivered into a session", out, re.M), out
    for root in re.findall(r"(?:in a temporary dir|state root) (/tmp/xtdemo\.\w+)", out):
        assert not Path(root).exists()


def test_a_harness_bin_that_is_not_a_directory_is_a_usage_error(xt: Procs):
    res = xt.cli("demo", "--harness-bin", str(xt.root / "nope"))
    assert res.returncode == 2
    assert one_error_line(res.stderr) == f"crosstalk: --harness-bin {xt.root / 'nope'}: not a directory"


def test_ctrl_c_stops_the_fake_agents_by_pid_and_removes_the_temp_dir(xt: Procs):
    proc = subprocess.Popen(demo(xt), env=env(xt), cwd=xt.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, stdin=subprocess.DEVNULL,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    xt.procs.append(proc)  # type: ignore[arg-type]
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:  # bounded by the test's timeout; three agents are up once this line is printed
        seen.append(line)
        if line.startswith("Deliveries"):
            proc.send_signal(signal.SIGINT)
            break
    out = "".join(seen) + proc.communicate(timeout=60)[0]
    assert proc.returncode == 130, f"exit {proc.returncode}\n{out}"
    assert out.rstrip().endswith("crosstalk demo: interrupted; everything it started is stopped and removed"), out
    pids = [int(p) for p in re.findall(r"\bpid (\d+)", out)]
    assert len(pids) == 3 and [p for p in pids if Path(f"/proc/{p}").exists()] == [], out
    root = re.search(r"state root (/tmp/xtdemo\.\w+)", out)
    assert root and not Path(root[1]).exists(), out
