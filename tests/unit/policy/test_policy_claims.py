"""claim / release: every transition and every error, as a table and as named cases."""

from __future__ import annotations

import itertools

import pytest

from crosstalk.policy import ClaimState, Role, claim, release
from crosstalk.policy.errors import ClaimError, PolicyError

TARGET = "t" * 16
OWNER = "o" * 16
OTHER = "x" * 16

# Every valid starting state: any unowned non-worker role, or a worker owned by OWNER.
STATES = [
    ClaimState(Role.PRIMARY, None),
    ClaimState(Role.ORCHESTRATOR, None),
    ClaimState(Role.PEER, None),
    ClaimState(Role.WORKER, OWNER),
]
ACTORS = {"self": TARGET, "owner": OWNER, "other": OTHER}


def expected_claim(state: ClaimState, actor: str, claimer_role: str) -> str | ClaimState:
    if actor == "self":
        return "self_claim"
    if state.owner is not None:
        return "already_claimed"
    if claimer_role == "worker":
        return "worker_cannot_claim"
    return ClaimState(Role.WORKER, ACTORS[actor])


def expected_release(state: ClaimState, actor: str) -> str | ClaimState:
    if actor == "self":
        return "self_release"
    if state.owner is None:
        return "not_claimed"
    if actor != "owner":
        return "not_owner"
    return ClaimState(Role.PRIMARY, None)


@pytest.mark.parametrize(("state", "actor", "claimer_role"), list(itertools.product(STATES, ACTORS, Role)), ids=str)
def test_claim_table(state: ClaimState, actor: str, claimer_role: Role) -> None:
    expected = expected_claim(state, actor, claimer_role.value)
    if isinstance(expected, str):
        with pytest.raises(ClaimError) as info:
            claim(state, target_id=TARGET, claimer_id=ACTORS[actor], claimer_role=claimer_role)
        assert info.value.reason == expected
    else:
        got = claim(state, target_id=TARGET, claimer_id=ACTORS[actor], claimer_role=claimer_role)
        assert got == expected


@pytest.mark.parametrize(("state", "actor"), list(itertools.product(STATES, ACTORS)), ids=str)
def test_release_table(state: ClaimState, actor: str) -> None:
    expected = expected_release(state, actor)
    if isinstance(expected, str):
        with pytest.raises(ClaimError) as info:
            release(state, target_id=TARGET, requester_id=ACTORS[actor])
        assert info.value.reason == expected
    else:
        assert release(state, target_id=TARGET, requester_id=ACTORS[actor]) == expected


@pytest.mark.parametrize("claimer_role", [Role.PRIMARY, Role.ORCHESTRATOR, Role.PEER], ids=str)
def test_claim_then_release_round_trip(claimer_role: Role) -> None:
    claimed = claim(ClaimState(), target_id=TARGET, claimer_id=OWNER, claimer_role=claimer_role)
    assert claimed == ClaimState(Role.WORKER, OWNER)
    assert release(claimed, target_id=TARGET, requester_id=OWNER) == ClaimState()


def test_claim_error_shape() -> None:
    with pytest.raises(ClaimError) as info:
        claim(ClaimState(Role.WORKER, OWNER), target_id=TARGET, claimer_id=OTHER, claimer_role=Role.PRIMARY)
    err = info.value
    assert isinstance(err, PolicyError) and isinstance(err, ValueError)
    assert err.reason == "already_claimed"
    assert str(err).startswith("already_claimed: ") and OWNER in str(err) and "\n" not in str(err)


@pytest.mark.parametrize(
    ("role", "owner"),
    [(Role.WORKER, None), (Role.PRIMARY, OWNER), (Role.ORCHESTRATOR, OWNER), (Role.PEER, OWNER)],
    ids=str,
)
def test_inconsistent_state_refused(role: Role, owner: str | None) -> None:
    with pytest.raises(PolicyError):
        ClaimState(role, owner)


def test_default_state_is_unclaimed_primary() -> None:
    assert ClaimState() == ClaimState(Role.PRIMARY, None)
