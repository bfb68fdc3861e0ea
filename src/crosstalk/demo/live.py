"""The demo without the harness CLIs: real agents in a temporary state root exchanging messages through real sockets.

Three fake-harness agents run as `crosstalk agent run` subprocesses; the demo itself hosts a fourth agent
("orchestrator") in-process so its sends are verified by SO_PEERCRED. Every delivery is printed with its state,
then a receiver is killed with SIGKILL and restarted to show that acknowledged messages survive and are never
injected twice. Everything is removed at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crosstalk.core.message import Message, new_message
from crosstalk.core.states import DELIVERED_STATES, Outcome
from crosstalk.demo.orchestrator import Orchestrator

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0


@dataclass
class DemoAgent:
    name: str
    proc: subprocess.Popen[bytes]
    agent_id: str
    inbox: Path


class Demo:
    def __init__(self, out: Callable[[str], None] = print) -> None:
        self.out = out
        self.root = Path(tempfile.mkdtemp(prefix="xtdemo.", dir="/tmp"))
        self.env = {**os.environ, "CROSSTALK_HOME": str(self.root)}
        self.agents: dict[str, DemoAgent] = {}
        self.orchestrator = Orchestrator(self.root)
        self.tally: Counter[str] = Counter()  # each line of the deliveries table, by what became of it

    # -------------------------------------------------------------- agents
    def start_agent(self, name: str, *extra: str) -> DemoAgent:
        inbox = self.root / f"{name}.inbox.jsonl"
        cmd = [
            sys.executable,
            "-m",
            "crosstalk",
            "agent",
            "run",
            "--harness",
            "fake",
            "--name",
            name,
            "--inbox",
            str(inbox),
            "--json",
            *extra,
        ]
        proc = subprocess.Popen(cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self.root)
        ready = _read_ready(proc, START_TIMEOUT_S)
        agent = DemoAgent(name, proc, ready["agent_id"], inbox)
        self.agents[name] = agent
        replay = ready.get("replay") or {}
        again = f", replayed {replay.get('records', 0)} journal records" if replay.get("records") else ""
        self.out(f"  started {name:<12} agent_id {agent.agent_id}  pid {proc.pid}{again}")
        return agent

    def kill_agent(self, name: str) -> None:
        agent = self.agents.pop(name)
        agent.proc.kill()
        agent.proc.wait(STOP_TIMEOUT_S)
        self.out(f"  killed  {name:<12} with SIGKILL (no clean shutdown)")

    def start_orchestrator(self) -> None:
        """Host an agent in this process, so messages it sends are verified by the socket, not by a claim."""
        agent_id = self.orchestrator.start(self.root)
        self.out(f"  started {'orchestrator':<12} agent_id {agent_id}  (in this process)")

    # -------------------------------------------------------------- sending
    def send(
        self,
        to: str,
        text: str,
        *,
        from_: str = "orchestrator",
        kind: str = "inform",
        delivery: str = "auto",
        message_id: str | None = None,
        note: str = "",
    ) -> Outcome | None:
        from crosstalk.core.errors import CrosstalkError

        msg = new_message(to, text, from_=from_, kind=kind, delivery=delivery, message_id=message_id)
        try:
            outcome = self.orchestrator.send(msg)
        except CrosstalkError as exc:
            self._line(msg, from_, "unreachable", str(exc), note)
            self.tally["unreachable"] += 1
            return None
        duplicate = bool(outcome.evidence.get("duplicate"))
        reason = ", ".join(x for x in (outcome.reason, "duplicate" if duplicate else None) if x) or None
        self._line(msg, from_, outcome.state.value, reason, note)
        self.count(outcome.state.value, kind, duplicate)
        return outcome

    def count(self, state: str, kind: str, duplicate: bool = False) -> None:
        """Tally one line of the deliveries table: "delivered" is what a session's inbox shows."""
        if duplicate:
            self.tally["duplicate"] += 1
        elif kind == "ping" and state == "accepted":
            self.tally["ping"] += 1  # answered by the agent (pong), never shown to the session
        elif state in DELIVERED_STATES or state == "completed":
            self.tally["delivered"] += 1
        else:
            self.tally[state] += 1

    def send_cli(self, to: str, text: str, *args: str) -> int:
        """Send with the real `crosstalk send` command, as a shell script or CI hook would."""
        answer, code = self._cli("send", to, text, "--json", *args)
        sender, kind = _option(args, "--from", "@cli"), _option(args, "--kind", "inform")
        self.out(
            f"  {sender:<14} → {to:<12} {kind:<7} {answer.get('state', '?'):<11}"
            f"{_reason(answer.get('reason'))} {_quote(text)}   [crosstalk send, exit {code}]"
        )
        self.count(str(answer.get("state")), kind)
        return code

    def send_a2a_cli(self, as_agent: str, to: str, text: str, *args: str) -> int:
        """Send over A2A with `crosstalk send --a2a --as AGENT`: the sender's own bearer token proves who it is,
        and the receiver answers with a task (for an ask: completed with the reply)."""
        answer, code = self._cli("send", "--a2a", "--as", as_agent, to, text, "--json", *args)
        kind = _option(args, "--kind", "inform")
        detail = answer.get("completion") or answer.get("reason") or answer.get("delivery")
        self.out(
            f"  {as_agent:<14} ⇒ {to:<12} {kind:<7} task {answer.get('state', '?'):<9}{_reason(detail)} "
            f"{_quote(text)}   [A2A, exit {code}]"
        )
        if answer.get("reply"):
            self.out(f"  {'':<14}   reply from {to}: {_quote(answer['reply'])}")
        self.count(str(answer.get("state")), kind)
        return code

    def _cli(self, *argv: str) -> tuple[dict[str, Any], int]:
        """Run `crosstalk ARGV` (with --json): its first stdout line as JSON, else its error, and its exit code."""
        res = subprocess.run(
            [sys.executable, "-m", "crosstalk", *argv], env=self.env, capture_output=True, timeout=60, check=False
        )
        try:
            answer = json.loads(res.stdout.decode().strip().splitlines()[0])
        except (ValueError, IndexError):
            answer = {"state": "error", "reason": res.stderr.decode().strip()}
        return answer, res.returncode

    def _line(self, msg: Message, sender: str, state: str, reason: str | None, note: str) -> None:
        self.out(
            f"  {sender:<14} → {msg.to:<12} {msg.kind.value:<7} {state:<11}{_reason(reason)} "
            f"{_quote(msg.text)}{('   ' + note) if note else ''}"
        )

    # -------------------------------------------------------------- showing
    def show_inboxes(self) -> tuple[int, int]:
        """The inbox table; the messages it shows and how many of them were injected twice."""
        self.out("\nWhat each session saw (one line per injection, from the fake harness's inbox file):")
        shown = twice = 0
        for name in ("alice", "bob", "carol", "dana"):
            path = self.root / f"{name}.inbox.jsonl"
            text = path.read_text() if path.exists() else ""
            lines = [json.loads(x) for x in text.splitlines() if x.strip()]
            ids = [x["message_id"] for x in lines]
            dup = len(ids) - len(set(ids))
            shown, twice = shown + len(lines), twice + dup
            self.out(f"  {name:<12} {len(lines)} message(s), {dup} injected twice")
        first = next((p for p in sorted(self.root.glob("alice.inbox.jsonl"))), None)
        if first and first.read_text().strip():
            rendered = json.loads(first.read_text().splitlines()[0])["rendered"]
            self.out("\nThe first message as alice's model sees it:")
            for ln in rendered.splitlines():
                self.out(f"    {ln}")
        return shown, twice

    def summary(self, shown: int, twice: int) -> str:
        """One line, every number a count of the tables above: the deliveries table's lines by what became of
        them (their sum is its length), and "delivered" beside what the inbox table shows."""
        parts = [f"{self.tally['delivered']} delivered into a session (the inbox table shows {shown})"]
        words = {"ping": "ping answered with a pong (never shown to a session)",
                 "duplicate": "duplicates answered from the journal (not injected again)"}  # fmt: skip
        parts += [f"{n} {words.get(what, what)}" for what, n in sorted(self.tally.items()) if what != "delivered"]
        again = "none twice" if twice == 0 else f"{twice} injected twice"
        return f"{sum(self.tally.values())} sends: {', '.join(parts)}; {again}."

    # -------------------------------------------------------------- cleanup
    def close(self) -> None:
        for agent in list(self.agents.values()):
            with contextlib.suppress(ProcessLookupError):
                agent.proc.send_signal(signal.SIGTERM)
        for agent in list(self.agents.values()):
            try:
                agent.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                agent.proc.kill()
                agent.proc.wait(STOP_TIMEOUT_S)
            for stream in (agent.proc.stdout, agent.proc.stderr):
                if stream:
                    stream.close()
        self.agents.clear()
        self.orchestrator.close()
        shutil.rmtree(self.root, ignore_errors=True)


