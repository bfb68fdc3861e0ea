"""The task operations the A2A conformance profile answers with (artifacts, direct messages, input_required), over
the real receiver chain, journal and fake harness; and their journal replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crosstalk.core.errors import TaskError
from crosstalk.core.kinds import Kind
from crosstalk.core.tasks import Artifact, ArtifactPart, TaskState
from crosstalk.harness.fake import FakeHarness
from crosstalk.harness.fake.adapter import conformance_answer
from crosstalk.journal import JournalState
from crosstalk.journal import records as R
from crosstalk.receiver import Receiver
from crosstalk.tasks.ledger import ReplyError
from crosstalk.tasks.service import TaskService
from tests.support.receiver import CAROL, Rig, msg, run, wait_for
from tests.support.tasks import run_with_service

FILE = ArtifactPart(raw="dGNr", media_type="text/plain", filename="output.txt")
DATA = ArtifactPart(data={"key": "value", "count": 42})


def _wire(fake: FakeHarness, svc: TaskService) -> None:
    """As `crosstalk agent run --conformance` wires the fake's profile to the task service."""
    fake.on_expect = svc.expect_answer
    fake.on_reply = lambda mid, text, artifacts, direct: svc.reply(mid, text, artifacts=artifacts, direct=direct)
    fake.on_require_input = svc.require_input


def _conformance(rig: Rig, svc: TaskService) -> None:
    """Turn the fake's conformance profile on and wire it to `svc` (the `setup` for `run_with_service`)."""
    rig.fake.conformance = True
    _wire(rig.fake, svc)


async def _service(rig: Rig, *, conformance: bool = True) -> TaskService:
    svc = TaskService(rig.receiver)
    if conformance:
        _conformance(rig, svc)
    await svc.start()
    return svc


def _replayed(rig: Rig, root: Path) -> tuple[Rig, TaskService]:
    records = rig.records()
    rig.close()
    rig2 = Rig(root)
    state = JournalState.replay(records)
    svc = TaskService(Receiver(rig2.identity, rig2.journal, state, rig2.fake, rig2.view))
    svc.load(records)
    return rig2, svc


def test_reply_with_artifacts_completes_an_awaited_inform_and_replays(root: Path) -> None:
    rig = Rig(root)
    ids: dict[str, str] = {}

    async def body() -> None:
        svc = await _service(rig, conformance=False)
        try:
            plain = msg("no one said they would answer")
            view = await svc.send(CAROL, plain, task_id=None, return_immediately=False)
            assert view.completion == "delivered"
            with pytest.raises(ReplyError) as not_ask:  # an inform nobody awaits still takes no reply
                await svc.reply(plain.message_id, "x")
            assert not_ask.value.code == ReplyError.NOT_AN_ASK

            m = msg("make me a file")
            sent = await svc.send(CAROL, m, task_id=None, return_immediately=True)
            await wait_for(lambda: svc.table.tasks[sent.task_id].view.delivery is not None)
            # Delivered: an inform completes on delivery unless the receiver said it would answer first.
            assert svc.table.tasks[sent.task_id].view.state is TaskState.COMPLETED
            with pytest.raises(ReplyError):
                await svc.reply(m.message_id, "", artifacts=(Artifact("a", (FILE,)),))

            awaited = msg("make me data")
            sent2 = await svc.send(CAROL, awaited, task_id=None, return_immediately=True)
            assert svc.expect_answer(awaited.message_id)
            assert not svc.expect_answer("no-such-message")
            await wait_for(lambda: svc.table.tasks[sent2.task_id].view.delivery == "accepted")
            assert svc.table.tasks[sent2.task_id].view.state is TaskState.WORKING  # waits for the answer
            arts = (Artifact("out-1", (FILE, DATA), name="outputs"),)
            done = await svc.reply(awaited.message_id, "", artifacts=arts)
            assert done.state is TaskState.COMPLETED and done.completion == "replied"
            assert done.artifacts == arts and [h.role for h in done.history] == ["user"]
            assert (await svc.reply(awaited.message_id, "", artifacts=arts)).task_id == sent2.task_id  # same: fine
            with pytest.raises(ReplyError) as again:
                await svc.reply(awaited.message_id, "different")
            assert again.value.code == ReplyError.ALREADY_REPLIED
            ids["task"] = sent2.task_id
        finally:
            await svc.close()

    run(body())
    task_records = [r for r in rig.records() if r["type"] == R.TASK and r.get("artifacts")]
    assert task_records and task_records[-1]["artifacts"][0]["parts"][1] == {"data": {"key": "value", "count": 42}}
    rig2, svc = _replayed(rig, root)
    try:
        view = svc.table.tasks[ids["task"]].view
        assert view.state is TaskState.COMPLETED
        assert view.artifacts == (Artifact("out-1", (FILE, DATA), name="outputs"),)
    finally:
        rig2.close()


