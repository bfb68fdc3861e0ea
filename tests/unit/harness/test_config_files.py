"""harness/config_files.py: the install and uninstall steps every installer shares, and what each reports."""

from __future__ import annotations

from pathlib import Path

from crosstalk.fs.config_edit import update
from crosstalk.harness.config_files import install_edit, uninstall_edit


def _run(path: Path):
    return lambda edit: update(path, edit, limit=1 << 20)


def test_restored_removed_updated_kept_and_nothing(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "home"), "CROSSTALK_HOME": str(tmp_path / "xt")}
    mine = tmp_path / "cfg" / "mine.json"
    mine.parent.mkdir()
    mine.write_bytes(b'{"a":1}')
    assert install_edit(mine, env, _run(mine), lambda raw: b'{"a":1,"x":2}').action == "updated"
    assert uninstall_edit(mine, env, _run(mine), lambda raw: raw).action == "restored"  # type: ignore[union-attr]
    assert mine.read_bytes() == b'{"a":1}'

    made = tmp_path / "new" / "made.json"
    assert install_edit(made, env, _run(made), lambda raw: b"{}").action == "created"
    assert uninstall_edit(made, env, _run(made), None).action == "removed"  # type: ignore[union-attr]
    assert not (tmp_path / "new").exists()

    assert install_edit(made, env, _run(made), lambda raw: b"{}").action == "created"
    made.write_bytes(b'{"users": 1}')  # changed since: no restore
    strip = lambda raw: b'{"users": 1, "gone": 1}'.replace(b', "gone": 1', b"") if raw else raw  # noqa: E731
    assert uninstall_edit(made, env, _run(made), strip).action == "absent"  # type: ignore[union-attr]
    install_edit(made, env, _run(made), lambda raw: b'{"users": 1, "x": 2}')
    made.write_bytes(b'{"users": 2, "x": 2}')
    assert uninstall_edit(made, env, _run(made), None).action == "kept"  # type: ignore[union-attr]
    assert uninstall_edit(tmp_path / "never.json", env, _run(tmp_path / "never.json"), None) is None
