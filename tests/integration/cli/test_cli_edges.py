"""Rough edges of the live CLI, against real agent processes: `send`'s options in any position and a ping without
text, `--transport` only where it means something, `who --json`'s start time as a UTC time, and `crosstalk mcp
--help` and the README telling the same registration."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest

from crosstalk.cli.mcp_cmd import SETUP_COMMANDS
from tests.support.procs import Agent, Procs, one_error_line

README = Path(__file__).resolve().parents[3] / "README.md"
CLI_DOC = README.with_name("docs") / "cli.md"  # the command reference: `send` and its options
ISO_UTC = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z"


@pytest.mark.parametrize(
    "args",
    [
        ["alice", "--kind", "meta", "main is frozen"],
        ["--kind", "meta", "alice", "main is frozen"],
        ["alice", "main is frozen", "--kind", "meta"],
        ["--from", "@ci:build", "alice", "--kind", "meta", "main is frozen", "--json"],
    ],
)
def test_send_options_in_any_position(xt: Procs, alice: Agent, args: list[str]) -> None:
    res = xt.cli("send", *args)
    assert res.returncode == 0, res.stderr
    [line] = alice.inbox_lines()
    assert (line["text"], line["kind"]) == ("main is frozen", "meta")


def test_a_ping_needs_no_text(xt: Procs, alice: Agent) -> None:
    res = xt.cli("send", "--kind", "ping", "alice", "--json")
    assert res.returncode == 0, res.stderr
    answer = json.loads(res.stdout)
    assert (answer["state"], answer.get("reason")) == ("accepted", "pong")
    assert alice.inbox_lines() == []
    # Anything but a ping still needs a body.
    res = xt.cli("send", "alice", "--kind", "meta", input="  \n")
    assert res.returncode == 2 and "the message is empty" in one_error_line(res.stderr)


def test_send_transport_is_only_for_bus_addresses(xt: Procs, alice: Agent) -> None:
    res = xt.cli("send", "--transport", "team", "alice", "hello")
    assert res.returncode == 2
    assert "--transport applies only to a NAME@MACHINE address" in one_error_line(res.stderr)
    assert alice.inbox_lines() == []


def test_send_help_lists_transport_and_a_second_text_is_refused(xt: Procs, alice: Agent) -> None:
    res = xt.cli("send", "--help")
    assert res.returncode == 0 and "--transport NAME|DIR" in res.stdout
    res = xt.cli("send", "alice", "one", "two")
    assert res.returncode == 2 and "unrecognized arguments: two" in one_error_line(res.stderr)


def test_who_json_shows_start_times_in_utc(xt: Procs, alice: Agent) -> None:
    data = json.loads(xt.cli("who", "alice", "--json").stdout)
    assert re.fullmatch(ISO_UTC, data["started_at"]), data["started_at"]
    started = dt.datetime.fromisoformat(data["started_at"].replace("Z", "+00:00"))
    # The agent started within this test: its start time is now, give or take the tick and boot-time rounding.
    assert abs((dt.datetime.now(dt.UTC) - started).total_seconds()) < 120
    text = xt.cli("who", "alice").stdout
    assert re.search(rf"^started_at\s+{ISO_UTC}$", text, re.M), text
    [row] = json.loads(xt.cli("list", "--json").stdout)
    assert row["started_at"] == data["started_at"]


def test_mcp_help_and_the_readme_give_the_same_registration(xt: Procs) -> None:
    help_text = " ".join(xt.cli("mcp", "--help").stdout.split())
    readme = README.read_text(encoding="utf-8")
    section = readme.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    for command in SETUP_COMMANDS:
        assert f"`{command}`" in help_text, help_text
        assert re.search(rf"^{re.escape(command)}\s", section, re.M), command
    assert "config.toml`" not in help_text  # no hand-written registration that the README does not give


def test_the_send_reference_lists_every_option(xt: Procs) -> None:
    reference = CLI_DOC.read_text(encoding="utf-8")
    table = reference.split("## `crosstalk send", 1)[1].split("\n\n", 1)[0]
    for option in ("ask", "command", "--a2a", "--as", "--timeout", "--deadline", "--task", "--transport"):
        assert option in table, option
