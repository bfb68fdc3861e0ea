"""Faults under load across a real nats-server, two state roots as two machines (laptop receives, gpu sends): kill -9
of the receiving relay process mid-load and a restart, a nats-server killed and restarted under load, kill -9 of the
sending process mid-send. Each time every message ends in exactly one delivery, or a clear non-accepted state at the
sender that a resend of the same message_id settles (answered from the receiver's journal when it had arrived);
nothing is ever delivered twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from crosstalk.core.message import Message, new_message
from crosstalk.relay.config import RelayConfig, load
from crosstalk.relay.send import NO_ANSWER, NO_MACHINE, UNREACHABLE, RemoteResult, send_remote
from tests.support.nats_relay import NatsServer, join_and_serve, nats_server, serving_state
from tests.support.procs import Agent, Procs, procs
from tests.support.waiting import until

LOAD = 40
SEND_TIMEOUT_S = 3.0  # each request's own bound: a lost answer is `unknown` after this
RESEND_ROUNDS = 5
BOUND_S = 20.0
# What a sender may see when the fault hits: accepted, or a state that says it was not (or may not have been) taken.
NOT_ACCEPTED = {("unreachable", NO_MACHINE), ("unreachable", UNREACHABLE), ("unknown", NO_ANSWER)}


@pytest.fixture
def relay() -> Iterator[NatsServer]:
    with nats_server("laptop", "gpu") as server:
        yield server


@pytest.fixture
def laptop(relay: NatsServer) -> Iterator[Procs]:
    with procs() as p:
        yield p


@pytest.fixture
def gpu(relay: NatsServer) -> Iterator[Procs]:
    with procs() as p:
        creds = str(relay.creds_file(p, "gpu"))
        res = p.cli("relay", "join", relay.url, "--alias", "gpu", "--creds", creds, "--no-start")
        assert res.returncode == 0, res.stderr
        yield p


@pytest.fixture
def alice(laptop: Procs) -> Agent:
    return laptop.start_agent("alice")


def config_of(machine: Procs) -> RelayConfig:
    config = load(machine.paths)
    assert config is not None
    return config


def batch(tag: str) -> list[Message]:
    return [new_message("alice@laptop", f"{tag} {i}", from_="@ci:load") for i in range(LOAD)]


def state_of(result: RemoteResult) -> tuple[str, str | None]:
    return result.outcome.state.value, result.outcome.reason


def send_all(config: RelayConfig, msgs: list[Message], workers: int = 4) -> list[Future[RemoteResult]]:
    pool = ThreadPoolExecutor(workers)
    try:
        return [pool.submit(send_remote, config, m, timeout=SEND_TIMEOUT_S) for m in msgs]
    finally:
        pool.shutdown(wait=False)


def settle(config: RelayConfig, msgs: list[Message], first: dict[str, RemoteResult]) -> dict[str, RemoteResult]:
    """Resend (same message_id) every message whose last answer was not accepted, until all are, a bounded number
    of rounds. The last answer for each."""
    last = dict(first)
    for _ in range(RESEND_ROUNDS):
        todo = [m for m in msgs if state_of(last[m.message_id])[0] != "accepted"]
        if not todo:
            break
        for m in todo:
            last[m.message_id] = send_remote(config, m, timeout=SEND_TIMEOUT_S)
    return last


def assert_each_delivered_once(alice: Agent, msgs: list[Message], last: dict[str, RemoteResult]) -> None:
    assert {state_of(r)[0] for r in last.values()} == {"accepted"}, Counter(state_of(r) for r in last.values())
    counts = Counter(alice.inbox_ids())
    assert set(counts) == {m.message_id for m in msgs}
    assert max(counts.values()) == 1, [i for i, n in counts.items() if n > 1]


def test_kill_9_of_the_receiving_relay_process_mid_load(
    relay: NatsServer, laptop: Procs, gpu: Procs, alice: Agent
) -> None:
    serving = join_and_serve(laptop, relay, "laptop")
    msgs = batch("kill9 receiver")
    futures = send_all(config_of(gpu), msgs)
    until(lambda: len(alice.inbox_lines()) >= LOAD // 4, "a quarter of the load delivered", BOUND_S)
    os.kill(serving.pid, signal.SIGKILL)
    serving.wait(BOUND_S)
    first = {m.message_id: f.result(BOUND_S) for m, f in zip(msgs, futures, strict=True)}
    seen = Counter(state_of(r) for r in first.values())
    assert set(seen) - {("accepted", None)} <= NOT_ACCEPTED, seen
    assert seen[("accepted", None)] < LOAD and sum(seen.values()) == LOAD  # the kill was felt
    delivered = set(alice.inbox_ids())
    for m in msgs:  # `unreachable` is a promise too: no machine took it, so nothing was delivered
        if state_of(first[m.message_id]) == ("unreachable", NO_MACHINE):
            assert m.message_id not in delivered
    join_again = laptop.popen_cli("relay", "serve")  # the join stands: the relay process is started again
    until(lambda: serving_state(laptop) == "connected", "laptop's relay process back", BOUND_S)
    last = settle(config_of(gpu), msgs, first)
    assert_each_delivered_once(alice, msgs, last)
    for m in msgs:  # a message that had arrived is answered from the journal on resend, never injected again
        if m.message_id in delivered and state_of(first[m.message_id])[0] != "accepted":
            assert last[m.message_id].outcome.evidence.get("duplicate") is True
    assert join_again.poll() is None


def test_nats_server_restart_under_load(relay: NatsServer, laptop: Procs, gpu: Procs, alice: Agent) -> None:
    join_and_serve(laptop, relay, "laptop")
    config = config_of(gpu)
    msgs = batch("server restart")
    first: dict[str, RemoteResult] = {}
    stop = threading.Event()

    def load() -> None:
        for m in msgs:
            first[m.message_id] = send_remote(config, m, timeout=SEND_TIMEOUT_S)
        stop.set()

    sender = threading.Thread(target=load)
    sender.start()
    try:
        until(lambda: len(first) >= LOAD // 4, "a quarter of the load answered", BOUND_S)
        relay.kill9()
        until(lambda: serving_state(laptop) == "disconnected", "laptop's relay process saw the relay go", BOUND_S)
        relay.start()
        until(lambda: serving_state(laptop) == "connected", "laptop's relay process reconnected on its own", BOUND_S)
    finally:
        sender.join(LOAD * (SEND_TIMEOUT_S + 5))
    assert stop.is_set() and len(first) == LOAD
    seen = Counter(state_of(r) for r in first.values())
    assert set(seen) - {("accepted", None)} <= NOT_ACCEPTED, seen
    assert seen[("unreachable", UNREACHABLE)] + seen[("unknown", NO_ANSWER)] >= 1, seen  # the outage was seen
    # sends resume: the messages after the restart are accepted again, and resends settle the rest once each
    last = settle(config, msgs, first)
    assert_each_delivered_once(alice, msgs, last)
    after = send_remote(config, new_message("alice@laptop", "after", from_="@ci:load"), timeout=SEND_TIMEOUT_S)
    assert state_of(after) == ("accepted", None)


SENDER = """
import json, sys
from crosstalk.core.message import Message
from crosstalk.registry.paths import StatePaths
from crosstalk.relay.config import load
from crosstalk.relay.send import send_remote
config = load(StatePaths.from_env())
for line in open(sys.argv[1]):
    msg = Message.from_dict(json.loads(line))
    result = send_remote(config, msg, timeout=float(sys.argv[2]))
    print(msg.message_id, result.outcome.state.value, flush=True)
