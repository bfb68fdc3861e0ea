"""Dispatcher.tick() in-process: the TickReport, an idle tick, the answered index after a crash before the cursor
moved, and the bare-name grab (a dispatcher skips work another one answered while its tick ran)."""

from __future__ import annotations

import os
import threading

from crosstalk.bus.transport.state import transport_state, write_cursor
from tests.support.bus_dispatch import (
    channel_rel,
    in_process_dispatcher,
    replies_to,
    runs,
    send,
    set_registry,
    single_machine,
    wait_for,
    write_model,
)
from tests.support.bus_machines import TwoMachines


def test_tick_report_idle_tick_and_rescan_after_a_crash(make_machine, monkeypatch) -> None:
    m, channel = single_machine(make_machine)
    models = m.base / "models"
    models.mkdir()
    echo = write_model(models, "echo")
    set_registry(m, {"local": {"echo": str(echo)}})
    [path] = send(m, "echo", "in-process please")
    dispatcher = in_process_dispatcher(m, monkeypatch)
    first_cursor_target = m.git("rev-parse", "HEAD").strip()

    report = dispatcher.tick()
    assert not report.idle and report.head == first_cursor_target
    assert (report.batches, report.dispatched, report.replies, report.failed, report.silent) == (1, 1, 1, 0, 0)
    assert report.reply_paths and replies_to(m.root, channel, path)

    # The reply commit is new: one more (cheap) tick scans it and finds nothing to do; then the tick is idle.
    again = dispatcher.tick()
    assert (again.added, again.batches, again.replies) == (1, 0, 0)
    assert dispatcher.tick().idle is True

    # A crash before the cursor moved: the range is scanned again, and the reply in it keeps the model asleep.
    write_cursor(transport_state("bus", os.environ), m.git("rev-parse", "HEAD~2").strip())
    rescan = dispatcher.tick()
    assert rescan.skipped_answered == 1 and rescan.dispatched == 0
    assert len(runs(echo)) == 1 and len(replies_to(m.root, channel, path)) == 1
    beat = dispatcher.heartbeat()
    assert beat["dispatched"] == 1 and beat["claimed"] == ["local/echo"] and beat["alias"] == "m1"


def test_bare_name_work_answered_elsewhere_meanwhile_is_skipped(two_machines: TwoMachines, monkeypatch) -> None:
    a, b = two_machines.a, two_machines.b
    models = a.base / "models"
    models.mkdir()
    echo = write_model(models, "echo")
    set_registry(a, {"local": {"echo": str(echo)}})
    b.git("pull", "-q")
    [path] = send(a, "echo", "first grab wins", sender="op-m1")
    dispatcher = in_process_dispatcher(a, monkeypatch)
    original = dispatcher.batches.drop_taken

    def b_answers_first(batch, head, report):  # B's dispatcher takes the job after A's tick scanned it
        res = b.cli("daemon", "dispatch", "--once", timeout=90)
        assert res.returncode == 0, res.stderr
        return original(batch, head, report)

    monkeypatch.setattr(dispatcher.batches, "drop_taken", b_answers_first)
    report = dispatcher.tick()
    assert report.skipped_taken == 1 and report.dispatched == 0 and report.replies == 0
    [run] = runs(echo)
    assert run["env"]["CROSSTALK_ALIAS"] == "m2"
    replies = replies_to(a.root, two_machines.channel, path)
    assert [r.sender for r in replies] == ["local/echo@m2"]
    assert replies[0].re == (channel_rel(path),)


def test_run_forever_ends_when_its_stop_event_is_set(make_machine, monkeypatch) -> None:
    m, _ = single_machine(make_machine)
    dispatcher = in_process_dispatcher(m, monkeypatch)
    dispatcher.interval = 120.0
    stop = threading.Event()
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(dispatcher.run_forever(stop)))
    thread.start()
    try:
        state = transport_state("bus", os.environ)
        wait_for(state.wake_sock.exists, 20, "the wake socket", poll=0.05)
        assert state.pidfile.read_text().strip() == str(os.getpid())
    finally:
        stop.set()
        thread.join(timeout=20)
    assert not thread.is_alive() and codes == [0]
    assert not state.wake_sock.exists() and not state.pidfile.exists()
