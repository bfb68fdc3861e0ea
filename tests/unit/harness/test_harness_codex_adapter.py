"""The Codex adapter's branches, against an in-process WebSocket server on a unix socket that answers as the pinned
app-server was seen to (the real one is driven in tests/e2e/test_codex_live.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.server import unix_serve

from crosstalk.core.ids import new_message_id
from crosstalk.core.kinds import Delivery, Kind
from crosstalk.core.message import Message, TextPart
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import State
from crosstalk.harness.base import AgentInfo, InjectRequest, SessionIdentity
from crosstalk.harness.codex.adapter import CodexAdapter
from crosstalk.harness.codex.endpoints import control_socket, endpoints, parent_listen_socket
from crosstalk.harness.codex.endpoints import parent_control_socket as real_parent_control_socket
from crosstalk.harness.errors import HarnessDisconnected, HarnessRefused, PreSendFailure
from tests.support.bounded import run_bounded

THREAD = "01a2-thread"
ALICE = Sender(SenderClass.VERIFIED, "a11ce0a11ce0a11c", "alice", "a2a")
INFO = AgentInfo("0123456789abcdef", "codex-x", THREAD, "/x.sock", "/w")


@pytest.fixture(autouse=True)
def _no_parent_app_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest is not an app-server: a Codex running on this machine under the test's HOME is never asked."""
    from crosstalk.harness.codex import endpoints as codex_endpoints

    monkeypatch.setattr(codex_endpoints, "parent_control_socket", lambda: None)


class FakeAppServer:
    """Records requests; `answers[method]` is a result, an {"error": …}, "hang" or "close"."""

    def __init__(self, loaded: list[str], status: str = "idle") -> None:
        self.loaded, self.status = loaded, status
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.answers: dict[str, Any] = {}

    async def handler(self, ws: Any) -> None:
        async for frame in ws:
            msg = json.loads(frame)
            if "id" not in msg:
                continue
            method, params = msg["method"], msg.get("params") or {}
            self.calls.append((method, params))
            answer = self.answers.get(method, self.default(method))
            if answer == "close":
                await ws.close()
                return
            if answer == "hang":
                continue
            reply = {"id": msg["id"], **(answer if "error" in answer else {"result": answer})}
            await ws.send(json.dumps(reply))

    def default(self, method: str) -> dict[str, Any]:
        return {
            "initialize": {"userAgent": "fake"},
            "thread/loaded/list": {"data": self.loaded, "nextCursor": None},
            "thread/read": {"thread": {"id": THREAD, "status": {"type": self.status}}},
            "thread/turns/list": {"data": [{"id": "turn-9", "status": "inProgress"}]},
            "turn/start": {"turn": {"id": "turn-1", "status": "inProgress"}},
            "turn/steer": {"turnId": "turn-9"},
            "thread/inject_items": {},
        }.get(method, {})


def request(delivery: Delivery = Delivery.AUTO, sender: Sender = ALICE, kind: Kind = Kind.INFORM) -> InjectRequest:
    msg = Message(message_id=new_message_id(), to="codex-x", parts=(TextPart("hi"),), kind=kind, delivery=delivery)
    return InjectRequest(msg, sender, delivery, meta=kind is Kind.META)


def run(tmp_path: Path, server: FakeAppServer, body: Any) -> None:
    env = {"CODEX_HOME": str(tmp_path)}
    path = control_socket(env)
    path.parent.mkdir(parents=True)

    async def main() -> None:
        async with unix_serve(server.handler, str(path)):
            adapter = CodexAdapter(SessionIdentity("codex", THREAD), env)
            try:
                await body(adapter)
            finally:
                await adapter.close()

    run_bounded(main, 20, what=getattr(body, "__qualname__", None))


