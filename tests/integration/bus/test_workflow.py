"""Workflows end to end: real git (a bare remote, two clones as machines a and b), real dispatcher
processes, script models on each machine's PATH. Machine a claims the compile model `t/compile`, `t/draft` and the
judge `t/judge`; machine b claims `t/draft` only. `crosstalk workflow run` on a makes a the owner: it compiles, fans
three drafts out round-robin over a and b, has the judge synthesize, and replies to the marker."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from tests.support.bus_dispatch import Daemon, channel_messages, commit_files, log_text, wait_for, wait_replied
from tests.support.bus_machines import Machine, init_and_clone
from tests.support.bus_terminal import Terminal

pytestmark = pytest.mark.slow

WAIT_S = 90.0
PLAN = {"fanout": {"to": "t/draft", "count": 3, "body": "Draft the proposal."},
        "synthesize": {"to": "t/judge", "body": "Pick the strongest draft."}}  # fmt: skip
REGISTRY = """providers:
  t:
    models:
      compile: wf-compile
      draft: wf-draft
      judge: wf-judge
"""
SCRIPT = """#!{python}
import os, sys
prompt = sys.argv[-1]
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "{name}.runs"), "a") as f:
    f.write(os.environ.get("CROSSTALK_FROM", "") + "\\n")
{body}
"""
BODIES = {
    "wf-compile": "print(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'plan.txt')).read())",
    "wf-draft": "import time; time.sleep(float(os.environ.get('WF_DRAFT_SLEEP', '0')))\n"
    "sys.exit(3) if os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fail')) else "
    "print('draft by ' + os.environ['CROSSTALK_FROM'])",
    "wf-judge": "print('best of ' + str(prompt.count('--- Candidate ')))",
}


def _tools(m: Machine, names: list[str], plan: object = PLAN) -> Path:
    bin_dir = m.base / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in names:
        path = bin_dir / name
        path.write_text(SCRIPT.format(python=sys.executable, name=name, body=BODIES[name]))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    (bin_dir / "plan.txt").write_text(plan if isinstance(plan, str) else json.dumps(plan))
    m.env["PATH"] = f"{bin_dir}{os.pathsep}{m.env.get('PATH', os.environ['PATH'])}"
    return bin_dir


def _runs(bin_dir: Path, name: str) -> list[str]:
    path = bin_dir / f"{name}.runs"
    return path.read_text().split() if path.exists() else []


@pytest.fixture
def bus(bare_remote, make_machine):
    a, b = make_machine("a"), make_machine("b")
    abin = _tools(a, ["wf-compile", "wf-draft", "wf-judge"])
    bbin = _tools(b, ["wf-draft"])
    init_and_clone(a, b, bare_remote, "--alias", "a")
    assert a.cli("channel", "create", "general").returncode == 0
    b.git("pull", "-q")
    commit_files(b, {"data/crosstalk.yaml": REGISTRY}, "test: registry")
    daemons = {"a": Daemon(a, "--interval", "0.3"), "b": Daemon(b, "--interval", "0.3")}
    try:
        for d in daemons.values():
            d.wait_ready()
        # a learns from the history that b claims t/draft: b answers one message as t/draft@b.
        out = a.cli("message", "send", "--to", "t/draft@b", "--channel", "general", "warm up")
        assert out.returncode == 0, out.stderr
        wait_replied(a, [out.stdout.strip()], WAIT_S)
        yield a, b, abin, bbin, daemons
    finally:
        for d in daemons.values():
            d.stop()


def _workflow(
    a: Machine, prose: str = "Fan out 3 drafts using t/draft; have t/judge pick the best.", env: dict | None = None
) -> str:
    doc = a.base / "wf.md"
    doc.write_text(f"---\ntype: workflow\n---\n\n{prose}\n")
    res = a.cli("workflow", "run", str(doc), "--channel", "general", env=env)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def _child(a: Machine, marker: str) -> dict:
    a.git("pull", "-q", "--rebase")
    channel = marker.split("/")[2]
    msg = channel_messages(a.root, channel)["/".join(marker.split("/")[3:])]
    return {"uuid": msg.child_channel, "messages": channel_messages(a.root, msg.child_channel)}


def test_a_workflow_fans_out_across_two_machines_synthesizes_and_replies(bus) -> None:
    a, _b, abin, bbin, _ = bus
    marker = _workflow(a)
    [row] = wait_replied(a, [marker], WAIT_S)
    assert row["state"] == "REPLIED", row
    child = _child(a, marker)
    subs = [m for m in child["messages"].values() if m.workflow_step == "fanout"]
    assert sorted(m.to for m in subs) == ["t/draft@a", "t/draft@a", "t/draft@b"]
    assert sorted(m.fanout for m in subs) == ["1/3", "2/3", "3/3"]
    [synth] = [m for m in child["messages"].values() if m.workflow_step == "synthesize"]
    assert synth.to == "t/judge@a" and synth.body.startswith("Pick the strongest draft.")
    assert synth.body.count("--- Candidate ") == 3 and "draft by t/draft@b" in synth.body
    assert (a.root / "data" / "channels" / child["uuid"] / "COMPLETE").read_text() == "complete\n"
    assert json.loads((a.root / "data" / "channels" / child["uuid"] / "PLAN.json").read_text()) == PLAN
    [result] = [m for m in channel_messages(a.root, marker.split("/")[2]).values() if m.workflow_step == "result"]
    assert result.sender == "workflow@a" and result.to == "op-a" and not result.failed
    assert result.body.startswith("best of 3"), result.body
    assert len(_runs(abin, "wf-compile")) == 1 and len(_runs(abin, "wf-judge")) == 1
    assert len(_runs(abin, "wf-draft")) == 2 and len(_runs(bbin, "wf-draft")) == 2  # b: the warm-up and one copy
    res = a.cli("workflow", "status", marker, "--json")
    assert res.returncode == 0, res.stderr
    [status] = json.loads(res.stdout)
    assert status["stage"] == "complete" and status["fanout"] == {"sent": 3, "answered": 3, "planned": 3}


@pytest.mark.parametrize(
    ("plan", "fail", "error"),
    [
        ("I would rather not.", False, "invalid plan from t/compile: the compile answer holds no JSON object"),
        ({**PLAN, "extra": 1}, False, "exactly the keys fanout and synthesize"),
        (
            {**PLAN, "synthesize": {"to": "t/nobody", "body": "x"}},
            False,
            "no machine is known to claim 't/nobody'",
        ),
        (PLAN, True, "fanout 1/3"),
    ],
    ids=["no-json", "bad-shape", "unclaimed", "failed-copy"],
)
def test_every_failure_ends_the_workflow_with_a_failed_reply(bus, plan, fail: bool, error: str) -> None:
    a, _b, abin, bbin, _ = bus
    (abin / "plan.txt").write_text(plan if isinstance(plan, str) else json.dumps(plan))
    if fail:
        for d in (abin, bbin):
            (d / "fail").write_text("")
    marker = _workflow(a)
    [row] = wait_replied(a, [marker], WAIT_S)
    assert row["state"] == "FAILED", row
    [result] = [m for m in channel_messages(a.root, marker.split("/")[2]).values() if m.workflow_step == "result"]
    assert result.failed and error in (result.error or ""), result.error
    child = _child(a, marker)["uuid"]
    assert (a.root / "data" / "channels" / child / "COMPLETE").read_text() == f"failed: {result.error}\n"
    res = a.cli("workflow", "status", marker)
    assert "failed" in res.stdout and error in res.stdout, res.stdout


@pytest.mark.parametrize("when", ["workflow_compiled", "workflow_fanout", "workflow_synthesize"])
def test_a_kill_9_of_the_owner_at_each_stage_resumes_with_no_duplicate_work(bus, when: str) -> None:
    a, _b, abin, _bbin, daemons = bus
    daemons["a"].stop()
    slow = {"WF_DRAFT_SLEEP": "1.5"}  # the copies take a moment: a kill after fanout lands before the synthesis
    owner = Daemon(a, "--interval", "0.3", log_name="owner.out", env=slow)
    owner.wait_ready()
    before = log_text(a).count(f" {when} ")
    marker = _workflow(a)
    wait_for(lambda: log_text(a).count(f" {when} ") > before, WAIT_S, when)
    owner.kill9()
    again = Daemon(a, "--interval", "0.3", log_name="again.out")
    try:
        again.wait_ready()
        [row] = wait_replied(a, [marker], WAIT_S, again)
        assert row["state"] == "REPLIED", row
    finally:
        again.stop()
        daemons["a"] = again
    child = _child(a, marker)
    msgs = list(child["messages"].values())
    assert sum(m.workflow_step == "fanout" for m in msgs) == 3
    assert sum(m.workflow_step == "synthesize" for m in msgs) == 1
    results = [m for m in channel_messages(a.root, marker.split("/")[2]).values() if m.workflow_step == "result"]
    assert len(results) == 1 and not results[0].failed
    assert len(_runs(abin, "wf-compile")) == 1, "compiled once"
    # A model run the kill interrupted runs again (model runs are at-least-once; the kill after the synthesis was
    # sent can land while the judge runs): what must not happen twice is a message, checked above.
    assert 1 <= len(_runs(abin, "wf-judge")) <= 2


def test_compose_shows_the_plan_lets_it_be_edited_and_submits_it_compiled(bus) -> None:
    """Through a terminal: the plan is shown, [e]dit opens it in $EDITOR (a script here, making 2 copies of 3),
    [y]es submits the marker with its PLAN.json, and the owner runs it without compiling again."""
    a, _b, abin, _bbin, _ = bus
    editor = abin / "edit-plan"
    editor.write_text(f"#!{sys.executable}\nimport sys\np = sys.argv[1]\nt = open(p).read()\n"
                      "open(p, 'w').write(t.replace('count: 3', 'count: 2'))\n")  # fmt: skip
    editor.chmod(0o755)
    term = Terminal(a, "workflow", "compose", "Two drafts please, then judge them.", "--channel", "general",
                    env={"EDITOR": str(editor)})  # fmt: skip
    try:
        term.expect("count: 3")
        term.expect("[y]es / [e]dit / [n]o? ")
        term.mark()
        term.type("e\n")
        term.expect("count: 2")
        term.expect("[y]es / [e]dit / [n]o? ")
        term.mark()
        term.type("y\n")
        marker = term.expect("data/channels/").split("data/channels/", 1)[1].split()[0]
    finally:
        assert term.close() == 0
    marker = "data/channels/" + marker
    [row] = wait_replied(a, [marker], WAIT_S)
    assert row["state"] == "REPLIED", row
    child = _child(a, marker)
    assert sum(m.workflow_step == "fanout" for m in child["messages"].values()) == 2
    assert len(_runs(abin, "wf-compile")) == 1, "compiled by compose only"


def test_compose_answered_no_writes_nothing(bus) -> None:
    a, _b, _abin, _bbin, _ = bus
    head = a.git("rev-parse", "HEAD")
    res = a.cli("workflow", "compose", "Anything.", "--channel", "general", input="n\n")
    assert res.returncode == 1 and "nothing submitted" in res.stdout and '"fanout"' not in res.stdout
    assert "fanout:" in res.stdout and a.git("rev-parse", "HEAD") == head


def test_a_workflow_run_from_a_persona_answers_in_that_persona(bus) -> None:
    """Run from a dispatched turn wearing a persona (CROSSTALK_AS), the marker carries wake_as and the result
    wears it as `as:`, so the asker is woken in the same persona; an invalid persona name is refused."""
    a, *_ = bus
    marker = _workflow(a, env={"CROSSTALK_AS": "reviewer"})
    assert channel_messages(a.root, marker.split("/")[2])["/".join(marker.split("/")[3:])].wake_as == "reviewer"
    [row] = wait_replied(a, [marker], WAIT_S)
    assert row["state"] == "REPLIED", row
    [result] = [m for m in channel_messages(a.root, marker.split("/")[2]).values() if m.workflow_step == "result"]
    assert result.as_ == "reviewer"
    doc = a.base / "wf.md"
    res = a.cli("workflow", "run", str(doc), "--channel", "general", env={"CROSSTALK_AS": "../etc"})
    assert res.returncode == 2 and "invalid persona name" in res.stderr, res.stderr
