"""The NATS relay, when this state root joined one: its relay process runs and is connected."""

from __future__ import annotations

import shlex

from crosstalk.doctor.facts import RelayFacts
from crosstalk.doctor.findings import Finding, ok, problem

CHECK = "relay"


def check(relay: RelayFacts | None) -> list[Finding]:
    if relay is None:
        return []
    if relay.config_error is not None:
        return [problem(CHECK, relay.config_error, "crosstalk relay leave (then crosstalk relay join URL again)")]
    creds = f" --creds {shlex.quote(relay.creds)}" if relay.creds else ""
    rejoin = f"crosstalk relay join {shlex.quote(relay.url or '')} --alias {relay.alias}{creds}"
    joined = f"joined {relay.url} as {relay.alias!r}"
    if relay.serve_pid is None:
        return [problem(CHECK, f"{joined}, but no relay process runs: NAME@{relay.alias} is unreachable", rejoin)]
    if relay.serve_state != "connected":
        why = f": {relay.serve_error}" if relay.serve_error else ""
        return [
            problem(
                CHECK,
                f"{joined}; relay process pid {relay.serve_pid} is {relay.serve_state or 'starting'}{why}",
                "crosstalk relay status (and check the relay server and this machine's credentials)",
            )
        ]
    if relay.serve_error and "permissions violation" in relay.serve_error.lower():
        return [
            problem(
                CHECK,
                f"{joined}; connected, but the relay refuses this machine a subject: {relay.serve_error}",
                f"grant user {relay.alias} publish crosstalk.v1.presence.{relay.alias} and subscribe "
                "crosstalk.v1.presence.* in the relay's config, as docs/relay.md shows",
            )
        ]
    heard = ", ".join(relay.machines) if relay.machines else "no other machine yet"
    return [ok(CHECK, f"{joined}; relay process pid {relay.serve_pid} connected; hears {heard}")]
