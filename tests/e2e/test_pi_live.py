"""pi for real: the pinned pi 0.73.1 in RPC mode with the crosstalk pi extension (`crosstalk install pi`, enabled by
PI_CROSSTALK=1), a mock chat-completions server logging every request; messages from other pi sessions, the CLI,
Claude Code and Codex land in the session as tagged user turns, and the tests assert what the model saw."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.live_claude import CROSSTALK, sessions
from tests.support.live_codex import LiveCodex
from tests.support.live_pi import LivePi

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def root(live_root: Path, require: Callable[[str], Path]) -> Path:
    require("pi")
    return live_root


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(root), "CROSSTALK_HOME": str(root / "xt"), "USER": "tester"}
    return subprocess.run([str(CROSSTALK), *args], env=env, capture_output=True, text=True, timeout=60)


def positions(pi: LivePi, *needles: str) -> list[int]:
    """Where each needle first appears among the user messages of pi's newest model request that has them all."""
    for req in reversed(pi.requests()):
        texts = pi.user_texts(req)
        found = [next((i for i, t in enumerate(texts) if n in t), -1) for n in needles]
        if -1 not in found:
            return found
    raise AssertionError(f"no model request carried all of {needles}\n{pi.tail()}")


def back_to_back(root: Path, to: str, texts: list[str]) -> list[str]:
    """Send each text right after the previous one's answer, from this process over the agent's socket (a few
    ms apart: the second arrives while the first one's run is still starting, where pi's own calls lose it)."""
    from crosstalk.core.message import new_message
    from crosstalk.ingress.client import send
    from crosstalk.registry.paths import StatePaths

    paths = StatePaths(root / "xt")
    return [send(paths, new_message(to, t, from_="@cli:tester")).outcome.state.value for t in texts]


def test_three_back_to_back_messages_into_an_idle_session_all_reach_the_model_in_order(root: Path):
    with LivePi.start(root / "w", crosstalk_home=root / "xt", PI_CROSSTALK_HANDLE="idle-w") as pi:
        token = secrets.token_hex(4)
        needles = [f"m{i}-{token}" for i in range(3)]
        states = back_to_back(root, "idle-w", needles)
        assert states[0] == "accepted" and set(states) <= {"accepted", "queued"}, states
        for needle in needles:
            pi.wait_seen(needle)
        pi.idle()
        assert positions(pi, *needles) == sorted(positions(pi, *needles))
        texts = [t for t in pi.user_texts(pi.requests()[-1]) if token in t]
        assert texts == [f"[from @cli:tester] {n}" for n in needles], texts


def test_sequential_sends_keep_their_order(root: Path):
    with LivePi.start(root / "w", crosstalk_home=root / "xt", PI_CROSSTALK_HANDLE="ordered") as pi:
        token = secrets.token_hex(4)
        for i in range(3):
            assert cli(root, "send", "ordered", f"n{i}-{token}").returncode == 0
        needles = [f"n{i}-{token}" for i in range(3)]
        pi.wait_seen(needles[-1])
        pi.idle()
        assert positions(pi, *needles) == sorted(positions(pi, *needles))


def test_orchestrator_steers_a_worker_mid_turn_and_follows_up_after_it(root: Path):
    with (
        LivePi.start(root / "o", crosstalk_home=root / "xt", PI_CROSSTALK_HANDLE="orch",
                     PI_CROSSTALK_ROLE="orchestrator") as orch,
        LivePi.start(root / "w", crosstalk_home=root / "xt", PI_CROSSTALK_HANDLE="orch-w",
                     PI_CROSSTALK_ROLE="worker", PI_CROSSTALK_PARENT="orch") as worker,
    ):  # fmt: skip
        token = secrets.token_hex(4)
        n = len(worker.requests())
        worker.say("SLEEP 3\na slow task")
        worker.wait_event(lambda e: e.get("type") == "agent_start")
        worker.wait_seen("a slow task", after=n)  # the model is answering the slow request now
        orch.say(f"/crosstalk steer orch-w steer-{token}")
        orch.say(f"/crosstalk followup orch-w follow-{token}")
        seen_steer = worker.wait_seen(f"steer-{token}", after=n)
        seen_follow = worker.wait_seen(f"follow-{token}", after=n)
        assert f"[from parent:orch · steer] steer-{token}" in seen_steer.raw
        assert f"[from parent:orch · followUp] follow-{token}" in seen_follow.raw
        # the steer joined the running work; the follow-up came after it, in a request of its own or later
        assert worker.requests().index(seen_steer) <= worker.requests().index(seen_follow)
        sent = [m for m in orch.notices() if m.startswith("sent · ")]  # what each /crosstalk send told the user
        assert len(sent) == 2 and all(" · id " in m for m in sent), orch.notices()


