"""A2A 1.0 edge: a JSON-RPC server per agent (server.A2AServer) and the client agents use to reach each other
(client.A2AClient). Protocol SDK types never leave this package; callers see crosstalk's own records.

Importing this package costs nothing: the SDK (~300 ms) loads only when a name below is first used.
"""

from __future__ import annotations

from crosstalk.ingress.errors import A2AAuthError, A2AOutcomeUnknown, A2AProtocolError, A2AUnreachable

_LAZY = {
    "A2AServer": "crosstalk.ingress.a2a.server",
    "A2AClient": "crosstalk.ingress.a2a.client",
    "fetch_card": "crosstalk.ingress.a2a.client",
}

__all__ = [
    "A2AAuthError",
    "A2AClient",
    "A2AOutcomeUnknown",
    "A2AProtocolError",
    "A2AServer",
    "A2AUnreachable",
    "fetch_card",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