def test_bound_when_the_control_socket_has_the_thread_and_deliveries_map_to_methods(tmp_path: Path):
    server = FakeAppServer([THREAD])

    async def body(adapter: CodexAdapter) -> None:
        bound = await adapter.bind(INFO)
        assert bound.inbound_reachable and bound.endpoint == str(control_socket({"CODEX_HOME": str(tmp_path)}))
        out = await adapter.inject(request())
        assert (out.state, out.evidence["turn_id"]) == (State.ACCEPTED, "turn-1")
        assert (await adapter.inject(request(Delivery.NEXT_TURN))).state is State.QUEUED
        assert (await adapter.inject(request(kind=Kind.META))).state is State.QUEUED
        assert (await adapter.inject(request(sender=Sender.unverified("@ci:build")))).state is State.QUEUED
        steer_idle = await adapter.inject(request(Delivery.STEER))  # idle: a turn is started
        assert steer_idle.evidence["codex"] == "turn/start"
        server.status = "active"
        steered = await adapter.inject(request(Delivery.STEER))
        assert (steered.evidence["codex"], steered.evidence["turn_id"]) == ("turn/steer", "turn-9")
        methods = [m for m, _ in server.calls]
        assert methods.count("thread/inject_items") == 3 and methods[-1] == "turn/steer"
        steer = server.calls[-1][1]
        assert steer["expectedTurnId"] == "turn-9" and steer["threadId"] == THREAD
        assert "cross-session-message" in steer["input"][0]["text"]

    run(tmp_path, server, body)


def test_a_thread_the_server_does_not_have_is_unreachable_with_a_reason(tmp_path: Path):
    async def body(adapter: CodexAdapter) -> None:
        bound = await adapter.bind(INFO)
        assert not bound.inbound_reachable and "does not have this thread loaded" in (bound.reason or "")
        with pytest.raises(PreSendFailure, match="does not have this thread"):
            await adapter.inject(request())

    run(tmp_path, FakeAppServer(["another-thread"]), body)


def test_a_refusal_is_unreachable_and_a_broken_or_silent_server_after_the_send_is_unknown(tmp_path: Path, monkeypatch):
    from crosstalk.harness.codex import appserver

    monkeypatch.setattr(appserver, "REQUEST_TIMEOUT_S", 0.5)
    server = FakeAppServer([THREAD])

    async def body(adapter: CodexAdapter) -> None:
        await adapter.bind(INFO)
        server.answers["turn/start"] = {"error": {"code": -32600, "message": "thread is closing"}}
        with pytest.raises(HarnessRefused, match="thread is closing"):
            await adapter.inject(request())
        server.answers["turn/start"] = "hang"
        with pytest.raises(HarnessDisconnected, match="no answer"):
            await adapter.inject(request())
        server.answers["turn/start"] = "close"
        with pytest.raises(HarnessDisconnected):
            await adapter.inject(request())
        del server.answers["turn/start"]  # the next delivery connects again
        assert (await adapter.inject(request())).state is State.ACCEPTED

    run(tmp_path, server, body)


def test_no_app_server_is_unreachable(tmp_path: Path):
    adapter = CodexAdapter(SessionIdentity("codex", THREAD), {"CODEX_HOME": str(tmp_path)})
    bound = asyncio.run(adapter.bind(INFO))
    assert not bound.inbound_reachable and "no Codex app-server has this thread loaded" in (bound.reason or "")


def test_loaded_threads_are_listed_and_a_native_inform_starts_a_turn(tmp_path: Path):
    """The blocking client (harness/codex/threads.py), as `crosstalk list` and list_agents use it."""
    import threading

    from crosstalk.harness.codex import KIND
    from crosstalk.harness.codex.threads import deliver

    server = FakeAppServer(["01a2-aaaa-bbbb-c0ffee12", "01a2-dead"])
    server.answers["thread/read"] = {"thread": {"status": {"type": "active"}, "environments": [{"cwd": "/w"}]}}
    env = {"CODEX_HOME": str(tmp_path)}
    path = control_socket(env)
    path.parent.mkdir(parents=True)
    loop = asyncio.new_event_loop()
    ready, stop = threading.Event(), asyncio.Event()

    async def serve() -> None:
        async with unix_serve(server.handler, str(path)):
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    try:
        assert ready.wait(10)
        rows = KIND.discover(env)
        assert [(r.name, r.status, r.cwd, r.reachable) for r in rows] == [
            ("codex-c0ffee12", "busy", "/w", True), ("codex-01a2dead", "busy", "/w", True)
        ]  # fmt: skip
        out = deliver(str(path), "01a2-dead", "hello")
        assert out.state is State.ACCEPTED and out.evidence["native"] is True
        assert server.calls[-1] == ("turn/start", {"threadId": "01a2-dead", "input": [
            {"type": "text", "text": "hello", "text_elements": []}]})  # fmt: skip
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()
    assert KIND.discover(env) == [] and deliver(str(path), "x", "y").state is State.UNREACHABLE  # no app-server now


