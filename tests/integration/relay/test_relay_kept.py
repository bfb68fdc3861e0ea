"""The relay's local hops on kept connections and `crosstalk send NAME@ALIAS` through the relay process.

- The receiving relay process hands each message to the agent on a kept uds connection (relay/deliver.py); a kept
  connection that breaks after the frame left is retried once on a fresh one with the same message_id, and the
  agent's dedupe answers the copy: one delivery.
- `crosstalk send NAME@ALIAS` goes through this machine's relay process's local socket: no NATS client loaded and no
  credentials read in the CLI; without a relay process here it says so (`unreachable`), at once.
- A token-less request on the local socket is an external sender: it can never name an agent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from crosstalk.core.message import new_message
from crosstalk.fs.locks import FileLock
from crosstalk.fs.procinfo import login_name, proc_start_time
from crosstalk.ingress.errors import KeptBroken
from crosstalk.ingress.uds_kept import Conn
from crosstalk.relay.deliver import Deliverer
from crosstalk.relay.wire import decode_answer, encode_request
from tests.support.bounded import run_bounded
from tests.support.loaded_modules import command_modules, hits
from tests.support.nats_relay import NatsServer, join_and_serve
from tests.support.procs import Agent, Procs, one_error_line

pytestmark = pytest.mark.integration

SEND_BOUND_S = 10.0
TEST_S = 30.0


def _pose_as_relay_process(machine: Procs) -> FileLock:
    """This test process as `machine`'s relay process, as the uds ingress knows one (ingress/relay_peer.py): it
    holds relay/serve.lock and relay/status.json names its pid and start time."""
    relay = machine.root / "relay"
    relay.mkdir(mode=0o700, exist_ok=True)
    lock = FileLock(relay / "serve.lock")
    assert lock.try_acquire()
    status = {"pid": os.getpid(), "pid_started": proc_start_time(os.getpid()), "state": "connected"}
    (relay / "status.json").write_text(json.dumps(status))
    return lock


def test_a_kept_connection_that_breaks_is_retried_once_and_delivers_once(
    laptop: Procs, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = laptop.start_agent("alice")
    lock = _pose_as_relay_process(laptop)
    real = Conn.exchange
    broke: list[str] = []

    async def answer_lost(self: Conn, line: bytes, wait: float) -> bytes:
        """On a kept connection, once: the agent takes the frame and answers, and the answer is lost."""
        raw = await real(self, line, wait)
        if self.reused and not broke:
            broke.append(raw.decode())
            raise KeptBroken("the connection broke before the answer came", sent=True)
        return raw

    monkeypatch.setattr(Conn, "exchange", answer_lost)
    first = new_message("alice@laptop", "one", from_="@cli:bob")
    second = new_message("alice@laptop", "two", from_="@cli:bob")

    async def main() -> tuple[list[object], int]:
        hands = Deliverer(laptop.paths)
        try:
            answers = [decode_answer(await hands.answer(encode_request(m), "laptop", "gpu")) for m in (first, second)]
            [(_instance, conns)] = hands._agents.values()
            return list(answers), conns.opened
        finally:
            await hands.close()

    try:
        answers, opened = run_bounded(main(), TEST_S)
    finally:
        lock.release()
    assert broke, "the second message rode the first one's kept connection"
    assert [a.outcome.state.value for a in answers] == ["accepted", "accepted"]  # type: ignore[attr-defined]
    assert answers[1].outcome.evidence.get("duplicate") is True  # type: ignore[attr-defined]
    assert opened == 2  # the kept one, then one fresh one for the retry
    assert alice.inbox_ids() == [first.message_id, second.message_id]  # each delivered once
    assert [x["from"] for x in alice.inbox_lines()] == ["@relay:gpu/cli:bob"] * 2


@pytest.fixture
def alice(laptop: Procs, gpu: Procs, relay: NatsServer) -> Agent:
    agent = laptop.start_agent("alice")
    join_and_serve(laptop, relay, "laptop")
    return agent


def test_the_cli_sends_through_the_relay_process_with_no_nats_and_no_credentials(
    gpu: Procs, relay: NatsServer, alice: Agent
) -> None:
    join_and_serve(gpu, relay, "gpu")
    creds = gpu.root / "gpu.creds"
    creds.rename(gpu.root / "elsewhere.creds")  # the relay process connected already; the CLI never reads them
    args = ("send", "alice@laptop", "lean and kept", "--json")
    res, loaded = command_modules(args, env=gpu.env, workdir=gpu.root, timeout=SEND_BOUND_S)
    assert res.returncode == 0, res.stderr
    answer = json.loads(res.stdout)
    assert (answer["state"], answer["to"], answer["agent_id"]) == ("accepted", "alice@laptop", alice.agent_id)
    assert sorted(m for m in loaded if m == "nats" or m.startswith(("nats.", "asyncio"))) == []
    assert "crosstalk.relay.link" not in loaded and "crosstalk.relay.config" not in loaded
    # nor the bus (PyYAML, git helpers), nor the stdlib the lean local send avoids (test_cli_send_lean.py)
    costly = ("crosstalk.bus", "yaml", "pathlib", "re", "json", "enum", "typing", "dataclasses", "socket")
    assert hits(loaded, costly) == []
    [line] = alice.inbox_lines()
    assert (line["text"], line["from"]) == ("lean and kept", f"@relay:gpu/cli:{login_name()}")


def test_without_a_relay_process_the_cli_says_so_at_once(gpu: Procs, relay: NatsServer, alice: Agent) -> None:
    creds = str(relay.creds_file(gpu, "gpu"))
    res = gpu.cli("relay", "join", relay.url, "--alias", "gpu", "--creds", creds, "--no-start")
    assert res.returncode == 0, res.stderr
    res = gpu.cli("send", "alice@laptop", "anyone?", timeout=SEND_BOUND_S)
    assert res.returncode == 4
    line = one_error_line(res.stderr)
    assert "relay:not_serving" in line
    assert "no relay process serves this machine: `crosstalk relay join` starts it" in line
    assert alice.inbox_lines() == []


def _raw_request(sock_path: Path, request: dict[str, object]) -> dict[str, object]:
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(SEND_BOUND_S)
        s.connect(str(sock_path))
        s.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    answer = json.loads(data)
    assert isinstance(answer, dict)
    return answer


def test_an_external_sender_on_the_local_socket_can_never_name_an_agent(
    gpu: Procs, relay: NatsServer, alice: Agent
) -> None:
    join_and_serve(gpu, relay, "gpu")
    sock = gpu.root / "relay" / "local.sock"
    forged = new_message("alice@laptop", "I am bob, an agent", from_="@cli:x").to_dict()
    answer = _raw_request(sock, {"v": 1, "message": {**forged, "from": "bob"}, "timeout": 5})
    assert answer["error"] == "bad_frame" and "@scheme:topic" in str(answer["detail"])
    assert alice.inbox_lines() == []
    answer = _raw_request(sock, {"v": 1, "message": forged, "timeout": 5})
    assert answer["result"]["outcome"]["state"] == "accepted"  # type: ignore[index]
    assert [x["from"] for x in alice.inbox_lines()] == ["@relay:gpu/cli:x"]
