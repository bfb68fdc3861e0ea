"""Messages into a Qwen Code session crosstalk does not serve, written as Qwen's own peers write them (cross-session
protocol sections 3–4), inform only. Which token the frame presents decides how the session judges it:

- the controller token the user minted for crosstalk (`qwen sessions controllers add --label crosstalk`, saved 0600
  at `$CROSSTALK_HOME/qwen-controller.token`, docs/qwen.md): a program the user trusts, delivered under the default
  policy (`origin="controller"`); used only when that file is there, this user's, not a symlink, and not readable
  by others;
- otherwise the session's own registry token (`ipcToken`): an ordinary peer, delivered only when the frame's
  `fromMode` names the receiver's own review class, held for its user otherwise. `fromMode` is the sending
  session's class as its command line proves it (`bypass` for `--yolo`/`--approval-mode yolo` or Claude's
  bypass flags, else `prompting`); a sender that is not a session (the CLI) asserts none, so its message is held.

The content is the text alone: Qwen wraps it in its own `<cross_session_message name=…>` with the sender's name, and
a session without crosstalk has no address to answer through.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Mapping
from pathlib import Path

from crosstalk.core.states import State
from crosstalk.fs.reading import read_capped
from crosstalk.fs.state_root import state_root
from crosstalk.harness.base import InjectResult, SessionRow
from crosstalk.harness.qwen import receipts, wire
from crosstalk.harness.qwen.sessions import read_record, token_of

CONTROLLER_FILE = "qwen-controller.token"
CONTROLLER = re.compile(r"^qpc_[0-9a-f]{64}$")
MAX_CMDLINE_BYTES = 64 * 1024
BYPASS_ARGS = frozenset({"--yolo", "-y", "--dangerously-skip-permissions"})
BYPASS_MODES = frozenset({"yolo", "bypassPermissions"})


def crosstalk_home(environ: Mapping[str, str]) -> Path:
    """Where crosstalk keeps its state (fs/state_root.py)."""
    return Path(state_root(environ))


def controller_token(environ: Mapping[str, str]) -> str | None:
    """The controller token the user saved for crosstalk, or None (absent, a symlink, not this user's, readable by
    others, or not a token)."""
    path = crosstalk_home(environ) / CONTROLLER_FILE
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        return None
    raw = read_capped(path, 256)
    token = raw.decode(errors="replace").strip() if raw else ""
    return token if CONTROLLER.match(token) else None


def review_class(pid: int | None) -> str | None:
    """The review class of the sending session `pid` as its command line proves it: `bypass` or `prompting`; None
    for no session (or an unreadable one)."""
    raw = read_capped(f"/proc/{pid}/cmdline", MAX_CMDLINE_BYTES) if pid and pid > 0 else None
    if not raw:
        return None
    args = raw.decode(errors="replace").split("\0")
    if BYPASS_ARGS & set(args):
        return "bypass"
    for i, arg in enumerate(args):
        value = args[i + 1] if arg in ("--approval-mode", "--permission-mode") and i + 1 < len(args) else None
        if "=" in arg and arg.split("=", 1)[0] in ("--approval-mode", "--permission-mode"):
            value = arg.split("=", 1)[1]
        if value in BYPASS_MODES:
            return "bypass"
    return "prompting"


def deliver(
    row: SessionRow,
    text: str,
    *,
    from_name: str,
    sender_pid: int | None,
    environ: Mapping[str, str],
    message_id: str | None = None,
    on_settled: Callable[[str, InjectResult], None] | None = None,
) -> InjectResult:
    if row.pid is None or not row.endpoint:
        return InjectResult(State.UNREACHABLE, "the Qwen Code session published no inbox")
    record = read_record(environ, row.pid)  # read again: `/clear` may have swapped the session id since the listing
    if record is None:
        return InjectResult(State.UNREACHABLE, "the Qwen Code session ended")
    if record.get("ipcPath") != row.endpoint:
        return InjectResult(State.UNREACHABLE, "the Qwen Code session's inbox changed since it was listed")
    controller = controller_token(environ)
    token = controller or token_of(record)
    mode = None if controller else review_class(sender_pid)
    mid = wire.msg_id_for(message_id)

    def later(receipt: receipts.Receipt) -> None:
        if on_settled is not None:
            on_settled(mid, receipts.late_result(receipt))

    out = wire.deliver(
        row.endpoint, row.pid, token, to_session=str(record["sessionId"]), content=text, from_name=from_name,
        from_mode=mode, message_id=mid, on_receipt=later, environ=dict(environ),
    )  # fmt: skip
    auth = "controller" if controller else "peer"
    return InjectResult(out.state, out.reason, {**out.evidence, "auth": auth, "from_mode": mode})
