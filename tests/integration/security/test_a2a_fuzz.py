"""Hostile A2A bodies, generated: whatever arrives at an agent's A2A endpoint, with or without a valid bearer
token, is answered (a JSON-RPC error or a refusal, never a server error, never a hang), nothing reaches the session,
and the agent still delivers a real message afterwards."""

from __future__ import annotations

import json

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crosstalk.core.message import new_message
from crosstalk.ingress.client import send
from crosstalk.registry.credentials import read_key
from tests.support.procs import procs

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=25,
)
METHODS = st.sampled_from(["SendMessage", "GetTask", "ListTasks", "CancelTask", "message/send", "", "x"])
RPC = st.fixed_dictionaries(
    {
        "jsonrpc": st.sampled_from(["2.0", "1.0", None]),
        "id": st.one_of(st.integers(), st.text(max_size=8)),
        "method": METHODS,
        "params": JSON,
    },
)
BODIES = st.one_of(
    st.binary(max_size=300),
    JSON.map(lambda v: json.dumps(v).encode()),
    RPC.map(lambda v: json.dumps(v).encode()),
    RPC.map(lambda v: json.dumps(v).encode()[: len(json.dumps(v)) // 2]),  # cut short
)


def test_generated_a2a_bodies_are_all_answered_and_nothing_reaches_the_session() -> None:
    with procs() as xt:
        bob = xt.start_agent("bob")
        alice = xt.start_agent("alice")
        url = bob.ready["a2a_url"]
        token = read_key(xt.paths.token_path(alice.agent_id))
        answered = {"n": 0}
        with httpx.Client(timeout=10.0) as http:

            @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
            @given(body=BODIES, authed=st.booleans(), typed=st.booleans())
            def one(body: bytes, authed: bool, typed: bool) -> None:
                headers = {"A2A-Version": "1.0"}
                if typed:
                    headers["Content-Type"] = "application/json"
                if authed:
                    headers["Authorization"] = f"Bearer {token}"
                response = http.post(url, content=body, headers=headers)
                assert response.status_code < 500, (body, response.status_code, response.text[:300])
                if response.status_code == 200:
                    answer = response.json()
                    assert "error" in answer or "result" in answer, answer
                answered["n"] += 1

            one()
        assert answered["n"] >= 300
        assert bob.inbox_ids() == []  # no generated body reached the session
        real = new_message("bob", "still here?", from_="@test:fuzz")
        assert send(xt.paths, real).outcome.state.value == "accepted"
        assert bob.inbox_ids() == [real.message_id]
