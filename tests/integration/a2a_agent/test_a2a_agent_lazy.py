"""An agent's A2A endpoint is bound and published at start but loads the SDK only when a client first connects
(ingress/a2a/lazy.py): until then the process holds no A2A stack; then an A2A 1.0 client gets the agent card,
bearer auth and SendMessage exactly as from an eagerly started server. Real `crosstalk agent run` processes."""

from __future__ import annotations

import pytest

from crosstalk.core.message import new_message
from crosstalk.ingress.a2a.client import A2AClient, fetch_card
from crosstalk.ingress.errors import A2AAuthError
from crosstalk.registry.credentials import read_key
from tests.support.a2a_agents import WAIT_S
from tests.support.bounded import run_bounded
from tests.support.procs import procs, wait_for

pytestmark = pytest.mark.integration

SDK_MARK = "google/_upb"  # protobuf's extension module: mapped only once the A2A stack is imported


def sdk_loaded(pid: int) -> bool:
    with open(f"/proc/{pid}/maps") as f:
        return SDK_MARK in f.read()


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_the_a2a_stack_loads_on_the_first_client_and_then_serves_card_auth_and_messages():
    with procs() as p:
        alice = p.start_agent("alice")
        bob = p.start_agent("bob")
        url = bob.ready["a2a_url"]
        assert url.startswith("http://127.0.0.1:")
        assert not sdk_loaded(bob.pid), "the A2A stack loaded before any A2A client connected"
        before = rss_kb(bob.pid)

        token = read_key(p.paths.token_path(alice.agent_id))

        async def client() -> None:
            card = await fetch_card(url)  # the first connection: it waits in the queue while the stack loads
            assert card["name"] == "bob" and card["supportedInterfaces"][0]["url"] == url
            assert "bearer" in card["securitySchemes"]
            with pytest.raises(A2AAuthError):
                async with A2AClient(url, "not-a-token") as peer:
                    await peer.send(new_message("bob", "forged"))
            async with A2AClient(url, token) as peer:
                view = await peer.send(new_message("bob", "hello over A2A", from_="alice"))
            assert view.state.value == "completed" and view.answer is not None
            assert view.answer.state.value == "accepted"

        run_bounded(client(), 60)
        wait_for(lambda: len(bob.inbox_lines()) == 1, WAIT_S, "bob's inbox")
        line = bob.inbox_lines()[0]
        assert (line["text"], line["from"], line["sender_class"]) == ("hello over A2A", "alice", "verified")
        assert sdk_loaded(bob.pid)
        assert rss_kb(bob.pid) > before  # what the stack costs is paid now, by the agent an A2A client used
        assert not sdk_loaded(alice.pid)
