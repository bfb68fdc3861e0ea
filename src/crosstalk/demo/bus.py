"""The bus half of `crosstalk demo`: two machines (two state roots with their own aliases) on one git transport whose
remote is a bare repository in a temp dir, each running the real dispatcher. Everything goes through the real
`crosstalk` command, the way an operator would type it:

    laptop: transport init --remote  →  server: transport clone  →  a script model claimed on the server
    laptop: message send --to demo/reviewer@server  →  the server's dispatcher runs it and replies (re: linked)
    server: message send --to alice@laptop  →  the laptop's dispatcher delivers it into alice's live session

The model is a small Python script written into the temp dir (a stand-in for `claude -p`, `codex exec` or `pi -p`,
which the e2e tests run for real against mock model servers): it needs no network and no account.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

CLI_TIMEOUT_S = 60.0
REPLY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0

REVIEWER = """#!{python}
# A demo model: reads the dispatch prompt (the last argument, or stdin above 64 KiB) and answers each message.
import re, sys
prompt = sys.argv[-1] if len(sys.argv) > 1 else sys.stdin.read()
heads = re.findall(r"^--- Message (\\d+) of (\\d+) \\(from: (.*?), ref: .*?\\) ---\\n(.*)$", prompt, re.M)
for k, n, sender, first_line in heads:
    print(f"[{{k}}/{{n}}] {{sender}} asked: {{first_line.strip()!r}} -> looks good, ship it")
