"""The receiving relay process's hop to this machine's agents: each request's message through the named agent's
receiver chain, over its uds socket, on connections kept per agent (ingress/uds_kept.py's KeptConnections, the
frames of ingress/uds_keeping.py), async on the relay process's loop: no new unix connection and no worker
thread per message.

One request is one chain, as a `crosstalk send` is: resolve the name, the agent's key (read again only when the
agent restarted), one crosstalk frame with `"keep": true`, its state line. Bounded: the connect (5 s) and the
answer (DELIVER_TIMEOUT_S). A kept connection that broke after the frame left (the agent restarted, or timed the
connection out) is retried once on a fresh one with the same frame, so the same message_id: the agent's dedupe
answers a copy it already took from its journal, never delivering it twice. The relay process proves itself to the
agent as before: the `@relay:` tag in the frame, checked against this connection's SO_PEERCRED pid
(ingress/relay_peer.py).
"""

from __future__ import annotations

from crosstalk.ingress.errors import FrameError as WireFrameError
from crosstalk.ingress.errors import KeptBroken, KeptUnreachable
from crosstalk.ingress.frames import MAX_LINE_BYTES, encode_auth, encode_crosstalk_user, parse_answer
from crosstalk.ingress.uds_kept import KeptConnections
from crosstalk.registry.descriptor import Descriptor
from crosstalk.registry.paths import StatePaths
from crosstalk.relay.wire import FrameError, encode_answer, encode_error, parse_frame, request_of

DELIVER_TIMEOUT_S = 60.0  # the receiver's 30 s inject timeout plus two journal writes (the uds client's own)
MAX_AGENTS = 256  # agents with kept connections; past it the idle ones are closed and the table starts again


class Deliverer:
    """The relay process's connections to its agents, kept per agent instance."""

    def __init__(self, paths: StatePaths, *, timeout: float = DELIVER_TIMEOUT_S) -> None:
        self.paths = paths
        self.timeout = timeout
        self._agents: dict[str, tuple[str, KeptConnections]] = {}  # agent_id → (its instance, its connections)

    async def answer(self, data: bytes, own_alias: str, from_alias: str) -> bytes:
        """One request's answer frame: the message through the named agent's receiver chain. A message the chain
        never saw is answered with an error frame saying why."""
        from crosstalk.registry.discovery import resolve
        from crosstalk.registry.errors import AmbiguousName, KeyFileError, NoSuchAgent, RegistryError

        task = None
        try:
            frame = parse_frame(data)
            if "task" in frame:  # A2A across the relay: a task for the named agent (relay/a2a_in.py), seldom
                from crosstalk.relay.a2a_wire import task_request_of

                task = task_request_of(frame, own_alias, from_alias)
                msg = task.message
            else:
                msg = request_of(frame, own_alias, from_alias)
        except FrameError as exc:
            return encode_error("bad_frame", str(exc))
        try:
            target = resolve(self.paths, msg.to)
            conns = await self._connections(target)
        except (NoSuchAgent, AmbiguousName) as exc:
            return encode_error("no_agent", str(exc))
        except KeyFileError as exc:
            return encode_error("unreachable", f"agent {msg.to!r} has no usable key: {exc}")
        except RegistryError as exc:
            return encode_error("unreachable", f"this machine's registry cannot be read: {exc}")
        if task is not None:
            from crosstalk.relay.a2a_in import deliver_task

            return await deliver_task(conns, target, task, self.timeout)
        line = encode_crosstalk_user(msg, keep=True)
        if len(line) > MAX_LINE_BYTES:
            return encode_error("bad_frame", f"the message frame is {len(line)} bytes, over the socket's line")
        try:
            raw = await conns.request(line, self.timeout)
        except KeptUnreachable as exc:
            return encode_error("unreachable", str(exc))
        except KeptBroken as exc:  # the agent may have it: the sender resends the same message_id
            return encode_error("wire", f"{target.uds_path}: {exc}")
        except TimeoutError:
            return encode_error("wire", f"no answer from {target.uds_path} within {self.timeout:g} s")
        try:
            outcome = parse_answer(raw)
        except WireFrameError as exc:
            return encode_error("wire", str(exc))
        return encode_answer(outcome, target.name, target.agent_id)

    async def _connections(self, target: Descriptor) -> KeptConnections:
        """`target`'s kept connections; a new set (its key read again) when the agent restarted since."""
        from crosstalk.registry.credentials import read_key

        known = self._agents.get(target.agent_id)
        if known is not None and known[0] == target.instance_id:
            return known[1]
        key = read_key(self.paths.key_file(target.agent_id))
        if known is not None:
            await known[1].close()
        if len(self._agents) >= MAX_AGENTS:
            await self.close()
        conns = KeptConnections(str(target.uds_path), encode_auth(key))
        self._agents[target.agent_id] = (target.instance_id, conns)
        return conns

    async def close(self) -> None:
        agents, self._agents = self._agents, {}
        for _instance, conns in agents.values():
            await conns.close()
