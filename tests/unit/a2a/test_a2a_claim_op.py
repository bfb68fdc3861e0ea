"""metadata.crosstalk.op on the wire: carried by the client side, recognised (and validated) by the server side."""

from __future__ import annotations

import pytest
from a2a.utils.errors import InvalidParamsError

from crosstalk.core.message import new_message
from crosstalk.ingress.a2a.convert import message_op, message_to_a2a


def test_op_round_trips_and_plain_messages_have_none():
    msg = new_message("bob", "claim please", from_="alice")
    assert message_op(message_to_a2a(msg)) is None
    assert message_op(message_to_a2a(msg, op="claim")) == "claim"
    assert message_op(message_to_a2a(msg, op="release")) == "release"


def test_unknown_op_is_invalid_params_naming_the_field():
    wire = message_to_a2a(new_message("bob", "x"), op="adopt")
    with pytest.raises(InvalidParamsError) as exc:
        message_op(wire)
    assert "metadata.crosstalk.op" in str(exc.value.message)
