"""Which kinds a transport carries. The socket (uds) frame has no kind encoding beyond inform, so nothing that opens
an obligation or carries work may arrive on it, whoever the sender is: only inform, meta and ping travel there.
Asks and commands travel over A2A (or the git bus). One exception, `relay`: a socket frame from this machine's relay
process (ingress/relay_peer.py proves the peer) for another machine's agent (`@relay:ALIAS/NAME`) may be an ask,
since its reply routes back across the relay (docs/dev/relay.md); never a command."""

from __future__ import annotations

from crosstalk.core.kinds import Kind

UDS_TRANSPORT = "uds"
# The kinds that open no obligation and carry no work: the only ones the socket carries, and the ones any sender
# the ACL admits may send (policy/kinds.py).
UDS_KINDS: frozenset[Kind] = frozenset({Kind.INFORM, Kind.META, Kind.PING})


RELAY_TRANSPORT = "relay"
RELAY_KINDS: frozenset[Kind] = UDS_KINDS | {Kind.ASK}


def check_transport(kind: Kind, transport: str) -> str | None:
    """None when `transport` can carry `kind`, else the "kind:..." reason."""
    if transport == UDS_TRANSPORT and kind not in UDS_KINDS:
        return "kind:not_on_uds"
    if transport == RELAY_TRANSPORT and kind not in RELAY_KINDS:
        return "kind:not_on_relay"
    return None


def socket_kinds_text() -> str:
    """The kinds the socket carries, as a sentence names them ("inform, meta and ping")."""
    names = [k.value for k in Kind if k in UDS_KINDS]
    return f"{', '.join(names[:-1])} and {names[-1]}"
