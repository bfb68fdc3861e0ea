"""The dispatcher on one machine, one `daemon dispatch --once` tick at a time: waking, activation, batching,
fanout, prompt assembly, stdin fallback, failures, timeouts, silence, ambiguity and machine addressing."""

from __future__ import annotations

from pathlib import Path

import pytest

from crosstalk.bus.protocol.message import BusMessage, new_message_name, render_message, utc_timestamp
from tests.support.bus_dispatch import (
    channel_messages,
    channel_rel,
    commit_files,
    dispatch_once,
    log_text,
    machine_with_models,
    replies_to,
    runs,
    send,
    set_registry,
    write_model,
)


@pytest.fixture
def bus(make_machine):
    """(machine, channel uuid, models dir) with a local/echo model claimed."""
    return machine_with_models(make_machine, echo="")


def test_a_new_task_wakes_its_model_and_gets_one_reply(bus) -> None:
    m, channel, models = bus
    [path] = send(m, "echo", "what is 2+2?")
    dispatch_once(m)
    [reply] = replies_to(m.root, channel, path)
    assert reply.sender == "local/echo@m1"
    assert reply.to == "alice"
    assert reply.re == (channel_rel(path),)
    assert reply.body == "answer from local/echo@m1"
    assert not reply.failed
    [run] = runs(models / "echo")
    env = run["env"]
    assert env["CROSSTALK_CHANNEL"] == channel
    assert env["CROSSTALK_RE"] == channel_rel(path)
    assert env["CROSSTALK_FROM"] == "local/echo@m1"
    assert env["CROSSTALK_ALIAS"] == "m1"
    assert Path(env["CROSSTALK_TRANSPORT"]) == m.root
    assert "what is 2+2?" in run["prompt"]
    res = m.cli("message", "replies", path)
    assert res.returncode == 0, res.stdout + res.stderr
    # The reply does not wake alice's model (there is none) and a second tick finds nothing new.
    dispatch_once(m)
    assert len(runs(models / "echo")) == 1
    assert len(replies_to(m.root, channel, path)) == 1
    assert "dispatch " in log_text(m) and "reply path=" in log_text(m)


def test_activation_rule(bus) -> None:
    m, channel, models = bus
    [question] = send(m, "bob", "a question for a human", sender="alice")
    dispatch_once(m)
    # An FYI to echo that answers alice's message: echo never asked, so it does not wake. (The CLI never links a
    # send to messages its addressee did not send, so this one is written as another runtime might write it.)
    fyi = BusMessage(
        sender="carol", to="echo", timestamp=utc_timestamp(), re=(channel_rel(question),), body="fyi: bob is on it"
    )
    commit_files(m, {f"data/channels/{channel}/{new_message_name()}": render_message(fyi)})
    # Self-sent: echo writing to itself never wakes it.
    send(m, "echo", "note to self", sender="local/echo@m1")
    # echo's own earlier message gets a reply addressed to echo: that wakes it.
    [own] = send(m, "alice", "echo asks alice something", sender="local/echo@m1")
    dispatch_once(m)
    assert runs(models / "echo") == []
    send(
        m,
        "echo",
        "alice answers echo",
        sender="alice",
        env={"CROSSTALK_CHANNEL": channel, "CROSSTALK_RE": channel_rel(own)},
    )
    dispatch_once(m)
    [run] = runs(models / "echo")
    assert "alice answers echo" in run["prompt"]
    assert "fyi" not in run["prompt"] and "note to self" not in run["prompt"]


def test_batching_one_invocation_one_reply_per_asker(bus) -> None:
    m, channel, models = bus
    [a1] = send(m, "echo", "first from alice", sender="alice")
    [b1] = send(m, "echo", "only from bob", sender="bob")
    [a2] = send(m, "echo", "second from alice", sender="alice")
    dispatch_once(m)
    [run] = runs(models / "echo")
    prompt = str(run["prompt"])
    for k in (1, 2, 3):
        assert f"--- Message {k} of 3 (from: " in prompt
    assert prompt.index("first from alice") < prompt.index("only from bob") < prompt.index("second from alice")
    replies = [msg for msg in channel_messages(m.root, channel).values() if msg.re]
    by_asker = {r.to: r for r in replies}
    assert len(replies) == 2 and set(by_asker) == {"alice", "bob"}
    assert by_asker["alice"].re == (channel_rel(a1), channel_rel(a2))
    assert by_asker["bob"].re == (channel_rel(b1),)
    assert run["env"]["CROSSTALK_RE"] == ",".join(channel_rel(p) for p in (a1, b1, a2))


