"""The uds ingress: one unix socket per agent (sock/<agent_id>.sock), feeding the receiver chain.

Sender identity comes from the socket, never from the frame: SO_PEERCRED gives the peer pid, whose kernel start
time must match exactly one live descriptor (its shim pid or harness pid) for the sender to be verified. The key
file proves only that the peer is this user; a keyed but unmatched peer is unverified.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hmac
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

from crosstalk.core import envelope
from crosstalk.core.errors import EnvelopeError, MessageError
from crosstalk.core.ids import new_message_id
from crosstalk.core.kinds import Kind
from crosstalk.core.message import Message, TextPart
from crosstalk.core.sender import Sender, SenderClass
from crosstalk.core.states import Outcome, State
from crosstalk.fs.procinfo import login_name
from crosstalk.ingress import taps
from crosstalk.ingress.errors import FrameError
from crosstalk.ingress.frames import (
    MAX_LINE_BYTES,
    AuthLine,
    TaskLine,
    UserLine,
    encode_answer,
    encode_error_answer,
    message_from_crosstalk,
    parse_line,
)
from crosstalk.ingress.relay_peer import REFUSED as RELAY_TAG_REFUSED
from crosstalk.ingress.relay_peer import claims_relay_tag, is_relay_process, names_relayed_agent
from crosstalk.ingress.task_frames import encode_error
from crosstalk.ingress.uds_keeping import IdleKept, cancelled_here, user_keeps
from crosstalk.ingress.uds_keeping import serve_kept as serve_kept_lines
from crosstalk.ingress.uds_peers import PeerCache, PeerResolver, peer_credentials
from crosstalk.ingress.uds_tasks import TaskDesk, serve_kept
from crosstalk.policy.transport import RELAY_TRANSPORT
from crosstalk.receiver import Inbound, Receiver
from crosstalk.registry.descriptor import Descriptor

log = logging.getLogger(__name__)

LINE_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 256  # served at once; past it the longest-idle kept connection is shed, or the new one refused busy
ACCEPT_BACKOFF_S = 0.1  # out of descriptors: wait this long before accepting again
LOG_INTERVAL_S = 30.0  # a repeated failure is logged at most once per interval
INTERNAL = "internal"  # the evidence key of an answer the chain could not give (_receive): what failed
_RETRY_AT_ONCE_ERRNOS = frozenset({errno.ECONNABORTED, errno.EAGAIN, errno.EINTR, errno.EPROTO})


class UdsIngress:
    def __init__(
        self,
        path: Path,
        token: str,
        receiver: Receiver,
        resolve_peer: PeerResolver,
        tasks: TaskDesk | None = None,
        relay_root: Path | None = None,
    ) -> None:
        """`tasks`: serve task frames (the agent serves tasks, as its A2A endpoint does); None refuses them.
        `relay_root`: the state root whose relay process (ingress/relay_peer.py) is the one sender that may claim
        a `@relay:` tag; None refuses the tag to everyone."""
        self.path = path
        self._tasks = tasks
        self._relay_root = relay_root
        if tasks is not None and tasks.relay_peer is None:
            tasks.relay_peer = self._from_relay_process  # a task for another machine's agent (uds_tasks.py)
        self._token = token
        self._receiver = receiver
        self._peers = PeerCache(resolve_peer)
        self._listener: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._idle_kept = IdleKept()  # kept connections waiting for their next frame: shed first at the cap
        self._shedding: set[asyncio.Task[Any]] = set()  # shed, still closing: no longer counted against the cap
        self._warned: dict[str, float] = {}

    async def start(self) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a socket left by a crashed instance; we hold the agent lock, so it is ours
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(self.path))
            os.chmod(self.path, 0o600)  # before listen(): no connection can arrive while it is still wider
            listener.listen(512)
            listener.setblocking(False)
        except BaseException:
            listener.close()
            raise
        self._listener = listener
        self._accepting = asyncio.create_task(self._accept_loop(listener), name=f"uds-accept:{self.path.name}")

    async def close(self) -> None:
        accepting, listener = self._accepting, self._listener
        self._accepting = self._listener = None
        if accepting is not None:
            accepting.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(accepting, 5)
        if listener is not None:
            listener.close()
            # Cancel handlers before waiting: a stuck peer must not hold up shutdown.
            handlers = [t for t in self._handlers if t is not asyncio.current_task()]
            for task in handlers:
                task.cancel()
            if handlers:
                # Wait for them to unwind, so the journal is not closed under a handler still writing to it.
                await asyncio.wait(handlers, timeout=5)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def _accept_loop(self, listener: socket.socket) -> None:
        """Accept forever. A failed accept (EMFILE: out of descriptors) backs off and logs once per interval: asyncio's
        own server logs a traceback for every failed accept. Past MAX_CONNECTIONS a connection is answered busy and
        closed at once, so idle peers cannot hold every descriptor while real senders wait."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _addr = await _accept(loop, listener)
            except OSError as exc:
                if listener.fileno() < 0:
                    return  # closed under us
                if exc.errno in _RETRY_AT_ONCE_ERRNOS:
                    continue  # that one peer gave up; the next may be waiting
                self._warn("accept", "uds accept on %s failed (%s); backing off", self.path, exc.strerror or exc)
                await asyncio.sleep(ACCEPT_BACKOFF_S)
                continue
            if not self._admit():
                self._warn("busy", "uds ingress %s has %d connections open; refusing more", self.path, MAX_CONNECTIONS)
                _refuse(
                    conn,
                    encode_error_answer(f"busy: {MAX_CONNECTIONS} connections already open to this agent; try again"),
                )
                continue
            task = asyncio.create_task(self._handle(conn))
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)

    def _admit(self) -> bool:
        """Room for one more connection: under the cap, or the longest-idle kept connection shed to make it."""
        if len(self._handlers) - len(self._shedding) < MAX_CONNECTIONS:
            return True
        shed = self._idle_kept.shed()
        if shed is None:
            return False
        self._shedding.add(shed)
        shed.add_done_callback(self._shedding.discard)
        return True

    def _warn(self, key: str, fmt: str, *args: object, exc_info: BaseException | bool = False) -> None:
        """A warning at most once per LOG_INTERVAL_S for each key: a flood must not become a log flood."""
        now = time.monotonic()
        if now - self._warned.get(key, -LOG_INTERVAL_S) >= LOG_INTERVAL_S:
            self._warned[key] = now
            log.warning(fmt, *args, exc_info=exc_info or None)

    async def _handle(self, conn: socket.socket) -> None:
        try:
            reader, writer = await asyncio.open_unix_connection(sock=conn, limit=MAX_LINE_BYTES + 2)
        except Exception as exc:  # not only OSError: an exception ending this task would leave the socket to the GC
            self._warn("connect", "uds connection on %s could not start: %s", self.path, exc)
            _refuse(conn, encode_answer(Outcome("", State.UNREACHABLE, f"internal: {type(exc).__name__}: {exc}")))
            return
        await self._on_connect(reader, writer)

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one connection and write its answer. Every frame read gets one: the chain's outcome, `unknown` when
        the chain failed or was cancelled under it (_receive), `unreachable` when serving failed before the chain.
        Closed without one only when there is nobody to tell: the peer closed or reset the connection, or it was a
        kept connection shed while it waited for a frame (uds_keeping.py)."""
        taps.tap_connection(reader, writer, self.path)  # `crosstalk capture`: costs a clock read when off
        try:
            try:
                answer = await self._serve(reader, writer)
            except ConnectionError:
                return  # the peer closed or reset it while a frame was read: nothing to answer on
            except Exception as exc:
                # Not a frame problem, and not the chain's (_receive answers those), so the message never reached the
                # session: unreachable. TimeoutError too: the connection's own timeouts are handled where they run.
                self._warn("internal", "uds connection on %s failed before the chain", self.path, exc_info=True)
                answer = encode_answer(Outcome("", State.UNREACHABLE, f"internal: {type(exc).__name__}: {exc}"))
            if answer:
                writer.write(answer)
                async with asyncio.timeout(LINE_TIMEOUT_S):
                    await writer.drain()
        except asyncio.CancelledError:
            pass  # shed waiting for a frame (none read), or the agent closing (a frame in the chain: _receive told it)
        except Exception as exc:  # TimeoutError, ConnectionError: the peer does not take its answer
            self._warn("unanswered", "uds connection on %s: the answer could not be written (%r)", self.path, exc)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1)

    async def _receive(self, inbound: Inbound, writer: asyncio.StreamWriter) -> Outcome:
        """The chain's outcome for a frame that was read, always: the sender cannot otherwise tell delivered from
        lost. The chain answers its own journal and harness failures (receiver/chain.py); anything that still
        escapes it (TimeoutError, ConnectionError: raised inside the agent, not by this connection) is answered
        `unknown`, as the message may have reached the session. So is a cancellation that is not this connection's
        (a future inside the chain). The agent closing cancels this connection mid-chain: `unknown` is written
        before the cancellation goes on."""
        mid = inbound.message.message_id
        try:
            return await self._receiver.receive(inbound)
        except asyncio.CancelledError as exc:
            if cancelled_here():
                writer.write(encode_answer(_internal(mid, exc)))
                raise
            failure: BaseException = exc
        except Exception as exc:
            failure = exc
        self._warn("chain", "uds frame %s: the receiver chain failed; answered unknown", mid, exc_info=failure)
        return _internal(mid, failure)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes | None:
        """Handle one connection; return the bytes to answer with (None = bare EOF)."""
        sock = writer.get_extra_info("socket")
        pid, uid = peer_credentials(sock)
        if uid != os.getuid():
            return encode_error_answer("auth: peer runs as another user")
        try:
            first = parse_line(await _read_line(reader))
            authed = False
            if isinstance(first, AuthLine):
                if not hmac.compare_digest(first.token.encode(), self._token.encode()):
                    return encode_error_answer("auth: wrong key for this agent")
                authed = True
                second = parse_line(await _read_line(reader))
                if isinstance(second, TaskLine):
                    return await self._serve_task(second, pid, reader, writer)
                if not isinstance(second, UserLine):
                    raise FrameError("expected a user or task line after the auth line")
                user = second
            elif isinstance(first, TaskLine):
                return encode_error_answer("auth: send an auth line with the agent's key first")
            else:
                user = first
            peer = self._peers.get(pid)
            if user.is_native and (user.claude_frame or not authed):
                if not (authed or peer):
                    return None  # a native frame from an unregistered process: closed with no state
                outcome = await self._receive_native(user, peer, pid, writer)
                # Claude's sender reads EOF as taken and any bytes as failure: the chain failing is not taken.
                return encode_answer(outcome) if INTERNAL in outcome.evidence else None
            if not (authed or peer):
                return encode_error_answer("auth: send an auth line with the agent's key first")
            if user.is_native:
                # The key, then a plain user line (frames.py's shape (a) from a script): a crosstalk client.
                return encode_answer(await self._receive_plain(user, peer, writer))
            if authed and user_keeps(user):  # the relay process's hop: one connection, many messages
                answer = lambda u: self._answer_crosstalk(u, pid, writer)  # noqa: E731
                return await serve_kept_lines(user, answer, reader, writer, self._idle_kept)
            return encode_answer(await self._receive_crosstalk(user, peer, pid, writer))
        except FrameError as exc:
            return encode_error_answer(f"frame: {exc}")

    async def _serve_task(
        self, line: TaskLine, pid: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bytes | None:
        """Task frames from another crosstalk agent, one or more on this connection (uds_tasks.py); refused by an
        agent that serves no tasks."""
        if self._tasks is None:
            return encode_error("unsupported_operation", "this agent serves no tasks (it was started without A2A)")
        return await serve_kept(self._tasks, line, pid, self._receiver.identity.name, reader, writer, self._idle_kept)

    async def _receive_crosstalk(
        self, user: UserLine, peer: Descriptor | None, pid: int, writer: asyncio.StreamWriter
    ) -> Outcome:
        claimed = user.crosstalk.get("from") if user.crosstalk else None
        mid = user.crosstalk.get("message_id") if user.crosstalk else None
        try:
            msg = message_from_crosstalk(user, self._receiver.identity.name)
        except MessageError as exc:
            return Outcome(mid if isinstance(mid, str) else "", State.REJECTED, f"invalid: {exc}")
        sender = _verified(peer) if peer else Sender.unverified(claimed if isinstance(claimed, str) else None)
        if not peer and claims_relay_tag(claimed):
            if not self._from_relay_process(pid):
                return self._receiver.reject(Inbound(msg, sender, "uds"), RELAY_TAG_REFUSED)
            if msg.kind is Kind.ASK and names_relayed_agent(claimed):  # another machine's agent asks (policy/transport)
                return await self._receive(Inbound(msg, sender, RELAY_TRANSPORT), writer)
        return await self._receive(Inbound(msg, sender, "uds"), writer)

    async def _answer_crosstalk(self, user: UserLine, pid: int, writer: asyncio.StreamWriter) -> bytes:
        return encode_answer(await self._receive_crosstalk(user, self._peers.get(pid), pid, writer))

    def _from_relay_process(self, pid: int) -> bool:
        return self._relay_root is not None and is_relay_process(self._relay_root, pid)

    async def _receive_plain(self, user: UserLine, peer: Descriptor | None, writer: asyncio.StreamWriter) -> Outcome:
        """A keyed user line without crosstalk metadata. The key proves only that the sender runs as this user, so
        unless its pid matches a registered agent it is an unverified inform, named @uds:<user> the
        way `crosstalk send` names itself @cli:<user>. The content is the body; an envelope in it asking to be
        another kind is refused, as on every uds frame."""
        kind = None
        if envelope.looks_like_envelope(user.content):
            with contextlib.suppress(EnvelopeError):
                kind = envelope.parse(user.content).kind
        tag = None if peer else f"@uds:{_user_name()}"
        sender = _verified(peer) if peer else Sender.unverified(tag)
        msg = Message(
            message_id=new_message_id(), to=self._receiver.identity.name, parts=(TextPart(user.content),), from_=tag
        )
        inbound = Inbound(msg, sender, "uds")
        if kind not in (None, "", "inform"):
            return self._receiver.reject(inbound, "kind:not_on_uds")
        return await self._receive(inbound, writer)

    async def _receive_native(
        self, user: UserLine, peer: Descriptor | None, pid: int, writer: asyncio.StreamWriter
    ) -> Outcome:
        text, claimed_name, kind = user.content, None, None
        if envelope.looks_like_envelope(text):
            try:
                env = envelope.parse(text)
                text, claimed_name, kind = env.body, env.from_name, env.kind
            except EnvelopeError:
                pass  # not a well-formed envelope: the whole content is the body
        sender = _verified(peer) if peer else Sender.unverified(claimed_name)
        msg = Message(
            message_id=new_message_id(), to=self._receiver.identity.name, parts=(TextPart(text),), from_=claimed_name
        )
        inbound = Inbound(msg, sender, "uds", native=True)
        if not peer and claims_relay_tag(claimed_name) and not self._from_relay_process(pid):
            return self._receiver.reject(inbound, RELAY_TAG_REFUSED)
        if kind not in (None, "", "inform"):
            # A native frame is an inform; one that asks to be anything else is refused, whatever the sender.
            return self._receiver.reject(inbound, "kind:native_inform_only")
        # Our own session answering natively names no message: the chain bounces it back, never forwards it.
        return await self._receive(inbound, writer)


def _user_name() -> str:
    """This user's login name (the peer runs as this user: the uid was checked), for a plain sender's tag."""
    return login_name() or str(os.getuid())


async def _accept(loop: asyncio.AbstractEventLoop, listener: socket.socket) -> tuple[socket.socket, object]:
    return await loop.sock_accept(listener)


def _refuse(conn: socket.socket, answer: bytes) -> None:
    """Answer one line without waiting (a fresh socket's buffer takes it) and close."""
    with contextlib.suppress(OSError):
        conn.setblocking(False)
        conn.send(answer)
    conn.close()


def _internal(message_id: str, exc: BaseException) -> Outcome:
    """The answer for a frame the chain failed on: unknown (it may have reached the session), marked INTERNAL."""
    return Outcome(message_id, State.UNKNOWN, f"internal: {type(exc).__name__}: {exc}", {INTERNAL: type(exc).__name__})


def _verified(desc: Descriptor) -> Sender:
    return Sender(SenderClass.VERIFIED, desc.agent_id, desc.name, "uds")


async def _read_line(reader: asyncio.StreamReader) -> bytes:
    try:
        async with asyncio.timeout(LINE_TIMEOUT_S):  # not wait_for: on 3.11 it can swallow a cancel (the agent closing)
            line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            raise FrameError("connection closed before a complete frame") from None
        return exc.partial  # a last line without its newline, followed by EOF, is still a line
    except asyncio.LimitOverrunError:
        raise FrameError(f"frame line is over the {MAX_LINE_BYTES}-byte limit") from None
    except TimeoutError:
        raise FrameError(f"no complete line within {LINE_TIMEOUT_S:.0f} s") from None
    return line
