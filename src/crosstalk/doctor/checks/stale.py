"""Stale descriptors, sockets, keys and temp files. Something is prunable only when its owner is provably dead:
for an agent, the recorded pid no longer runs with the recorded start time (or no descriptor names one) and
nobody holds the agent lock (every registration holds it for its whole life); for a temp file, its writer pid is
gone; for a dispatcher's pid file and wake socket, nobody holds dispatcher.lock; for a native Claude peer record
crosstalk published, its pid no longer runs with its procStart. Anything else is left alone."""

from __future__ import annotations

from crosstalk.doctor.facts import AgentLeftovers, Leftovers
from crosstalk.doctor.findings import Finding, ok, problem

CHECK = "stale"
FIX = "crosstalk doctor --fix"


def is_dead(agent: AgentLeftovers) -> bool:
    """Provably dead: no open registration, and the process the descriptor names (if any) is gone."""
    return not agent.lock_held and not agent.same_process


def _label(agent: AgentLeftovers) -> str:
    who = f"{agent.name} ({agent.agent_id})" if agent.name else agent.agent_id
    return who if agent.pid is None else f"{who}, pid {agent.pid}"


def check(leftovers: Leftovers) -> list[Finding]:
    out = []
    live = 0
    for agent in leftovers.agents:
        if agent.lock_held and agent.same_process:
            live += 1
        elif is_dead(agent):
            kinds = ", ".join(_kind(f) for f in agent.files)
            gone = "is gone" if not agent.pid_alive else "was reused by another process"
            why = f"its process {gone}" if agent.pid is not None else "no registration owns them"
            out.append(problem(CHECK, f"stale agent {_label(agent)}: {kinds} left ({why})", FIX, agent.files))
        else:
            live += 1  # alive, or not provably dead (a registration starting or closing): never touched
    for temp in leftovers.temps:
        if not temp.writer_alive:
            out.append(
                problem(CHECK, f"temp file {temp.path} left by pid {temp.writer_pid}, which is gone", FIX, (temp.path,))
            )
    for disp in leftovers.dispatchers:
        if not disp.lock_held and disp.files:
            names = ", ".join(_kind(f) for f in disp.files)
            out.append(
                problem(CHECK, f"dispatcher for {disp.transport} is not running but left {names}", FIX, disp.files)
            )
    for peer in leftovers.claude_peers:
        who = f"agent {peer.name}, pid {peer.pid}" if peer.name else f"pid {peer.pid}"
        out.append(
            problem(
                CHECK,
                f"stale Claude peer record in {peer.sessions_dir} ({who}, which is gone): Claude lists a dead peer",
                FIX,
                peer.files,
            )
        )
    if not out:
        out.append(ok(CHECK, f"no stale descriptors, sockets or keys ({live} live agent{'s' if live != 1 else ''})"))
    return out


def _kind(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    for suffix, kind in (
        (".json", "descriptor"), (".sock", "socket"), (".key", "key"), (".cred", "token"), (".pid", "pid file"),
    ):  # fmt: skip
        if name.endswith(suffix):
            return kind
    return name
