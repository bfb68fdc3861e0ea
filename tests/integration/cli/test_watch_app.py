"""The `crosstalk watch` screen, driven by textual's own test pilot (App.run_test) against a real state root:
what the screen shows as agents come and go, as a real `crosstalk send` lands, and as a dispatcher beats."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from crosstalk.watch.app import WatchApp
from crosstalk.watch.snapshot import Reader
from tests.support.procs import Procs
from tests.support.watch import dispatcher, init_transport, line_with, screen_text

WAIT_S = 30.0
SIZE = (160, 45)


async def until(pilot: object, app: WatchApp, *words: str, absent: bool = False) -> str:
    """Wait (up to WAIT_S) until a screen line holds every word in order (or, with absent, none does); the line."""
    deadline = time.monotonic() + WAIT_S
    while True:
        text = screen_text(app)
        found = line_with(text, *words)
        if (found is None) == absent:
            return found or ""
        if time.monotonic() > deadline:
            raise AssertionError(f"{words} {'still' if absent else 'never'} on screen:\n{text}")
        await pilot.pause(0.1)  # type: ignore[attr-defined]


async def until_true(pilot: object, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, "not within the wait"
        await pilot.pause(0.05)  # type: ignore[attr-defined]


def run_app(
    xt: Procs,
    body: Callable[[object, WatchApp], Awaitable[None]],
    *,
    use_inotify: bool = True,
    tick_s: float | None = None,
) -> WatchApp:
    app = WatchApp(Reader(xt.paths, xt.env), use_inotify=use_inotify, tick_s=tick_s)

    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await body(pilot, app)

    asyncio.run(main())
    return app


def test_agents_are_listed_and_a_message_sent_meanwhile_appears(xt: Procs) -> None:
    alice = xt.start_agent("alice")
    carol = xt.start_agent("carol", "--role", "worker", "--parent", "alice")

    async def body(pilot: object, app: WatchApp) -> None:
        await until(pilot, app, "alice", "fake", "primary", "-", "yes", "0", "0", "0", str(alice.pid))
        await until(pilot, app, "carol", "fake", "worker", "alice", "yes", str(carol.pid))
        assert line_with(screen_text(app), "Agents (2 live)", "live updates: inotify")
        assert line_with(screen_text(app), "Traffic (0 messages")
        res = await asyncio.to_thread(xt.cli, "send", "alice", "hello from the test")
        assert res.returncode == 0, res.stderr
        line = await until(pilot, app, "(external)", "alice", "inform", "accepted", " ms", "hello from the test")
        assert line_with(screen_text(app), "Traffic (1 messages")
        assert "@cli:" in line
        await pilot.press("q")  # type: ignore[attr-defined]

    app = run_app(xt, body)
    assert app.return_value == 0


def test_without_inotify_the_timer_follows_the_same_changes(xt: Procs) -> None:
    xt.start_agent("alice")

    async def body(pilot: object, app: WatchApp) -> None:
        await until(pilot, app, "alice", "fake", "primary")
        assert line_with(screen_text(app), "live updates: every 1 s")
        bob = await asyncio.to_thread(xt.start_agent, "bob", "--default", "refuse")
        await until(pilot, app, "bob", "fake", "primary", "yes", str(bob.pid))
        res = await asyncio.to_thread(xt.cli, "send", "bob", "are you there")
        assert res.returncode == 4
        await until(pilot, app, "bob", "unreachable (fake: the session refused the input)", "are you there")
        await until(pilot, app, "bob", "fake", "primary", "yes", "0", "0", "1", str(bob.pid))  # unread: 1
        await pilot.press("q")  # type: ignore[attr-defined]

    assert run_app(xt, body, use_inotify=False).return_value == 0


def test_an_agent_that_stops_or_is_killed_leaves_the_screen(xt: Procs) -> None:
    xt.start_agent("alice")
    bob = xt.start_agent("bob")
    dave = xt.start_agent("dave")

    async def body(pilot: object, app: WatchApp) -> None:
        await until(pilot, app, "bob", "fake", "primary")
        await until(pilot, app, "dave", "fake", "primary")
        await asyncio.to_thread(xt.stop, bob.proc)  # unregisters: its descriptor goes (a file event)
        await until(pilot, app, "bob", "fake", "primary", absent=True)
        await asyncio.to_thread(xt.kill9, dave)  # its descriptor stays behind: the liveness timer notices
        await until(pilot, app, "dave", "fake", "primary", absent=True)
        await until(pilot, app, "Agents (1 live)")
        await pilot.press("ctrl+c")  # type: ignore[attr-defined]

    assert run_app(xt, body).return_value == 0


def test_a_transport_shows_its_dispatcher_heartbeat(xt: Procs) -> None:
    init_transport(xt)

    async def body(pilot: object, app: WatchApp) -> None:
        await until(pilot, app, "t1", "not running", "never", "0 commits")
        with dispatcher(xt) as pid:
            await until(pilot, app, "t1", f"running (pid {pid})", "s ago", "0 commits", "0", "0", "0", "0")
        await until(pilot, app, "t1", "not running", "s ago")  # the last heartbeat is still there, ageing
        await pilot.press("q")  # type: ignore[attr-defined]

    assert run_app(xt, body).return_value == 0


def test_r_takes_a_snapshot_now(xt: Procs) -> None:
    async def body(pilot: object, app: WatchApp) -> None:
        await until(pilot, app, "Agents (0 live)")  # the first snapshot; the timer would wait an hour
        first = app.snapshot
        assert first is not None
        await pilot.press("r")  # type: ignore[attr-defined]
        await until_true(pilot, lambda: app.snapshot is not first)
        await pilot.press("q")  # type: ignore[attr-defined]

    assert run_app(xt, body, use_inotify=False, tick_s=3600).return_value == 0