def read_line(proc: subprocess.Popen[bytes], timeout: float, buf: bytearray | None = None) -> bytes | None:
    """One line from proc.stdout within timeout, never blocking past it; None on EOF or timeout. Bytes read past
    the line stay in `buf` for the next call. (How a caller reads a started `crosstalk` process's ready line.)"""
    assert proc.stdout is not None
    buf = bytearray() if buf is None else buf
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([proc.stdout], [], [], min(left, 0.1))
        if not ready:
            continue
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            return None
        buf += chunk
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return line


def _read_ready(proc: subprocess.Popen[bytes], timeout: float) -> dict[str, Any]:
    line = read_line(proc, timeout)
    if line is not None:
        return json.loads(line)
    proc.kill()
    err = proc.stderr.read().decode() if proc.stderr else ""
    raise RuntimeError(f"agent did not start: {err.strip() or 'no ready line within the timeout'}")


def _option(args: tuple[str, ...], flag: str, default: str) -> str:
    """The value given to `flag` in a command line's arguments, or `default`."""
    return args[args.index(flag) + 1] if flag in args else default


def _reason(reason: str | None) -> str:
    return f" ({reason})" if reason else ""


def _quote(text: str) -> str:
    return repr(text if len(text) <= 48 else text[:45] + "...")