def test_a_fanout_copy_is_dispatched_alone(bus) -> None:
    m, channel, models = bus
    paths = send(m, "echo", "draft a haiku", extra=["--fanout", "3"])
    assert len(paths) == 3
    dispatch_once(m)
    recorded = runs(models / "echo")
    assert len(recorded) == 3
    assert all("--- Message 1 of 1 (from: alice" in str(r["prompt"]) for r in recorded)
    for path in paths:
        assert len(replies_to(m.root, channel, path)) == 1


def test_protocol_and_persona_are_prepended(bus) -> None:
    m, _, models = bus
    commit_files(m, {"local/actors/critic.md": "You are a harsh critic of haiku.\n"})
    send(m, "echo", "review my haiku", extra=["--as", "critic"])
    dispatch_once(m)
    [run] = runs(models / "echo")
    prompt = str(run["prompt"])
    protocol = (m.root / "PROTOCOL.md").read_text().strip()
    assert prompt.startswith(protocol[:200])
    assert prompt.index(protocol[-100:]) < prompt.index("harsh critic") < prompt.index("--- Message 1 of 1")
    assert run["env"]["CROSSTALK_AS"] == "critic"


def test_a_prompt_over_64k_goes_on_stdin(bus) -> None:
    m, channel, models = bus
    body = m.base / "big.txt"
    text = "".join(f"line {i:06d} of a long brief\n" for i in range(3000))  # ~90 KB
    body.write_text(text)
    [path] = send(m, "echo", str(body))
    dispatch_once(m)
    [run] = runs(models / "echo")
    assert run["stdin"] is True and run["argv"] == []
    assert text.strip() in str(run["prompt"])
    assert len(replies_to(m.root, channel, path)) == 1


def test_a_failing_model_gets_a_failed_reply(bus) -> None:
    m, channel, models = bus
    script = 'print("partial output")\nsys.stderr.write("boom: disk on fire\\n")\nsys.exit(3)'
    boom = write_model(models, "boom", script)
    set_registry(m, {"local": {"echo": str(models / "echo"), "boom": str(boom)}})
    [path] = send(m, "boom", "try this")
    dispatch_once(m)
    [reply] = replies_to(m.root, channel, path)
    assert reply.failed is True
    assert reply.error is not None and reply.error.startswith("exit 3: ") and "disk on fire" in reply.error
    assert reply.error in reply.body and "partial output" in reply.body
    res = m.cli("message", "replies", path)
    assert res.returncode == 0 and "FAILED" in res.stdout
    assert "dispatch_failed" in log_text(m)


def test_a_model_past_its_timeout_gets_a_timed_out_reply(bus) -> None:
    m, channel, models = bus
    slow = write_model(models, "slow", "time.sleep(60)")
    set_registry(m, {"local": {"echo": str(models / "echo"), "slow": str(slow)}})
    [path] = send(m, "slow", "take your time")
    dispatch_once(m, "--model-timeout", "1")
    [reply] = replies_to(m.root, channel, path)
    assert reply.failed is True and "timed out" in (reply.error or "")


def test_empty_stdout_is_dispatch_silent_and_stays_pending(bus) -> None:
    m, channel, models = bus
    quiet = write_model(models, "quiet", "pass")
    set_registry(m, {"local": {"echo": str(models / "echo"), "quiet": str(quiet)}})
    [path] = send(m, "quiet", "nothing to say?")
    dispatch_once(m)
    assert len(runs(quiet)) == 1
    assert replies_to(m.root, channel, path) == []
    assert "dispatch_silent" in log_text(m)
    res = m.cli("message", "replies", path)
    assert res.returncode == 1 and "PENDING" in res.stdout


def test_an_ambiguous_bare_model_gets_a_failed_reply_with_the_choices(bus) -> None:
    m, channel, models = bus
    echo = str(models / "echo")
    set_registry(m, {"alpha": {"dup": echo}, "beta": {"dup": echo}})
    [path] = send(m, "dup", "which one?")
    dispatch_once(m)
    assert runs(models / "echo") == []
    [reply] = replies_to(m.root, channel, path)
    assert reply.failed is True
    assert "alpha/dup" in (reply.error or "") and "beta/dup" in (reply.error or "")
    # A second tick does not answer it again, and naming the provider works.
    dispatch_once(m)
    assert len(replies_to(m.root, channel, path)) == 1
    [path2] = send(m, "beta/dup", "you then")
    dispatch_once(m)
    assert [r.sender for r in replies_to(m.root, channel, path2)] == ["beta/dup@m1"]


def test_a_message_for_another_machine_is_not_dispatched_here(bus) -> None:
    m, channel, models = bus
    [elsewhere] = send(m, "echo@otheralias", "not for m1")
    [here] = send(m, "echo@m1", "for m1")
    dispatch_once(m)
    [run] = runs(models / "echo")
    assert "for m1" in str(run["prompt"]) and "not for m1" not in str(run["prompt"])
    assert replies_to(m.root, channel, elsewhere) == []
    assert len(replies_to(m.root, channel, here)) == 1


