"""The pi core's saved settings under hostile input: a peer handle too long or not text is refused at `peer add`
with a clear reason (so the settings never outgrow their cap and a resume keeps handle and role), a bad entry
planted in the saved file is skipped with a warning, and an invalid PI_CROSSTALK_HANDLE is named, not silently
replaced."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from crosstalk.core.ids import agent_id_for
from tests.support.pi_link import Extension


@pytest.fixture
def home() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="xpi", dir="/tmp"))  # unix socket paths stay short
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def started(home: Path) -> Iterator[Callable[..., Extension]]:
    exts: list[Extension] = []

    def start(session: str, **kw: Any) -> Extension:
        exts.append(Extension(home, session, **kw))
        return exts[-1]

    yield start
    for ext in reversed(exts):
        ext.close()


def settings_file(home: Path, session: str) -> Path:
    return home / "xt" / "pi" / f"{agent_id_for('pi', session)}.json"


def test_a_huge_peer_handle_is_refused_and_a_resume_keeps_handle_and_role(started, home: Path):
    ext = started("s-big")
    assert ext.call("set", handle="keeper", role="orchestrator")["ok"]
    out = ext.call("peer_add", handle="p" * 100_000)
    assert not out["ok"] and "peer handle" in out["reason"] and "100000 characters" in out["reason"]
    assert ext.call("peer_add", handle="bad name!")["reason"].startswith("peer handle 'bad name!'")
    assert ext.call("peer_add", handle="buddy")["ok"]
    assert len(settings_file(home, "s-big").read_bytes()) < 64 * 1024
    ext.close()
    again = started("s-big")
    assert (again.ready["name"], again.ready["role"]) == ("keeper", "orchestrator")
    assert again.ready["peers"] == ["buddy"]


def test_a_lone_surrogate_is_refused_at_input_and_status_still_answers(started):
    ext = started("s-sur")
    rid = next(ext.ids)
    # json.dumps writes the lone surrogate as the escape \ud800, legal JSON
    ext.write({"t": "call", "id": rid, "op": "peer_add", "args": {"handle": "a\ud800b"}})
    out = ext.wait("result", id=rid)["result"]
    assert not out["ok"] and "lone surrogate" in out["reason"]
    assert ext.call("status")["ok"]


def test_a_bad_saved_entry_is_skipped_with_a_warning(started, home: Path):
    path = settings_file(home, "s-planted")
    path.parent.mkdir(parents=True)
    planted = {"handle": "keeper", "role": "orchestrator", "peers": ["good", "a\ud800b", "x" * 5000, 7]}
    path.write_text(json.dumps(planted))
    ext = started("s-planted")
    assert (ext.ready["name"], ext.ready["role"], ext.ready["peers"]) == ("keeper", "orchestrator", ["good"])
    warnings = [m["text"] for m in ext.seen if m.get("t") == "notice"]
    assert any("saved peer" in w and "skipped" in w for w in warnings), warnings
    assert ext.call("status")["ok"]
    path.write_text(json.dumps({"handle": "bad\ud800", "role": "worker"}))
    ext.close()
    again = started("s-planted")
    assert again.ready["role"] == "worker" and "\ud800" not in again.ready["name"]
    assert any("saved handle" in m["text"] for m in again.seen if m.get("t") == "notice")


def test_an_invalid_handle_in_the_environment_is_named(started, home: Path):
    ext = started("s-env", PI_CROSSTALK_HANDLE="not a handle!")
    notices = [m["text"] for m in ext.seen if m.get("t") == "notice"]
    assert any(n.startswith("PI_CROSSTALK_HANDLE='not a handle!'") for n in notices), notices
    assert ext.ready["name"] != "not a handle!"
    ext.close()
    assert "PI_CROSSTALK_HANDLE='not a handle!'" in (home / "s-env.err").read_text()
