"""AgentHost's setters, the narrow methods an extension host changes a session's agent through: what the policy
sees changes from the next message on, and a role or owner change is rewritten into the descriptor others read."""

from __future__ import annotations

from crosstalk.agent import AgentHost
from crosstalk.policy import Role
from crosstalk.registry.descriptor import Descriptor
from crosstalk.registry.discovery import list_descriptors
from tests.support.uds import HostThread

PARENT = "0123456789abcdef"


def _published(host: HostThread) -> Descriptor:
    return next(d for d in list_descriptors(host.paths) if d.agent_id == host.agent_id)


async def _apply(host: AgentHost, *steps: tuple[str, object]) -> None:
    """Run the setters on the agent's own loop, as an extension host does."""
    for name, value in steps:
        getattr(host, name)(value)


def test_peers_and_accept_from_change_what_the_policy_sees(host: HostThread) -> None:
    host.call(_apply(host.host, ("set_peers", ["buddy"]), ("set_accept_from", ["peers", "@github:ci"])))
    view = host.host.view()
    assert view.peers == {"buddy"} and view.accept_from == {"peers", "@github:ci"}
    host.call(_apply(host.host, ("set_accept_from", None)))
    assert host.host.view().accept_from is None  # back to the role's defaults


def test_a_role_resets_accept_from_and_only_a_worker_keeps_its_owner(host: HostThread) -> None:
    host.call(_apply(host.host, ("set_accept_from", ["peers"]), ("set_role", Role.WORKER), ("set_owner", PARENT)))
    view, desc = host.host.view(), _published(host)
    assert (view.role, view.owner, view.accept_from) == (Role.WORKER, PARENT, None)
    assert (desc.role, desc.owner) == ("worker", PARENT)
    host.call(_apply(host.host, ("set_role", Role.WORKER)))
    assert _published(host).owner == PARENT  # a worker keeps its parent across a role change
    host.call(_apply(host.host, ("set_role", Role.PEER)))
    assert (host.host.view().owner, _published(host).role, _published(host).owner) == (None, "peer", None)
