"""The state root's permissions, on real files: what crosstalk refuses or tightens is a problem naming its chmod."""

from __future__ import annotations

import os

from tests.support.doctor_machine import Machine, findings, problems


def test_a_fresh_machine_is_healthy_and_the_state_root_not_yet_made(machine: Machine) -> None:
    code, report = machine.doctor()
    assert code == 0 and report["healthy"] is True
    [perm] = findings(report, "permissions")
    assert perm["status"] == "ok" and "not created yet" in perm["text"]
    assert not machine.paths.root.exists()  # doctor never creates the state root


def test_wide_dirs_and_keys_are_problems_that_name_their_chmod(machine: Machine) -> None:
    live = machine.start_agent("keys")
    key = machine.paths.key_path(live["agent_id"])
    os.chmod(key, 0o644)
    os.chmod(machine.paths.journal, 0o775)
    os.chmod(machine.paths.names, 0o755)
    code, report = machine.doctor()
    assert code == 1
    by_fix = {f["fix"]: f["text"] for f in problems(report, "permissions")}
    assert by_fix == {
        f"chmod 600 {key}": f"{key} has mode 0644; a key must be exactly 0600 or crosstalk refuses it",
        f"chmod 700 {machine.paths.journal}": f"{machine.paths.journal} has mode 0775; others can add files to a "
        "state dir",
    }
    [readable] = [f for f in findings(report, "permissions") if f["status"] == "note"]
    assert readable["fix"] == f"chmod 700 {machine.paths.names}" and "others can list it" in readable["text"]
    os.chmod(key, 0o600)
    os.chmod(machine.paths.journal, 0o700)
    os.chmod(machine.paths.names, 0o700)
    code, report = machine.doctor()
    assert code == 0, problems(report)
    [row] = findings(report, "permissions")
    assert row["status"] == "ok" and "none others can change" in row["text"]


def test_a_symlink_in_the_state_root_is_a_problem(machine: Machine) -> None:
    machine.paths.ensure()
    link = machine.paths.sock / "0123456789abcdef.key"
    link.symlink_to(machine.dir / "elsewhere")
    code, report = machine.doctor()
    [p] = problems(report, "permissions")
    assert (
        code == 1 and p["text"] == f"{link} is a symlink; crosstalk refuses to follow it" and p["fix"] == f"rm {link}"
    )
