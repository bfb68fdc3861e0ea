"""What doctor gathers from the machine: frozen records, no behaviour. The checks read only these."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class HarnessCli:
    name: str  # claude, codex, pi
    tested: str  # the version crosstalk is tested with
    install: str  # the command that installs the tested version
    path: str | None  # where it was found on PATH, None when not found
    version: str | None = None  # what `<cli> --version` reported (x.y.z), None when it could not say
    error: str | None = None  # why the version is unknown


@dataclass(frozen=True, slots=True)
class Install:
    """Whether `crosstalk install <harness>` is in place for one harness (user scope, plus the project scope's files
    in the current directory when they exist)."""

    harness: str
    installed: bool
    where: tuple[str, ...] = ()  # the config files that carry crosstalk
    command: tuple[str, ...] = ()  # the `crosstalk mcp` (or pi-agent) command they name
    command_ok: bool = True  # its program exists and is executable
    missing: tuple[str, ...] = ()  # parts of the install that are absent (e.g. the Claude skill)
    error: str | None = None  # a config file that cannot be read


@dataclass(frozen=True, slots=True)
class ClaudeSession:
    pid: int
    name: str | None
    socket: str | None  # messagingSocketPath from its registry record
    socket_ok: bool  # that path is a unix socket now


@dataclass(frozen=True, slots=True)
class ClaudeMessaging:
    cli_found: bool
    socket_dir: str  # $XDG_RUNTIME_DIR/cc-socks, else /tmp/cc-socks
    socket_dir_exists: bool
    socket_dir_private: bool  # a directory of ours, mode 0700 (Claude makes it so)
    sessions: tuple[ClaudeSession, ...] = ()  # live Claude sessions (record + pid + procStart)
    bare: bool = False  # CLAUDE_CODE_SIMPLE / --bare style switch seen in this environment


@dataclass(frozen=True, slots=True)
class PathMode:
    path: str
    kind: str  # "dir" (must be 0700), "secret" (must be exactly 0600), "file" (must not be group/other writable)
    mode: int  # permission bits
    uid: int
    my_uid: int
    is_symlink: bool = False


@dataclass(frozen=True, slots=True)
class StateRoot:
    root: str
    exists: bool
    entries: tuple[PathMode, ...] = ()


@dataclass(frozen=True, slots=True)
class AgentLeftovers:
    """One agent_id's files in the state root, with what proves whether its registration is alive."""

    agent_id: str
    name: str | None  # from the descriptor, when readable
    pid: int | None
    started_at: str | None
    same_process: bool  # pid runs with the recorded start time
    pid_alive: bool  # some process has that pid (maybe a reused one)
    lock_held: bool  # the agent lock is held: a registration is open
    files: tuple[str, ...]  # descriptor, socket, key, credential present for it
    instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class TempLeftover:
    path: str
    writer_pid: int
    writer_alive: bool


@dataclass(frozen=True, slots=True)
class DispatcherLeftovers:
    transport: str
    lock_held: bool
    files: tuple[str, ...]  # dispatcher.pid and wake.sock present


@dataclass(frozen=True, slots=True)
class ClaudePeerLeftover:
    """A record crosstalk published as a native Claude peer (`--native-peers`) whose publisher is gone."""

    sessions_dir: str
    pid: int
    name: str | None
    files: tuple[str, ...]  # the record and its key


@dataclass(frozen=True, slots=True)
class Leftovers:
    agents: tuple[AgentLeftovers, ...] = ()
    temps: tuple[TempLeftover, ...] = ()
    dispatchers: tuple[DispatcherLeftovers, ...] = ()
    claude_peers: tuple[ClaudePeerLeftover, ...] = ()


@dataclass(frozen=True, slots=True)
class CodexProcess:
    pid: int
    root: str  # the state root its own environment names


@dataclass(frozen=True, slots=True)
class CodexEnvironment:
    installed: bool
    config: str
    entry_root: str | None  # the state root the [mcp_servers.crosstalk] entry gives its shim
    shell_root: str  # the state root of the shell doctor runs in
    sessions: tuple[CodexProcess, ...] = ()  # running Codex processes of this user


@dataclass(frozen=True, slots=True)
class TransportFacts:
    name: str
    root: str
    exists: bool
    version_problem: str | None  # None when CROSSTALK-VERSION matches this crosstalk
    protocol: int | None  # the version the transport says it speaks
    remote: str | None
    ahead: int = 0  # commits not on the remote
    last_push: str | None = None  # ISO time of the last successful push (the remote-tracking ref's reflog)
    dispatcher_running: bool = False
    dispatcher_pid: int | None = None
    heartbeat_age_s: float | None = None
    halted: str | None = None
    errors: int = 0
    git_error: str | None = None


@dataclass(frozen=True, slots=True)
class RelayFacts:
    """A saved relay join and its relay process (docs/relay.md)."""

    url: str | None
    alias: str | None
    creds: str | None
    config_error: str | None = None
    serve_pid: int | None = None  # the relay process holding the lock, or None when none runs
    serve_state: str | None = None  # connecting, connected, disconnected
    serve_error: str | None = None
    machines: tuple[str, ...] = ()  # the other machines it hears


@dataclass(frozen=True, slots=True)
class Facts:
    clis: tuple[HarnessCli, ...] = ()
    installs: tuple[Install, ...] = ()
    claude: ClaudeMessaging | None = None
    state: StateRoot | None = None
    leftovers: Leftovers = field(default_factory=Leftovers)
    codex: CodexEnvironment | None = None
    transports: tuple[TransportFacts, ...] = ()
    relay: RelayFacts | None = None