def test_a_thread_loaded_on_two_app_servers_is_ambiguous_never_the_first(tmp_path: Path, monkeypatch):
    from crosstalk.harness.codex import endpoints as codex_endpoints

    other = tmp_path / "other.sock"
    monkeypatch.setattr(codex_endpoints, "parent_listen_socket", lambda: str(other))
    env = {"CODEX_HOME": str(tmp_path)}
    control_socket(env).parent.mkdir(parents=True)
    first, second = FakeAppServer([THREAD]), FakeAppServer([THREAD])

    async def main() -> None:
        async with unix_serve(first.handler, str(control_socket(env))), unix_serve(second.handler, str(other)):
            adapter = CodexAdapter(SessionIdentity("codex", THREAD), env)
            bound = await adapter.bind(INFO)
            assert not bound.inbound_reachable and (bound.reason or "").startswith("ambiguous_endpoint")
            assert str(other) in (bound.reason or "")
            with pytest.raises(PreSendFailure, match="ambiguous_endpoint"):
                await adapter.inject(request())
            second.loaded = []  # now only the control socket has it
            again = CodexAdapter(SessionIdentity("codex", THREAD), env)
            assert (await again.bind(INFO)).endpoint == str(control_socket(env))
            await again.close()

    asyncio.run(main())


def test_the_parent_app_servers_socket_is_read_from_its_command_line(sleeper):
    pid = sleeper("app-server", "--listen", "unix:///run/x.sock",
                  ready=lambda p: b"app-server" in Path(f"/proc/{p}/cmdline").read_bytes())  # fmt: skip
    assert parent_listen_socket(pid) == "/run/x.sock"
    assert parent_listen_socket(999_999_999) is None


def serving(*servers: tuple[FakeAppServer, Path]) -> Any:
    """Serve each fake app-server on its socket in a background loop (for the blocking listing client)."""
    import contextlib
    import threading

    @contextlib.contextmanager
    def cm() -> Any:
        loop = asyncio.new_event_loop()
        ready, stop = threading.Event(), asyncio.Event()

        async def serve() -> None:
            async with contextlib.AsyncExitStack() as stack:
                for server, path in servers:
                    await stack.enter_async_context(unix_serve(server.handler, str(path)))
                ready.set()
                await stop.wait()

        thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
        thread.start()
        try:
            assert ready.wait(10)
            yield
        finally:
            loop.call_soon_threadsafe(stop.set)
            thread.join(10)
            loop.close()

    return cm()


def test_a_thread_on_an_endpoint_another_agents_descriptor_records_is_bound_there(tmp_path: Path):
    """Neither the control socket nor the shim's parent has the thread; the endpoint another Codex agent is bound
    to (handed in by the host from its descriptor) does."""
    env = {"CODEX_HOME": str(tmp_path)}
    control_socket(env).parent.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere.sock"
    default, other = FakeAppServer(["01a2-someone-else"]), FakeAppServer([THREAD])

    async def main() -> None:
        async with unix_serve(default.handler, str(control_socket(env))), unix_serve(other.handler, str(elsewhere)):
            alone = CodexAdapter(SessionIdentity("codex", THREAD), env)
            assert not (await alone.bind(INFO)).inbound_reachable  # without the recorded endpoint: not found
            await alone.close()
            adapter = CodexAdapter(SessionIdentity("codex", THREAD), env)
            info = AgentInfo(INFO.agent_id, INFO.name, THREAD, INFO.uds_path, INFO.cwd, (str(elsewhere),))
            try:
                assert (await adapter.bind(info)).endpoint == str(elsewhere)
                assert (await adapter.inject(request())).state is State.ACCEPTED
            finally:
                await adapter.close()
        assert [m for m, _ in other.calls if m == "turn/start"] == ["turn/start"]
        assert "turn/start" not in [m for m, _ in default.calls]

    asyncio.run(main())


