"""The git bus wakes through the NATS relay: two machines of one transport (two state roots, one bare remote) that
joined a real nats-server on loopback. A send on m1 wakes m2's dispatcher, whose reply wakes m1's, so the round
trip from idle completes although neither dispatcher would poll for a minute; with the relay down the bus still
answers, by its poll, with the reason logged; a machine flooding wakes buys only the gate's bounded ticks and cannot
wake as another machine; a relay without the wake grants leaves the poll, and the log says so."""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk.relay.wake import transport_key, wake_subject
from tests.support.bus_dispatch import Daemon, log_text, send, set_registry, wait_for, write_model
from tests.support.bus_machines import Machine, TwoMachines
from tests.support.nats_relay import NatsServer, nats_server

NEVER_S = "60"  # the dispatchers' poll in the wake tests: nothing below may wait for it
REPLY_BOUND_S = 20.0  # well inside that poll: only a wake can have brought the reply


@pytest.fixture
def relay() -> Iterator[NatsServer]:
    with nats_server("m1", "m2", "evil") as server:
        yield server


def join(machine: Machine, relay: NatsServer) -> None:
    creds = machine.base / "relay.creds"
    creds.write_text(f"user={machine.alias}\npassword={relay.password(machine.alias)}\n")
    os.chmod(creds, 0o600)
    res = machine.cli(
        "relay", "join", relay.url, "--alias", machine.alias, "--creds", str(creds), "--no-start", timeout=30
    )
    assert res.returncode == 0, res.stderr


def with_echo(two: TwoMachines) -> Path:
    models = two.a.base / "models"
    models.mkdir()
    echo = write_model(models, "echo")
    set_registry(two.a, {"local": {"echo": str(echo)}})
    two.b.git("pull", "-q")
    return echo


def replied_here(machine: Machine, path: str) -> bool:
    """Whether the reply is in the machine's own work tree (no --pull: its dispatcher must have fetched it)."""
    res = machine.cli("message", "replies", path, "--json")
    return res.returncode == 0 and '"REPLIED"' in res.stdout


def events(machine: Machine, event: str) -> list[str]:
    return [line for line in log_text(machine).splitlines() if re.search(rf"\s{event}(\s|$)", line)]


def wait_up(machine: Machine, daemon: Daemon) -> None:
    try:
        wait_for(lambda: events(machine, "relay_wake_up"), 20, f"{machine.alias}'s dispatcher on the relay")
    except AssertionError as exc:
        raise AssertionError(f"{exc}:\n{daemon.tail()}") from None


def round_trip(a: Machine, da: Daemon, db: Daemon, text: str, within: float, how: str = "") -> None:
    """Send `text` from m1 to echo@m2 and wait until its reply is in m1's own work tree; both dispatchers' log tails
    in the failure when it is not there within `within` s."""
    [path] = send(a, "echo@m2", text, sender="op-m1")
    try:
        wait_for(lambda: replied_here(a, path), within, f"the reply in m1's work tree{how}", poll=0.1)
    except AssertionError as exc:
        raise AssertionError(f"{exc}:\n{da.tail()}\n=== m2\n{db.tail()}") from None


def test_a_round_trip_from_idle_is_woken_through_the_relay(two_machines: TwoMachines, relay: NatsServer) -> None:
    a, b = two_machines.a, two_machines.b
    with_echo(two_machines)
    join(a, relay)
    join(b, relay)
    poll = ("--interval", NEVER_S, "--active-interval", NEVER_S)
    with Daemon(a, *poll) as da, Daemon(b, *poll) as db:
        da.wait_ready()
        db.wait_ready()
        wait_up(a, da)
        wait_up(b, db)
        round_trip(a, da, db, "hello across the relay", REPLY_BOUND_S)
        # The mechanism: m2 ticked because m1's wake came, m1 fetched the reply because m2's came.
        assert any("machines=m1" in line for line in events(b, "relay_wake")), db.tail()
        assert any("machines=m2" in line for line in events(a, "relay_wake")), da.tail()
        assert not events(a, "relay_wake_down") and not events(b, "relay_wake_down")
        assert da.stop() == 0 and db.stop() == 0


def test_with_the_relay_down_the_poll_still_answers(two_machines: TwoMachines, relay: NatsServer) -> None:
    a, b = two_machines.a, two_machines.b
    with_echo(two_machines)
    join(a, relay)
    join(b, relay)
    relay.stop()
    with Daemon(a, "--interval", "1") as da, Daemon(b, "--interval", "1") as db:
        da.wait_ready()
        db.wait_ready()
        for machine, daemon in ((a, da), (b, db)):
            wait_for(lambda m=machine: events(m, "relay_wake_down"), 20, f"{machine.alias} logs the relay down")
            [line] = events(machine, "relay_wake_down")  # once, not once a retry
            assert "fallback=poll" in line and "reason=" in line, daemon.tail()
        round_trip(a, da, db, "hello by the poll", 30, " by the poll")
        assert not events(a, "relay_wake") and not events(b, "relay_wake")
        assert da.stop() == 0 and db.stop() == 0


