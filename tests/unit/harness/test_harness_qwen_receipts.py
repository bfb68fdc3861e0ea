"""Qwen Code's delivery receipts: one state per status, heard only with our token, from our uid and the process the
message was written to, applied as the protocol's transitions."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from crosstalk.core.states import State
from crosstalk.harness.qwen import receipts
from crosstalk.harness.qwen.receipts import Receipt, ReceiptInbox, late_result, parse, result_of


def receipt_bytes(token: str, mid: str, status: str, **more: object) -> bytes:
    lines = [{"msgV": 1, "type": "auth", "token": token},
             {"msgV": 1, "msgId": "x", "type": "control", "action": "delivery_status", "status": status,
              "origMsgId": mid, "reason": "why", **more}]  # fmt: skip
    return "".join(json.dumps(x) + "\n" for x in lines).encode()


@pytest.mark.parametrize(
    ("status", "state"),
    [("delivered", State.QUEUED), ("held", State.HELD), ("denied", State.REJECTED), ("refused", State.REJECTED),
     ("expired", State.UNREACHABLE), ("misaddressed", State.UNREACHABLE), ("dropped", State.UNREACHABLE),
     ("gone", State.UNKNOWN)],
)  # fmt: skip
def test_each_status_is_one_state(status: str, state: State) -> None:
    assert result_of(Receipt("m", status)).state is state


@pytest.mark.parametrize("status", ["delivered", "held", "denied", "refused", "expired", "misaddressed", "dropped",
                                    "gone"])  # fmt: skip
def test_a_later_word_is_the_same_one_state(status: str) -> None:
    """A released message is `queued`, as one delivered at once: each word is one state, first or later."""
    assert late_result(Receipt("m", status)).state is result_of(Receipt("m", status)).state
    assert "released by its user" in (late_result(Receipt("m", "delivered")).reason or "")


def test_parse_needs_our_token_and_fans_out_a_burst() -> None:
    assert parse(receipt_bytes("bad", "m", "held"), "good") == []
    assert parse(b"junk\n" + receipt_bytes("good", "m", "held"), "good") == []
    got = parse(receipt_bytes("good", "m", "dropped", dropReason="rate-limited", droppedMsgIds=["a", 3, "b"]), "good")
    assert [(r.message_id, r.status, r.drop_reason) for r in got] == [
        (mid, "dropped", "rate-limited") for mid in ("m", "a", "b")
    ]


def send(path: str, raw: bytes) -> None:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(path)
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)
        sock.recv(1)


@pytest.fixture
def inbox(tmp_path: Path):
    box = ReceiptInbox(tmp_path)
    yield box
    box.close()


def test_the_inbox_hears_the_session_it_wrote_to_and_applies_transitions(inbox: ReceiptInbox) -> None:
    later: list[str] = []
    inbox.expect("m1", os.getpid(), lambda r: later.append(r.status))
    send(inbox.path, receipt_bytes(inbox.token, "m1", "held"))
    first = inbox.wait("m1", 5)
    assert first is not None and first.status == "held"
    # each send returns once the inbox applied it (it closes the connection after): the order is the test's
    for status in ("held", "delivered", "refused", "expired"):  # a repeat; delivered; not after it; a final word
        send(inbox.path, receipt_bytes(inbox.token, "m1", status))
    assert later == ["held", "delivered", "expired"]


def test_a_receipt_from_another_process_or_without_our_token_is_ignored(inbox: ReceiptInbox) -> None:
    inbox.expect("m2", os.getpid() + 1_000_000)
    send(inbox.path, receipt_bytes(inbox.token, "m2", "delivered"))
    inbox.expect("m3", os.getpid())
    send(inbox.path, receipt_bytes("0" * 64, "m3", "delivered"))
    assert inbox.wait("m2", 0.3) is None and inbox.wait("m3", 0.3) is None


def test_the_inbox_directory_is_private(tmp_path: Path) -> None:
    directory = receipts.inbox_dir({"XDG_RUNTIME_DIR": str(tmp_path)})
    assert directory == tmp_path / "crosstalk-qwen" and (directory.stat().st_mode & 0o777) == 0o700
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "crosstalk-qwen").symlink_to(tmp_path)
    assert receipts.inbox_dir({"XDG_RUNTIME_DIR": str(tmp_path / "other")}) != tmp_path / "other" / "crosstalk-qwen"


def test_inboxes_crashed_processes_left_are_removed(tmp_path: Path) -> None:
    dead = tmp_path / "999999999-00000000.sock"
    with socket.socket(socket.AF_UNIX) as left:
        left.bind(str(dead))
    kept = tmp_path / "notes.txt"
    kept.write_text("mine")
    box = ReceiptInbox(tmp_path)
    try:
        assert not dead.exists() and kept.exists() and Path(box.path).exists()
    finally:
        box.close()
