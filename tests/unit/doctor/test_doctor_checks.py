"""Each check is a pure function of facts: the same machine always reads the same way."""

from __future__ import annotations

from crosstalk.doctor.checks import claude_messaging, codex_env, harness_cli, installed, stale, transports
from crosstalk.doctor.diagnose import check
from crosstalk.doctor.facts import (
    AgentLeftovers,
    ClaudeMessaging,
    CodexEnvironment,
    CodexProcess,
    Facts,
    HarnessCli,
    Install,
    Leftovers,
    TransportFacts,
)
from crosstalk.doctor.findings import Status

INSTALL = "npm install -g @openai/codex@0.171.0"


def _cli(path: str | None, version: str | None = None, error: str | None = None) -> HarnessCli:
    return HarnessCli("codex", "0.171.0", INSTALL, path, version, error)


def test_harness_versions_beside_the_tested_ones() -> None:
    [same] = harness_cli.check((_cli("/bin/codex", "0.171.0"),))
    [other] = harness_cli.check((_cli("/bin/codex", "0.180.2"),))
    [missing] = harness_cli.check((_cli(None),))
    [mute] = harness_cli.check((_cli("/bin/codex", None, "boom"),))
    assert (same.status, same.text) == (Status.OK, "codex 0.171.0 (tested version) at /bin/codex")
    assert (other.status, other.fix) == (Status.NOTE, INSTALL)
    assert other.text == "codex 0.180.2 at /bin/codex: crosstalk is tested with 0.171.0"
    assert (missing.status, missing.text) == (Status.NOTE, "codex: not found on PATH (tested with 0.171.0)")
    assert mute.text == "codex: /bin/codex did not report a version: boom"


def test_an_install_is_a_note_only_when_the_harness_is_there() -> None:
    absent = Install("pi", False)
    assert installed.check((absent,))[0].status is Status.OK
    [found] = installed.check((absent,), (HarnessCli("pi", "0.73.1", "npm i", "/bin/pi"),))
    assert (found.status, found.fix) == (Status.NOTE, "crosstalk install pi")
    [broken] = installed.check((Install("pi", True, ("/s.json",), ("/gone", "pi-agent"), command_ok=False),))
    assert broken.status is Status.PROBLEM and "/gone" in broken.text


def test_stale_means_provably_dead_only() -> None:
    def agent(**kw: object) -> AgentLeftovers:
        base = {"agent_id": "0" * 16, "name": "a", "pid": 7, "started_at": "9", "same_process": False,
                "pid_alive": False, "lock_held": False, "files": ("/s/agents/" + "0" * 16 + ".json",)}  # fmt: skip
        return AgentLeftovers(**{**base, **kw})  # type: ignore[arg-type]

    assert stale.is_dead(agent())
    assert stale.is_dead(agent(pid_alive=True))  # the pid was reused: another start time
    assert not stale.is_dead(agent(same_process=True))  # alive, even with no lock
    assert not stale.is_dead(agent(lock_held=True))  # a registration is open
    [finding] = stale.check(Leftovers((agent(), agent(same_process=True, lock_held=True))))
    assert finding.prunable == agent().files and finding.fix == "crosstalk doctor --fix"
    assert stale.check(Leftovers((agent(lock_held=True),)))[0].status is Status.OK


def test_codex_sessions_started_with_another_root_are_named() -> None:
    facts = CodexEnvironment(True, "/h/.codex/config.toml", "/a", "/a", (CodexProcess(42, "/b"),))
    [p] = codex_env.check(facts)
    assert p.status is Status.PROBLEM and "codex pid 42" in p.text
    assert p.fix == "CROSSTALK_HOME=/b crosstalk install codex, then restart codex (pid 42)"
    assert codex_env.check(CodexEnvironment(False, "/c", None, "/a"))[0].status is Status.OK


def test_claude_with_no_cli_and_no_sessions_has_nothing_to_check() -> None:
    assert claude_messaging.check(ClaudeMessaging(False, "/r/cc-socks", False, False))[0].status is Status.OK
    assert claude_messaging.check(None)[0].status is Status.OK


def test_a_transport_dispatcher_that_stopped_beating_or_halted() -> None:
    base = {"name": "t", "root": "/t", "exists": True, "version_problem": None, "protocol": 7, "remote": "/r.git"}
    hung = TransportFacts(**base, dispatcher_running=True, dispatcher_pid=5, heartbeat_age_s=900.0)  # type: ignore[arg-type]
    halted = TransportFacts(**base, halted="disk full")  # type: ignore[arg-type]
    assert [f.status for f in transports.check((hung,))] == [Status.PROBLEM]
    assert "has not beaten for 900s" in transports.check((hung,))[0].text
    assert transports.check((halted,))[0].fix == "crosstalk server restart --transport t"


def test_the_report_is_healthy_when_only_notes_and_oks() -> None:
    facts = Facts(clis=(_cli(None),))
    report = check(facts)
    assert report.healthy and not report.problems
    sick = check(Facts(transports=(TransportFacts("t", "/t", False, None, None, None),)))
    assert not sick.healthy and sick.problems[0].fix == "crosstalk transport rm t"
