"""A workflow run by real harness CLIs as bus models (issue 15 item 5), across two simulated machines sharing a bare
remote: `claude -p` compiles the prose (its mock answers with the JSON plan), three `codex exec` runs draft, placed
round-robin over both machines, and `pi -p` synthesizes; the owner (ops) replies to the marker with pi's answer."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from bus_fixtures import REPLY_TIMEOUT, Daemon, bus_pair, harness_provider, wait_replied
from dispatch_helpers import channel_messages

if TYPE_CHECKING:  # the fixture module is not imported at run time: several test dirs have a conftest.py
    from conftest import HarnessRun

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
MakeRun = Callable[..., "HarnessRun"]


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