def test_profile_answers_each_magic_prefix_before_the_default_wait_returns(root: Path) -> None:
    async def body(rig: Rig, svc: TaskService) -> None:
        async def send(mid: str) -> Any:
            return await svc.send(CAROL, msg("tck", mid=mid), task_id=None, return_immediately=False)

        done = await send("tck-complete-task-s1")
        assert done.state is TaskState.COMPLETED and done.history[-1].text == "Hello from TCK"
        expected = {
            "tck-artifact-text-s1": ArtifactPart(text="Generated text content"),
            "tck-artifact-file-s1": FILE,
            "tck-artifact-file-url-s1": ArtifactPart(
                url="https://example.com/output.txt", media_type="text/plain", filename="output.txt"
            ),
            "tck-artifact-data-s1": DATA,
        }
        for mid, part in expected.items():
            view = await send(mid)
            assert view.state is TaskState.COMPLETED, mid
            assert [a.parts for a in view.artifacts] == [(part,)], mid
        direct = await send("tck-message-response-s1")
        assert direct.state is TaskState.COMPLETED and direct.direct
        assert direct.history[-1].role == "agent" and direct.history[-1].text == "Direct message response"
        rejected = await send("tck-reject-task-s1")
        assert (rejected.state, rejected.delivery) == (TaskState.FAILED, "unreachable")
        other = await send("tck-something-else-s1")
        assert other.state is TaskState.COMPLETED and other.completion == "delivered"
        # Every one of them went through the session, except the one it refused.
        written = [w["message_id"] for w in rig.fake.writes]
        assert "tck-reject-task-s1" not in written and "tck-message-response-s1" in written

    run_with_service(root, body, setup=_conformance)


