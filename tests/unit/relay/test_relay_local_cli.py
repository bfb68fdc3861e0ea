"""relay/local_cli.py (the CLI's lean client of the relay process's local socket) names the same socket, join file
and reasons as relay/local.py and relay/config.py, which it does not import (they load asyncio and NATS-side code)."""

from __future__ import annotations

from crosstalk.registry.paths import StatePaths
from crosstalk.relay import local, local_cli
from crosstalk.relay.config import config_path


def test_the_lean_client_names_what_the_relay_process_serves(tmp_path) -> None:
    paths = StatePaths(tmp_path)
    assert local_cli.socket_path(paths) == str(local.local_socket_path(paths))
    assert (local_cli.NOT_SERVING, local_cli.LOCAL_FAILED, local_cli.AUTH) == (
        local.NOT_SERVING, local.LOCAL_FAILED, local.AUTH
    )  # fmt: skip
    assert local_cli.NOT_SERVING_DETAIL == local.NOT_SERVING_DETAIL
    from crosstalk.cli.send_away import NO_MACHINE
    from crosstalk.relay.send import NO_MACHINE as SENT_NO_MACHINE

    assert NO_MACHINE == SENT_NO_MACHINE
    assert not local_cli.joined(paths)
    config_path(paths).parent.mkdir(parents=True)
    config_path(paths).write_text("{}")
    assert local_cli.joined(paths)


def test_without_a_relay_process_nothing_is_sent_and_it_says_why(tmp_path) -> None:
    from crosstalk.core.message import new_message

    msg = new_message("alice@laptop", "hi", from_="@cli:bob")
    out = local_cli.send_via_relay_process(StatePaths(tmp_path), msg, timeout=1)
    assert (out.outcome.state.value, out.outcome.reason) == ("unreachable", "relay:not_serving")
    assert out.outcome.evidence["detail"] == local.NOT_SERVING_DETAIL
