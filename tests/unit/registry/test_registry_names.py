from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.ids import agent_id_for
from crosstalk.fs.locks import FileLock
from crosstalk.registry.errors import InvalidName
from crosstalk.registry.names import (
    candidate_names,
    fallback_names,
    is_valid_name,
    validate_name,
)
from crosstalk.registry.paths import StatePaths
from crosstalk.registry.registration import claim_first_name

AID = "1a2b3c4d5e6f7a8b"
# The name rule as a regular expression (registry/names.py checks it with str methods: no `re` on send's path).
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_NAMEISH = st.text(st.sampled_from("aZ09._-é \n/\x00"), max_size=70) | st.text(max_size=70)


@given(_NAMEISH)
def test_is_valid_name_is_the_expression(name: str) -> None:
    expected = NAME_RE.fullmatch(name) is not None and re.fullmatch(r"[0-9a-f]{16}", name) is None
    assert is_valid_name(name) == expected


@pytest.mark.parametrize("name", ["alice", "A", "0", "codex-proj-1a2b3c4d", "a.b_c-d", "x" * 64])
def test_valid_names(name: str) -> None:
    assert validate_name(name) == name


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "is empty"),
        ("x" * 65, "over the 64-character limit"),
        ("-a", "must start with a letter or digit"),
        (".hidden", "must start with a letter or digit"),
        ("a b", "contains ' '"),
        ("a/b", "contains '/'"),
        ("alice\n", "contains '\\\\n'"),
        ("élise", "must start with a letter or digit"),
        ("caf\u00e9", "contains 'é'"),
        (3, "must be a string"),
    ],
)
def test_invalid_names(name: object, problem: str) -> None:
    with pytest.raises(InvalidName, match=problem):
        validate_name(name)


def test_trailing_newline_is_not_a_name() -> None:
    # NAME_RE.match would accept it ('$' matches before a final newline); the rule uses fullmatch.
    assert NAME_RE.match("alice\n")
    assert not is_valid_name("alice\n")


def test_fallback_series() -> None:
    names = list(fallback_names("codex", "/home/u/my proj", AID))
    assert names == [f"codex-my-proj-{AID[:n]}" for n in (8, 10, 12, 14, 16)]


def test_fallbacks_are_always_valid() -> None:
    for harness, cwd in [
        ("codex", "/"),
        ("codex", ""),
        ("claude", "/work/" + "ü" * 80),
        ("-weird harness-", "/x/" + "b" * 200),
        ("!!!", "/x/.config/"),
        ("h" * 100, "/a/b"),
    ]:
        names = list(fallback_names(harness, cwd, AID))
        assert len(set(names)) == 5
        assert all(is_valid_name(n) for n in names), names
        assert names[-1].endswith(AID)
    assert next(fallback_names("codex", "/", AID)) == f"codex-{AID[:8]}"
    assert next(fallback_names("!!!", "/x/.config/", AID)) == f"agent-.config-{AID[:8]}"
    long_base = list(fallback_names("claude", "/x/" + "b" * 200, AID))
    assert len({n.rsplit("-", 1)[0] for n in long_base}) == 1  # one truncated basename for the whole series


def test_candidates() -> None:
    fb = list(fallback_names("codex", "/w/p", AID))
    assert candidate_names("alice", "codex", "/w/p", AID) == ["alice", *fb]
    assert candidate_names(None, "codex", "/w/p", AID) == fb
    assert candidate_names("not valid!", "codex", "/w/p", AID) == fb
    assert candidate_names(fb[0], "codex", "/w/p", AID) == fb  # no duplicate


def test_spike9_thread_ids_sharing_a_long_prefix_get_distinct_names() -> None:
    # The four spike-9 Codex threads share the prefix 01a1a3…; agent_id hashes the whole session_ref.
    refs = [f"01a1a3b7-0000-7000-8000-00000000000{i}" for i in range(4)]
    firsts = [next(fallback_names("codex", "/w/proj", agent_id_for("codex", r))) for r in refs]
    assert len(set(firsts)) == 4


def test_agent_ids_sharing_a_long_prefix_walk_to_distinct_names(paths: StatePaths) -> None:
    # Worst case: agent_ids that share their first 12 hex; each newcomer extends its suffix two hex at a time.
    ids = ["01a1a3b7c9d2" + tail for tail in ("0000", "1111", "2222", "3333")]
    held: list[FileLock] = []
    names: list[str] = []
    try:
        for aid in ids:
            name, lock, _ = claim_first_name(paths, candidate_names(None, "codex", "/w/proj", aid))
            held.append(lock)
            names.append(name)
        assert names == [
            "codex-proj-01a1a3b7",
            "codex-proj-01a1a3b7c9",
            "codex-proj-01a1a3b7c9d2",
            "codex-proj-01a1a3b7c9d233",
        ]
        # A fifth agent whose chosen name and first fallback are held: suffix extended, never the held one.
        fifth = "01a1a3b7ffffffff"
        name, lock, skipped = claim_first_name(paths, candidate_names(names[0], "codex", "/w/proj", fifth))
        held.append(lock)
        assert skipped == [names[0]]
        assert name == "codex-proj-01a1a3b7ff"
        assert len({*names, name}) == 5
    finally:
        for lock in held:
            lock.release()


def test_a_name_never_has_an_agent_ids_shape() -> None:
    from crosstalk.registry.errors import InvalidName
    from crosstalk.registry.names import candidate_names, is_valid_name, validate_name

    assert (
        not is_valid_name("deadbeefdeadbeef") and is_valid_name("deadbeefdeadbee") and is_valid_name("Deadbeefdeadbeef")
    )
    with pytest.raises(InvalidName, match="shape of an agent_id"):
        validate_name("deadbeefdeadbeef")
    names = candidate_names("0123456789abcdef", "fake", "/w/p", "fedcba9876543210")
    assert "0123456789abcdef" not in names and names[0] == "fake-p-fedcba98"