def test_a_worker_refuses_the_ci_hook_until_allow_external(root: Path):
    with LivePi.start(
        root / "w", crosstalk_home=root / "xt", PI_CROSSTALK_HANDLE="wk", PI_CROSSTALK_ROLE="worker"
    ) as w:
        token = secrets.token_hex(4)
        denied = cli(root, "send", "wk", f"denied-{token}", "--from", "@ci:build")
        assert denied.returncode == 3 and "acl:external" in denied.stdout + denied.stderr, denied
        w.say("/crosstalk allow external")
        deadline = time.monotonic() + 20
        while not any("external" in m for m in w.notices()):
            assert time.monotonic() < deadline, w.tail()
            time.sleep(0.05)
        allowed = cli(root, "send", "wk", f"build 481 failed {token}", "--from", "@ci:build")
        assert allowed.returncode == 0, allowed
        seen = w.wait_seen(f"build 481 failed {token}")
        assert f"[from @ci:build] build 481 failed {token}" in seen.raw
        assert not any(f"denied-{token}" in r.raw for r in w.requests())


def test_meta_is_noted_in_the_transcript_and_never_starts_a_turn_and_a_ping_is_never_shown(root: Path):
    with LivePi.start(root / "p", crosstalk_home=root / "xt", PI_CROSSTALK_HANDLE="quiet") as pi:
        token = secrets.token_hex(4)
        n = len(pi.requests())
        sent = cli(root, "send", "quiet", f"fyi {token}", "--kind", "meta", "--json")
        assert sent.returncode == 0 and json.loads(sent.stdout)["state"] == "queued", sent
        ping = cli(root, "send", "quiet", "are you there", "--kind", "ping", "--json")
        assert ping.returncode == 0 and json.loads(ping.stdout)["state"] == "accepted", ping
        pi.say("what is new?")
        seen = pi.wait_seen("what is new?", after=n)
        assert "what is new?" in pi.requests()[n].raw, "the meta or the ping started a turn of its own"
        assert f"fyi {token}" in seen.raw and "[crosstalk meta from " in seen.raw
        assert "are you there" not in seen.raw  # a ping is never shown


def test_pi_and_claude_code_talk_both_ways_and_pi_answers_an_ask_with_reply(root: Path):
    with sessions(root, "alpha") as live, LivePi.start(root / "p", crosstalk_home=root / "xt",
                                                       PI_CROSSTALK_HANDLE="pi-one") as pi:  # fmt: skip
        a = live["alpha"]
        a.say("CALL mcp__crosstalk__list_agents {}")
        claude_name = next(r for r in a.wait_tool_result("list_agents")["agents"] if r.get("self"))["name"]
        token = secrets.token_hex(4)
        a.say(f"CALL mcp__crosstalk__send_message {json.dumps({'to': 'pi-one', 'text': f'hello pi {token}'})}")
        assert a.wait_tool_result("send_message")["state"] == "accepted"
        assert f"[from agents:{claude_name}] hello pi {token}" in pi.wait_seen(f"hello pi {token}").raw
        pi.idle()
        pi.say(f"/crosstalk send {claude_name} hello claude {token}")
        a.wait_seen(f"hello claude {token}")
        # Claude asks; pi's model answers with the reply tool; the answer reaches Claude's model
        answer = json.dumps({"message_id": "$MESSAGE_ID", "text": f"use main {token}"})
        ask = json.dumps({"to": "pi-one", "text": f"which branch?\nCALL reply {answer}", "deadline_seconds": 120})
        n = len(a.requests())
        a.say(f"CALL mcp__crosstalk__ask {ask}")
        ask_id = a.wait_tool_result("ask", after=n)["message_id"]
        assert f"[ask from agents:{claude_name} · id {ask_id}] which branch?" in pi.wait_seen(ask_id).raw
        # the reply's envelope names the ask; the ask's own prompt does not
        seen = a.mock.wait_seen(f'in-reply-to=\\"{ask_id}\\"', after=n, what=a.tail)
        assert f"use main {token}" in seen.raw


def test_pi_and_codex_talk_both_ways(root: Path, require: Callable[[str], Path]):
    require("codex")
    with (
        LiveCodex.start(root / "cx", crosstalk_home=root / "xt") as cx,
        LivePi.start(root / "p", crosstalk_home=root / "xt", PI_CROSSTALK_HANDLE="pi-two") as pi,
    ):
        thread = cx.start_thread()
        cx.say(thread, "CALL mcp__crosstalk.list_agents {}")
        codex_name = next(r for r in cx.wait_tool_result("list_agents")["agents"] if r.get("self"))["name"]
        token = secrets.token_hex(4)
        cx.say(
            thread, f"CALL mcp__crosstalk.send_message {json.dumps({'to': 'pi-two', 'text': f'from codex {token}'})}"
        )
        assert f"[from agents:{codex_name}] from codex {token}" in pi.wait_seen(f"from codex {token}").raw
        pi.idle()
        pi.say(f"/crosstalk send {codex_name} from pi {token}")
        cx.wait_seen(f"from pi {token}")
        # Codex asks; pi's model answers with the reply tool; the answer reaches the thread, naming the ask
        answer = json.dumps({"message_id": "$MESSAGE_ID", "text": f"ship it {token}"})
        ask = json.dumps({"to": "pi-two", "text": f"ready?\nCALL reply {answer}", "deadline_seconds": 120})
        n = len(cx.requests())
        cx.say(thread, f"CALL mcp__crosstalk.ask {ask}")
        ask_id = cx.wait_tool_result("ask", after=n)["message_id"]
        assert f"· id {ask_id}] ready?" in pi.wait_seen(ask_id).raw
        # the reply's envelope names the ask (the ask's own prompt does not)
        cx.mock.wait_request(lambda r: "in-reply-to" in r.raw and ask_id in r.raw and token in r.raw, after=n,
                             what=cx.tail)  # fmt: skip


