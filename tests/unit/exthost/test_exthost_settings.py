"""An extension-hosted session's saved settings: each entry is checked on its own (a bad one is skipped with a
warning, the rest kept), a file past the cap is never written, and the checks name what they refuse."""

from __future__ import annotations

import json
from pathlib import Path

from crosstalk.core.ids import agent_id_for
from crosstalk.exthost.settings import (
    MAX_SETTINGS,
    bad_accept,
    bad_handle,
    load_settings,
    save_settings,
    settings_path,
)
from crosstalk.registry.paths import StatePaths


def test_the_settings_live_under_the_harness_and_the_sessions_agent_id(tmp_path: Path):
    paths = StatePaths.from_env({"CROSSTALK_HOME": str(tmp_path)})
    assert settings_path(paths, "pi", "s1") == paths.root / "pi" / f"{agent_id_for('pi', 's1')}.json"


def test_handles_are_names_and_peers_or_parents_may_be_agent_ids():
    assert bad_handle("alice", "peer") is None
    assert bad_handle(agent_id_for("pi", "s1"), "parent") is None
    assert bad_handle(7, "peer") == "peer 7 is not text"
    assert (bad_handle("bad name!", "handle") or "").startswith("handle 'bad name!'")
    assert "surrogate" in (bad_handle("a\ud800", "peer") or "")


def test_accept_from_entries_are_buckets_handles_or_tags():
    for entry in ("peers", "external", "alice", "@github:ci"):
        assert bad_accept(entry, "entry") is None, entry
    problem = bad_accept("no way!", "entry") or ""
    assert problem.startswith("entry 'no way!' is not a bucket (agents, children, external, parent, peers, unknown)")


def test_a_bad_entry_is_skipped_with_a_warning_and_the_rest_kept(tmp_path: Path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"handle": "ok-name", "role": "worker", "parent": "bad parent!",
                                "peers": ["buddy", 3], "accept_from": "peers"}))  # fmt: skip
    warnings: list[str] = []
    saved = load_settings(path, warnings.append)
    assert saved == {"handle": "ok-name", "role": "worker", "peers": ["buddy"]}
    assert len(warnings) == 3 and "accept_from is not a list" in warnings[2]


def test_an_unreadable_file_is_ignored_whole_and_a_missing_one_is_empty(tmp_path: Path):
    warnings: list[str] = []
    assert load_settings(tmp_path / "none.json", warnings.append) == {"role": None} and warnings == []
    (tmp_path / "bad.json").write_text("[1, 2]")
    assert load_settings(tmp_path / "bad.json", warnings.append) == {}
    assert warnings[0].startswith("saved crosstalk settings ignored:")


def test_settings_past_the_cap_are_refused_and_nothing_is_written(tmp_path: Path):
    path = tmp_path / "pi" / "s.json"
    assert save_settings(path, {"handle": "keeper", "peers": ["buddy"]}, print) is None
    assert json.loads(path.read_text()) == {"handle": "keeper", "peers": ["buddy"]}
    problem = save_settings(path, {"peers": ["p" * MAX_SETTINGS]}, print)
    assert problem is not None and "-byte cap: not saved" in problem
    assert json.loads(path.read_text()) == {"handle": "keeper", "peers": ["buddy"]}
