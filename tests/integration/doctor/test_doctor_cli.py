"""`crosstalk doctor` as a person runs it: one line per finding, each problem ending in what to run, and the exit
code scripts read."""

from __future__ import annotations

from tests.support.doctor_machine import Machine


def test_the_text_report_has_one_line_per_finding_and_problems_say_what_to_run(machine: Machine) -> None:
    healthy = machine.crosstalk("doctor")
    assert healthy.returncode == 0, healthy.stderr
    lines = healthy.stdout.splitlines()
    assert lines[-1] == "healthy (5 notes)"  # the five harness CLIs are not on this PATH
    assert all(line.split()[0] in ("ok", "note") for line in lines[:-1])
    assert "note    pi: not found on PATH (tested with 0.73.1) -> run: npm install -g " in healthy.stdout

    pid, started = machine.dead_process()
    agent_id = machine.stale_agent("ghost", pid, started)
    sick = machine.crosstalk("doctor")
    assert sick.returncode == 1
    [line] = [x for x in sick.stdout.splitlines() if x.startswith("PROBLEM")]
    assert line == (
        f"PROBLEM stale agent ghost ({agent_id}), pid {pid}: descriptor, token, key, socket left (its process is "
        "gone) -> run: crosstalk doctor --fix"
    )
    assert sick.stdout.splitlines()[-1] == "1 problem (5 notes)"

    fixed = machine.crosstalk("doctor", "--fix")
    assert fixed.returncode == 0
    assert f"removed {machine.paths.descriptor(agent_id)}" in fixed.stdout.splitlines()
    assert fixed.stdout.splitlines()[-1] == "healthy (5 notes)"


def test_a_bad_option_is_one_usage_line(machine: Machine) -> None:
    proc = machine.crosstalk("doctor", "--fx")
    assert proc.returncode == 2
    assert proc.stderr == "crosstalk: unrecognized arguments: --fx (see 'crosstalk --help')\n"
    assert proc.stdout == ""


def test_doctor_is_listed_in_the_help(machine: Machine) -> None:
    assert "doctor" in machine.crosstalk("--help").stdout