def test_the_pi_tui_in_tmux_shows_the_handle_and_the_unread_count(root: Path):
    import shlex

    from tests.support.live_claude import bin_dir
    from tests.support.live_pi import MODEL, prepare
    from tests.support.tmux_pane import TmuxPane

    env, mock, cwd = prepare(root / "t", root / "xt", {"PI_CROSSTALK_HANDLE": "tui-pi"})
    env["TERM"] = "xterm-256color"
    cmd = " ".join(["exec env -i", *(f"{k}={shlex.quote(v)}" for k, v in env.items()),
                    shlex.quote(str(bin_dir() / "pi")), "--provider", "mock", "--model", MODEL])  # fmt: skip
    pane = TmuxPane(f"xtp-{os.getpid()}")
    try:
        pane.start(cmd, str(cwd))

        def shows(text: str) -> None:
            deadline = time.monotonic() + 60
            while text not in pane.screen():
                assert time.monotonic() < deadline, pane.screen()
                time.sleep(0.1)

        shows("⇄ tui-pi")
        token = secrets.token_hex(4)
        assert cli(root, "send", "tui-pi", f"hello tui {token}").returncode == 0
        shows(f"hello tui {token}")
        shows("⇄ tui-pi [1]")
        mock.wait_seen(f"hello tui {token}", what=pane.screen)  # the TUI shows the turn before the request comes
    finally:
        pane.close()
        mock.stop()


def test_meta_during_a_run_adds_no_model_request_and_the_next_turn_sees_it(root: Path):
    with LivePi.start(root / "p", crosstalk_home=root / "xt", PI_CROSSTALK_HANDLE="busy-meta") as pi:
        token = secrets.token_hex(4)
        n = len(pi.requests())
        pi.say("SLEEP 2\na slow turn")
        pi.wait_event(lambda e: e.get("type") == "agent_start")
        pi.wait_seen("a slow turn", after=n)
        sent = cli(root, "send", "busy-meta", f"context {token}", "--kind", "meta", "--json")
        assert sent.returncode == 0 and json.loads(sent.stdout)["state"] == "queued", sent
        pi.idle()
        assert len(pi.requests()) == n + 1  # the slow answer only: the meta made no request of its own
        pi.say("and now?")
        seen = pi.wait_seen("and now?", after=n + 1)
        assert f"context {token}" in seen.raw


def test_a_new_session_rebinds_and_the_model_tools_send_when_the_config_enables_them(root: Path):
    """`/new` (RPC new_session) gives a new session id: the old agent is gone, the new one is registered and
    receives. With `enableLlmTool` in the extension's config, the model's talk_to_peer sends."""
    with (
        LivePi.start(root / "a", crosstalk_home=root / "xt", PI_CROSSTALK_HANDLE="rebind") as pi,
        LivePi.start(root / "b", crosstalk_home=root / "xt", PI_CROSSTALK_HANDLE="listener") as other,
    ):
        old = pi.agent()
        config = Path(pi.env["HOME"]) / ".config" / "pi-agent-extensions" / "crosstalk" / "config.json"
        flags = {"enableLlmTool": True, "enableCrosstalkSetTool": True, "enableCrosstalkInspectTool": True}
        config.write_text(json.dumps({**json.loads(config.read_text()), **flags}))
        assert pi.command({"type": "new_session"})["success"]
        new = pi.agent()
        assert new.session_ref != old.session_ref and new.agent_id != old.agent_id
        token = secrets.token_hex(4)
        assert cli(root, "send", new.name, f"after new {token}").returncode == 0
        pi.wait_seen(f"after new {token}")
        pi.idle()
        assert pi.command({"type": "get_state"})["data"]["sessionId"] == new.session_ref
        call = json.dumps({"peer": "listener", "text": f"by tool {token}", "mode": "followUp"})
        pi.say(f"CALL talk_to_peer {call}")
        seen = other.wait_seen(f"by tool {token}")
        assert f"[from agents:{new.name} · followUp] by tool {token}" in seen.raw
        pi.idle()
        n = len(pi.requests())
        pi.say('CALL crosstalk_inspect {"handle": "listener"}')
        looked = pi.wait_seen('\\"match\\"', after=n)  # the tool's JSON, as the model reads it
        assert '\\"handle\\":\\"listener\\"' in looked.raw.replace(" ", ""), looked.raw[-600:]
        pi.idle()
        pi.say('CALL crosstalk_set {"role": "peer"}')
        deadline = time.monotonic() + 30
        while pi.agent().role != "peer":
            assert time.monotonic() < deadline, pi.tail()
            time.sleep(0.05)
