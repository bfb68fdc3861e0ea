"""The demo with the real harnesses: live Claude Code, Codex and pi sessions (and Qwen Code, OpenCode and Gemini CLI
when their CLIs are found), crosstalk installed into each one's own HOME the way a user does, every model a scripted
model server on 127.0.0.1 (crosstalk.demo.models: the model's part is scripted on the server, so nothing leaves the
machine and no account is needed).

The demo's own agent sends one message into each session, then the Codex session's model asks the Claude Code
session's model a question with crosstalk's `ask` tool, Claude's model answers with `reply`, and the answer lands in
the Codex thread. What each model read is taken from its server's request log, and the summary counts those tables.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from crosstalk.demo.claude_session import ClaudeSession
from crosstalk.demo.codex_session import CodexSession
from crosstalk.demo.gemini_session import GeminiSession
from crosstalk.demo.harnesses import Harnesses, session_env, version
from crosstalk.demo.models import RecordedRequest, ScriptedModelServer
from crosstalk.demo.orchestrator import NAME as ORCHESTRATOR
from crosstalk.demo.orchestrator import Orchestrator
from crosstalk.demo.procs import Procs

WAIT_S = 90.0
PI_HANDLE = "pi-docs"
WHO = "Who else is on this machine?"
ASK = "Which branch should the 1.4 release be cut from?"
ANSWER = "From release-1.4: main still has the unreviewed retry change."
ASKING = "Ask the Claude Code session which branch the release is cut from."
# Typed into Gemini CLI's TUI: no "?" (typed with the rest, it can open the TUI's shortcuts panel instead).
WHO_TYPED = "Who else is on this machine."
NEXT = "Tell me what is new."  # the prompt the demo types into the Gemini CLI session as its user
API = {"claude": "Anthropic Messages API", "codex": "OpenAI Responses API", "pi": "Chat Completions API",
       "qwen": "Chat Completions API", "opencode": "Chat Completions API", "gemini": "Gemini API"}  # fmt: skip
TITLE = {"claude": "Claude Code", "codex": "Codex", "pi": "pi", "qwen": "Qwen Code", "opencode": "OpenCode",
         "gemini": "Gemini CLI"}  # fmt: skip
ORDER = ("claude", "codex", "pi", "qwen", "opencode", "gemini")
TEXTS = {
    "claude": "Heads-up from the demo: the build of main is green again.",
    "codex": "Heads-up from the demo: test_login is flaky on CI.",
    "pi": "Heads-up from the demo: the changelog needs a 1.4 entry.",
    "qwen": "Heads-up from the demo: the docs site deploy is paused.",
    "opencode": "Heads-up from the demo: the staging database is read-only today.",
    "gemini": "Heads-up from the demo: the 1.4 branch is frozen at noon.",
}


class Session(Protocol):
    harness: str
    tool_prefix: str
    side_requests: bool  # its harness also asks its model things of its own (without tools): not counted
    model: ScriptedModelServer
    pid: int
    root: Path

    def say(self, text: str) -> None: ...
    def alive(self) -> bool: ...
    def tool_result(self, req: RecordedRequest, tool: str) -> dict[str, Any] | None: ...
    def close(self, procs: Procs) -> None: ...
    def tail(self) -> str: ...
    def exited(self) -> RuntimeError: ...


@dataclass
class Sent:
    sender: str
    to: str
    harness: str  # the receiving session's
    kind: str
    text: str
    state: str
    reason: str | None = None
    seen: int = 0  # how many times the receiving model's newest request carries the text (1: landed once)


@dataclass
class RealDemo:
    harnesses: Harnesses
    out: Callable[[str], None]
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="xtdemo.", dir="/tmp")))
    sessions: dict[str, Session] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    sent: list[Sent] = field(default_factory=list)
    width: int = 12  # of the name columns, once the names are known

    def __post_init__(self) -> None:
        self.state = self.root / "state"
        self.state.mkdir()
        self.procs = Procs(f"CROSSTALK_HOME={self.state}")
        self.orchestrator = Orchestrator(self.state)

    # ------------------------------------------------------------------ starting
    def start(self) -> None:
        from crosstalk.demo.pi_session import PiSession

        scratch = session_env(self.root / "versions", self.harnesses, self.state)
        versions = {h: version(exe, scratch) for h, exe in self.harnesses.bins.items()}
        names = [f"{TITLE[h]} {versions[h]}" for h in ORDER if h in versions]
        self.out(
            f"crosstalk demo: real {', '.join(names[:-1])} and {names[-1]}"
            f" sessions (found {self.harnesses.where}), in a temporary dir {self.root}"
        )
        self.out("  their models are scripted model servers on 127.0.0.1 (the demo scripts each model's part)\n")
        self.sessions["pi"] = PiSession(self.root / "pi", self.harnesses, self.state, self.procs, PI_HANDLE)
        self.sessions["claude"] = ClaudeSession(self.root / "claude", self.harnesses, self.state, self.procs)
        self.sessions["codex"] = codex = CodexSession(self.root / "codex", self.harnesses, self.state, self.procs)
        if "qwen" in self.harnesses.bins:  # its first prompt (on its command line) registers it
            from crosstalk.demo.qwen_session import QwenSession

            qwen = QwenSession(self.root / "qwen", self.harnesses, self.state, self.procs, WHO)
            self.sessions["qwen"] = qwen
        if "opencode" in self.harnesses.bins:  # its first prompt (over its HTTP API) registers it
            from crosstalk.demo.opencode_session import OpenCodeSession

            self.sessions["opencode"] = OpenCodeSession(self.root / "oc", self.harnesses, self.state, self.procs, WHO)
        if "gemini" in self.harnesses.bins:  # its first prompt (typed into its TUI) registers it
            gemini = GeminiSession(self.root / "gm", self.harnesses, self.state, self.procs, WHO_TYPED)
            self.sessions["gemini"] = gemini
        self.orchestrator.start(self.root)
        claude = self.sessions["claude"]
        claude.model.scripts_by[WHO] = f"CALL {claude.tool_prefix}list_agents {{}}"
        codex.model.scripts_by[WHO] = f"CALL {codex.tool_prefix}list_agents {{}}"
        reply = json.dumps({"message_id": "$MESSAGE_ID", "text": ANSWER})
        claude.model.scripts_by[ASK] = f"CALL {claude.tool_prefix}reply {reply}"
        claude.say(WHO)  # its crosstalk agent registers with the session's first tool call
        codex.connect(WAIT_S)
        codex.say(WHO)
        for harness in self.sessions:
            self.names[harness] = self.agent_name(harness)
        self.width = max(len(n) for n in [*self.names.values(), ORCHESTRATOR])
        for harness, session in self.sessions.items():
            self.out(
                f"  {TITLE[harness]:<11} pid {session.pid:<7} agent {self.names[harness]:<{self.width}}  its model: "
                f"scripted model server on 127.0.0.1:{session.model.port} ({API[harness]}) — no outside service"
            )
        self.out(f"  {'this demo':<11} {'':<11} agent {ORCHESTRATOR:<{self.width}}  (hosted in this process)")

    def agent_name(self, harness: str) -> str:
        from crosstalk.registry.discovery import list_descriptors
        from crosstalk.registry.paths import StatePaths

        session = self.sessions[harness]
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and session.alive():
            for d in list_descriptors(StatePaths(self.state)):
                if d.harness == harness and (harness != "pi" or d.name == PI_HANDLE):
                    return d.name
            time.sleep(0.05)
        if not session.alive():
            raise session.exited()
        raise RuntimeError(f"the {TITLE[harness]} session registered no crosstalk agent\n{session.tail()}")

    # ------------------------------------------------------------------ messages
    def send_into_each(self) -> None:
        self.out("\nA message into each session (sender → receiver, kind, state):")
        gemini = self.sessions.get("gemini")
        if isinstance(gemini, GeminiSession):
            gemini.wait_idle()  # its first turn is over: the session is idle
        for harness in self.sessions:
            text = TEXTS[harness]
            msg = self.orchestrator.message(self.names[harness], text)
            outcome = self.orchestrator.send(msg)
            self.record(Sent(ORCHESTRATOR, self.names[harness], harness, "inform", text, outcome.state.value,
                             outcome.reason))  # fmt: skip
        for row in self.sent:
            if row.harness == "gemini" and row.state == "queued":
                self.out(
                    f"  {TITLE['gemini']}: queued, its model reads it with its user's next prompt (nothing can start"
                    f" a turn in an idle Gemini CLI session); the demo, as its user, types {NEXT!r}"
                )
                self.sessions["gemini"].say(NEXT)
            self.landed(row)
        self.wait_idle("codex")

    def ask_across(self) -> None:
        claude, codex = self.sessions["claude"], self.sessions["codex"]
        self.out(
            "\nAn ask across harnesses (Codex's model calls crosstalk's ask tool; Claude's model answers with reply):"
        )
        ask = json.dumps({"to": self.names["claude"], "text": ASK, "deadline_seconds": int(WAIT_S)})
        codex.model.scripts_by[ASKING] = f"CALL {codex.tool_prefix}ask {ask}"
        n = len(codex.model.model_requests())
        self.out(f"  {'you':<{self.width}} → {'the Codex thread':<{self.width}}  a turn: {ASKING!r}")
        codex.say(ASKING)
        asked = self.tool_result(codex, "ask", n)
        self.record(Sent(self.names["codex"], self.names["claude"], "claude", "ask", ASK, str(asked.get("state"))))
        self.landed(self.sent[-1])
        replied = self.tool_result(claude, "reply", 0)
        self.record(Sent(self.names["claude"], self.names["codex"], "codex", "reply", ANSWER, str(replied["state"])))
        ask_id = str(asked.get("message_id"))
        self.wait_read(codex, lambda r: ANSWER in r.raw and ask_id in r.raw, "the answer", after=n)
        self.landed(self.sent[-1])
        self.out(f"  the Codex thread's model read the answer, naming ask {ask_id}: {ANSWER!r}")

    def record(self, row: Sent) -> None:
        self.sent.append(row)
        self.out(f"  {row.sender:<{self.width}} → {row.to:<{self.width}}  {row.kind:<7} {row.state:<9} {row.text!r}")
        if row.state == "queued" and row.reason:
            self.out(f"      ({row.reason})")

    def landed(self, row: Sent) -> None:
        """Wait until the receiving model read the text; count it in that model's newest request (of the session's
        own turns: Qwen's, OpenCode's and Gemini's also ask their model things of their own, without tools, which are
        not counted)."""
        session = self.sessions[row.harness]
        own = not session.side_requests
        self.wait_read(session, lambda r: row.text in r.raw and (own or bool(r.body.get("tools"))), repr(row.text))
        newest = [r for r in session.model.model_requests() if own or r.body.get("tools")][-1]
        row.seen = newest.raw.count(json.dumps(row.text)[1:-1])

    def wait_read(self, session: Session, found: Callable[[RecordedRequest], bool], what: str, after: int = 0) -> None:
        """Until a request of the session's model (from index `after` on) satisfies `found`."""
        try:
            session.model.wait_request(found, after=after, timeout=WAIT_S, alive=session.alive)
        except AssertionError:
            if not session.alive():
                raise session.exited() from None
            raise RuntimeError(f"{TITLE[session.harness]}'s model never read {what}\n{session.tail()}") from None

    def tool_result(self, session: Session, tool: str, after: int) -> dict[str, Any]:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and session.alive():
            for req in reversed(session.model.model_requests()[after:]):
                found = session.tool_result(req, tool)
                if found is not None:
                    return found
            time.sleep(0.05)
        if not session.alive():
            raise session.exited()
        raise RuntimeError(f"no result of {tool} reached {TITLE[session.harness]}'s model\n{session.tail()}")

    def wait_idle(self, harness: str) -> None:
        """Until the Codex thread's running turn is over (turn/start is for an idle thread)."""
        codex = self.sessions[harness]
        assert isinstance(codex, CodexSession)
        deadline = time.monotonic() + WAIT_S
        while codex.request("thread/read", {"threadId": codex.thread})["thread"]["status"]["type"] != "idle":
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Codex thread stayed busy\n{codex.tail()}")
            time.sleep(0.1)

    # ------------------------------------------------------------------ showing
    def show(self) -> int:
        self.out("\nWhat each session's model read (from its scripted model server's request log):")
        for harness in self.sessions:
            rows = [r for r in self.sent if r.harness == harness]
            landed = [r for r in rows if r.seen]
            self.out(f"  {TITLE[harness]:<11} {self.names[harness]:<{self.width}}  {len(landed)} message(s)")
            for r in rows:
                seen = {0: "never read", 1: "read once"}.get(r.seen, f"read {r.seen} times")
                self.out(f"      {r.kind:<7} from {r.sender:<{self.width}}  {seen}")
        self.show_read()
        total = sum(1 for r in self.sent if r.seen)
        twice = sum(1 for r in self.sent if r.seen > 1)  # the table's "read N times"
        answered = sum(1 for r in self.sent if r.kind == "reply" and r.seen)
        again = "none twice" if twice == 0 else f"{twice} more than once"
        self.out(
            f"\n{len(self.sent)} messages sent, {total} read by the receiving session's model ({again});"
            f" {answered} ask answered across harnesses."
        )
        return 0 if total == len(self.sent) and not twice and answered else 1

    def show_read(self) -> None:
        """Each session's first message, as the newest user input of its model's request (the envelope, if any)."""
        self.out("\nThe message into each session, as its model read it:")
        for harness, session in self.sessions.items():
            row = next(r for r in self.sent if r.harness == harness)
            own = not session.side_requests
            req = next(r for r in session.model.model_requests() if row.text in r.raw and (own or r.body.get("tools")))
            lines = session.model.newest_user_text(req.body).splitlines()
            at = next((k for k, line in enumerate(lines) if row.text in line), None)
            if at is None:
                continue
            start = at
            while start > 0 and lines[start - 1].lstrip().startswith("[crosstalk "):  # crosstalk's header (Qwen)
                start -= 1
            opened = start > 0 and lines[start - 1].lstrip().startswith("<")  # an envelope: its open and close tags
            block = lines[start - 1 : at + 2] if opened else lines[start : at + 1]
            self.out(f"  {TITLE[harness]}:")
            for line in block:
                self.out(f"    {line}")

    # ------------------------------------------------------------------ cleanup
    def close(self) -> None:
        pids = sorted(p.pid for p in self.procs.started)
        for session in reversed(list(self.sessions.values())):
            session.close(self.procs)
        self.orchestrator.close()
        strays = self.procs.close()
        left = [p for p in (*pids, *strays) if Path(f"/proc/{p}").exists()]
        extra = f", {len(strays)} more found by their state root ({', '.join(map(str, strays))})" if strays else ""
        self.out(f"stopped the sessions (pids {', '.join(map(str, pids))}){extra}; {len(left)} left running")


def run_real(harnesses: Harnesses, out: Callable[[str], None]) -> int:
    import shutil

    demo = RealDemo(harnesses, out)
    try:
        demo.start()
        demo.send_into_each()
        demo.ask_across()
        return demo.show()
    finally:
        demo.close()
        shutil.rmtree(demo.root, ignore_errors=True)
        out(f"cleaned up {demo.root}")