def test_only_unix_sockets_this_user_owns_are_asked_and_each_once(tmp_path: Path):
    env = {"CODEX_HOME": str(tmp_path)}
    control = control_socket(env)
    control.parent.mkdir(parents=True)
    regular = tmp_path / "not-a-socket"
    regular.write_text("x")
    (tmp_path / "link.sock").symlink_to(control)
    server = FakeAppServer([THREAD])

    async def main() -> None:
        async with unix_serve(server.handler, str(control)):
            asked = endpoints(env, [str(regular), "relative.sock", str(tmp_path / "missing.sock"),
                                    str(tmp_path / "link.sock"), str(control)], parent=False)  # fmt: skip
            assert asked == [str(control)]  # the link is the same socket; the rest are not sockets

    asyncio.run(main())


def test_listing_asks_recorded_endpoints_and_a_thread_on_two_is_ambiguous(tmp_path: Path):
    from crosstalk.harness.codex import KIND

    env = {"CODEX_HOME": str(tmp_path)}
    control = control_socket(env)
    control.parent.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere.sock"
    default = FakeAppServer(["01a2-both", "01a2-here"])
    other = FakeAppServer(["01a2-both", "01a2-there"])
    with serving((default, control), (other, elsewhere)):
        rows = {r.session_ref: r for r in KIND.discover(env, [str(elsewhere)])}
        assert set(rows) == {"01a2-both", "01a2-here", "01a2-there"}
        assert rows["01a2-there"].endpoint == str(elsewhere) and rows["01a2-there"].reachable
        assert rows["01a2-here"].endpoint == str(control)
        both = rows["01a2-both"]
        assert not both.reachable and (both.reason or "").startswith("ambiguous_endpoint")
        sent = KIND.deliver_native(rows["01a2-there"], "hi", from_name="a", sender_pid=None, environ=env)
        refused = KIND.deliver_native(both, "hi", from_name="a", sender_pid=None, environ=env)
    assert sent.state is State.ACCEPTED and [m for m, _ in other.calls].count("turn/start") == 1
    assert refused.state is State.UNREACHABLE and "ambiguous_endpoint" in (refused.reason or "")
    assert "turn/start" not in [m for m, _ in default.calls]


def test_an_entry_without_the_users_codex_home_still_finds_the_parents_control_socket(
    tmp_path: Path, monkeypatch, sleeper
):
    """The shim's CODEX_HOME (the default: the entry did not carry the user's) has no app-server; the one under the
    CODEX_HOME its parent was started with has the thread, and the thread is bound there."""
    import tempfile

    from crosstalk.harness.codex import endpoints as codex_endpoints

    short = Path(tempfile.mkdtemp(prefix="xcx", dir="/tmp"))  # a socket path must stay under 108 bytes
    user = {"CODEX_HOME": str(short)}
    found = real_parent_control_socket(sleeper(env={**user, "PATH": "/bin"}, ready=real_parent_control_socket))
    assert found == str(control_socket(user))
    monkeypatch.setattr(codex_endpoints, "parent_control_socket", lambda: found)
    control_socket(user).parent.mkdir(parents=True)
    server = FakeAppServer([THREAD])
    shim_env = {"HOME": str(tmp_path / "home")}  # no CODEX_HOME: ~/.codex, where nothing listens

    async def main() -> None:
        async with unix_serve(server.handler, found):
            adapter = CodexAdapter(SessionIdentity("codex", THREAD), shim_env)
            try:
                assert (await adapter.bind(INFO)).endpoint == found
            finally:
                await adapter.close()

    try:
        asyncio.run(main())
    finally:
        import shutil

        shutil.rmtree(short, ignore_errors=True)
