"""Workflows and chat run by real harness CLIs as bus models, across two simulated machines sharing
a bare remote. `claude -p` compiles the prose (its mock answers with the JSON plan), `codex exec` runs draft, placed
round-robin over both machines, and `pi -p` synthesizes; the owner (ops) replies to the marker with pi's answer.
Also: a kill -9 of the owner after each stage, every failure path, and `crosstalk chat` through a terminal."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from crosstalk.bus.protocol.message import BusMessage
from tests.support.bus_dispatch import channel_messages, channel_rel, log_text, wait_for
from tests.support.bus_harness import REPLY_TIMEOUT, BusPair, Daemon, bus_pair, harness_provider, refuse, wait_replied
from tests.support.bus_terminal import Terminal
from tests.support.harness_run import HarnessRun

pytestmark = pytest.mark.timeout(900)
MakeRun = Callable[..., HarnessRun]


def test_a_workflow_of_real_harnesses_fans_out_over_two_machines_and_synthesizes(harness_run: MakeRun) -> None:
    token = secrets.token_hex(6)
    plan = {
        "fanout": {"to": "codex/mock", "count": 3, "body": f"Draft a one-line slogan {token}."},
        "synthesize": {"to": "pi/mock", "body": "Pick the best slogan."},
    }
    compile_run = harness_run("claude", reply=json.dumps(plan))
    draft_run = harness_run("codex", reply=f"draft slogan {token}")
    judge_run = harness_run("pi", reply=f"the best slogan {token}")
    registries, env = [], {}
    for run, name in ((compile_run, "claude"), (draft_run, "codex"), (judge_run, "pi")):
        text, daemon_env = harness_provider(run, name, {"mock": []}, prefix=f"XT_{name.upper()}_")
        registries.append(text.split("\n", 1)[1])  # without its "providers:" line
        env.update(daemon_env)
    with bus_pair() as pair:
        pair.commit_registry("providers:\n" + "".join(registries))
        with (
            Daemon(pair.ops, "--interval", "0.5", env=env) as ops,
            Daemon(pair.gpu, "--interval", "0.5", env=env) as gpu,
        ):
            assert ops.wait_ready()["claimed"][0] == "claude/mock", ops.tail()  # the owner compiles with it
            gpu.wait_ready()
            # ops learns from the history that gpu claims codex/mock: gpu answers one message as codex/mock@gpu.
            warm = pair.send("codex/mock@gpu", "Warm up.")
            [status] = wait_replied(pair.ops, [warm], REPLY_TIMEOUT, gpu)
            assert status["state"] == "REPLIED", f"{status}\n{gpu.tail()}"
            doc = pair.ops.base / "slogan.md"
            doc.write_text(f"---\ntype: workflow\n---\n\nThree codex drafts of a slogan {token}; pi picks one.\n")
            res = pair.ops.cli("workflow", "run", str(doc))
            assert res.returncode == 0, res.stderr
            marker = res.stdout.strip()
            [status] = wait_replied(pair.ops, [marker], 2 * REPLY_TIMEOUT, ops)
            assert status["state"] == "REPLIED", f"{status}\n{ops.tail()}\n{gpu.tail()}"
        result = pair.read(status["replies"][0]["path"])
        assert result.sender == "workflow@ops" and result.body.strip() == f"the best slogan {token}", result
        child = pair.read(marker).child_channel
        assert child is not None and pair.ops.root is not None
        steps = channel_messages(pair.ops.root, child).values()
        subs = [m for m in steps if m.workflow_step == "fanout"]
        assert sorted(m.to for m in subs) == ["codex/mock@gpu", "codex/mock@ops", "codex/mock@ops"]
        [synth] = [m for m in steps if m.workflow_step == "synthesize"]
        assert synth.to == "pi/mock@ops" and synth.body.count(f"draft slogan {token}") == 3
    assert compile_run.mock.saw("You compile a workflow described in prose into a JSON plan")
    assert compile_run.mock.saw(f"Three codex drafts of a slogan {token}")
    assert draft_run.mock.saw(f"Draft a one-line slogan {token}.")
    assert judge_run.mock.saw("Pick the best slogan.") and judge_run.mock.saw("--- Candidate 3 of 3 ---")


def _harness_models(harness_run: MakeRun) -> tuple[dict[str, HarnessRun], str, dict[str, str]]:
    """claude (compile), codex (drafts) and pi (synthesis) against their mocks: the runs, one registry declaring
    the three providers' `mock` models, and the dispatchers' environment."""
    runs = {name: harness_run(name) for name in ("claude", "codex", "pi")}
    registries, env = [], {}
    for name, run in runs.items():
        text, daemon_env = harness_provider(run, name, {"mock": []}, prefix=f"XT_{name.upper()}_")
        registries.append(text.split("\n", 1)[1])  # without its "providers:" line
        env.update(daemon_env)
    return runs, "providers:\n" + "".join(registries), env


def _submit(pair: BusPair, name: str, prose: str) -> str:
    doc = pair.ops.base / f"{name}.md"
    doc.write_text(f"---\ntype: workflow\n---\n\n{prose}\n")
    res = pair.ops.cli("workflow", "run", str(doc))
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def _steps(pair: BusPair, marker: str) -> tuple[list[BusMessage], list[BusMessage]]:
    """(the child channel's messages, the marker channel's workflow results for this marker)."""
    assert pair.ops.root is not None
    child = pair.read(marker).child_channel
    assert child is not None
    steps = list(channel_messages(pair.ops.root, child).values())
    parent = marker.split("/")[2]
    mine = channel_rel(marker)
    results = [m for m in channel_messages(pair.ops.root, parent).values() if m.workflow_step == "result"]
    results = [m for m in results if mine in m.re]
    return steps, results


def _logged(pair: BusPair, event: str) -> int:
    """How often ops's dispatcher log holds `event`."""
    return log_text(pair.ops).count(f" {event} ")


