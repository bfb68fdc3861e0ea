"""The `@relay:` sender tag is reserved for this machine's relay process (`crosstalk relay serve`, relay/serve.py):
it alone labels a message `@relay:<machine>/<sender>`, and a reply goes back across the relay to such a sender
(shim/replying.py). Any other local process of this user claiming the tag on an agent's socket is refused.

The relay process is known by what it leaves under the state root: it holds relay/serve.lock for life and writes its
pid and that pid's kernel start time to relay/status.json; the peer (SO_PEERCRED pid) must be that process, alive
(its start time matches, so a reused pid is not it) while the lock is held. These paths are relay/config.py's
(tests/unit/relay/test_relay_peer.py holds the two to the same names); this layer sits below relay/.
"""

from __future__ import annotations

import json
from pathlib import Path

from crosstalk.fs.procinfo import proc_start_time

TAG = "@relay:"
REFUSED = "sender:relay_tag_reserved"
MAX_STATUS_BYTES = 64 * 1024


def claims_relay_tag(claimed: object) -> bool:
    return isinstance(claimed, str) and claimed.startswith(TAG)


def names_relayed_agent(claimed: object) -> bool:
    """Whether `claimed` is `@relay:ALIAS/NAME` with NAME an agent name (relay/wire.py relayed_agent's shape): a
    sender a reply can route back to across the relay, so the one relayed sender that may ask."""
    from crosstalk.registry.names import is_valid_name

    if not claims_relay_tag(claimed):
        return False
    alias, sep, name = str(claimed)[len(TAG) :].partition("/")
    return bool(sep and alias) and is_valid_name(name)


def relay_status_file(root: Path) -> Path:
    return root / "relay" / "status.json"


def relay_lock_file(root: Path) -> Path:
    return root / "relay" / "serve.lock"


def is_relay_process(root: Path, pid: int) -> bool:
    """Whether `pid` is the relay process serving the state root `root` right now."""
    from crosstalk.fs.locks import is_locked

    try:
        with open(relay_status_file(root), "rb") as f:
            data = json.loads(f.read(MAX_STATUS_BYTES))
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict) or data.get("pid") != pid or data.get("state") == "stopped":
        return False
    started = proc_start_time(pid)
    return started is not None and started == data.get("pid_started") and is_locked(relay_lock_file(root))
