"""Each bus transport: its work tree, protocol version, remote, unpushed commits and last successful push, and
this machine's dispatcher."""

from __future__ import annotations

import shlex

from crosstalk.doctor.facts import TransportFacts
from crosstalk.doctor.findings import Finding, note, ok, problem

CHECK = "transport"
STALE_HEARTBEAT_S = 300.0  # a running dispatcher beats every tick (seconds apart); minutes of silence is a hang


def _one(t: TransportFacts) -> list[Finding]:
    name, root = t.name, shlex.quote(t.root)
    if not t.exists:
        return [problem(CHECK, f"{name}: {t.root} does not exist", f"crosstalk transport rm {name}")]
    if t.version_problem is not None:
        return [problem(CHECK, f"{name}: {t.version_problem}", f"crosstalk transport rm {name} (then clone it anew)")]
    if t.git_error is not None:
        return [problem(CHECK, f"{name}: git cannot read {t.root}: {t.git_error}", f"git -C {root} status")]
    out = []
    pushed = f"last push {t.last_push}" if t.last_push else "no push recorded here"
    remote = t.remote or "no remote"
    summary = f"{name} (v{t.protocol}) {remote}, {pushed}"
    if t.remote is None:
        out.append(note(CHECK, f"{summary}: other machines cannot reach it", f"git -C {root} remote add origin URL"))
    elif t.ahead:
        out.append(
            problem(
                CHECK,
                f"{summary}: {t.ahead} commit{'s' if t.ahead != 1 else ''} not pushed",
                f"git -C {root} push origin HEAD (or crosstalk server start --transport {name})",
            )
        )
    if t.halted:
        out.append(
            problem(CHECK, f"{name}: the dispatcher halted: {t.halted}", f"crosstalk server restart --transport {name}")
        )
    elif t.dispatcher_running and t.heartbeat_age_s is not None and t.heartbeat_age_s > STALE_HEARTBEAT_S:
        out.append(
            problem(
                CHECK,
                f"{name}: dispatcher pid {t.dispatcher_pid} runs but has not beaten for {t.heartbeat_age_s:.0f}s",
                f"crosstalk logs --transport {name}; crosstalk server restart --transport {name}",
            )
        )
    elif not t.dispatcher_running:
        out.append(
            note(CHECK, f"{name}: no dispatcher running on this machine", f"crosstalk server start --transport {name}")
        )
    if not out:
        beat = "" if t.heartbeat_age_s is None else f", heartbeat {t.heartbeat_age_s:.0f}s ago"
        out.append(ok(CHECK, f"{summary}; dispatcher pid {t.dispatcher_pid}{beat}"))
    elif t.remote is not None and not t.ahead and all(f.status != "problem" for f in out):
        out.insert(0, ok(CHECK, summary))
    return out


def check(transports: tuple[TransportFacts, ...]) -> list[Finding]:
    if not transports:
        return [ok(CHECK, "no bus transports on this machine")]
    return [f for t in transports for f in _one(t)]