"""


class BusDemo:
    def __init__(self, out: Callable[[str], None] = print) -> None:
        self.out = out
        self.tmp = Path(tempfile.mkdtemp(prefix="xtbus.", dir="/tmp"))
        self.remote = self.tmp / "hub.git"
        self.daemons: list[subprocess.Popen[bytes]] = []
        self.agents: list[subprocess.Popen[bytes]] = []

    def env(self, machine: str) -> dict[str, str]:
        home = self.tmp / machine
        return {
            **{k: v for k, v in os.environ.items() if not k.startswith(("CROSSTALK_", "GIT_"))},
            "CROSSTALK_HOME": str(home / "state"),
            "CROSSTALK_ALIAS": machine,
            "USER": f"op-{machine}",
        }

    def cli(self, machine: str, *args: str, cwd: Path | None = None) -> str:
        res = subprocess.run(
            [sys.executable, "-m", "crosstalk", *args],
            env=self.env(machine),
            cwd=cwd or self.tmp / machine / "team",
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
        pending = res.returncode == 1 and args[:2] == ("message", "replies") and res.stdout.startswith("[")
        if res.returncode != 0 and not pending:  # `message replies` exits 1 while a message is PENDING
            raise RuntimeError(f"crosstalk {' '.join(args)} ({machine}): {res.stderr.strip()}")
        return res.stdout

    def git(self, machine: str, *args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.name=demo", "-c", "user.email=demo@crosstalk.invalid", *args],
            cwd=self.tmp / machine / "team",
            env=self.env(machine),
            check=True,
            capture_output=True,
            timeout=CLI_TIMEOUT_S,
        )

    def start_daemon(self, machine: str) -> None:
        log = open(self.tmp / f"{machine}.dispatcher.out", "ab")  # noqa: SIM115 - the child keeps it
        proc = subprocess.Popen(
            [sys.executable, "-m", "crosstalk", "daemon", "dispatch", "--interval", "0.5"],
            cwd=self.tmp / machine / "team",
            env=self.env(machine),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.daemons.append(proc)

    def start_alice(self) -> Path:
        inbox = self.tmp / "alice.inbox.jsonl"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "crosstalk",
                "agent",
                "run",
                "--harness",
                "fake",
                "--name",
                "alice",
                "--inbox",
                str(inbox),
                "--no-a2a",
                "--json",
            ],
            env=self.env("laptop"),
            cwd=self.tmp,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.agents.append(proc)
        assert proc.stdout is not None
        proc.stdout.readline()  # the ready line: alice is registered and listening
        return inbox

    def wait_reply(self, machine: str, path: str) -> list[dict[str, object]]:
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        while time.monotonic() < deadline:
            rows = json.loads(self.cli(machine, "message", "replies", path, "--pull", "--json"))
            if all(r["state"] != "PENDING" for r in rows):
                return rows
            time.sleep(0.2)
        raise RuntimeError(f"no reply to {path} within {REPLY_TIMEOUT_S:g} s")

    def show_file(self, machine: str, rel: str) -> None:
        for line in (self.tmp / machine / "team" / rel).read_text().splitlines():
            self.out(f"      {line}")

    def close(self) -> None:
        for proc in self.daemons + self.agents:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        for proc in self.daemons + self.agents:
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_TIMEOUT_S)
            if proc.stdout:
                proc.stdout.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def run_bus_demo(out: Callable[[str], None] = print) -> int:
    demo = BusDemo(out)
    try:
        out(f"\nThe git bus: machines 'laptop' and 'server' share a transport whose remote is {demo.remote}")
        subprocess.run(
            ["git", "init", "-q", "--bare", "--initial-branch=main", str(demo.remote)],
            check=True,
            capture_output=True,
            timeout=CLI_TIMEOUT_S,
        )
        for machine in ("laptop", "server"):
            (demo.tmp / machine).mkdir()
        demo.cli(
            "laptop",
            "transport",
            "init",
            "team",
            "--dir",
            str(demo.tmp / "laptop" / "team"),
            "--remote",
            str(demo.remote),
            cwd=demo.tmp,
        )
        demo.cli(
            "server",
            "transport",
            "clone",
            str(demo.remote),
            "--dir",
            str(demo.tmp / "server" / "team"),
            "--name",
            "team",
            cwd=demo.tmp,
        )
        model = demo.tmp / "reviewer"
        model.write_text(REVIEWER.format(python=sys.executable))
        model.chmod(0o755)
        (demo.tmp / "server" / "team" / "data" / "crosstalk.yaml").write_text(
            f"providers:\n  demo:\n    models:\n      reviewer: {model}\n"
        )
        demo.git("server", "commit", "-qam", "registry: the demo reviewer")
        demo.git("server", "push", "-q", "origin", "main")
        demo.cli("laptop", "channel", "create", "review")
        out("  laptop: transport init --remote; server: transport clone; the server claims demo/reviewer")
        for machine in ("laptop", "server"):
            demo.start_daemon(machine)

        out("\n  laptop → demo/reviewer@server (two messages; the dispatcher batches what is waiting):")
        paths = [
            demo.cli("laptop", "message", "send", "--to", "demo/reviewer@server", text).strip()
            for text in ("Please review PR #12 (retry with backoff)", "And PR #13 (timeout default 30 s)")
        ]
        for path in paths:
            rows = demo.wait_reply("laptop", path)
            out(f"    {path.split('/')[-1]}: {rows[0]['state']}")
        replies = rows[0]["replies"]
        assert isinstance(replies, list) and replies
        out("    the reply, as committed by the server's dispatcher:")
        demo.show_file("laptop", str(replies[0]["path"]))

        out("\n  server → alice@laptop (alice is a live agent on the laptop, not a model):")
        inbox = demo.start_alice()
        demo.cli("server", "channel", "create", "ops")
        text = "deploy window opens at 14:00"
        demo.cli("server", "message", "send", "--to", "alice@laptop", "--channel", "ops", text)
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        while not (inbox.exists() and inbox.read_text().strip()):
            if time.monotonic() > deadline:
                raise RuntimeError("alice never received the bus message")
            time.sleep(0.1)
        seen = json.loads(inbox.read_text().splitlines()[0])
        out(f"    alice's session got it live: from {seen['from']}: {seen['text']!r}")
        out("    (her `reply` tool would write a channel message re: it, back to op-server)")
        return 0
    finally:
        demo.close()
        out(f"cleaned up {demo.tmp}")
