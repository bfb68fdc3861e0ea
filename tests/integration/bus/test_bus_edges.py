"""Rough edges of the bus CLI on two simulated machines sharing a bare remote: `send model@machine` with
`--transport`, then `message send` without --channel; the warning (and --strict refusal) for an address no known
machine claims; `model add|list|remove`; `message show`; message paths given absolutely from any directory."""

from __future__ import annotations

import json
import os
import stat
from importlib.resources import files
from pathlib import Path

import pytest

from tests.support.bus_dispatch import Daemon, wait_replied, write_model
from tests.support.bus_machines import Machine, TwoMachines, remote_git

TEMPLATE = files("crosstalk.bus.protocol").joinpath("template/data/crosstalk.yaml").read_text(encoding="utf-8")
WAIT_S = 60.0
ECHO = 'import sys\nprint("echo: " + sys.argv[-1].strip().splitlines()[-1])'


def _second_transport(m: Machine) -> None:
    res = m.cli("transport", "init", "second", "--dir", str(m.base / "second"))
    assert res.returncode == 0, res.stderr


def _channels(m: Machine) -> dict[str, str]:
    return {c["name"]: c["uuid"] for c in json.loads(m.cli("channel", "list", "--json").stdout)}


# ---------------------------------------------------------------------------------------------- send


def test_send_to_a_bus_address_then_message_send_without_channel(two_machines: TwoMachines) -> None:
    """`send model@machine` makes this machine's live-<alias> channel; a later `message send` with no --channel still
    goes to the one channel people made."""
    a = two_machines.a
    res = a.cli("send", "t/echo@m2", "from send")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("queued via the git bus (bus) → t/echo@m2: data/channels/"), res.stdout
    channels = _channels(a)
    assert set(channels) == {"general", "live-m1"}
    res = a.cli("message", "send", "--to", "t/echo@m2", "from message send")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(f"data/channels/{channels['general']}/"), res.stdout


def test_send_transport_flag_picks_one_of_several(two_machines: TwoMachines) -> None:
    a = two_machines.a
    _second_transport(a)
    res = a.cli("send", "t/echo@m2", "which one?", cwd=a.base)  # outside both, two known
    assert res.returncode == 4
    assert "2 known (bus, second): name one with --transport or $CROSSTALK_TRANSPORT" in res.stderr
    res = a.cli("send", "--transport", "bus", "t/echo@m2", "to bus", cwd=a.base)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("queued via the git bus (bus) → t/echo@m2"), res.stdout
    res = a.cli("send", "t/echo@m2", "to second", "--transport", str(a.base / "second"), cwd=a.base)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("queued via the git bus (second) → t/echo@m2"), res.stdout


# ---------------------------------------------------------------------------------------------- claims


def test_message_send_warns_when_no_known_machine_claims(two_machines: TwoMachines) -> None:
    a = two_machines.a
    for to in ("anthropic/sonnet@gpu", "nosuchmodel"):
        res = a.cli("message", "send", "--to", to, "hello?")
        assert res.returncode == 0, res.stderr
        [warning] = res.stderr.splitlines()
        assert warning.startswith(f"crosstalk: warning: no known machine claims {to!r}, so it stays PENDING"), warning
        assert "crosstalk model add" in warning
        assert res.stdout.startswith("data/channels/")  # sent all the same

    head = a.git("rev-parse", "HEAD")
    res = a.cli("message", "send", "--strict", "--to", "nosuchmodel", "hello?")
    assert res.returncode == 2
    [error] = res.stderr.splitlines()
    assert error.startswith("crosstalk: no known machine claims 'nosuchmodel'; nothing was sent"), error
    assert a.git("rev-parse", "HEAD") == head and res.stdout == ""

    model = write_model(a.base, "echo", ECHO)
    assert a.cli("model", "add", "t/echo", "--", str(model)).returncode == 0
    # This machine claims it, but no dispatcher of this machine runs to answer it: sent, and it says so.
    res = a.cli("message", "send", "--strict", "--to", "t/echo", "x")
    assert res.returncode == 0 and res.stdout.startswith("data/channels/"), res.stderr
    assert res.stderr == (
        "crosstalk: warning: no dispatcher runs for transport bus on this machine, so the message stays PENDING "
        "until one does: crosstalk server start\n"
    )
    with Daemon(a, "--interval", "5") as da:
        da.wait_ready()
        for to in ("t/echo", "echo", "t/echo@m1", "echo@m1"):
            res = a.cli("message", "send", "--strict", "--to", to, "x")
            assert (res.returncode, res.stderr) == (0, ""), to
    res = a.cli("message", "send", "--strict", "--to", "t/echo@m2", "x")  # nobody has seen m2 answer as t/echo
    assert res.returncode == 2 and "no known machine claims 't/echo@m2'" in res.stderr