def test_input_required_resumes_on_the_next_message_and_replays(root: Path) -> None:
    rig = Rig(root)
    ids: dict[str, str] = {}

    async def body() -> None:
        svc = await _service(rig)
        try:
            first = await svc.send(
                CAROL, msg("start", mid="tck-input-required-a"), task_id=None, return_immediately=False
            )
            assert first.state is TaskState.INPUT_REQUIRED and not first.terminal
            assert first.history[-1].role == "agent"  # the agent's question
            assert (await svc.require_input("tck-input-required-a", "again")).state is TaskState.INPUT_REQUIRED
            # The creator's next message resumes it; an ordinary message completes on delivery.
            more = msg("here is more")
            done = await svc.send(CAROL, more, task_id=first.task_id, return_immediately=False)
            assert done.state is TaskState.COMPLETED and done.completion == "replied"
            assert [h.text for h in done.history if h.role == "user"] == ["start", "here is more"]
            assert len(rig.fake.writes) == 2

            # Asked for input again, then answered by the profile on the resuming message.
            second = await svc.send(CAROL, msg("b", mid="tck-input-required-b"), task_id=None, return_immediately=False)
            assert second.state is TaskState.INPUT_REQUIRED
            answered = await svc.send(
                CAROL, msg("go", mid="tck-complete-task-b"), task_id=second.task_id, return_immediately=False
            )
            assert answered.state is TaskState.COMPLETED and answered.history[-1].text == "Hello from TCK"
            with pytest.raises(TaskError) as closed:
                await svc.send(CAROL, msg("late"), task_id=second.task_id, return_immediately=False)
            assert closed.value.code == TaskError.UNSUPPORTED

            # Waiting for its creator, nothing is in flight: it can be canceled, and nothing is written.
            third = await svc.send(CAROL, msg("c", mid="tck-input-required-c"), task_id=None, return_immediately=False)
            writes = len(rig.fake.writes)
            canceled = await svc.cancel(CAROL.agent_id, third.task_id)
            assert canceled.state is TaskState.CANCELED and len(rig.fake.writes) == writes
            with pytest.raises(TaskError) as again:
                await svc.cancel(CAROL.agent_id, third.task_id)
            assert again.value.code == TaskError.NOT_CANCELABLE

            fourth = await svc.send(CAROL, msg("d", mid="tck-input-required-d"), task_id=None, return_immediately=False)
            ids.update(fourth=fourth.task_id, third=third.task_id)

            # An ask can be interrupted too; its reply then completes it as usual.
            ask = msg("which branch?", kind=Kind.ASK)
            asked = await svc.send(CAROL, ask, task_id=None, return_immediately=True)
            await wait_for(lambda: svc.table.tasks[asked.task_id].view.delivery == "accepted")
            assert (await svc.require_input(ask.message_id, "main or dev?")).state is TaskState.INPUT_REQUIRED
            follow = msg("main")
            resumed = await svc.send(CAROL, follow, task_id=asked.task_id, return_immediately=True)
            assert resumed.state is TaskState.WORKING
            await wait_for(lambda: svc.worker.pending(follow.message_id) is None)
            assert svc.table.tasks[asked.task_id].view.state is TaskState.WORKING  # an ask still waits for its reply
            final = await svc.reply(follow.message_id, "green")
            assert final.state is TaskState.COMPLETED and final.history[-1].text == "green"
            assert rig.state.open_asks() == 0
        finally:
            await svc.close()

    run(body())
    rig2, svc = _replayed(rig, root)
    try:
        assert svc.table.tasks[ids["fourth"]].view.state is TaskState.INPUT_REQUIRED
        assert svc.table.tasks[ids["third"]].view.state is TaskState.CANCELED

        async def after() -> None:
            await svc.start()
            try:
                # Restored as input_required: still cancelable after a restart.
                view = await svc.cancel(CAROL.agent_id, ids["fourth"])
                assert view.state is TaskState.CANCELED
            finally:
                await svc.close()

        run(after())
    finally:
        rig2.close()


def test_direct_answer_is_journaled_and_replayed(root: Path) -> None:
    rig = Rig(root)
    ids: dict[str, str] = {}

    async def body() -> None:
        svc = await _service(rig)
        try:
            view = await svc.send(
                CAROL, msg("hi", mid="tck-message-response-x"), task_id=None, return_immediately=False
            )
            assert view.direct and view.state is TaskState.COMPLETED
            ids["task"] = view.task_id
        finally:
            await svc.close()

    run(body())
    assert any(r.get("direct") for r in rig.records() if r["type"] == R.TASK)
    rig2, svc = _replayed(rig, root)
    try:
        view = svc.table.tasks[ids["task"]].view
        assert view.direct and view.history[-1].text == "Direct message response"
    finally:
        rig2.close()


def test_profile_is_opt_in_and_matches_the_longest_file_prefix_first() -> None:
    assert conformance_answer("tck-artifact-file-url-1")[2][0].parts[0].url  # type: ignore[index]
    assert conformance_answer("tck-artifact-file-1")[2][0].parts[0].raw == "dGNr"  # type: ignore[index]
    assert conformance_answer("hello") is None
    assert FakeHarness().conformance is False
