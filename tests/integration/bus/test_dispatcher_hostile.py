"""Files a pusher controls must not leak, wedge or vanish: symlinks and oversized files in a transport are refused
per file; a broken message is one logged error and the cursor moves past it; odd file names are dispatched (or
refused with a reason); a message outside any channel directory is ignored with a log line."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from crosstalk.bus.transport.state import read_cursor, transport_state
from tests.support.bus_dispatch import (
    GIT_ID,
    commit_files,
    in_process_dispatcher,
    log_text,
    replies_to,
    runs,
    set_registry,
    single_machine,
    write_model,
)
from tests.support.bus_machines import Machine

SECRET = "TOP-SECRET-4c1f9e"
DAY = "2026/11/29"


def message(to: str = "echo", body: str = "hello", timestamp: str = "2026-11-29T23:51:20.913Z", extra: str = "") -> str:
    return f"---\nfrom: alice\nto: {to}\ntimestamp: {timestamp}\n{extra}---\n\n{body}\n"


def msg_path(channel: str, name: str) -> str:
    return f"data/channels/{channel}/{DAY}/{name}"


@pytest.fixture
def echo_machine(make_machine, monkeypatch):
    """(machine, channel, echo model, in-process dispatcher, secret file outside the transport)."""
    m, channel = single_machine(make_machine)
    models = m.base / "models"
    models.mkdir()
    echo = write_model(models, "echo")
    set_registry(m, {"local": {"echo": str(echo)}})
    secret = m.base / "secret.txt"
    secret.write_text(SECRET + "\n")
    dispatcher = in_process_dispatcher(m, monkeypatch)
    dispatcher.tick()  # settle the cursor past the setup commits
    return m, channel, echo, dispatcher, secret


def commit_symlinks(m: Machine, links: dict[str, str]) -> None:
    """Commit symlinks (path -> target) with plain git."""
    assert m.root is not None
    for rel, target in links.items():
        path = m.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.exists():
            path.unlink()
        os.symlink(target, path)
    m.git("add", "--", *links)
    m.git(*GIT_ID, "commit", "-q", "-m", "test: symlinks")


def prompts(echo: Path) -> str:
    return "\n".join(str(r["prompt"]) for r in runs(echo))


def test_a_symlinked_protocol_md_never_reaches_the_prompt(echo_machine) -> None:
    m, channel, echo, dispatcher, secret = echo_machine
    commit_symlinks(m, {"PROTOCOL.md": str(secret)})
    commit_files(m, {msg_path(channel, "235120913Z-00000000000000a1.md"): message()})
    report = dispatcher.tick()
    assert report.dispatched == 1
    assert SECRET not in prompts(echo)
    log = log_text(m)
    assert "unsafe_file" in log and "PROTOCOL.md" in log and "symlink" in log


def test_a_symlinked_message_file_is_a_parse_error_naming_it(echo_machine) -> None:
    m, channel, echo, dispatcher, secret = echo_machine
    bad = msg_path(channel, "235120913Z-00000000000000b1.md")
    zero = msg_path(channel, "235120914Z-00000000000000b2.md")
    good = msg_path(channel, "235120915Z-00000000000000b3.md")
    commit_symlinks(m, {bad: str(secret), zero: "/dev/zero"})
    commit_files(m, {good: message(body="the good one")})
    started = time.monotonic()
    report = dispatcher.tick()
    assert time.monotonic() - started < 30  # /dev/zero is never read
    assert report.parse_errors == 2 and report.dispatched == 1
    assert SECRET not in prompts(echo) and "the good one" in prompts(echo)
    log = log_text(m)
    assert bad in log and zero in log and "symlink" in log


def test_an_oversized_message_file_is_refused_by_size(echo_machine) -> None:
    m, channel, echo, dispatcher, _ = echo_machine
    big = msg_path(channel, "235120913Z-00000000000000c1.md")
    commit_files(m, {big: message(body="x" * (3 << 20))})
    report = dispatcher.tick()
    assert report.parse_errors == 1 and report.dispatched == 0 and runs(echo) == []
    assert big in log_text(m) and "limit" in log_text(m)


def test_a_persona_through_a_symlinked_directory_is_refused(echo_machine) -> None:
    m, channel, echo, dispatcher, _ = echo_machine
    outside = m.base / "outside"
    outside.mkdir()
    (outside / "evil.md").write_text(SECRET)
    assert m.root is not None
    m.git("rm", "-r", "-q", "--ignore-unmatch", "--", "local/actors")
    shutil.rmtree(m.root / "local" / "actors", ignore_errors=True)
    commit_symlinks(m, {"local/actors": str(outside)})
    commit_files(m, {msg_path(channel, "235120913Z-00000000000000d1.md"): message(extra="as: evil\n")})
    report = dispatcher.tick()
    assert report.failed == 1 and SECRET not in prompts(echo)
    [reply] = replies_to(m.root, channel, f"{DAY}/235120913Z-00000000000000d1.md")
    assert reply.failed and "local/actors" in (reply.error or "") and "symlink" in (reply.error or "")


def test_an_impossible_date_is_one_error_and_the_cursor_moves_past_it(echo_machine) -> None:
    m, channel, echo, dispatcher, _ = echo_machine
    bad = msg_path(channel, "235120913Z-00000000000000e1.md")
    good = msg_path(channel, "235120914Z-00000000000000e2.md")
    commit_files(m, {bad: message(timestamp="2026-13-45"), good: message(body="still answered")})
    report = dispatcher.tick()
    assert report.parse_errors == 1 and report.dispatched == 1 and "still answered" in prompts(echo)
    assert read_cursor(transport_state("bus", os.environ)) == report.head
    assert bad in log_text(m)
    # The broken file is addressed to echo and names its sender: it gets a failed reply once, not a model run.
    [reply] = replies_to(m.root, channel, f"{DAY}/235120913Z-00000000000000e1.md")
    assert reply.failed
    later = dispatcher.tick()
    assert later.parse_errors == 0 and len(runs(echo)) == 1


def test_yaml_aliases_in_front_matter_are_refused_quickly(echo_machine) -> None:
    m, channel, echo, dispatcher, _ = echo_machine
    lol = "".join(f"x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 9)}]\n" for i in range(1, 10))
    bomb = msg_path(channel, "235120913Z-00000000000000f1.md")
    # `failed:` must be a bool: the old error message turned the ~2 GB expansion into text to quote it.
    commit_files(m, {bomb: message(extra="x0: &x0 lol\n" + lol + "failed: *x9\n")})
    started = time.monotonic()
    report = dispatcher.tick()
    assert time.monotonic() - started < 30
    assert report.parse_errors == 1 and runs(echo) == []
    assert bomb in log_text(m) and "alias" in log_text(m)


def test_non_ascii_names_are_dispatched_and_a_newline_name_is_refused_by_name(echo_machine) -> None:
    m, channel, echo, dispatcher, _ = echo_machine
    accented = msg_path(channel, "235120913Z-héllo-wörld.md")
    newline = msg_path(channel, "235120914Z-two\nlines.md")
    commit_files(m, {accented: message(body="accented name"), newline: message(body="newline name")})
    report = dispatcher.tick()
    assert report.dispatched == 1 and "accented name" in prompts(echo) and "newline name" not in prompts(echo)
    assert replies_to(m.root, channel, f"{DAY}/235120913Z-héllo-wörld.md")
    assert report.parse_errors == 1 and "control character" in log_text(m)


def test_a_message_outside_a_channel_directory_is_ignored_and_logged_once(echo_machine) -> None:
    m, _channel, echo, dispatcher, _ = echo_machine
    stray = f"data/channels/not-a-channel/{DAY}/235120913Z-0000000000000011.md"
    no_channel_md = f"data/channels/0b7e6a53-6a2b-4d51-9f0f-9b1f2f4c8d11/{DAY}/235120913Z-0000000000000012.md"
    commit_files(m, {stray: message(body="stray"), no_channel_md: message(body="no CHANNEL.md")})
    report = dispatcher.tick()
    assert report.dispatched == 0 and runs(echo) == []
    dispatcher.tick()
    log = log_text(m)
    assert log.count(stray) == 1 and log.count(no_channel_md) == 1 and "ignored" in log
