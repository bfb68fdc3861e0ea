"""fs/install_undo.py: the bytes from before crosstalk's first edit come back only while the file is exactly what
crosstalk wrote; a record that is not a private file of ours restores nothing."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from crosstalk.fs.install_undo import STORE, UndoRecord, missing_dirs, tidy


def test_restores_the_first_before_across_reinstalls_and_only_while_unchanged(tmp_path: Path) -> None:
    target = tmp_path / "settings.json"
    rec = UndoRecord(tmp_path / "state", target)
    rec.keep(b"original", b"v1", [])
    rec.keep(b"v1", b"v2", [])  # a re-install that changed crosstalk's entry
    assert rec.restore(b"v2") == b"original"
    assert rec.restore(b"v1") == b"v1" and rec.restore(b"changed by the harness") == b"changed by the harness"
    assert oct(rec.file.stat().st_mode & 0o777) == "0o600"


def test_a_file_install_created_is_deleted_and_its_directories_go_when_empty(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "config.json"
    made = missing_dirs(target)
    assert made == [str(tmp_path / "a"), str(tmp_path / "a" / "b")]
    rec = UndoRecord(tmp_path / "state", target)
    target.parent.mkdir(parents=True)
    target.write_bytes(b"ours")
    rec.keep(None, b"ours", made)
    assert rec.restore(b"ours") is None
    target.unlink()
    rec.finish()
    assert not (tmp_path / "a").exists() and not rec.file.exists()
    tidy(tmp_path / "state")
    assert not (tmp_path / "state").exists()  # the store made the state root: gone with the last record


def test_a_directory_holding_the_users_files_stays(tmp_path: Path) -> None:
    target = tmp_path / "a" / "config.json"
    rec = UndoRecord(tmp_path / "state", target)
    rec.keep(None, b"ours", missing_dirs(target))
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "mine").write_text("x")
    rec.finish()
    assert (tmp_path / "a" / "mine").exists()


def test_a_record_others_can_read_or_write_restores_nothing(tmp_path: Path) -> None:
    rec = UndoRecord(tmp_path / "state", tmp_path / "f")
    rec.keep(b"before", b"after", [])
    os.chmod(rec.file, 0o644)
    assert rec.load() is None and rec.restore(b"after") == b"after"
    assert (tmp_path / "state" / STORE).is_dir()


@given(before=st.one_of(st.none(), st.binary(max_size=200)), after=st.binary(min_size=1, max_size=200))
def test_restore_is_the_exact_inverse_of_one_edit(tmp_path_factory, before: bytes | None, after: bytes) -> None:
    base = tmp_path_factory.mktemp("undo")
    rec = UndoRecord(base, base / "f")
    rec.keep(before, after, [])
    assert rec.restore(after) == (after if before == after else before)
