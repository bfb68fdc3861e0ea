"""`crosstalk pi-agent`, the core the pi extension starts, driven over its real pipes by this test playing the
extension (docs/dev/pi-link.md): registration from the PI_CROSSTALK_* environment, delivery with tags and outcomes, the
ACL as pi users know it, and the slash-command ops. The real pi with the real extension is tests/e2e/test_pi_live.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.pi_link import CROSSTALK, WAIT_S, Extension


@pytest.fixture
def home(tmp_path: Path):
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="xpi", dir="/tmp"))  # unix socket paths stay short
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def started(home: Path):
    exts: list[Extension] = []

    def start(session: str, **kw: Any) -> Extension:
        ext = Extension(home, session, **kw)
        exts.append(ext)
        return ext

    yield start
    for ext in reversed(exts):
        ext.close()


def until(predicate: Any) -> Any:
    deadline = time.monotonic() + WAIT_S
    while not (value := predicate()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
    return value


def cli_send(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "CROSSTALK_HOME": str(home / "xt"), "USER": "tester"}
    return subprocess.run([*CROSSTALK, "send", *args], env=env, capture_output=True, text=True, timeout=60)


def test_a_handle_is_taken_once_and_collisions_are_suffixed(started):
    first = started("s-1", PI_CROSSTALK_HANDLE="reviewer")
    second = started("s-2", PI_CROSSTALK_HANDLE="reviewer")
    assert (first.ready["name"], second.ready["name"]) == ("reviewer", "reviewer-2")
    assert first.ready["role"] == "primary"


def test_an_external_send_to_a_worker_is_denied_until_allow_external(started, home: Path):
    orch = started("s-orch", PI_CROSSTALK_HANDLE="orch", PI_CROSSTALK_ROLE="orchestrator")
    worker = started("s-w", PI_CROSSTALK_HANDLE="orch-w", PI_CROSSTALK_ROLE="worker", PI_CROSSTALK_PARENT="orch")
    assert worker.ready["role"] == "worker" and worker.ready["accept_from"] == ["parent"]
    denied = cli_send(home, "orch-w", "build broke", "--from", "@ci:build")
    assert denied.returncode == 3 and "acl:external" in denied.stdout + denied.stderr, denied
    assert worker.delivered == []
    assert worker.call("allow", entry="external")["current"]["accept_from"] == ["external", "parent"]
    ok = cli_send(home, "orch-w", "build broke", "--from", "@ci:build", "--mode", "followUp")
    assert ok.returncode == 0, ok
    [msg] = worker.delivered
    assert msg["text"] == "[from @ci:build · followUp] build broke" and msg["as"] == "followUp"
    # the parent (resolved from its handle) reaches the worker as parent, steered
    sent = orch.call("send", to="orch-w", text="stop and rebase", mode="steer")
    assert sent["ok"] and sent["state"] == "accepted" and sent["delivered"] == "immediate", sent
    assert worker.delivered[-1]["text"] == "[from parent:orch · steer] stop and rebase"
    assert worker.call("status")["parent"] == "orch"
    assert "orch-w" in orch.call("status")["children"]


def test_outcomes_map_from_the_extensions_answer_and_meta_is_noted(started, home: Path):
    queued = started("s-q", PI_CROSSTALK_HANDLE="busy", answer="queued")
    out = cli_send(home, "busy", "later please", "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["state"] == "queued", out
    meta = cli_send(home, "busy", "fyi: main is green", "--kind", "meta", "--json")
    assert meta.returncode == 0, meta
    assert queued.delivered[-1]["as"] == "meta" and queued.delivered[-1]["text"].startswith("[crosstalk meta from ")


def test_an_ask_is_tagged_with_its_id_and_answered_with_reply(started):
    asker = started("s-a", PI_CROSSTALK_HANDLE="asker")
    answerer = started("s-b", PI_CROSSTALK_HANDLE="answerer")
    sent = asker.call("send", to="answerer", text="which branch?", kind="ask")
    assert sent["ok"] and sent["state"] in ("submitted", "accepted", "queued"), sent
    until(lambda: answerer.delivered)
    text = answerer.delivered[-1]["text"]
    assert text.startswith("[ask from agents:asker · id ") and text.endswith("] which branch?")
    mid = text.split(" · id ", 1)[1].split("]", 1)[0]
    replied = answerer.call("reply", message_id=mid, text="main")
    assert replied["ok"] and replied["state"] == "replied", replied
    until(lambda: asker.delivered)
    back = asker.delivered[-1]["text"]
    assert back.startswith(f"[reply from agents:answerer · to {sent['message_id']}] ") and "main" in back, back


def test_a_closed_link_ends_the_core_and_unregisters(started, home: Path):
    ext = started("s-x", PI_CROSSTALK_HANDLE="gone")
    ext.close()
    assert ext.proc.returncode == 0
    out = cli_send(home, "gone", "anyone?")
    assert out.returncode == 4, out


def test_a_bad_role_warns_and_falls_through(started):
    ext = started("s-r", PI_CROSSTALK_HANDLE="r", PI_CROSSTALK_ROLE="Worker")
    [notice] = [m for m in ext.seen if m["t"] == "notice"]  # told before it is ready
    assert notice["level"] == "warning" and "PI_CROSSTALK_ROLE" in notice["text"]
    assert ext.ready["role"] == "primary"


def test_a_resumed_session_keeps_what_it_set_and_the_environment_still_wins(started, home: Path):
    first = started("s-keep", PI_CROSSTALK_HANDLE="keeper", PI_CROSSTALK_ROLE="worker")
    assert first.call("allow", entry="@ci:build")["ok"]
    assert first.call("peer_add", handle="orch-b")["ok"]
    first.close()
    again = started("s-keep")  # pi resumed the session: no PI_CROSSTALK_* this time
    assert (again.ready["name"], again.ready["role"]) == ("keeper", "worker")
    assert again.ready["accept_from"] == ["@ci:build", "parent"]
    assert again.call("status")["peers"] == ["orch-b"]
    saved = home / "xt" / "pi"
    assert [oct(p.stat().st_mode & 0o777) for p in saved.iterdir()] == ["0o600"]
    again.close()
    reset = started("s-keep", PI_CROSSTALK_ROLE="orchestrator")  # a role from the environment resets acceptFrom
    assert reset.ready["role"] == "orchestrator" and reset.ready["accept_from"] == ["children", "external", "peers"]


def test_pi_crosstalk_keeps_the_exit_codes_scripts_were_written_for(started, home: Path):
    started("s-pc", PI_CROSSTALK_HANDLE="scripted", PI_CROSSTALK_ROLE="worker")
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "CROSSTALK_HOME": str(home / "xt"), "USER": "tester"}

    def pc(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-c", "from crosstalk.cli.pi_crosstalk import main; main()", *args]
        return subprocess.run(cmd, env=env, input=stdin, capture_output=True, text=True, timeout=60)

    listed = pc("list", "--json")
    assert listed.returncode == 0 and [r["name"] for r in json.loads(listed.stdout) if r["harness"] == "pi"] == [
        "scripted"]  # fmt: skip
    assert pc("who", "scripted").returncode == 0
    denied = pc("send", "scripted", "--from", "@ci:build", "--kind", "user", stdin="build broke\n")
    assert denied.returncode == 3 and "acl:external" in denied.stdout + denied.stderr, denied
    assert pc("send", "nobody", "hi").returncode == 1  # no such session: a wire error here
    assert pc("send").returncode == 2 and pc("frobnicate").returncode == 2


def test_a_deeply_nested_line_is_dropped_and_the_core_serves_on(started):
    ext = started("s-deep", PI_CROSSTALK_HANDLE="deep")
    assert ext.proc.stdin is not None
    deep = b'{"t": "call", "id": "deep-1", "op": "status", "args": {"x": ' + b"[" * 1000 + b"]" * 1000 + b"}}\n"
    ext.proc.stdin.write(
        deep + b'{"t": "call", "id": "deep-2", "op": "status", "args": {"x": ' + b"[" * 100_000 + b"\n"
    )
    ext.proc.stdin.flush()
    assert ext.call("status")["name"] == "deep"  # still serving
    assert ext.proc.poll() is None
    dropped = ("deep-1", "deep-2")  # never run
    assert not [m for m in ext.seen if m.get("t") == "result" and m.get("id") in dropped]
    out = ext.call("send", to="deep", text="hi \ud800", mode="auto")
    assert out["ok"] is False and out["state"] == "invalid_arguments", out
    assert out["reason"].startswith("text:") and "surrogate" in out["reason"]
