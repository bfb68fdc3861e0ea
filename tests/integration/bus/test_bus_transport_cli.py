"""`crosstalk transport init|clone|list|rm` and the version check, with real git and a bare remote."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.support.bus_machines import GIT_TIMEOUT, Machine, TwoMachines, clean_env, remote_git


def _remote_files(remote: Path) -> list[str]:
    return remote_git(remote, "ls-tree", "-r", "--name-only", "main").split()


def test_init_with_remote_pushes_the_scaffold(bare_remote: Path, make_machine: Callable[[str], Machine]) -> None:
    m = make_machine("m1")
    res = m.cli("transport", "init", "bus", "--remote", str(bare_remote), "--json")
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    root = Path(info["root"])
    assert root == (m.base / "bus").resolve()  # DIR defaults to ./NAME
    assert info["pushed"] is True and info["alias"] == "m1"
    files = set(_remote_files(bare_remote))
    assert {
        "CROSSTALK-VERSION",
        "CROSSTALK.md",
        "PROTOCOL.md",
        ".gitignore",
        "data/crosstalk.yaml",
        "local/actors/.gitkeep",
    } <= files
    assert (root / "CROSSTALK-VERSION").read_text() == "7\n"
    log = m.git("log", "--format=%s|%an", cwd=root).splitlines()
    assert log == ["crosstalk: initial transport|crosstalk"]  # works with no user.name configured
    entry = json.loads((m.home / "bus" / "transports" / "bus.json").read_text())
    assert entry == {"name": "bus", "root": str(root), "alias": None}
    assert oct((m.home / "bus" / "transports" / "bus.json").stat().st_mode & 0o777) == "0o600"
    # The bus was the first to need the state root: it and every directory under it are 0700, never the umask's.
    for d in (m.home, m.home / "bus", m.home / "bus" / "transports"):
        assert oct(d.stat().st_mode & 0o777) == "0o700", d


def test_init_refuses_a_non_empty_dir_and_a_taken_name(make_machine: Callable[[str], Machine]) -> None:
    m = make_machine("m1")
    (m.base / "full").mkdir()
    (m.base / "full" / "x").write_text("x")
    res = m.cli("transport", "init", "full")
    assert res.returncode == 1
    assert "already exists and is not an empty directory" in res.stderr
    assert (m.base / "full" / "x").exists()
    assert m.cli("transport", "init", "t1").returncode == 0
    res = m.cli("transport", "init", "t1", "--dir", str(m.base / "other"))
    assert res.returncode == 1 and "already registered" in res.stderr
    assert not (m.base / "other").exists()
    res = m.cli("transport", "init", "Bad Name")
    assert res.returncode == 1 and "not valid" in res.stderr


def test_init_push_failure_says_how_to_push_later(make_machine: Callable[[str], Machine]) -> None:
    m = make_machine("m1")
    missing = m.base / "nowhere.git"
    res = m.cli("transport", "init", "bus", "--remote", str(missing))
    assert res.returncode == 1
    assert res.stderr.count("\n") == 1
    assert "was created at" in res.stderr and "push -u origin main" in res.stderr
    assert (m.base / "bus" / "CROSSTALK-VERSION").is_file()
    assert m.cli("transport", "list", "--json").stdout.count('"bus"') == 1


def test_init_against_a_remote_that_holds_a_transport_creates_nothing_and_says_clone(
    bare_remote: Path, make_machine: Callable[[str], Machine]
) -> None:
    assert make_machine("m1").cli("transport", "init", "bus", "--remote", str(bare_remote)).returncode == 0
    m = make_machine("m2")
    res = m.cli("transport", "init", "bus", "--remote", str(bare_remote), "--alias", "gpu")
    assert res.returncode == 1 and res.stderr.count("\n") == 1, res.stderr
    assert f"crosstalk transport clone {bare_remote} --alias gpu" in res.stderr and "push" not in res.stderr
    assert not (m.base / "bus").exists()
    assert m.cli("transport", "list", "--json").stdout.strip() == "[]"  # nothing registered


def test_clone_joins_and_list_shows_both_machines(two_machines: TwoMachines) -> None:
    a, b = two_machines.a, two_machines.b
    assert (b.root / "PROTOCOL.md").is_file()
    listing = json.loads(b.cli("transport", "list", "--json").stdout)
    assert listing == [
        {"name": "bus", "root": str(b.root), "alias": None, "exists": True, "version_ok": True, "problem": None}
    ]
    text = a.cli("transport", "list").stdout
    assert "bus" in text and str(a.root) in text and "ok" in text
    # b sees the channel a created (pulled by the fixture)
    assert two_machines.channel in b.cli("channel", "list").stdout


def test_clone_name_and_alias_options(two_machines: TwoMachines, make_machine: Callable[[str], Machine]) -> None:
    c = make_machine("m3")
    res = c.cli(
        "transport",
        "clone",
        str(two_machines.remote),
        "--dir",
        str(c.base / "x"),
        "--name",
        "shared",
        "--alias",
        "gpu",
        "--json",
        env={"CROSSTALK_ALIAS": ""},
    )
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["name"] == "shared" and info["alias"] == "gpu"


def _make_remote_with_version(base: Path, version: str | None, name: str) -> Path:
    work = base / f"{name}-src"
    work.mkdir()
    env = clean_env() | {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    if version is not None:
        (work / "CROSSTALK-VERSION").write_text(version)
    (work / "README").write_text("x\n")
    for args in (
        ["init", "-q", "--initial-branch=main"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "v"],
    ):
        subprocess.run(["git", *args], cwd=work, env=env, check=True, timeout=GIT_TIMEOUT, capture_output=True)
    return work


def test_clone_refuses_v6_and_non_transports(make_machine: Callable[[str], Machine]) -> None:
    m = make_machine("m1")
    v6 = _make_remote_with_version(m.base, "6\n", "old")
    res = m.cli("transport", "clone", str(v6), "--dir", str(m.base / "old"))
    assert res.returncode == 1
    assert res.stderr == (
        "crosstalk: transport old speaks crosstalk protocol v6; this crosstalk speaks v7 — use a crosstalk release "
        "that speaks it, or start a new transport (there is no migration)\n"
    )
    assert not (m.base / "old").exists()  # the fresh clone is removed
    plain = _make_remote_with_version(m.base, None, "plain")
    res = m.cli("transport", "clone", str(plain), "--dir", str(m.base / "plain"))
    assert res.returncode == 1
    assert (
        res.stderr
        == f"crosstalk: {plain} is not a crosstalk transport (no CROSSTALK-VERSION); removed the fresh clone\n"
    )
    assert not (m.base / "plain").exists()
    assert json.loads(m.cli("transport", "list", "--json").stdout) == []


def test_commands_refuse_an_incompatible_transport_dir(two_machines: TwoMachines) -> None:
    a = two_machines.a
    (a.root / "CROSSTALK-VERSION").write_text("6\n")
    res = a.cli("channel", "list")
    assert res.returncode == 1
    assert res.stderr.startswith("crosstalk: transport bus speaks crosstalk protocol v6; this crosstalk speaks v7")
    res = a.cli("channel", "list", "--transport", str(a.base))
    assert res.returncode == 1
    assert res.stderr == f"crosstalk: {a.base} is not a crosstalk transport (no CROSSTALK-VERSION)\n"
    listing = json.loads(a.cli("transport", "list", "--json").stdout)
    assert listing[0]["version_ok"] is False and "v6" in listing[0]["problem"]


def test_resolution_cwd_name_dir_and_ambiguity(two_machines: TwoMachines) -> None:
    a = two_machines.a
    assert a.cli("transport", "init", "second").returncode == 0
    res = a.cli("channel", "list", cwd=a.base)  # outside both, two known
    assert res.returncode == 2
    assert (
        "no transport here and 2 known (bus, second): name one with --transport or $CROSSTALK_TRANSPORT" in res.stderr
    )
    assert a.cli("channel", "list", cwd=a.root / "data").stdout.strip().endswith("general")  # cwd inside bus
    assert "no channels yet" in a.cli("channel", "list", "--transport", "second", cwd=a.root).stdout
    assert "general" in a.cli("channel", "list", "--transport", str(a.root), cwd=a.base).stdout
    env = {"CROSSTALK_TRANSPORT": "second"}
    assert "no channels yet" in a.cli("channel", "list", cwd=a.base, env=env).stdout
    res = a.cli("channel", "list", "--transport", "nope", cwd=a.base)
    assert res.returncode == 2 and "no transport named 'nope'" in res.stderr


def test_rm_unregisters_and_deletes_only_with_confirmation(two_machines: TwoMachines) -> None:
    a = two_machines.a
    res = a.cli("transport", "rm", "bus", "--delete-files")
    assert res.returncode == 2 and "pass --yes bus" in res.stderr
    res = a.cli("transport", "rm", "bus", "--delete-files", "--yes", "bu")
    assert res.returncode == 2 and a.root.exists()
    res = a.cli("transport", "rm", "bus")
    assert res.returncode == 0 and "files kept" in res.stdout
    assert a.root.exists()
    assert json.loads(a.cli("transport", "list", "--json").stdout) == []
    res = a.cli("transport", "rm", "bus")
    assert res.returncode == 2 and "no transport named 'bus'" in res.stderr
    b = two_machines.b
    res = b.cli("transport", "rm", "bus", "--delete-files", "--yes", "bus")
    assert res.returncode == 0, res.stderr
    assert not b.root.exists()


def test_rm_refuses_while_the_dispatcher_runs(two_machines: TwoMachines) -> None:
    a = two_machines.a
    state = a.state_dir
    state.mkdir(parents=True, exist_ok=True)  # the join already made it (with the starting cursor)
    (state / "dispatcher.pid").write_text(f"{os.getpid()}\n")
    fd = os.open(state / "dispatcher.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # what a live daemon holds for its whole life
        res = a.cli("transport", "rm", "bus")
        assert res.returncode == 1
        assert f"the dispatcher for bus is running (pid {os.getpid()})" in res.stderr
    finally:
        os.close(fd)
    assert a.cli("transport", "rm", "bus").returncode == 0
    assert not state.exists()


def test_a_machine_starts_reading_where_it_joined(two_machines: TwoMachines) -> None:
    """The dispatcher's cursor starts at the commit the machine joined at: history before it is never replayed
    (a new machine must not re-run every old task it claims), work committed after it is this machine's."""
    a, b = two_machines.a, two_machines.b
    head_at_clone = b.git("rev-parse", "HEAD~1").strip()  # the fixture pulled a's channel commit after the clone
    cursor = b.state_dir / "cursor"
    assert cursor.read_text().strip() == head_at_clone
    assert (cursor.stat().st_mode & 0o777) == 0o600
    init_cursor = a.state_dir / "cursor"
    first = a.git("rev-list", "--max-parents=0", "HEAD").strip()
    assert init_cursor.read_text().strip() == first  # init: the initial commit
