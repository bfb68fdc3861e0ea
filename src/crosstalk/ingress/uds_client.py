"""The sending side of the uds ingress: write an auth line and one crosstalk user line, read the state answer.

Kept free of asyncio and of the receiver so `crosstalk send` starts fast. It speaks through `_socket`, the C module
under `socket`: importing `socket` costs ~3 ms on `crosstalk send`'s start-up path (it builds its enums and imports
selectors), and a unix stream socket needs none of that.
"""

from __future__ import annotations

import _socket

from crosstalk.core.message import Message
from crosstalk.core.states import Outcome
from crosstalk.fs.reading import read_line
from crosstalk.ingress.errors import AgentUnreachable, FrameError, WireError
from crosstalk.ingress.frames import MAX_LINE_BYTES, encode_auth, encode_crosstalk_user, parse_answer

TYPE_CHECKING = False  # not `typing`: importing it costs ~2 ms on `crosstalk send`'s start-up path
if TYPE_CHECKING:
    from pathlib import Path

DEFAULT_TIMEOUT_S = 60.0  # covers the receiver's own 30 s inject timeout plus two journal writes


def deliver(uds_path: str | Path, token: str, msg: Message, *, timeout: float = DEFAULT_TIMEOUT_S) -> Outcome:
    payload = encode_auth(token) + encode_crosstalk_user(msg)
    if len(payload) > 2 * MAX_LINE_BYTES:
        raise WireError(f"message frame is {len(payload)} bytes, too large for the socket protocol")
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        try:
            sock.connect(str(uds_path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise AgentUnreachable(f"nothing listens on {uds_path} ({exc.strerror})") from None
        except OSError as exc:
            raise AgentUnreachable(f"cannot connect to {uds_path}: {exc.strerror or exc}") from None
        broke: OSError | None = None
        try:
            sock.sendall(payload)
            sock.shutdown(_socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError) as exc:
            # The agent closed before it read the whole frame, so it did not take the message; it may have said why
            # first (`busy` at its connection cap), and that line is still ours to read.
            broke = exc
        except TimeoutError:
            raise WireError(f"no answer from {uds_path} within {timeout:.0f} s") from None
        except OSError as exc:
            raise WireError(f"connection to {uds_path} failed: {exc.strerror or exc}") from None
        try:
            answer = read_line(sock, MAX_LINE_BYTES)
        except TimeoutError:
            raise WireError(f"no answer from {uds_path} within {timeout:.0f} s") from None
        except OSError as exc:
            raise WireError(f"connection to {uds_path} failed: {(broke or exc).strerror or exc}") from None
    finally:
        sock.close()
    if not answer.strip():
        if broke is not None:
            raise WireError(f"connection to {uds_path} failed: {broke.strerror or broke}")
        raise WireError("the agent closed the connection without an answer")
    try:
        return parse_answer(answer)
    except FrameError as exc:
        raise WireError(str(exc)) from None
