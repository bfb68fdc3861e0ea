"""This state root's place on a NATS relay: the saved join, its relay process's status, the machines it hears."""

from __future__ import annotations

from crosstalk.doctor.facts import RelayFacts
from crosstalk.registry.paths import StatePaths


def gather(paths: StatePaths) -> RelayFacts | None:
    """None when this state root joined no relay (doctor then says nothing about one)."""
    from crosstalk.relay.config import RelayConfigError, joined, load
    from crosstalk.relay.presence import read_presence
    from crosstalk.relay.serve import read_status

    if not joined(paths):
        return None
    try:
        config = load(paths)
    except RelayConfigError as exc:
        return RelayFacts(url=None, alias=None, creds=None, config_error=exc.message)
    if config is None:
        return None
    serving = read_status(paths)
    pid = serving.get("pid") if serving else None
    state = serving.get("state") if serving else None
    error = serving.get("error") if serving else None
    return RelayFacts(
        url=config.url,
        alias=config.alias,
        creds=config.creds,
        serve_pid=pid if isinstance(pid, int) else None,
        serve_state=state if isinstance(state, str) else None,
        serve_error=error if isinstance(error, str) else None,
        machines=tuple(sorted(read_presence(paths))),
    )