"""


def test_kill_9_of_the_sending_process_mid_send(relay: NatsServer, laptop: Procs, gpu: Procs, alice: Agent) -> None:
    join_and_serve(laptop, relay, "laptop")
    msgs = batch("kill9 sender")
    batch_file = gpu.root / "batch.jsonl"
    batch_file.write_text("".join(json.dumps(m.to_dict()) + "\n" for m in msgs))
    proc = subprocess.Popen(
        [sys.executable, "-c", SENDER, str(batch_file), str(SEND_TIMEOUT_S)],
        env=gpu.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    gpu.procs.append(proc)
    until(lambda: len(alice.inbox_lines()) >= LOAD // 4, "a quarter of the load delivered", BOUND_S)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(BOUND_S)
    assert proc.stdout is not None
    answered = {line.split()[0]: line.split()[1] for line in proc.stdout.read().decode().splitlines()}
    assert len(answered) < LOAD  # killed mid-send
    before = Counter(alice.inbox_ids())
    assert max(before.values()) == 1
    # the sending machine sends again what it cannot prove accepted (here: all, from its own record of the batch)
    config = config_of(gpu)
    last = settle(config, msgs, {m.message_id: send_remote(config, m, timeout=SEND_TIMEOUT_S) for m in msgs})
    assert_each_delivered_once(alice, msgs, last)
    for m in msgs:
        if m.message_id in before:
            assert last[m.message_id].outcome.evidence.get("duplicate") is True
