"""Every kind that delivers into sessions crosstalk does not serve takes the seam's whole call (harness.base
NativeDelivery): the shim passes the message id and a late-outcome sink to whichever kind owns the session."""

from __future__ import annotations

import inspect

from crosstalk import harness as kinds
from crosstalk.harness.base import NativeDelivery


def test_every_native_delivery_takes_the_seams_keywords() -> None:
    wanted = set(inspect.signature(NativeDelivery.deliver_native).parameters) - {"self"}
    found = [kinds.kind(name) for name in kinds.choices() if name != "auto"]
    natives = [k for k in found if isinstance(k, NativeDelivery)]
    assert {k.name for k in natives} >= {"claude", "codex"}
    for kind in natives:
        params = set(inspect.signature(kind.deliver_native).parameters)
        assert wanted <= params, (kind.name, wanted - params)