def run_fake_demo(out: Callable[[str], None] = print) -> int:
    demo = Demo(out)
    try:
        out(f"crosstalk demo: agents in a temporary state root {demo.root}\n")
        demo.start_agent("alice")
        demo.start_agent("bob", "--script", "accept,accept,queue")
        demo.start_agent("carol", "--role", "worker", "--parent", "alice")
        demo.start_orchestrator()

        out("\nDeliveries (sender → receiver, kind, state):")
        demo.send_cli("alice", "build 481 failed: test_login timed out", "--from", "@ci:build")
        first = demo.send("bob", "please review the retry change in client.py")
        demo.send("bob", "and check the timeout default while you are there")
        demo.send("bob", "FYI: main is frozen for the release", kind="meta", note="(bob's session was busy)")
        if first is not None:
            demo.send(
                "bob",
                "please review the retry change in client.py",
                message_id=first.message_id,
                note="(same message_id again: answered from the journal)",
            )
        demo.send("carol", "drop what you are doing", note="(carol is alice's worker)")
        demo.send_cli("carol", "nightly job finished", "--from", "@cron:nightly")
        demo.send("alice", "are you there?", kind="ping")

        out("\nCrash and restart:")
        demo.kill_agent("bob")
        demo.send("bob", "are you still there?", note="(bob is down)")
        demo.start_agent("bob")
        if first is not None:
            demo.send(
                "bob",
                "please review the retry change in client.py",
                message_id=first.message_id,
                note="(retry after the restart: still not injected twice)",
            )
        demo.send("bob", "welcome back")

        out("\nAgent to agent over A2A (the sender's bearer token names it; the answer is a task;")
        out("dana's fake session answers every ask with a scripted reply):")
        demo.start_agent("dana", "--answer", "LGTM: the retry is bounded and idempotent")
        demo.send_a2a_cli("alice", "dana", "your review of client.py is next in the queue")
        demo.send_a2a_cli("alice", "dana", "is the retry change safe to merge?", "--kind", "ask", "--deadline", "30")

        shown, twice = demo.show_inboxes()
        out(f"\n{demo.summary(shown, twice)}")
        return 0 if shown == demo.tally["delivered"] and not twice else 1
    finally:
        demo.close()
        out(f"cleaned up {demo.root}")
