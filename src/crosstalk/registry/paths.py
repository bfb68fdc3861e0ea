"""Where crosstalk keeps machine-local state (one root per user), and making it private."""

from __future__ import annotations

import os
import stat

from crosstalk.core.ids import is_agent_id
from crosstalk.core.record import Record
from crosstalk.fs.state_root import join as _join
from crosstalk.fs.state_root import plain as plain
from crosstalk.fs.state_root import state_root
from crosstalk.registry.errors import RegistryError
from crosstalk.registry.names import validate_name

# pathlib (with urllib.parse, ipaddress and fnmatch) costs ~0.25x a bare interpreter start on `crosstalk send`'s
# start-up path, which needs only strings: every path here is decided once, as a string (the `*_file`/`*_dir`
# methods), and the Path API other callers use is that string as a Path, made on first use.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

# sockaddr_un.sun_path is 108 bytes on Linux, including the terminating NUL.
MAX_SOCKET_PATH_BYTES = 107
_LONGEST_AGENT_ID = "0" * 16


def check_socket_path(path: Path | str) -> Path:
    """Return path if it fits AF_UNIX, else raise a RegistryError that says how to fix it."""
    size = len(os.fsencode(path))
    if size > MAX_SOCKET_PATH_BYTES:
        raise RegistryError(
            f"socket path {path} is {size} bytes, over the {MAX_SOCKET_PATH_BYTES}-byte AF_UNIX limit; "
            "set CROSSTALK_HOME to a shorter directory"
        )
    return _path(os.fspath(path))


def _path(path: str) -> Path:
    from pathlib import Path

    return Path(path)


def _agent(agent_id: str) -> str:
    # Agent ids become file names; a hostile id must never walk out of the state dir.
    if not is_agent_id(agent_id):
        raise RegistryError(f"agent_id must be 16 lowercase hex characters, got {agent_id!r}")
    return agent_id


class StatePaths(Record):
    """The state root and the paths under it. A Record (core/record.py): `crosstalk send` builds one at start-up.
    Its one field, `root`, is kept as the string pathlib would write (`plain`); `root` and the path properties are
    Paths of those strings."""

    _fields = ("root",)
    __slots__ = ("_root",)
    _root: str

    def __init__(self, root: Path | str) -> None:
        self._set(root)

    def _set(self, *values: object) -> None:
        (root,) = values
        object.__setattr__(self, "_root", plain(os.fspath(root)))  # type: ignore[call-overload]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> StatePaths:
        """$CROSSTALK_HOME, else $XDG_STATE_HOME/crosstalk, else ~/.local/state/crosstalk (fs/state_root.py)."""
        return cls(state_root(environ))

    @property
    def root(self) -> Path:
        return _path(self._root)

    def root_dir(self) -> str:
        return self._root

    def agents_dir(self) -> str:
        return _join(self._root, "agents")

    def sock_dir(self) -> str:
        return _join(self._root, "sock")

    def credentials_dir(self) -> str:
        return _join(self._root, "credentials")

    @property
    def agents(self) -> Path:
        return _path(self.agents_dir())

    @property
    def names(self) -> Path:
        return self.root / "names"

    @property
    def journal(self) -> Path:
        return self.root / "journal"

    @property
    def sock(self) -> Path:
        return _path(self.sock_dir())

    def descriptor_file(self, agent_id: str) -> str:
        return _join(self.agents_dir(), f"{_agent(agent_id)}.json")

    def descriptor(self, agent_id: str) -> Path:
        return _path(self.descriptor_file(agent_id))

    def agent_lock_file(self, agent_id: str) -> str:
        return _join(self.agents_dir(), f"{_agent(agent_id)}.lock")

    def agent_lock(self, agent_id: str) -> Path:
        return _path(self.agent_lock_file(agent_id))

    def name_lock(self, name: str) -> Path:
        return self.names / f"{validate_name(name)}.lock"

    def journal_file(self, agent_id: str) -> Path:
        return self.journal / f"{_agent(agent_id)}.jsonl"

    def journal_lock(self, agent_id: str) -> Path:
        return self.journal / f"{_agent(agent_id)}.lock"

    def uds_path(self, agent_id: str) -> Path:
        return self.sock / f"{_agent(agent_id)}.sock"

    def key_file(self, agent_id: str) -> str:
        return _join(self.sock_dir(), f"{_agent(agent_id)}.key")

    def key_path(self, agent_id: str) -> Path:
        return _path(self.key_file(agent_id))

    @property
    def credentials(self) -> Path:
        return self.root / "credentials"

    def token_path(self, agent_id: str) -> Path:
        """The agent's A2A bearer token (0600): presenting it is how the agent proves who sends."""
        return self.credentials / f"{_agent(agent_id)}.cred"

    @property
    def native_peers(self) -> Path:
        """Opt-in settings, one `<harness>.json` per harness whose native peers crosstalk agents publish themselves
        as (`crosstalk install claude --native-peers`)."""
        return self.root / "native-peers"

    def ensure(self) -> StatePaths:
        """Create every state dir 0700 (tightening wider ones); fail early if sockets cannot fit AF_UNIX."""
        check_socket_path(self.uds_path(_LONGEST_AGENT_ID))
        self.root.parent.mkdir(parents=True, exist_ok=True)
        for d in (self.root, self.agents, self.names, self.journal, self.sock, self.credentials):
            ensure_private_dir(d)
        return self


def ensure_private_dir(path: Path) -> None:
    """Create `path` 0700 (its parent must exist), or check an existing one is a directory of this user's, and
    tighten it to 0700. The state root and the bus's machine-local state share this rule."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise RegistryError(f"state path {path} exists and is not a directory")
    uid = os.geteuid()
    if st.st_uid != uid:
        raise RegistryError(f"state dir {path} is owned by uid {st.st_uid}, not by you (uid {uid}); refusing to use it")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)  # keys, sockets and descriptors are for this user only