def _reap_model_runs(root: Path) -> None:
    """Kill (by process group) every process working in `root`: the harness runs a killed dispatcher left."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cwd = Path(os.readlink(proc / "cwd"))
        except OSError:
            continue
        if cwd == root or root in cwd.parents:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(os.getpgid(int(proc.name)), signal.SIGKILL)


def test_a_kill_9_of_the_owner_after_each_stage_resumes_with_no_duplicate_sub_message(harness_run: MakeRun) -> None:
    """The owner dies (kill -9, its harness runs with it) right after it committed the plan, the fanout, and the
    synthesis request (before it routed the result); a new owner finishes each workflow with exactly 3 copies, one
    synthesis request, one result, and the prose compiled once."""
    runs, registry, env = _harness_models(harness_run)
    token = secrets.token_hex(6)
    with bus_pair() as pair:
        assert pair.ops.root is not None
        pair.commit_registry(registry)
        with Daemon(pair.gpu, "--interval", "0.5", env=env) as gpu:
            gpu.wait_ready()
            owner = Daemon(pair.ops, "--interval", "0.5", env=env, log_name="owner-0.out")
            try:
                owner.wait_ready()
                warm = pair.send("codex/mock@gpu", "Warm up.")
                [status] = wait_replied(pair.ops, [warm], REPLY_TIMEOUT, gpu)
                assert status["state"] == "REPLIED", f"{status}\n{gpu.tail()}"
                for life, stage in enumerate(("workflow_compiled", "workflow_fanout", "workflow_synthesize"), 1):
                    tag = f"{stage}-{token}"
                    # SLEEP lines slow the mocks' answers, so the kill lands while the next stage's runs are busy.
                    runs["claude"].mock.replies_by[tag] = json.dumps(
                        {
                            "fanout": {"to": "codex/mock", "count": 3, "body": f"SLEEP 2\\nDraft {tag}."},
                            "synthesize": {"to": "pi/mock", "body": f"SLEEP 2\\nJudge {tag}."},
                        }
                    )
                    runs["codex"].mock.replies_by[f"Draft {tag}"] = f"draft {tag}"
                    runs["pi"].mock.replies_by[f"Judge {tag}"] = f"verdict {tag}"
                    seen, done = _logged(pair, stage), _logged(pair, "workflow_done")
                    marker = _submit(pair, f"life{life}", f"Three codex drafts then a pi verdict: {tag}.")
                    wait_for(lambda s=stage, n=seen: _logged(pair, s) > n, REPLY_TIMEOUT, stage)
                    owner.kill9()
                    _reap_model_runs(pair.ops.root)
                    assert _logged(pair, "workflow_done") == done, f"{stage}: the kill came after the route"
                    owner = Daemon(pair.ops, "--interval", "0.5", env=env, log_name=f"owner-{life}.out")
                    owner.wait_ready()
                    [status] = wait_replied(pair.ops, [marker], 2 * REPLY_TIMEOUT, owner)
                    assert status["state"] == "REPLIED", f"{stage}: {status}\n{owner.tail()}\n{gpu.tail()}"
                    steps, results = _steps(pair, marker)
                    assert sum(m.workflow_step == "fanout" for m in steps) == 3, f"{stage}: {steps}"
                    assert sum(m.workflow_step == "synthesize" for m in steps) == 1, f"{stage}: {steps}"
                    assert len(results) == 1 and results[0].body.strip() == f"verdict {tag}", f"{stage}: {results}"
                    compiles = [r for r in runs["claude"].mock.model_requests() if tag in r.raw]
                    assert len(compiles) == 1, f"{stage}: the prose was compiled {len(compiles)} times"
            finally:
                owner.stop()


def test_every_failure_path_of_a_workflow_of_real_harnesses_ends_in_one_failed_reply(harness_run: MakeRun) -> None:
    """Six workflows at once, each failing another way: the compile answer holds no JSON, has the wrong shape, names
    a model nobody claims, the compile run fails (claude exits 1), a draft fails (codex exits 1), the synthesis
    fails (pi exits non-zero). Each ends in one `failed: true` result naming why, and COMPLETE says failed."""
    runs, registry, env = _harness_models(harness_run)
    token = secrets.token_hex(6)
    plan = {"fanout": {"to": "codex/mock", "count": 2, "body": "Draft it."},
            "synthesize": {"to": "pi/mock", "body": "Judge it."}}  # fmt: skip
    cases = {
        "nojson": ("I would rather not write a plan.", "the compile answer holds no JSON object"),
        "shape": (json.dumps({**plan, "extra": 1}), "exactly the keys fanout and synthesize"),
        "unclaimed": (
            json.dumps({**plan, "synthesize": {"to": "pi/nobody", "body": "x"}}),
            "no machine is known to claim 'pi/nobody'",
        ),
        "compilefail": (None, "the compile run failed: exit 1"),
        "copyfail": (
            json.dumps({**plan, "fanout": {**plan["fanout"], "body": f"Draft REFUSE-{token}."}}),
            "fanout 1/2: exit",
        ),
        "synthfail": (
            json.dumps({**plan, "synthesize": {"to": "pi/mock", "body": f"Judge REFUSE-{token}."}}),
            "synthesis: exit",
        ),
    }
    for case, (answer, _) in cases.items():
        if answer is not None:
            runs["claude"].mock.replies_by[f"case {case}-{token}"] = answer
    refuse(runs["claude"].mock, lambda req: f"case compilefail-{token}" in req.raw, 404,
           {"type": "not_found_error", "message": "model: the mock refuses this compile"})  # fmt: skip
    for name in ("codex", "pi"):
        refuse(runs[name].mock, lambda req: f"REFUSE-{token}" in req.raw, 400,
               {"type": "invalid_request_error", "message": f"the mock refuses this {name} run"})  # fmt: skip
    with bus_pair() as pair:
        pair.commit_registry(registry)
        with Daemon(pair.ops, "--interval", "0.5", env=env) as ops:
            ops.wait_ready()
            markers = {case: _submit(pair, case, f"A workflow, case {case}-{token}.") for case in cases}
            statuses = wait_replied(pair.ops, list(markers.values()), 3 * REPLY_TIMEOUT, ops)
        assert pair.ops.root is not None
        for (case, (_, error)), status in zip(cases.items(), statuses, strict=True):
            assert status["state"] == "FAILED", f"{case}: {status}\n{ops.tail()}"
            steps, results = _steps(pair, markers[case])
            assert len(results) == 1 and results[0].failed, f"{case}: {results}"
            assert error in (results[0].error or ""), f"{case}: {results[0].error}"
            child = pair.read(markers[case]).child_channel
            done = (pair.ops.root / "data" / "channels" / str(child) / "COMPLETE").read_text()
            assert done.startswith("failed: ") and done.count("\n") == 1 and len(done) > 10, f"{case}: {done!r}"
            if case in ("copyfail", "synthfail"):  # the failing run was a real harness refused by its API
                failed = [m for m in steps if m.failed]
                assert failed and all("mock refuses" in m.body for m in failed), f"{case}: {failed}"
        res = pair.ops.cli("workflow", "status", "--json")
        assert res.returncode == 0, res.stderr
        assert sorted(w["stage"] for w in json.loads(res.stdout)) == ["failed"] * len(cases), res.stdout


def test_chat_with_a_real_claude_on_another_machine_through_a_terminal(harness_run: MakeRun) -> None:
    """`crosstalk chat claude/mock@gpu` on ops, typed into a pseudo-terminal: each turn reaches a real `claude -p`
    run by gpu's dispatcher, its answer is printed, and the second turn's prompt carries the first exchange."""
    run = harness_run("claude")
    token = secrets.token_hex(6)
    run.mock.replies_by = {f"second {token}": f"answer two {token}", f"first {token}": f"answer one {token}"}
    with bus_pair() as pair:
        registry, env = harness_provider(run, "claude", {"mock": []})
        pair.commit_registry(registry)
        with Daemon(pair.gpu, "--interval", "0.5", env=env) as gpu:
            gpu.wait_ready()
            term = Terminal(pair.ops, "chat", "claude/mock@gpu", "--timeout", f"{REPLY_TIMEOUT:g}")
            try:
                term.expect("you> ")
                term.type(f"first {token}\n")
                term.expect(f"claude/mock@gpu> answer one {token}", REPLY_TIMEOUT)
                term.expect("you> ")
                term.mark()
                term.type(f"second {token}\n")
                term.expect(f"claude/mock@gpu> answer two {token}", REPLY_TIMEOUT)
                term.expect("you> ")
                term.type("\x04")  # Ctrl-D
            finally:
                code = term.close()
            assert code == 0, gpu.tail()
    [second] = [r for r in run.mock.model_requests() if f"second {token}" in r.raw]
    assert f"first {token}" in second.raw and f"answer one {token}" in second.raw, "the thread did not reach the model"
