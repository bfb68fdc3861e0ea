"""doctor's relay check (doctor/checks/relay.py): silent when not joined, a problem when no relay process runs or it
is not connected, ok with the machines it hears."""

from __future__ import annotations

from crosstalk.doctor.checks.relay import check
from crosstalk.doctor.facts import RelayFacts

JOINED = RelayFacts(url="nats://127.0.0.1:4222", alias="laptop", creds="/home/me/relay creds")


def test_not_joined_says_nothing() -> None:
    assert check(None) == []


def test_no_relay_process_names_the_join_that_starts_it() -> None:
    [f] = check(JOINED)
    assert f.status.value == "problem" and "no relay process runs" in f.text
    assert f.fix == "crosstalk relay join nats://127.0.0.1:4222 --alias laptop --creds '/home/me/relay creds'"


def test_disconnected_and_connected() -> None:
    from dataclasses import replace

    [f] = check(replace(JOINED, serve_pid=7, serve_state="disconnected", serve_error="connection refused"))
    assert f.status.value == "problem" and f.text.endswith("pid 7 is disconnected: connection refused")
    [f] = check(replace(JOINED, serve_pid=7, serve_state="connected", machines=("gpu",)))
    assert f.status.value == "ok" and f.text.endswith("relay process pid 7 connected; hears gpu")


def test_a_damaged_join_is_a_problem() -> None:
    [f] = check(RelayFacts(url=None, alias=None, creds=None, config_error="relay.json is damaged"))
    assert f.status.value == "problem" and f.fix is not None and "relay leave" in f.fix


def test_a_refused_grant_is_a_problem_naming_the_grant() -> None:
    from dataclasses import replace

    error = "nats: permissions violation for publish to 'crosstalk.v1.presence.laptop'"
    [f] = check(replace(JOINED, serve_pid=7, serve_state="connected", serve_error=error))
    assert f.status.value == "problem" and "refuses this machine a subject" in f.text
    assert f.fix is not None and "crosstalk.v1.presence.laptop" in f.fix
