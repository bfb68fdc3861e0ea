"""Roles, buckets, default acceptFrom and parse_role."""

from __future__ import annotations

import pytest

from crosstalk.core.errors import CrosstalkError
from crosstalk.policy import DEFAULT_ACCEPT_FROM, Bucket, Role, parse_role
from crosstalk.policy.errors import PolicyError

# Each role's default acceptFrom written out plainly, independent of the code under test.
EXPECTED_DEFAULTS = {
    "primary": {"parent", "children", "peers", "agents", "external"},
    "orchestrator": {"children", "external", "peers"},
    "worker": {"parent"},
    "peer": {"peers", "external"},
}


def test_role_and_bucket_values() -> None:
    assert [r.value for r in Role] == ["primary", "orchestrator", "worker", "peer"]
    assert [b.value for b in Bucket] == ["parent", "children", "peers", "agents", "external", "unknown"]


@pytest.mark.parametrize("role", list(Role), ids=str)
def test_default_accept_from(role: Role) -> None:
    assert {b.value for b in DEFAULT_ACCEPT_FROM[role]} == EXPECTED_DEFAULTS[role.value]
    assert isinstance(DEFAULT_ACCEPT_FROM[role], frozenset)


def test_every_role_has_defaults_and_none_accepts_unknown() -> None:
    assert set(DEFAULT_ACCEPT_FROM) == set(Role)
    assert all(Bucket.UNKNOWN not in buckets for buckets in DEFAULT_ACCEPT_FROM.values())


@pytest.mark.parametrize("role", list(Role), ids=str)
def test_parse_role_exact(role: Role) -> None:
    assert parse_role(role.value) is role


@pytest.mark.parametrize("bad", ["Worker", " worker ", "WORKER", "worker\n", "", "boss", "subagent", "primary "])
def test_parse_role_rejects(bad: str) -> None:
    with pytest.raises(PolicyError) as info:
        parse_role(bad)
    message = str(info.value)
    assert "\n" not in message
    assert repr(bad) in message
    for role in Role:
        assert role.value in message


def test_policy_error_is_value_error_and_crosstalk_error() -> None:
    assert issubclass(PolicyError, ValueError)
    assert issubclass(PolicyError, CrosstalkError)
