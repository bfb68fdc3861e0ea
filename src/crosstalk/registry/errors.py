"""Registry errors. Each message is one line naming the thing and the problem."""

from __future__ import annotations

from crosstalk.core.errors import CrosstalkError, ErrorKind

# (agent_id, name, harness, cwd): enough for a person or a model to pick one of several agents.
Candidate = tuple[str, str, str, str]


class RegistryError(CrosstalkError):
    """Base of every registry error."""


class NoSuchAgent(RegistryError):
    code = ErrorKind.NO_AGENT

    reason = "no_such_agent"

    def __init__(self, name: str, stopped_pid: int | None = None) -> None:
        if stopped_pid is not None:
            # A descriptor is left behind when an agent dies without cleaning up: say so, it is a different fix.
            message = f"agent {name!r} is not running (its process {stopped_pid} is gone)"
        else:
            message = f"no live agent is named or has agent_id {name!r}"
        super().__init__(message)
        self.name = name
        self.stopped_pid = stopped_pid


class AgentLockUnusable(NoSuchAgent):
    """The agent's process runs, but its lock path is not a lock file (something was planted there): its liveness
    cannot be proven, so nothing is delivered to it."""

    def __init__(self, name: str, pid: int, problem: str) -> None:
        RegistryError.__init__(self, f"agent {name!r} (pid {pid}) cannot be proven live: {problem}")
        self.name = name
        self.stopped_pid = None
        self.problem = problem


class AmbiguousName(RegistryError):
    code = ErrorKind.NO_AGENT

    reason = "ambiguous_name"

    def __init__(self, name: str, candidates: list[Candidate]) -> None:
        ids = ", ".join(c[0] for c in candidates)
        super().__init__(
            f"{len(candidates)} live agents are named {name!r} (agent_ids: {ids}); address one by agent_id"
        )
        self.name = name
        self.candidates = candidates


class AgentAlreadyRegistered(RegistryError):
    def __init__(self, agent_id: str, holder: str | None = None) -> None:
        who = f" ({holder})" if holder else ""
        super().__init__(f"agent {agent_id}{who} is already registered by a live process (agent lock held)")
        self.agent_id = agent_id


class InvalidName(RegistryError, ValueError):
    code = ErrorKind.USAGE

    def __init__(self, name: object, problem: str) -> None:
        super().__init__(f"invalid agent name {name!r}: {problem}")
        self.name = name
        self.problem = problem


class NameHeld(RegistryError):
    def __init__(self, name: str) -> None:
        super().__init__(f"the name {name!r} is held by a live agent")
        self.name = name


class KeyFileError(RegistryError):
    def __init__(self, path: object, problem: str) -> None:
        super().__init__(f"key file {path}: {problem}")
        self.path = path
        self.problem = problem