def test_a_broken_message_is_logged_and_answered_with_a_failure(bus) -> None:
    m, channel, models = bus
    rel = f"data/channels/{channel}/2026/01/02/030405006Z-00112233aabbccdd.md"
    commit_files(m, {rel: "---\nfrom: mallory\nto: echo\ntimestamp: 2026-01-02T03:04:05.006Z\ntype: text\n---\n\nhi\n"})
    dispatch_once(m)
    assert runs(models / "echo") == []
    text = log_text(m)
    assert "parse_error" in text and "030405006Z-00112233aabbccdd.md" in text
    [reply] = replies_to(m.root, channel, rel)
    assert reply.failed and reply.to == "mallory" and "type" in (reply.error or "")


def test_a_registry_change_is_picked_up(bus) -> None:
    m, channel, models = bus
    dispatch_once(m)
    late = write_model(models, "late")
    set_registry(m, {"local": {"echo": str(models / "echo"), "late": str(late)}})
    [path] = send(m, "late", "are you there?")
    dispatch_once(m)
    assert [r.sender for r in replies_to(m.root, channel, path)] == ["local/late@m1"]
    assert "late" in log_text(m).split("registry_reload")[-1].splitlines()[0]


def test_status_settings_and_logs(bus) -> None:
    import json

    m, channel, _ = bus
    send(m, "echo", "hello")
    dispatch_once(m)
    status = json.loads(m.cli("status", "--json").stdout)
    assert status["transport"] == "bus" and status["alias"] == "m1" and status["protocol"] == 7
    assert [c["uuid"] for c in status["channels"]] == [channel]
    d = status["dispatcher"]
    assert d["running"] is False and d["claimed"] == ["local/echo"] and d["caught_up"] is False  # replies since
    assert d["dispatched"] == 1
    assert "dispatcher: not running" in m.cli("status").stdout
    settings = json.loads(m.cli("settings", "show", "--json").stdout)
    assert settings["alias"] == "m1" and settings["alias_source"] == "CROSSTALK_ALIAS"
    assert settings["claimed_models"] == 1 and settings["model_timeout_default_s"] == 600
    res = m.cli("logs", "-n", "3")
    assert res.returncode == 0 and len(res.stdout.splitlines()) == 3
    assert "boot" in m.cli("logs", "-n", "1000").stdout


def test_a_persona_wearing_turn_is_woken_by_its_replies_in_that_persona(bus) -> None:
    """wake_as: a model dispatched with --as critic sends from inside its turn; the message carries wake_as: critic,
    the answer carries as: critic, and the reply wakes the first model wearing the critic persona again."""
    m, channel, models = bus
    commit_files(m, {"local/actors/critic.md": "You are a harsh critic of haiku.\n"})
    # The first model, when first woken, asks local/echo for a second opinion through the real CLI.
    asker = write_model(
        models,
        "asker",
        "import subprocess\n"
        "if os.environ['CROSSTALK_RE'] and 'second opinion' not in sys.argv[-1]:\n"
        "    subprocess.run([sys.executable, '-m', 'crosstalk', 'message', 'send', '--to', 'local/echo',\n"
        "                    'second opinion please'], check=True, timeout=60)\n"
        "print('noted')",
    )
    set_registry(m, {"local": {"echo": str(models / "echo"), "asker": str(asker)}})
    send(m, "local/asker", "review my haiku", extra=["--as", "critic"])
    dispatch_once(m)  # asker runs as critic and sends to echo (wake_as: critic); echo's turn is next tick
    sent = [msg for msg in channel_messages(m.root, channel).values() if msg.to == "local/echo"]
    # New work for echo (echo sent none of the asker's triggering messages, so a re: to them would never wake it).
    assert [(s.sender, s.wake_as, s.re) for s in sent] == [("local/asker@m1", "critic", ())]
    dispatch_once(m)  # echo answers: the reply wears as: critic and wakes the asker
    dispatch_once(m)  # the asker, woken by the reply, runs in the critic persona again
    (answer,) = [msg for msg in channel_messages(m.root, channel).values() if msg.sender == "local/echo@m1"]
    assert answer.to == "local/asker@m1" and answer.as_ == "critic"
    first, second = runs(asker)
    assert first["env"]["CROSSTALK_AS"] == second["env"]["CROSSTALK_AS"] == "critic"
    assert "harsh critic" in str(second["prompt"]) and "answer from local/echo@m1" in str(second["prompt"])