async def flood(relay: NatsServer, subject: str, seconds: float, spoofed: str) -> int:
    """Wakes as machine evil on `subject` for `seconds`, and as many on `spoofed` (another machine's), which the
    server refuses."""
    import nats

    async def refused(exc: Exception) -> None:
        pass  # the server's "Permissions Violation" for the spoofed subject: expected, and nothing else of ours

    nc = await nats.connect(
        relay.url, user="evil", password=relay.password("evil"), connect_timeout=5, error_cb=refused
    )
    sent = 0
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for _ in range(200):
                await nc.publish(subject, b"{}")
                await nc.publish(spoofed, b"{}")
            sent += 200
            await nc.flush(timeout=5)
    finally:
        await nc.close()
    return sent


def test_a_wake_flood_buys_only_a_bounded_rate_of_ticks(two_machines: TwoMachines, relay: NatsServer) -> None:
    a, b = two_machines.a, two_machines.b
    join(b, relay)
    key = transport_key(a.git("rev-list", "--max-parents=0", "HEAD"))
    with Daemon(b, "--interval", NEVER_S, "--active-interval", NEVER_S) as db:
        db.wait_ready()
        wait_up(b, db)
        before = len(events(b, "relay_wake"))
        started = time.monotonic()
        sent = asyncio.run(flood(relay, wake_subject(key, "evil"), 3.0, spoofed=wake_subject(key, "m1")))
        wait_for(lambda: len(events(b, "relay_wake")) > before, 10, "m2 woken by the flood")
        window = time.monotonic() - started
        woken = events(b, "relay_wake")[before:]
        assert sent >= 1000
        # The gate: a burst of 3, then 1 a second, however many arrive (plus one for a tick already waiting).
        assert 1 <= len(woken) <= 3 + window * 1.0 + 1, (len(woken), window)
        assert all("machines=evil" in line for line in woken)  # never m1: a machine cannot wake as another
        assert db.stop() == 0


class WithoutWakeGrants(NatsServer):
    """A relay configured as before the bus wake: each machine's live-message grants only."""

    def write_config(self) -> Path:
        users = ",\n    ".join(
            f'{{ user: "{a}", password: "{self.password(a)}", permissions: {{ '
            f'publish: {{ allow: ["crosstalk.v1.msg.*.{a}"] }}, '
            f'subscribe: {{ allow: ["crosstalk.v1.msg.{a}.*", "_INBOX.{a}.>"] }}, allow_responses: true }} }}'
            for a in self.aliases
        )
        conf = self.dir / "relay.conf"
        conf.write_text(f"listen: 127.0.0.1:{self.port}\nauthorization {{\n  users = [\n    {users}\n  ]\n}}\n")
        return conf


def test_a_relay_without_the_wake_grants_leaves_the_poll_and_says_why(two_machines: TwoMachines) -> None:
    a, b = two_machines.a, two_machines.b
    with_echo(two_machines)
    server = WithoutWakeGrants(("m1", "m2"))
    try:
        server.start()
        join(a, server)
        join(b, server)
        with Daemon(a, "--interval", "1") as da, Daemon(b, "--interval", "1") as db:
            da.wait_ready()
            db.wait_ready()
            for machine, daemon in ((a, da), (b, db)):
                wait_for(lambda m=machine: events(m, "relay_wake_refused"), 20, f"{machine.alias} logs the refusal")
                [line] = events(machine, "relay_wake_refused")
                assert "fallback=poll" in line and "crosstalk.v1.wake.*." + machine.alias in line, daemon.tail()
            round_trip(a, da, db, "hello without wake grants", 30, " by the poll")
            assert not events(a, "relay_wake") and not events(b, "relay_wake")
            assert da.stop() == 0 and db.stop() == 0
    finally:
        server.close()


def test_the_dispatcher_follows_a_join_and_a_leave_without_a_restart(
    two_machines: TwoMachines, relay: NatsServer
) -> None:
    a, b = two_machines.a, two_machines.b
    with_echo(two_machines)
    join(a, relay)
    poll = ("--interval", NEVER_S, "--active-interval", NEVER_S)
    with Daemon(a, *poll) as da, Daemon(b, *poll) as db:
        da.wait_ready()
        db.wait_ready()
        wait_up(a, da)
        assert not events(b, "relay_wake_up")  # m2 has not joined: its dispatcher polls alone
        join(b, relay)  # while its dispatcher runs: no `server restart`
        wait_up(b, db)
        round_trip(a, da, db, "hello after a join", REPLY_BOUND_S)
        assert any("machines=m1" in line for line in events(b, "relay_wake")), db.tail()
        res = b.cli("relay", "leave", timeout=30)
        assert res.returncode == 0, res.stderr
        wait_for(lambda: events(b, "relay_wake_off"), 10, "m2's dispatcher leaves the relay")
        assert len(events(b, "relay_wake_up")) == 1
        join(b, relay)  # and back: a second connection, still the same dispatcher
        wait_for(lambda: len(events(b, "relay_wake_up")) == 2, 20, "m2's dispatcher back on the relay")
        assert da.stop() == 0 and db.stop() == 0
