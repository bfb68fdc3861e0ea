"""Presence across a real nats-server on loopback, two state roots as two machines: each relay process announces
its live agents, and the other shows them as NAME@ALIAS in `list --all`, list_agents and `watch --once --json`; a
machine whose relay process is killed -9 disappears within EXPIRY_INTERVALS intervals, one that leaves at once; a
hostile machine can neither speak for another's agents nor grow what is kept without bound."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import Iterator
from typing import Any

import pytest

from crosstalk.relay.presence import EXPIRY_INTERVALS, INTERVAL_ENV, MAX_AGENTS, presence_path
from crosstalk.shim.listing import agent_rows
from tests.support.nats_relay import NatsServer, join_and_serve, nats_server, relay_status
from tests.support.procs import Procs, procs
from tests.support.waiting import until

INTERVAL_S = 0.5
GONE_BOUND_S = EXPIRY_INTERVALS * INTERVAL_S + 3.0  # the promise, plus the poll and a loaded machine's slack


@pytest.fixture
def relay(monkeypatch: pytest.MonkeyPatch) -> Iterator[NatsServer]:
    monkeypatch.setenv(INTERVAL_ENV, str(INTERVAL_S))  # inherited by every relay process the test starts
    with nats_server("laptop", "gpu", "evil") as server:
        yield server


def joined_machine(relay: NatsServer, agent: str, alias: str) -> Iterator[Procs]:
    """A state root with `agent` running, joined to the relay as `alias`, its relay process serving."""
    with procs() as p:
        p.start_agent(agent)
        join_and_serve(p, relay, alias)
        yield p


@pytest.fixture
def laptop(relay: NatsServer) -> Iterator[Procs]:
    yield from joined_machine(relay, "alice", "laptop")


@pytest.fixture
def gpu(relay: NatsServer) -> Iterator[Procs]:
    yield from joined_machine(relay, "bob", "gpu")


def listed_all(machine: Procs) -> list[dict[str, Any]]:
    res = machine.cli("list", "--all", "--json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert isinstance(rows, list)
    return rows


def remote_names(machine: Procs) -> set[str]:
    return {r["name"] for r in listed_all(machine) if "@" in r["name"]}


def test_each_machine_lists_the_others_agents_as_name_at_alias(laptop: Procs, gpu: Procs) -> None:
    until(lambda: remote_names(gpu) == {"alice@laptop"}, "gpu lists alice@laptop")
    until(lambda: remote_names(laptop) == {"bob@gpu"}, "laptop lists bob@gpu")
    [row] = [r for r in listed_all(gpu) if r["name"] == "alice@laptop"]
    assert (row["harness"], row["reachable"], row["machine"]) == ("fake", True, "laptop")
    assert set(row) <= {"name", "harness", "reachable", "reason", "machine", "crosstalk", "live"}  # nothing else
    # plain `list` is this machine's only, as before
    res = gpu.cli("list", "--json")
    assert [r["name"] for r in json.loads(res.stdout)] == ["bob"]
    res = gpu.cli("list", "--all")
    assert any(line.startswith("alice@laptop ") for line in res.stdout.splitlines()), res.stdout
    # list_agents: the same rows, small (name, harness, reachability)
    rows = agent_rows(gpu.paths, gpu.env, None)
    assert [r for r in rows if "@" in r["name"]] == [{"name": "alice@laptop", "harness": "fake", "reachable": True}]
    # watch --once --json and the text tables
    res = gpu.cli("watch", "--once", "--json")
    assert res.returncode == 0, res.stderr
    snap = json.loads(res.stdout)
    assert snap["remote_agents"] == [
        {"name": "alice@laptop", "machine": "laptop", "harness": "fake", "reachable": True, "reason": None}
    ]
    res = gpu.cli("watch", "--once")
    assert "agents (1 live, 1 on other machines)" in res.stdout
    assert any(line.strip().startswith("alice@laptop") for line in res.stdout.splitlines())
    # relay status says whom it hears
    until(lambda: relay_status(gpu).get("machines") == {"laptop": 1}, "gpu's relay status hears laptop")
    assert "other machines: laptop (1 agent)" in gpu.cli("relay", "status").stdout
    # kept private: the file is 0600
    assert stat.S_IMODE(os.stat(presence_path(gpu.paths)).st_mode) == 0o600


def test_a_new_agent_appears_and_a_stopped_one_goes(laptop: Procs, gpu: Procs) -> None:
    until(lambda: remote_names(gpu) == {"alice@laptop"}, "gpu lists alice@laptop")
    carol = laptop.start_agent("carol")
    until(lambda: remote_names(gpu) == {"alice@laptop", "carol@laptop"}, "carol@laptop appears on gpu")
    laptop.stop(carol.proc)
    until(lambda: remote_names(gpu) == {"alice@laptop"}, "carol@laptop goes from gpu")


def test_a_machine_killed_9_disappears_within_its_expiry(laptop: Procs, gpu: Procs) -> None:
    until(lambda: remote_names(gpu) == {"alice@laptop"}, "gpu lists alice@laptop")
    pid = relay_status(laptop)["serve"]["pid"]
    os.kill(pid, 9)
    until(lambda: remote_names(gpu) == set(), "alice@laptop gone from gpu after kill -9", GONE_BOUND_S)
    # and laptop's own view is not current without its relay process: it shows nothing rather than old news
    assert remote_names(laptop) == set()


def test_a_machine_that_leaves_is_gone_at_once(laptop: Procs, gpu: Procs) -> None:
    until(lambda: remote_names(gpu) == {"alice@laptop"}, "gpu lists alice@laptop")
    res = laptop.cli("relay", "leave")
    assert res.returncode == 0, res.stderr
    until(lambda: remote_names(gpu) == set(), "laptop's goodbye heard", 2.0)


async def _hostile(relay: NatsServer) -> list[str]:
    """As machine evil: announce for laptop (the server must refuse), then flood its own entry."""
    import nats

    errors: list[str] = []

    async def on_error(exc: Exception) -> None:
        errors.append(str(exc))

    nc = await nats.connect(relay.url, user="evil", password=relay.password("evil"), error_cb=on_error)
    try:
        fake = {"v": 1, "interval": 0.5, "agents": [{"name": "mallory", "harness": "fake", "reachable": True}]}
        await nc.publish("crosstalk.v1.presence.laptop", json.dumps(fake).encode())
        many = [{"name": f"a{i}", "harness": "fake", "reachable": True} for i in range(MAX_AGENTS * 3)]
        junk = [{"name": "../../etc", "harness": "x", "reachable": True}, {"name": "ok", "harness": "fake"}]
        flood = {"v": 1, "interval": 1e9, "agents": junk + many}
        await nc.publish("crosstalk.v1.presence.evil", json.dumps(flood).encode())
        await nc.publish("crosstalk.v1.presence.evil", b"x" * 200_000)  # oversized: dropped, the entry stands
        await nc.flush(timeout=5)
        await asyncio.sleep(0)  # let the server's permission error reach the callback
    finally:
        await nc.close()
    return errors


def test_a_hostile_machine_speaks_only_for_itself_and_within_caps(relay: NatsServer, laptop: Procs, gpu: Procs) -> None:
    until(lambda: remote_names(gpu) == {"alice@laptop"}, "gpu lists alice@laptop")
    asyncio.run(_hostile(relay))
    until(lambda: any(n.endswith("@evil") for n in remote_names(gpu)), "evil's own entry heard")
    names = remote_names(gpu)
    assert "mallory@laptop" not in names  # the server refused evil's publish on laptop's subject
    evil = {n for n in names if n.endswith("@evil")}
    # the first MAX_AGENTS entries are read, the two malformed ones among them skipped
    assert len(evil) == MAX_AGENTS - 2 and "a0@evil" in evil and not {"../../etc@evil", "ok@evil"} & evil
    assert os.path.getsize(presence_path(gpu.paths)) < 64 * 1024
    # evil announced an interval of 1e9 s: clamped, so it too expires within minutes, not never
    data = json.loads(presence_path(gpu.paths).read_text())
    assert set(data["machines"]) == {"laptop", "evil"}


def test_the_watch_screen_shows_the_other_machines_agents(laptop: Procs, gpu: Procs) -> None:
    """The textual screen (its own test pilot), following presence.json by inotify: an agent that starts on laptop
    appears on gpu's screen as NAME@laptop, and the heading counts it."""
    from crosstalk.watch.app import WatchApp
    from crosstalk.watch.snapshot import Reader
    from tests.support.watch import line_with, screen_text

    until(lambda: remote_names(gpu) == {"alice@laptop"}, "gpu lists alice@laptop")
    app = WatchApp(Reader(gpu.paths, gpu.env), use_inotify=True)

    async def on_screen(pilot: Any, *words: str) -> None:
        deadline = asyncio.get_running_loop().time() + 20.0
        while line_with(screen_text(app), *words) is None:
            assert asyncio.get_running_loop().time() < deadline, f"{words} never on screen:\n{screen_text(app)}"
            await pilot.pause(0.1)

    async def main() -> None:
        async with app.run_test(size=(160, 45)) as pilot:
            await on_screen(pilot, "alice@laptop", "fake", "yes")
            await on_screen(pilot, "Agents (1 live, 1 on other machines)")
            await asyncio.to_thread(laptop.start_agent, "carol")
            await on_screen(pilot, "carol@laptop", "fake", "yes")
            await on_screen(pilot, "Agents (1 live, 2 on other machines)")
            await pilot.press("q")

    asyncio.run(main())
    assert app.return_value == 0


def test_presence_comes_back_when_the_relay_does(relay: NatsServer, laptop: Procs, gpu: Procs) -> None:
    """The relay down: nothing is heard, so laptop's agents expire on gpu; the relay back: both relay processes
    reconnect on their own and laptop announces again at once."""
    until(lambda: remote_names(gpu) == {"alice@laptop"}, "gpu lists alice@laptop")
    relay.kill9()
    until(lambda: remote_names(gpu) == set(), "laptop expired on gpu while the relay is down", GONE_BOUND_S)
    relay.start()
    until(lambda: remote_names(gpu) == {"alice@laptop"}, "alice@laptop listed again after the relay came back")
    until(lambda: remote_names(laptop) == {"bob@gpu"}, "and bob@gpu on laptop")