def test_message_send_pulls_before_it_says_no_machine_claims(two_machines: TwoMachines) -> None:
    """Right after m2's `model add` claimed a model, m1 (which has not pulled since) sends to it without a warning:
    an address unknown to m1's clone is looked for again after a pull, where m2's commit says m2 claims it."""
    a, b = two_machines.a, two_machines.b
    bin_dir = b.base / "bin"
    bin_dir.mkdir()
    write_model(bin_dir, "rev-m2", ECHO)
    res = b.cli("model", "add", "gpu/rev", "--", "rev-m2", env={"PATH": f"{bin_dir}{os.pathsep}{b.env['PATH']}"})
    assert res.returncode == 0 and res.stdout.endswith("claimed here (m2)\n"), res.stderr
    res = a.cli("message", "send", "--strict", "--to", "gpu/rev@m2", "review this")
    assert (res.returncode, res.stderr) == (0, "")
    assert res.stdout.startswith("data/channels/")
    res = a.cli("message", "send", "--to", "gpu/rev@m3", "and this")  # m3 is known nowhere: still a warning
    assert res.returncode == 0 and "no known machine claims 'gpu/rev@m3'" in res.stderr


@pytest.mark.slow
def test_a_machine_learns_who_claims_from_replies_and_show_prints_them(two_machines: TwoMachines) -> None:
    """m2 claims t/echo (its program is on m2's PATH only); once m1's dispatcher has seen m2 answer as t/echo,
    `message send --strict --to t/echo@m2` on m1 is accepted. `message show` prints the question and the answer."""
    a, b = two_machines.a, two_machines.b
    bin_dir = b.base / "bin"
    bin_dir.mkdir()
    write_model(bin_dir, "echo-m2", ECHO)
    b_path = {"PATH": f"{bin_dir}{os.pathsep}{b.env.get('PATH', '')}"}
    res = b.cli("model", "add", "t/echo", "--", "echo-m2", env=b_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "added t/echo: echo-m2\nclaimed here (m2)\n"
    a.git("pull", "-q")
    # m2's `model add` said, in its commit, that m2 claims it: m1 knows before m2 ever answered as it
    row = next(line for line in a.cli("model", "list").stdout.splitlines() if line.startswith("t/echo "))
    assert row.split()[1:4] == ["no", "m2", "echo-m2"]  # not on m1's PATH; known on m2
    listing = {r["model"]: r for r in json.loads(a.cli("model", "list", "--json").stdout)}
    assert listing["t/echo"]["claimed_here"] is False and listing["t/echo"]["known_on"] == ["m2"]

    with Daemon(a, "--interval", "0.3"), Daemon(b, "--interval", "0.3", env=b_path) as db:
        db.wait_ready()
        res = a.cli("message", "send", "--strict", "--to", "t/echo@m2", "are you there")
        assert (res.returncode, res.stderr) == (0, "")
        path = res.stdout.strip()
        [row] = wait_replied(a, [path], WAIT_S, daemon=db)
        assert row["state"] == "REPLIED", row

    res = a.cli("message", "show", path)
    assert res.returncode == 0, res.stderr
    question, reply = res.stdout.split("\n\n== reply ", 1)
    assert question.startswith(f"== message {path}\nfrom op-m1 · to t/echo@m2 · at 20")
    assert question.endswith("\n\nare you there")
    assert reply.startswith("data/channels/") and "\nfrom t/echo@m2 · to op-m1 · at 20" in reply
    assert f" · re {path.split('/', 3)[3]}" in reply
    assert reply.rstrip().endswith("echo: are you there")
    data = json.loads(a.cli("message", "show", str(a.root / path), "--json", cwd=a.base).stdout)
    assert (data["path"], data["state"], data["body"]) == (path, "REPLIED", "are you there")
    [answer] = data["replies"]
    assert answer["from"] == "t/echo@m2" and answer["body"].strip().endswith("echo: are you there")


# ---------------------------------------------------------------------------------------------- model


def test_model_add_list_remove_commit_and_push(two_machines: TwoMachines) -> None:
    a, b, remote = two_machines.a, two_machines.b, two_machines.remote
    model = write_model(a.base, "echo", ECHO)
    res = a.cli("model", "add", "--json", "t/echo", "--", str(model), "--flag", "--")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert (out["model"], out["argv"], out["claimed_here"], out["pushed"]) == (
        "t/echo",
        [str(model), "--flag", "--"],
        True,
        True,
    )
    pushed = remote_git(remote, "show", "main:data/crosstalk.yaml")
    assert pushed.startswith(TEMPLATE)  # every comment and line of the file kept; the new provider appended
    assert pushed[len(TEMPLATE) :] == f"  t:\n    models:\n      echo: {model} --flag --\n"
    assert (
        remote_git(remote, "log", "-1", "--format=%s", "main").strip() == "crosstalk: model add t/echo (claimed by m1)"
    )

    b.git("pull", "-q")
    rows = {r["model"]: r for r in json.loads(b.cli("model", "list", "--json").stdout)}
    assert rows["t/echo"]["argv"] == [str(model), "--flag", "--"]
    assert rows["anthropic/sonnet"]["claimed_here"] is False  # out of the box: claude is not on this PATH
    text = b.cli("model", "list").stdout
    assert text.splitlines()[0].split() == ["MODEL", "CLAIMED", "HERE", "KNOWN", "ON", "COMMAND", "WHY", "NOT", "HERE"]

    res = b.cli("model", "add", "t/missing", "--", "xt-no-such-program", "--print")
    assert (
        res.stdout
        == "added t/missing: xt-no-such-program --print\nnot claimed here: 'xt-no-such-program' is not on PATH\n"
    )
    assert b.cli("model", "remove", "t/missing").stdout == "removed t/missing\n"

    # From b, which has pulled: the next edit starts from the newest file and lands on top.
    res = b.cli("model", "add", "t/echo", "--", "/bin/echo", "changed")
    assert res.returncode == 2 and "already in data/crosstalk.yaml" in res.stderr
    assert b.cli("model", "add", "t/echo", "--replace", "--", "/bin/echo", "changed").returncode == 0
    res = a.cli("model", "remove", "t/echo")  # a has not pulled: it pulls under the lock first
    assert res.returncode == 0, res.stderr
    assert res.stdout == "removed t/echo (provider t had no other model and was removed with it)\n"
    assert remote_git(remote, "show", "main:data/crosstalk.yaml") == TEMPLATE
    log = remote_git(remote, "log", "-5", "--format=%s", "main").splitlines()
    assert log == [
        "crosstalk: model remove t/echo",
        "crosstalk: model add t/echo (claimed by m2)",  # /bin/echo runs on m2: its add says so
        "crosstalk: model remove t/missing",
        "crosstalk: model add t/missing",  # not on m2's PATH: no claim
        "crosstalk: model add t/echo (claimed by m1)",
    ]


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["add", "t/echo"], "no command given: crosstalk model add t/echo -- COMMAND..."),
        (["add", "echo", "--", "/bin/echo"], "needs a provider"),
        (["add", "t/echo", "--", "/bin/echo", "two words"], "holds whitespace"),
        (["add", "t/echo", "--", "./echo"], "not added: model t/echo skipped: command './echo' is a relative path"),
        (["add", "t/echo", "--", "/bin/echo", "--nope-flag-for-us"], None),
        (["remove", "t/nope"], "no model t/nope in data/crosstalk.yaml"),
        (["remove", "t/nope", "--", "x"], "model remove takes no command after '--'"),
    ],
)
def test_model_refusals(two_machines: TwoMachines, args: list[str], why: str | None) -> None:
    a = two_machines.a
    head = a.git("rev-parse", "HEAD")
    res = a.cli("model", *args)
    if why is None:  # the command's own flags after '--' are the command's, never ours
        assert res.returncode == 0, res.stderr
        return
    assert res.returncode == 2, res.stderr
    [line] = res.stderr.splitlines()
    assert line.startswith("crosstalk: ") and why in line, line
    assert a.git("rev-parse", "HEAD") == head  # nothing committed


