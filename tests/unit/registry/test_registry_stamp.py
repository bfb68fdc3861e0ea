"""registry_stamp and the caches that use it: the registry's files are reread only when one of them changed."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

import pytest

from crosstalk.registry import bearer as bearer_mod
from crosstalk.registry.bearer import BearerDirectory
from crosstalk.registry.discovery import registry_stamp
from crosstalk.registry.paths import StatePaths


def _aged(paths: StatePaths, seconds: float = 5.0) -> None:
    """Both directories last changed `seconds` ago."""
    past = time.time() - seconds
    for d in (paths.agents, paths.credentials):
        os.utime(d, (past, past))


def _paths(tmp_path) -> StatePaths:
    paths = StatePaths(tmp_path)
    paths.agents.mkdir(parents=True)
    paths.credentials.mkdir(parents=True)
    return paths


def test_no_stamp_without_the_directories(tmp_path):
    assert registry_stamp(StatePaths(tmp_path)) is None


def test_a_stamp_is_trusted_only_once_settled_and_changes_with_a_rename_into_the_directory(tmp_path):
    paths = _paths(tmp_path)
    assert registry_stamp(paths) is None  # just changed: a second change in the same tick would be invisible
    _aged(paths)
    first = registry_stamp(paths)
    assert first is not None and registry_stamp(paths) == first
    tmp = paths.agents / ".tmp"
    tmp.write_text("{}")
    tmp.rename(paths.agents / "0123456789abcdef.json")
    assert registry_stamp(paths) is None  # changed now: not trusted until it settles
    _aged(paths, 3.0)
    assert registry_stamp(paths) not in (None, first)


def test_a_known_token_is_not_reread_after_the_ttl_while_the_registry_is_unchanged(tmp_path, monkeypatch):
    paths = _paths(tmp_path)
    _aged(paths)
    reads: list[int] = []
    desc = SimpleNamespace(agent_id="0123456789abcdef", instance_id="i1")
    monkeypatch.setattr(bearer_mod, "list_descriptors", lambda _p: reads.append(1) or [])
    directory = BearerDirectory(paths, ttl_s=0.0)
    monkeypatch.setattr(directory, "_live", lambda _d: True)
    directory._reload()
    directory._tokens = {"tok": desc}  # type: ignore[dict-item]
    assert reads == [1]
    for _ in range(3):
        assert directory.lookup("tok") is desc
    assert reads == [1]  # past the ttl every time, but nothing changed: no reread
    (paths.credentials / "x.cred").write_text("t")  # a token written: reread at the next lookup past the ttl
    assert directory.lookup("tok") is None and reads == [1, 1]


def test_an_agent_that_registers_just_after_a_load_is_found_at_its_first_request(tmp_path, monkeypatch):
    """The 50 ms throttle on rereads for unknown tokens never refuses a token written since the last load."""
    paths = _paths(tmp_path)
    registered: list[SimpleNamespace] = []
    monkeypatch.setattr(bearer_mod, "list_descriptors", lambda _p: list(registered))
    monkeypatch.setattr(bearer_mod, "read_key", lambda _path: "new-token")
    directory = BearerDirectory(paths)
    monkeypatch.setattr(directory, "_live", lambda _d: True)
    assert directory.lookup("new-token") is None  # loaded now: nobody holds it yet
    desc = SimpleNamespace(
        agent_id="0123456789abcdef", instance_id="i1", credential_ref=str(paths.token_path("0123456789abcdef"))
    )
    paths.token_path(desc.agent_id).write_text("new-token\n")
    registered.append(desc)
    assert directory.lookup("new-token") is desc  # well within 50 ms of the last load


def test_unknown_tokens_do_not_reread_a_settled_registry_more_than_every_50_ms(tmp_path, monkeypatch):
    paths = _paths(tmp_path)
    _aged(paths)
    reads: list[int] = []
    monkeypatch.setattr(bearer_mod, "list_descriptors", lambda _p: reads.append(1) or [])
    directory = BearerDirectory(paths)
    for _ in range(20):
        assert directory.lookup("nobody") is None
    assert reads == [1]


def test_resolve_rereads_descriptors_only_when_the_registry_changed_and_checks_liveness_each_time(
    tmp_path, monkeypatch
):
    from crosstalk.registry import discovery

    paths = _paths(tmp_path)
    _aged(paths)
    agents = {"0123456789abcdef": "bob"}
    reads: list[int] = []
    live: dict[str, bool] = {"0123456789abcdef": True}

    def read_all(_p):
        reads.append(1)
        return iter([SimpleNamespace(agent_id=a, name=n, pid=1, started_at="0") for a, n in agents.items()])

    monkeypatch.setattr(discovery, "_read_all", read_all)
    monkeypatch.setattr(discovery, "is_live", lambda _p, d, kept=False: live[d.agent_id])
    monkeypatch.setattr(discovery, "_SETTLED", {})
    for _ in range(3):
        assert discovery.resolve(paths, "bob").agent_id == "0123456789abcdef"
    assert reads == [1]  # a settled, unchanged registry: read once
    live["0123456789abcdef"] = False  # liveness is never cached: the agent's process ended
    with pytest.raises(discovery.NoSuchAgent):
        discovery.resolve(paths, "bob")
    agents["fedcba9876543210"] = "bob"  # a new agent registers: its descriptor is renamed into agents/
    live["fedcba9876543210"] = True
    (paths.agents / "fedcba9876543210.json").write_text("{}")
    assert discovery.resolve(paths, "bob").agent_id == "fedcba9876543210"  # changed just now: read again
    _aged(paths)
    assert discovery.resolve(paths, "bob").agent_id == "fedcba9876543210"
    assert discovery.resolve(paths, "bob").agent_id == "fedcba9876543210"
    assert len(reads) == 3  # the first, the unsettled one, one for the new stamp, then none
