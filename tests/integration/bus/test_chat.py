"""`crosstalk chat MODEL[@machine]`, driven as a person would: through a pseudo-terminal, and
from a pipe. Real git (a bare remote and two clones for the cross-machine case), real dispatcher processes, script
models."""

from __future__ import annotations

import pytest

from tests.support.bus_dispatch import (
    Daemon,
    channel_messages,
    commit_files,
    machine_with_models,
    registry_yaml,
    write_model,
)
from tests.support.bus_machines import Machine, init_and_clone
from tests.support.bus_terminal import Terminal

pytestmark = pytest.mark.slow

ECHO = 'print("echo: " + (sys.stdin.read() if from_stdin else args[-1]).strip().splitlines()[-1])'
SLOW = 'time.sleep(30)\nprint("late")'


def test_a_conversation_through_a_terminal_keeps_its_history_in_one_channel(make_machine) -> None:
    m, _channel, _models = machine_with_models(make_machine, echo=ECHO)
    with Daemon(m, "--interval", "0.3") as daemon:
        daemon.wait_ready()
        term = Terminal(m, "chat", "local/echo")
        try:
            term.expect("you> ")
            term.type("hello there\n")
            term.expect("local/echo@m1> echo: hello there")
            term.expect("you> ")
            term.mark()
            term.type("and again\n")
            term.expect("local/echo@m1> echo: and again")
            term.expect("you> ")
            term.type("\x04")  # Ctrl-D
        finally:
            code = term.close()
        assert code == 0
        # The next chat with the same model shows the history first and goes on in the same channel.
        term = Terminal(m, "chat", "local/echo")
        try:
            screen = term.expect("you> ")
            assert screen.index("echo: hello there") < screen.index("echo: and again") < screen.index("you> ")
            term.type("/quit\n")
        finally:
            assert term.close() == 0
    res = m.cli("channel", "list", "--json")
    assert "chat-local-echo" in res.stdout, res.stdout
    msgs = _chat_messages(m)
    said = [(rel, msg) for rel, msg in msgs if msg.to == "local/echo"]
    answers = [rel for rel, msg in msgs if msg.sender == "local/echo@m1"]
    assert [msg.body.strip() for _, msg in said] == ["hello there", "and again"]
    assert said[0][1].re == () and said[1][1].re == (answers[0],), "each turn is re: the model's last answer"


def test_ctrl_c_while_waiting_stops_the_wait_not_the_chat(make_machine) -> None:
    m, _channel, _models = machine_with_models(make_machine, slow=SLOW)
    with Daemon(m, "--interval", "0.3") as daemon:
        daemon.wait_ready()
        term = Terminal(m, "chat", "local/slow")
        try:
            term.expect("you> ")
            term.type("take your time\n")
            term.expect("waiting for local/slow")
            term.type("\x03")  # Ctrl-C
            term.expect("(stopped waiting; the answer will land in channel chat-local-slow")
            term.expect("you> ")
            term.type("/quit\n")
        finally:
            assert term.close() == 0


def test_chat_reads_turns_from_a_pipe_and_talks_to_a_model_on_another_machine(bare_remote, make_machine) -> None:
    a, b = make_machine("a"), make_machine("b")
    init_and_clone(a, b, bare_remote, "--alias", "a")
    model = write_model(b.base, "echo", ECHO)
    commit_files(b, {"data/crosstalk.yaml": registry_yaml({"t": {"echo": str(model)}})}, "test: registry")
    with Daemon(b, "--interval", "0.3") as daemon:  # only b dispatches: the chat on a pulls the answers itself
        daemon.wait_ready()
        res = a.cli("chat", "t/echo@b", "--timeout", "60", input="first question\n\nsecond question\n", timeout=150)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["t/echo@b> echo: first question", "t/echo@b> echo: second question"], res.stdout
    assert "you>" not in res.stdout and "waiting" not in res.stderr


def test_no_answer_within_the_timeout_is_said_and_the_chat_goes_on(make_machine) -> None:
    m, _channel, _models = machine_with_models(make_machine, echo=ECHO)
    # No dispatcher runs: nothing answers.
    res = m.cli("chat", "local/echo", "--timeout", "1", input="anyone?\n", timeout=60)
    assert res.returncode == 0, res.stderr
    assert "(no answer within 1 s; the answer will land in channel chat-local-echo" in res.stdout


@pytest.mark.parametrize(("args", "error"), [(["not an address"], "address"), (["x", "--timeout", "0"], "timeout")])
def test_bad_arguments_are_named(make_machine, args: list[str], error: str) -> None:
    m, _channel, _models = machine_with_models(make_machine, echo=ECHO)
    res = m.cli("chat", *args, input="")
    assert res.returncode == 2 and error in res.stderr.lower(), res.stderr


def _chat_messages(m: Machine) -> list[tuple[str, object]]:
    from crosstalk.bus.transport.channels import find_channel

    channel = find_channel(m.root, "chat-local-echo")
    return sorted(channel_messages(m.root, channel.uuid).items())