def test_model_add_refuses_a_registry_it_cannot_read(two_machines: TwoMachines) -> None:
    a = two_machines.a
    (a.root / "data" / "crosstalk.yaml").write_text("providers: [\n")
    a.git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-am", "a broken registry")
    res = a.cli("model", "add", "t/echo", "--", "/bin/echo")
    assert res.returncode == 2 and "YAML syntax error" in res.stderr
    assert (a.root / "data" / "crosstalk.yaml").read_text() == "providers: [\n"


def test_model_add_never_commits_a_persons_unfinished_edit(two_machines: TwoMachines) -> None:
    a = two_machines.a
    path = a.root / "data" / "crosstalk.yaml"
    edited = path.read_text() + "# not done yet\n"
    path.write_text(edited)
    head = a.git("rev-parse", "HEAD")
    res = a.cli("model", "add", "t/echo", "--", "/bin/echo")
    assert res.returncode == 2 and "has changes that are not committed" in res.stderr, res.stderr
    assert path.read_text() == edited and a.git("rev-parse", "HEAD") == head


# ---------------------------------------------------------------------------------------------- paths


def test_absolute_message_paths_work_from_any_directory(two_machines: TwoMachines) -> None:
    a = two_machines.a
    _second_transport(a)
    rel = a.cli("message", "send", "--to", "sonnet", "where am I").stdout.strip()
    absolute = str(a.root / rel)
    for cwd in (a.base, Path("/")):
        res = a.cli("message", "replies", absolute, cwd=cwd)
        assert (res.returncode, res.stdout) == (1, f"{rel} PENDING\n"), res.stderr
        res = a.cli("message", "show", absolute, cwd=cwd)
        assert res.returncode == 0 and res.stdout.startswith(f"== message {rel}\n"), res.stderr
        assert res.stdout.endswith("\n\nwhere am I\n\n(PENDING: no reply yet)\n")
    # A relative path outside any transport still needs one named.
    res = a.cli("message", "replies", rel, cwd=a.base)
    assert res.returncode == 2 and "name one with --transport" in res.stderr
    assert a.cli("message", "replies", rel, "--transport", "bus", cwd=a.base).returncode == 1  # PENDING
    other = a.base / "second" / "data" / "channels"
    res = a.cli("message", "replies", absolute, str(other / "x" / "2026" / "01" / "01" / "x.md"), cwd=a.base)
    assert res.returncode == 2 and "the paths lie in 2 transports" in res.stderr


