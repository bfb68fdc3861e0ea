"""One message into a Qwen Code session's inbox (cross-session protocol sections 2–4), blocking with timeouts, no
asyncio (`crosstalk send` calls it on its start-up path; the shim calls it in a thread):

    {"msgV":1,"type":"auth","token":<token>}
    {"msgV":1,"msgId":…,"type":"user","from":<our inbox>,"replyToken":<its token>,"fromName":…,"fromMode"?:…,
     "toSessionId":<the record's sessionId, read just now>,"priority":"next","message":{"role":"user","content":…}}
    then half-close, and wait for the session to close its side (it never writes on this connection).

The answer is the session's first receipt (receipts.py): held, delivered (→ queued), denied, refused, expired,
misaddressed or dropped. No receipt in time: unknown (a wrong token is dropped silently, but so may a receipt be).
"""

from __future__ import annotations

import json
import re
import socket
import uuid

from crosstalk.core.states import State
from crosstalk.fs import trace
from crosstalk.harness.base import InjectResult
from crosstalk.harness.errors import HarnessDisconnected, PreSendFailure
from crosstalk.harness.qwen import receipts
from crosstalk.harness.qwen.sessions import socket_problem

CONNECT_TIMEOUT_S = 2.0
EOF_TIMEOUT_S = 5.0
RECEIPT_TIMEOUT_S = 3.0  # measured: the first receipt comes within a few ms of the EOF, ~60 ms on a loaded machine
MSG_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
NO_INBOX = "no inbox for receipts could be bound: without one, Qwen Code would not say what became of a message"


def frame(token: str | None, *, msg_id: str, to_session: str, content: str, from_name: str, from_mode: str | None,
          inbox: receipts.ReceiptInbox, priority: str = "next") -> bytes:  # fmt: skip
    user: dict[str, object] = {
        "msgV": 1, "msgId": msg_id, "type": "user", "from": inbox.path, "replyToken": inbox.token,
        "fromName": from_name[:200], "toSessionId": to_session, "priority": priority,
        "message": {"role": "user", "content": content},
    }  # fmt: skip
    if from_mode:
        user["fromMode"] = from_mode
    lines = ([{"msgV": 1, "type": "auth", "token": token}] if token else []) + [user]
    return "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode()


def msg_id_for(message_id: str | None) -> str:
    """A crosstalk message id is a UUID, which the protocol's msgId accepts as it is; anything else gets a fresh one."""
    return message_id if message_id and MSG_ID.match(message_id) else str(uuid.uuid4())


def write(socket_path: str, payload: bytes) -> None:
    """Connect, write, half-close, wait for the EOF. PreSendFailure when nothing went out; HarnessDisconnected
    after."""
    problem = socket_problem(socket_path)
    if problem:
        raise PreSendFailure(problem)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            sock.connect(socket_path)
        except OSError as exc:
            raise PreSendFailure(f"the Qwen Code session's inbox {socket_path} refused: {exc}") from None
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            trace.mark("harness_write", harness="qwen")
        except OSError as exc:
            raise HarnessDisconnected(f"the write to the Qwen Code session broke: {exc}") from None
        sock.settimeout(EOF_TIMEOUT_S)
        try:
            answer = sock.recv(4096)
        except TimeoutError:
            raise HarnessDisconnected(f"the Qwen Code session did not close within {EOF_TIMEOUT_S:.0f} s") from None
        except OSError:
            return  # a reset as it closes: it has read what it will read
        if answer:
            raise HarnessDisconnected(f"the Qwen Code session answered bytes on the connection: {answer[:80]!r}")
    finally:
        sock.close()


def deliver(
    socket_path: str,
    peer_pid: int,
    token: str | None,
    *,
    to_session: str,
    content: str,
    from_name: str,
    from_mode: str | None,
    message_id: str | None = None,
    on_receipt: receipts.Callback | None = None,
    environ: dict[str, str] | None = None,
    receipt_timeout_s: float = RECEIPT_TIMEOUT_S,
) -> InjectResult:
    """Write one message and answer with the first receipt's state. Every later receipt (a held message's final word,
    a delivered one expiring) goes to `on_receipt` on the inbox's reader thread."""
    inbox = receipts.inbox(environ)
    if inbox is None:
        return InjectResult(State.UNREACHABLE, NO_INBOX)
    mid = msg_id_for(message_id)
    heard = [0]  # receipts so far: the first is the answer, every later one goes to on_receipt

    def later(receipt: receipts.Receipt) -> None:
        heard[0] += 1
        if heard[0] > 1 and on_receipt is not None:
            on_receipt(receipt)

    inbox.expect(mid, peer_pid, later)
    payload = frame(token, msg_id=mid, to_session=to_session, content=content, from_name=from_name,
                    from_mode=from_mode, inbox=inbox)  # fmt: skip
    evidence: dict[str, object] = {"socket": socket_path, "msg_id": mid}
    try:
        write(socket_path, payload)
    except PreSendFailure as exc:
        inbox.forget(mid)
        return InjectResult(State.UNREACHABLE, str(exc), evidence)
    except HarnessDisconnected as exc:
        return InjectResult(State.UNKNOWN, str(exc), evidence)
    receipt = inbox.wait(mid, receipt_timeout_s)
    if receipt is None:
        inbox.forget(mid)
        return InjectResult(
            State.UNKNOWN, f"the Qwen Code session sent no receipt within {receipt_timeout_s:.0f} s: it may have "
            "taken the message or dropped it (a token it did not accept is dropped silently)", evidence,
        )  # fmt: skip
    result = receipts.result_of(receipt)
    return InjectResult(result.state, result.reason, {**result.evidence, **evidence})
