"""Every command in the README and docs/recipes.md works as typed: each ```bash block is run by bash, in order, in a
scratch HOME with crosstalk on PATH (`/tmp/` becomes the scratch directory, so a run leaves nothing behind). A block
is classified below by its first line; a new block must be added there. Lines that need what a test machine cannot
give a shell (a terminal, the set-up the test command itself is) are named, with why, and every other line runs."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk.fs.procinfo import pid_alive
from tests.support.procs import wait_for

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
BLOCK_TIMEOUT_S = 180

# A line starting with one of these is not run, for the reason given.
NOT_RUN = {
    "bash scripts/dev.sh": "the set-up itself: `dev.sh test` is what CI runs, and the demo has a test of its own",
    "crosstalk watch": "a full-screen view: it needs a terminal (its --once --json form is tested in test_watch_*)",
    "qwen sessions": "Qwen Code's own command, minting a token for a user's Qwen (tests/e2e/test_qwen_live.py)",
    "chmod 600": "the second half of minting Qwen's token (above)",
}
# Each README block, by its first line: what it needs before it runs (a session named my-session is a standalone
# agent here), and what its output shows when it worked. The install block runs in the checkout (it activates its
# .venv, which the test command made); the others in the scratch directory.
BLOCKS: dict[str, tuple[list[list[str]], list[str]]] = {
    "bash scripts/dev.sh demo": ([], []),
    "bash scripts/dev.sh demo && source .venv/bin/activate": ([], ["installed: crosstalk for opencode", "healthy"]),
    "crosstalk list": (
        [["agent", "start", "--harness", "fake", "--name", "my-session"]],
        ["accepted ", "→ my-session"],
    ),
    "crosstalk agent start --harness fake --name alice --inbox /tmp/alice.jsonl": (
        [],
        ['"text": "hello"', "agent alice stopped"],
    ),
    "git init -q --bare --initial-branch=main /tmp/team.git": (
        [],
        ["== reply ", "and the tests?", "stopped"],
    ),
    # docs/recipes.md
    "crosstalk agent start --harness fake --name coder --inbox /tmp/coder.jsonl": ([], ["accepted ", "→ coder"]),
    'crosstalk agent start --harness fake --name coder --answer "yes: the retry stops after 3 tries"': (
        [],
        ["→ coder (replied)\nyes: the retry stops after 3 tries\n"],
    ),
    "crosstalk agent start --harness fake --name lead --role orchestrator": (
        [],
        ["→ worker-1 (delivered)", "refused (exit 3): a worker hears only its parent"],
    ),
    # the harness pages: install, then undo
    "crosstalk install claude": ([], ["installed: crosstalk for claude", "uninstalled: crosstalk for claude"]),
    "crosstalk install codex": ([], ["installed: crosstalk for codex", "uninstalled: crosstalk for codex"]),
    "crosstalk install pi": ([], ["installed: crosstalk for pi", "uninstalled: crosstalk for pi"]),
    "crosstalk install qwen": ([], ["installed: crosstalk for qwen", "uninstalled: crosstalk for qwen"]),
    "crosstalk install gemini": ([], ["installed: crosstalk for gemini", "uninstalled: crosstalk for gemini"]),
    "crosstalk install opencode": ([], ["installed: crosstalk for opencode", "uninstalled: crosstalk for opencode"]),
    "qwen sessions controllers add --label crosstalk | grep -o 'qpc_[0-9a-f]*' >": ([], []),
    # docs/cli.md: alice and bob are two agents; bob answers asks
    "crosstalk send --a2a --as alice bob": (
        [
            ["agent", "start", "--harness", "fake", "--name", "alice"],
            ["agent", "start", "--harness", "fake", "--name", "bob", "--answer", "after lunch"],
        ],
        ["→ bob (delivered)", "after lunch", "submitted"],
    ),
    # docs/bus.md: two machines on one, each a directory and a state root; gpu's dispatcher (under its own state
    # root) is stopped by the block, or by _stop_everything when the block fails before it
    '# two machines on this one: "laptop" and "gpu", each its own directory, state root and PATH': (
        [],
        [
            "== reply ",
            "from local/review@gpu · to ",
            "\ngpu has read: Review the retry change in client.py\n",
            " REPLIED\n",
            "dispatcher for team stopped",
        ],
    ),
    # docs/relay.md: a loopback nats-server and two state roots as two machines; a live send, then the bus's wake
    "mkdir -p /tmp/xt-relay && cd /tmp/xt-relay": (
        [],
        [
            "joined nats://127.0.0.1:14222 as 'gpu'",
            "→ alice@laptop",
            '"text": "the build on gpu is green"',
            "alice@laptop  -",
            "== reply ",
            "relay_wake machines=laptop",
            "left nats://127.0.0.1:14222",
        ],
    ),
}
DOCS = ("README.md", "docs/recipes.md", "docs/claude.md", "docs/codex.md", "docs/pi.md", "docs/qwen.md",
        "docs/gemini.md", "docs/opencode.md", "docs/cli.md", "docs/bus.md", "docs/relay.md")  # fmt: skip


def readme_blocks() -> list[str]:
    out = []
    for doc in DOCS:
        text = (REPO / doc).read_text()
        out += [m.group(1) for m in re.finditer(r"^```bash\n(.*?)^```", text, re.M | re.S)]
    return out


def _first_line(block: str) -> str:
    first = block.splitlines()[0]
    if first.startswith("#"):
        return first
    first = first.split("  #")[0].strip()
    return next((k for k in BLOCKS if first.startswith(k) and k != first), first) if first not in BLOCKS else first


@pytest.fixture
def scratch() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="xt-readme"))
    try:
        (base / "home").mkdir()
        yield base
    finally:
        _stop_everything(base)
        shutil.rmtree(base, ignore_errors=True)


def _env(scratch: Path) -> dict[str, str]:
    drop = ("CROSSTALK_HOME", "XDG_STATE_HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "QWEN_HOME", "PI_CODING_AGENT_DIR")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("GIT_")}
    path = f"{BIN}{os.pathsep}{env.get('PATH', os.defpath)}"
    return {**env, "HOME": str(scratch / "home"), "PATH": path, "TMPDIR": str(scratch)}


def _stop_everything(scratch: Path) -> None:
    """Whatever a block started and left running (an agent, a dispatcher), by the pids crosstalk recorded."""
    env = _env(scratch)
    listed = subprocess.run([str(BIN / "crosstalk"), "list", "--json"], env=env, capture_output=True, text=True,
                            timeout=30, check=False)  # fmt: skip
    pids = [d["pid"] for d in json.loads(listed.stdout or "[]")] if listed.returncode == 0 else []
    for pidfile in scratch.rglob("dispatcher.pid"):
        pids.append(int(pidfile.read_text().strip() or 0))
    for pid in pids:
        if pid > 0 and pid_alive(pid):
            os.kill(pid, signal.SIGTERM)
            wait_for(lambda p=pid: not pid_alive(p), 20, f"process {pid} stopped")


def test_every_block_is_classified() -> None:
    firsts = [_first_line(b) for b in readme_blocks()]
    assert sorted(firsts) == sorted(BLOCKS), "a README block changed or is new: classify it in BLOCKS"


def test_the_clean_up_stops_a_dispatcher_under_a_second_state_root(scratch: Path) -> None:
    """A block that plays two machines (docs/bus.md) starts a dispatcher under a state root of its own: when the
    block fails before it stops it, _stop_everything finds it by its dispatcher.pid all the same."""
    env = {**_env(scratch), "CROSSTALK_HOME": str(scratch / "gpu" / ".crosstalk")}
    for args in (["transport", "init", "team", "--dir", str(scratch / "gpu" / "team")], ["server", "start", "--json"]):
        res = subprocess.run([str(BIN / "crosstalk"), *args], env=env, cwd=scratch, capture_output=True, text=True,
                             timeout=60, check=False)  # fmt: skip
        assert res.returncode == 0, res.stderr
    pid = json.loads(res.stdout)["pid"]
    assert pid_alive(pid)
    _stop_everything(scratch)
    assert not pid_alive(pid)


RUN = [f for f in BLOCKS if not any(f.startswith(p) for p in NOT_RUN) or "&&" in f]


@pytest.mark.parametrize("first", RUN)
def test_a_readme_block_works_as_typed(scratch: Path, first: str) -> None:
    [block] = [b for b in readme_blocks() if _first_line(b) == first]
    setup, shows = BLOCKS[first]
    env = _env(scratch)
    for args in setup:
        res = subprocess.run([str(BIN / "crosstalk"), *args], env=env, cwd=scratch, capture_output=True, text=True,
                             timeout=120, check=False)  # fmt: skip
        assert res.returncode == 0, res.stderr
    lines = []
    for line in block.replace("/tmp/", f"{scratch}/").splitlines():
        skipped = next((p for p in NOT_RUN if line.startswith(p)), None)
        if skipped and "&&" in line:
            line = line.split("&&", 1)[1].strip()  # `dev.sh demo && source .venv/bin/activate`: the activation runs
        elif skipped:
            continue
        lines.append(line)
    script = "set -euo pipefail\n" + "\n".join(lines) + "\n"
    cwd = REPO if "source .venv/bin/activate" in block else scratch
    res = subprocess.run(["bash", "-c", script], env=env, cwd=cwd, capture_output=True, text=True,
                         timeout=BLOCK_TIMEOUT_S, check=False)  # fmt: skip
    assert res.returncode == 0, f"{script}\n--- stdout\n{res.stdout}\n--- stderr\n{res.stderr}"
    for needle in shows:
        assert needle in res.stdout, f"{needle!r} not in:\n{res.stdout}\n--- stderr\n{res.stderr}"
