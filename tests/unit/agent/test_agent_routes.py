"""open_inbound: what a bounce notice and the reply route list as still answerable."""

from __future__ import annotations

from crosstalk.agent.routes import open_inbound
from crosstalk.core.ids import new_message_id
from crosstalk.core.kinds import Kind
from crosstalk.core.message import Message, TextPart
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import State
from crosstalk.journal import JournalState
from crosstalk.journal import records as R

BIND = R.binding("inst", "sess", None)
ALICE = Sender(SenderClass.VERIFIED, "a11ce0a11ce0a11c", "alice", "a2a")


def received(kind: Kind, sender: Sender = ALICE) -> tuple[str, dict]:
    msg = Message(message_id=new_message_id(), to="bob", parts=(TextPart("x"),), kind=kind)
    return msg.message_id, R.received(msg, sender, dedupe_key=sender.dedupe_key, transport="a2a", bind=BIND)


def test_an_ask_being_written_into_the_session_is_already_answerable():
    """The model may answer (natively) before the dispatch outcome is journaled: the bounce must list the ask."""
    ask, rec = received(Kind.ASK)
    state = JournalState.replay([rec])
    assert open_inbound(state, now=0.0) == []  # journaled, not yet dispatched: the session cannot have it
    state.apply(R.dispatch(ask, BIND))
    assert open_inbound(state, now=0.0) == [{"message_id": ask, "from": "alice", "kind": "ask"}]


def test_informs_route_for_an_hour_after_delivery_and_unverified_senders_never():
    inform, rec = received(Kind.INFORM)
    ci, ci_rec = received(Kind.INFORM, Sender.unverified("@ci:build"))
    state = JournalState.replay([rec, ci_rec, R.dispatch(inform, BIND), R.dispatch(ci, BIND)])
    state.apply(R.outcome(inform, State.ACCEPTED, None, BIND))
    state.apply(R.outcome(ci, State.ACCEPTED, None, BIND))
    delivered_at = state.messages[inform].outcome_ts or 0.0
    assert [r["message_id"] for r in open_inbound(state, now=delivered_at + 10)] == [inform]
    assert open_inbound(state, now=delivered_at + 3601) == []
