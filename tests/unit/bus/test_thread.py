"""The thread a batch answers (bus/runs/thread.py): followed back through `re:`, oldest first, bounded, never through a
symlink; and how the prompt shows it."""

from __future__ import annotations

import os
from pathlib import Path

from crosstalk.bus.protocol.message import BusMessage, render_message
from crosstalk.bus.runs.prompt import EARLIER_HEADING, PromptItem, build_prompt
from crosstalk.bus.runs.reader import ScannedMessage
from crosstalk.bus.runs.thread import THREAD_BYTES, THREAD_MESSAGES, earlier_in_thread

CHANNEL = "0b5c3a8e-1d2f-4a6b-9c7d-112233445566"
TS = "2026-12-02T10:00:00.000Z"


def _write(root: Path, rel: str, sender: str, body: str, re: tuple[str, ...] = ()) -> BusMessage:
    msg = BusMessage(sender=sender, to="x", timestamp=TS, re=re, body=body)
    path = root / "data" / "channels" / CHANNEL / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_message(msg))
    return msg


def _scanned(rel: str, msg: BusMessage) -> ScannedMessage:
    return ScannedMessage(CHANNEL, rel, msg)


def _conversation(root: Path, turns: int) -> list[tuple[str, BusMessage]]:
    """Alternating turns, each `re:` the one before: 2026/12/02/0001.md ... oldest first."""
    out: list[tuple[str, BusMessage]] = []
    for i in range(turns):
        rel = f"2026/12/02/{i:04d}.md"
        sender = "op" if i % 2 == 0 else "t/m@a"
        out.append((rel, _write(root, rel, sender, f"turn {i}", (out[-1][0],) if out else ())))
    return out


def test_a_new_message_has_no_thread(tmp: Path) -> None:
    [(rel, msg)] = _conversation(tmp, 1)
    assert earlier_in_thread(tmp, CHANNEL, [_scanned(rel, msg)]) == []


def test_the_thread_is_followed_back_and_shown_oldest_first(tmp: Path) -> None:
    conv = _conversation(tmp, 4)
    rel, msg = conv[-1]
    earlier = earlier_in_thread(tmp, CHANNEL, [_scanned(rel, msg)])
    assert [(e.sender, e.ref, e.body.strip()) for e in earlier] == [
        ("op", conv[0][0], "turn 0"),
        ("t/m@a", conv[1][0], "turn 1"),
        ("op", conv[2][0], "turn 2"),
    ]


def test_a_batch_shares_one_thread_and_never_repeats_its_own_messages(tmp: Path) -> None:
    conv = _conversation(tmp, 3)
    batch = [_scanned(rel, msg) for rel, msg in conv[1:]]  # turns 1 and 2: turn 2 answers turn 1, in the batch
    assert [e.ref for e in earlier_in_thread(tmp, CHANNEL, batch)] == [conv[0][0]]


def test_the_thread_keeps_the_nearest_messages_within_its_bounds(tmp: Path) -> None:
    conv = _conversation(tmp, THREAD_MESSAGES + 5)
    rel, msg = conv[-1]
    earlier = earlier_in_thread(tmp, CHANNEL, [_scanned(rel, msg)])
    assert [e.ref for e in earlier] == [r for r, _ in conv[-1 - THREAD_MESSAGES : -1]]
    big = "y" * (THREAD_BYTES // 2 + 1)
    a = _write(tmp, "2027/01/01/a.md", "op", big)
    b = _write(tmp, "2027/01/01/b.md", "t/m@a", big, ("2027/01/01/a.md",))
    c = _write(tmp, "2027/01/01/c.md", "op", "now", ("2027/01/01/b.md",))
    assert a and b
    assert [e.ref for e in earlier_in_thread(tmp, CHANNEL, [_scanned("2027/01/01/c.md", c)])] == ["2027/01/01/b.md"]


def test_links_that_leave_the_channel_loop_or_lead_through_a_symlink_are_skipped(tmp: Path) -> None:
    secret = tmp / "secret.md"
    secret.write_text(render_message(BusMessage(sender="op", to="x", timestamp=TS, body="SECRET")))
    channel = tmp / "data" / "channels" / CHANNEL
    (channel / "2026").mkdir(parents=True)
    os.symlink(secret, channel / "2026" / "link.md")
    _write(tmp, "2026/loop-a.md", "op", "loop a", ("2026/loop-b.md",))
    _write(tmp, "2026/loop-b.md", "op", "loop b", ("2026/loop-a.md",))
    msg = _write(
        tmp, "2026/now.md", "op", "now", ("2026/link.md", "../../../secret.md", "2026/gone.md", "2026/loop-a.md")
    )
    earlier = earlier_in_thread(tmp, CHANNEL, [_scanned("2026/now.md", msg)])
    assert [e.body.strip() for e in earlier] == ["loop a", "loop b"]


def test_the_prompt_shows_the_thread_between_the_persona_and_the_messages() -> None:
    earlier = [PromptItem("op", "2026/1.md", "question\n"), PromptItem("t/m@a", "2026/2.md", "answer")]
    text = build_prompt("P", "Terse.", [PromptItem("op", "2026/3.md", "follow-up")], earlier)
    assert text == (
        "P\n\n## Persona\n\nTerse.\n\n"
        f"{EARLIER_HEADING}\n\n"
        "--- Earlier (from: op, ref: 2026/1.md) ---\nquestion\n\n"
        "--- Earlier (from: t/m@a, ref: 2026/2.md) ---\nanswer\n\n"
        "--- Message 1 of 1 (from: op, ref: 2026/3.md) ---\nfollow-up\n"
    )