def test_model_files_keep_their_mode(two_machines: TwoMachines) -> None:
    """The registry file stays readable by every user of the work tree, as git checked it out."""
    a = two_machines.a
    assert a.cli("model", "add", "t/echo", "--", "/bin/echo").returncode == 0
    mode = stat.S_IMODE((a.root / "data" / "crosstalk.yaml").stat().st_mode)
    assert mode & 0o444 == 0o444


def test_model_list_warns_of_a_missing_env_file_only_where_its_provider_runs(two_machines: TwoMachines) -> None:
    """The scaffold's example providers name env files nobody made: a machine that claims none of their models is
    not warned on every run; one that runs a model whose env_file is missing is, with the reason in the row too."""
    a = two_machines.a
    res = a.cli("model", "list")
    assert res.returncode == 0 and "env_file" not in res.stderr, res.stderr
    row = next(line for line in res.stdout.splitlines() if line.startswith("anthropic/sonnet "))
    assert row.endswith("'claude' is not on PATH")
    model = write_model(a.base, "echo", ECHO)
    registry = a.root / "data" / "crosstalk.yaml"
    registry.write_text(registry.read_text() + f"  t:\n    env_file: auth/t.env\n    models:\n      echo: {model}\n")
    res = a.cli("model", "list")
    assert res.returncode == 0
    assert res.stderr == "crosstalk: warning: env_file auth/t.env of provider t is missing; its models fail at spawn\n"
