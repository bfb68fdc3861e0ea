"""ReceiverView: defaults, freezing and effective_accept_from."""

from __future__ import annotations

import dataclasses

import pytest

from crosstalk.policy import DEFAULT_ACCEPT_FROM, ReceiverView, Role


def test_defaults() -> None:
    view = ReceiverView(agent_id="a" * 16, name="me")
    assert view.role is Role.PRIMARY
    assert view.owner is None
    assert view.children == frozenset()
    assert view.peers == frozenset()
    assert view.accept_from is None


@pytest.mark.parametrize("role", list(Role), ids=str)
def test_effective_accept_from_defaults_to_role(role: Role) -> None:
    view = ReceiverView(agent_id="a" * 16, name="me", role=role)
    assert view.effective_accept_from() == {b.value for b in DEFAULT_ACCEPT_FROM[role]}
    assert all(type(e) is str for e in view.effective_accept_from())


@pytest.mark.parametrize("role", list(Role), ids=str)
def test_explicit_accept_from_replaces_defaults(role: Role) -> None:
    view = ReceiverView(agent_id="a" * 16, name="me", role=role, accept_from=frozenset({"@ci:build"}))
    assert view.effective_accept_from() == frozenset({"@ci:build"})
    empty = ReceiverView(agent_id="a" * 16, name="me", role=role, accept_from=frozenset())
    assert empty.effective_accept_from() == frozenset()


def test_collections_are_frozen() -> None:
    view = ReceiverView(
        agent_id="a" * 16,
        name="me",
        children={"b" * 16},  # type: ignore[arg-type]
        peers=["bob"],  # type: ignore[arg-type]
        accept_from={"peers"},  # type: ignore[arg-type]
    )
    assert view.children == frozenset({"b" * 16}) and isinstance(view.children, frozenset)
    assert view.peers == frozenset({"bob"}) and isinstance(view.peers, frozenset)
    assert isinstance(view.accept_from, frozenset)
    hash(view)
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.role = Role.WORKER  # type: ignore[misc]


def test_role_given_as_string_becomes_role() -> None:
    view = ReceiverView(agent_id="a" * 16, name="me", role="worker")  # type: ignore[arg-type]
    assert view.role is Role.WORKER
