"""The opt-in conformance profile: a real `crosstalk agent run --harness fake --conformance` process answers each of
the A2A conformance kit's magic message ids (a2aproject/a2a-tck) as the kit's reference SUT does, through the real
receiver chain, journal and tasks; the official SDK client sends them with alice's bearer token. Without
`--conformance` the same ids are ordinary messages."""

from __future__ import annotations

from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict

from crosstalk.core.ids import new_message_id
from tests.support.a2a_agents import WAIT_S, ct_meta, history_roles, sdk, send_request
from tests.support.bounded import run_bounded
from tests.support.procs import procs, wait_for


def _artifact_parts(task: pb.Task) -> list[dict]:
    return [MessageToDict(p) for a in task.artifacts for p in a.parts]


def test_conformance_profile_answers_every_magic_prefix_over_a2a():
    with procs() as p:
        alice = p.start_agent("alice")
        bob = p.start_agent("bob", "--conformance")
        url = bob.ready["a2a_url"]
        token = p.paths.token_path(alice.agent_id).read_text().strip()
        session = new_message_id()[-8:]

        def tck(prefix: str) -> str:
            return f"tck-{prefix}-{session}"

        async def main():
            async with sdk(url, token) as client:
                done = await client.send_task(send_request("TCK", message_id=tck("complete-task")))
                assert done.status.state == pb.TASK_STATE_COMPLETED
                assert [p.text for p in done.status.message.parts] == ["Hello from TCK"]
                assert history_roles(done) == [("ROLE_USER", "TCK"), ("ROLE_AGENT", "Hello from TCK")]

                expected = {
                    "artifact-text": {"text": "Generated text content"},
                    "artifact-file": {"raw": "dGNr", "mediaType": "text/plain", "filename": "output.txt"},
                    "artifact-file-url": {
                        "url": "https://example.com/output.txt",
                        "mediaType": "text/plain",
                        "filename": "output.txt",
                    },
                    "artifact-data": {"data": {"key": "value", "count": 42.0}},
                }
                for prefix, part in expected.items():
                    task = await client.send_task(send_request("TCK artifact test", message_id=tck(prefix)))
                    assert task.status.state == pb.TASK_STATE_COMPLETED, prefix
                    assert task.artifacts[0].artifact_id, prefix
                    assert _artifact_parts(task) == [part], prefix
                    again = await client.get(task.id)  # kept by the task store, not only in the answer
                    assert _artifact_parts(again) == [part], prefix

                event = await client.send(send_request("TCK", message_id=tck("message-response")))
                assert event.HasField("message") and not event.HasField("task")
                assert event.message.role == pb.ROLE_AGENT
                assert [p.text for p in event.message.parts] == ["Direct message response"]

                rejected = await client.send_task(send_request("TCK", message_id=tck("reject-task")))
                assert rejected.status.state == pb.TASK_STATE_FAILED

                waiting = await client.send_task(send_request("TCK", message_id=tck("input-required")))
                assert waiting.status.state == pb.TASK_STATE_INPUT_REQUIRED
                listed = await client.list(status=pb.TASK_STATE_INPUT_REQUIRED)
                assert [t.id for t in listed.tasks] == [waiting.id]
                # The creator's next message resumes it (the context inferred from the task) and, ordinary, completes.
                follow = await client.send_task(send_request("more", message_id=new_message_id(), task_id=waiting.id))
                assert follow.id == waiting.id and follow.context_id == waiting.context_id
                assert follow.status.state == pb.TASK_STATE_COMPLETED
                short = await client.get(waiting.id)
                assert [m for m in history_roles(short) if m[0] == "ROLE_USER"] == [
                    ("ROLE_USER", "TCK"),
                    ("ROLE_USER", "more"),
                ]

                # Interrupted tasks can be canceled: nothing is in flight.
                other = await client.send_task(send_request("TCK", message_id=tck("input-required") + "-2"))
                assert other.status.state == pb.TASK_STATE_INPUT_REQUIRED
                canceled = await client.cancel(other.id)
                assert canceled.status.state == pb.TASK_STATE_CANCELED

                plain = await client.send_task(send_request("hello", message_id=new_message_id()))
                assert plain.status.state == pb.TASK_STATE_COMPLETED and ct_meta(plain)["completion"] == "delivered"

        run_bounded(main(), 60)
        # Everything but the rejected one reached bob's "session" once, through the receiver chain.
        wait_for(lambda: len(bob.inbox_lines()) == 10, WAIT_S, "bob's inbox")
        ids = bob.inbox_ids()
        assert tck("reject-task") not in ids and len(set(ids)) == len(ids)
        kinds = {r["type"] for r in p.journal_records(bob.agent_id)}
        assert "task" in kinds


def test_without_the_profile_magic_ids_are_ordinary_messages():
    with procs() as p:
        alice = p.start_agent("alice")
        bob = p.start_agent("bob")
        url = bob.ready["a2a_url"]
        token = p.paths.token_path(alice.agent_id).read_text().strip()

        async def main():
            async with sdk(url, token) as client:
                for prefix in ("artifact-text", "message-response", "input-required"):
                    task = await client.send_task(send_request("TCK", message_id=f"tck-{prefix}-{new_message_id()}"))
                    assert task.status.state == pb.TASK_STATE_COMPLETED and not task.artifacts
                    assert ct_meta(task)["completion"] == "delivered"

        run_bounded(main(), 60)
