"""Qwen Code's session registry as crosstalk reads it: only live records of this user's processes, in this pid
namespace and boot; nothing followed through a symlink; derived names told from chosen ones."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from crosstalk.fs.procinfo import proc_start_time
from crosstalk.harness.base import CallEvidence
from crosstalk.harness.qwen import KIND
from crosstalk.harness.qwen.sessions import boot_id, live_records, own_name, read_record
from tests.support.qwen_registry import record, write


def env(home: Path) -> dict[str, str]:
    return {"QWEN_HOME": str(home)}


def test_a_live_record_of_this_process_is_read_and_listed(tmp_path: Path) -> None:
    write(tmp_path, record())
    assert read_record(env(tmp_path), os.getpid()) is not None
    [(pid, rec)] = list(live_records(env(tmp_path)))
    assert pid == os.getpid() and rec["sessionId"] == record()["sessionId"]


def test_records_that_prove_nothing_are_skipped(tmp_path: Path) -> None:
    pid = os.getpid()
    for bad in (
        record(pidNs=1), record(procStart=f"other-boot:{proc_start_time(pid)}"), record(procStart=f"{boot_id()}:1"),
        record(schemaVersion=2), record(sessionId=""), record(pid=1), record(procStart=None),
    ):  # fmt: skip
        write(tmp_path, {**bad, "pid": bad["pid"]}, f"{pid}.json")
        assert read_record(env(tmp_path), pid) is None, bad
        assert list(live_records(env(tmp_path))) == []


def test_symlinks_are_not_followed(tmp_path: Path) -> None:
    real = write(tmp_path / "elsewhere", record())
    (tmp_path / "home" / "sessions").mkdir(parents=True)
    (tmp_path / "home" / "sessions" / f"{os.getpid()}.json").symlink_to(real)
    assert read_record(env(tmp_path / "home"), os.getpid()) is None
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "sessions").symlink_to(real.parent)
    assert read_record(env(tmp_path / "linked"), os.getpid()) is None
    assert list(live_records(env(tmp_path / "linked"))) == []


def test_an_oversized_record_and_junk_names_are_skipped(tmp_path: Path) -> None:
    write(tmp_path, {**record(), "pad": "x" * 200_000})
    write(tmp_path, record(), "junk.json")
    write(tmp_path, record(), f"0{os.getpid()}.json")
    assert list(live_records(env(tmp_path))) == []


def test_a_minted_name_is_read(tmp_path: Path) -> None:
    write(tmp_path, record(), f"{os.getpid()}-0a1b2c3d.json")
    assert [p for p, _ in live_records(env(tmp_path))] == [os.getpid()]


def test_derived_names_are_told_from_chosen_ones() -> None:
    assert own_name(record(name="project-3f")) is None
    assert own_name(record(name="project-d2")) is None  # /clear keeps the old id's two hex
    assert own_name(record(name="reviewer")) == "reviewer"
    assert own_name(record(name="other-3f")) == "other-3f"


def test_discovery_says_whether_the_inbox_is_there(tmp_path: Path) -> None:
    sock_path = tmp_path / "in.sock"
    write(tmp_path, record(ipcPath=str(sock_path)))
    [row] = KIND.discover(env(tmp_path))
    assert not row.reachable and "gone" in (row.reason or "") and row.name == "project-3f"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(sock_path))
        [row] = KIND.discover(env(tmp_path))
        assert row.reachable and row.endpoint == str(sock_path)


def test_identify_needs_the_session_variable_and_the_parents_record(tmp_path: Path) -> None:
    write(tmp_path, record())
    call = CallEvidence(parent_pid=os.getpid(), environ={**env(tmp_path), "QWEN_CODE_SESSION_ID": "whatever"})
    found = KIND.identify(call)
    assert found is not None and found.session_ref == record()["sessionId"] and found.preferred_name is None
    assert KIND.identify(CallEvidence(parent_pid=os.getpid(), environ=env(tmp_path))) is None
    assert KIND.identify(CallEvidence(parent_pid=1, environ={**env(tmp_path), "QWEN_CODE_SESSION_ID": "x"})) is None
