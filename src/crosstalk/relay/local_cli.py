"""`crosstalk send NAME@ALIAS` through this machine's relay process's local socket (relay/local.py): no NATS client,
no NATS connection and no credentials in the CLI. The CLI is an external sender: the request carries no token, and
its `from` is its `--from @scheme:topic` (default `@cli:$USER`), which the relay process takes on the socket's
SO_PEERCRED uid alone; the receiving machine labels it `@relay:<this machine>/cli:bob`, as before.

Blocking and lean, like the uds client (ingress/uds_client.py): `_socket`, core/jsonc.py, no asyncio.
"""

from __future__ import annotations

import _socket
import os

from crosstalk.core import jsonc
from crosstalk.core.states import Outcome, State
from crosstalk.fs.reading import read_line

TYPE_CHECKING = False  # not `typing`: importing it costs ~2 ms on `crosstalk send`'s start-up path
if TYPE_CHECKING:
    from crosstalk.core.message import Message
    from crosstalk.registry.paths import StatePaths

NOT_SERVING = "relay:not_serving"  # relay/local.py's names (tests/unit/relay holds the two the same)
LOCAL_FAILED = "relay:local_failed"
AUTH = "relay:sender_refused"
NOT_SERVING_DETAIL = "no relay process serves this machine: `crosstalk relay join` starts it"
SOCKET_SLACK_S = 10.0  # the local socket's own bound beyond the remote answer's
MAX_ANSWER_BYTES = 1 << 20


class LocalAnswer:
    """What the relay process answered: the outcome, the agent's address and id, or `no_agent` (the remote's word)."""

    __slots__ = ("agent_id", "no_agent", "outcome", "to")

    def __init__(self, outcome: Outcome, to: str, agent_id: str | None = None, no_agent: str | None = None) -> None:
        self.outcome, self.to, self.agent_id, self.no_agent = outcome, to, agent_id, no_agent


def joined(paths: StatePaths) -> bool:
    """relay/config.py's `joined` (the same path: tests/unit/relay holds the two the same), without that module's
    imports: one stat."""
    return os.path.exists(os.path.join(paths.root_dir(), "relay", "relay.json"))


def socket_path(paths: StatePaths) -> str:
    return os.path.join(paths.root_dir(), "relay", "local.sock")


def send_via_relay_process(paths: StatePaths, msg: Message, *, timeout: float) -> LocalAnswer:
    """`msg` (to NAME@ALIAS, `from` an external tag) through the relay process. Bounded by `timeout` plus
    SOCKET_SLACK_S; every way it fails is an outcome (`unreachable`: nothing sent; `unknown`: it may have left)."""

    def failed(state: State, reason: str, detail: str) -> LocalAnswer:
        return LocalAnswer(Outcome(msg.message_id, state, reason, {"detail": detail, "relay": True}), msg.to)

    path = socket_path(paths)
    line = jsonc.dumps({"v": 1, "message": msg.to_dict(), "timeout": timeout}, ensure_ascii=False) + "\n"
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    sock.settimeout(timeout + SOCKET_SLACK_S)
    try:
        try:
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError):
            return failed(State.UNREACHABLE, NOT_SERVING, NOT_SERVING_DETAIL)
        except OSError as exc:
            return failed(State.UNREACHABLE, NOT_SERVING, f"the relay process's socket {path}: {exc.strerror or exc}")
        try:
            sock.sendall(line.encode("utf-8"))
            raw = read_line(sock, MAX_ANSWER_BYTES)
            if not raw.strip():
                raise ConnectionError("the relay process closed the connection without an answer")
        except OSError as exc:  # TimeoutError included
            hint = f"resend it with the same message_id ({msg.message_id}): the receiver answers from its journal"
            return failed(State.UNKNOWN, LOCAL_FAILED, f"the relay process did not answer ({exc}); {hint}")
    finally:
        sock.close()
    try:
        obj = jsonc.loads(raw.decode("utf-8"))
        if "error" in obj:
            reason = AUTH if obj["error"] == "auth" else "relay:bad_frame"  # nothing was sent
            return failed(State.REJECTED, reason, str(obj.get("detail")))
        res = obj["result"]
        return LocalAnswer(Outcome.from_dict(res["outcome"]), str(res["to"]), res.get("agent_id"), res.get("no_agent"))
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return failed(State.UNKNOWN, LOCAL_FAILED, f"the relay process answered a bad line: {exc}")
